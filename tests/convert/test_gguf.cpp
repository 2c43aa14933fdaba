// The GGUF reader and importer (src/convert/gguf*.cpp): GGUF files written by a tiny writer here
// (std::vector bytes, following ggml's docs/gguf.md independently of src/), a table of damaged
// files each refused with its status and a message naming the key or tensor, bit-exact copies of
// Q8_0/Q4_0 blocks checked against the blocks the test wrote, the BPE tokenizer synthesized from
// a GGUF vocabulary, and the real stories260K.gguf against stories260K.bin converted with
// `ml_convert llama2c` (same quants, same encodings).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/gguf.h"
#include "convert/gguf_internal.h"
#include "core/half.h"
#include "model/format.h"
#include "model/model.h"
#include "model/tokenizer/tokenizer.h"
#include "mlb_reader.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// --- a tiny GGUF writer ----------------------------------------------------------------------

struct bytes {
  std::vector<uint8_t> b;
  void raw(const void* p, size_t n) { b.insert(b.end(), (const uint8_t*)p, (const uint8_t*)p + n); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void f32(float v) { raw(&v, 4); }
  void str(const std::string& s) { u64(s.size()), raw(s.data(), s.size()); }
};

// A metadata entry: the key and the encoded type + value.
struct kv {
  std::string key;
  std::vector<uint8_t> val;
};
kv kv_u32(const std::string& k, uint32_t v) { bytes b; b.u32(4), b.u32(v); return {k, b.b}; }
kv kv_i32(const std::string& k, int32_t v) { bytes b; b.u32(5), b.raw(&v, 4); return {k, b.b}; }
kv kv_f32(const std::string& k, float v) { bytes b; b.u32(6), b.f32(v); return {k, b.b}; }
kv kv_bool(const std::string& k, uint8_t v) { bytes b; b.u32(7), b.raw(&v, 1); return {k, b.b}; }
kv kv_str(const std::string& k, const std::string& v) { bytes b; b.u32(8), b.str(v); return {k, b.b}; }
kv kv_strs(const std::string& k, const std::vector<std::string>& v) {
  bytes b;
  b.u32(9), b.u32(8), b.u64(v.size());
  for (auto& s : v) b.str(s);
  return {k, b.b};
}
kv kv_f32s(const std::string& k, const std::vector<float>& v) {
  bytes b;
  b.u32(9), b.u32(6), b.u64(v.size());
  for (float x : v) b.f32(x);
  return {k, b.b};
}
kv kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
  bytes b;
  b.u32(9), b.u32(5), b.u64(v.size());
  for (int32_t x : v) b.raw(&x, 4);
  return {k, b.b};
}
kv kv_raw(const std::string& k, std::vector<uint8_t> v) { return {k, std::move(v)}; }

struct tensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type;
  std::vector<uint8_t> data;
  int64_t offset = -1;  // -1: the next aligned offset
};

struct gguf {
  uint32_t magic = 0x46554747, version = 3;
  std::vector<kv> kvs;
  std::vector<tensor> ts;
  uint64_t align = 32;
  int64_t n_tensors = -1, n_kv = -1;  // overrides of the counts

  std::vector<uint8_t> build() const {
    bytes b;
    b.u32(magic), b.u32(version);
    b.u64(n_tensors >= 0 ? (uint64_t)n_tensors : ts.size());
    b.u64(n_kv >= 0 ? (uint64_t)n_kv : kvs.size());
    for (auto& k : kvs) b.str(k.key), b.raw(k.val.data(), k.val.size());
    std::vector<uint64_t> offs;
    uint64_t next = 0;
    for (auto& t : ts) {
      const uint64_t off = t.offset >= 0 ? (uint64_t)t.offset : next;
      offs.push_back(off);
      if (t.offset < 0) next = (off + t.data.size() + align - 1) / align * align;
      b.str(t.name), b.u32((uint32_t)t.ne.size());
      for (uint64_t n : t.ne) b.u64(n);
      b.u32(t.type), b.u64(off);
    }
    while (b.b.size() % align) b.b.push_back(0);
    const size_t start = b.b.size();
    for (size_t i = 0; i < ts.size(); ++i) {
      if (ts[i].offset >= 0 && (uint64_t)ts[i].offset > (1u << 24)) continue;  // a deliberately wild offset
      if (b.b.size() < start + offs[i] + ts[i].data.size()) b.b.resize(start + offs[i] + ts[i].data.size());
      std::memcpy(b.b.data() + start + offs[i], ts[i].data.data(), ts[i].data.size());
    }
    return b.b;
  }
  kv* find(const std::string& k) {
    for (auto& x : kvs)
      if (x.key == k) return &x;
    return nullptr;
  }
  tensor* tensor_named(const std::string& n) {
    for (auto& t : ts)
      if (t.name == n) return &t;
    return nullptr;
  }
  void erase_kv(const std::string& k) {
    for (size_t i = 0; i < kvs.size(); ++i)
      if (kvs[i].key == k) kvs.erase(kvs.begin() + (long)i);
  }
  void erase_tensor(const std::string& n) {
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i].name == n) ts.erase(ts.begin() + (long)i);
  }
};

uint16_t half_bits(float f) { return ml_float_to_half(f); }

// Random data of a type for rows x cols (cols = ne[0]).
std::vector<uint8_t> rand_bytes(uint32_t type, uint64_t rows, uint64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> out;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> q8(-127, 127), q4(0, 255);
  auto put16 = [&](uint16_t h) { out.push_back((uint8_t)h), out.push_back((uint8_t)(h >> 8)); };
  for (uint64_t i = 0; i < rows * cols; ++i) {
    if (type == GGUF_T_F32) {
      const float f = u(rng);
      out.insert(out.end(), (const uint8_t*)&f, (const uint8_t*)&f + 4);
    } else if (type == GGUF_T_F16) {
      put16(half_bits(u(rng)));
    } else if (i % 32 == 0) {
      put16(half_bits(0.001f + 0.01f * std::fabs(u(rng))));
      if (type == GGUF_T_Q8_0)
        for (int j = 0; j < 32; ++j) out.push_back((uint8_t)(int8_t)q8(rng));
      else
        for (int j = 0; j < 16; ++j) out.push_back((uint8_t)q4(rng));
    }
  }
  return out;
}

constexpr uint32_t kDim = 32, kHidden = 64, kVocab = 8;

// A valid one-layer Llama: dim 32, one head of 32, hidden 64, vocab 8, tied, matrices of type mt.
gguf base(uint32_t mt = GGUF_T_F32, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  gguf g;
  g.kvs = {kv_str("general.architecture", "llama"),
           kv_u32("llama.embedding_length", kDim),
           kv_u32("llama.block_count", 1),
           kv_u32("llama.feed_forward_length", kHidden),
           kv_u32("llama.attention.head_count", 1),
           kv_u32("llama.attention.head_count_kv", 1),
           kv_u32("llama.context_length", 64),
           kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)};
  auto mat = [&](const std::string& n, uint64_t rows, uint64_t cols) {
    g.ts.push_back({n, {cols, rows}, mt, rand_bytes(mt, rows, cols, rng)});
  };
  auto norm = [&](const std::string& n) { g.ts.push_back({n, {kDim}, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, kDim, rng)}); };
  mat("token_embd.weight", kVocab, kDim);
  norm("blk.0.attn_norm.weight");
  mat("blk.0.attn_q.weight", kDim, kDim);
  mat("blk.0.attn_k.weight", kDim, kDim);
  mat("blk.0.attn_v.weight", kDim, kDim);
  mat("blk.0.attn_output.weight", kDim, kDim);
  norm("blk.0.ffn_norm.weight");
  mat("blk.0.ffn_gate.weight", kHidden, kDim);
  mat("blk.0.ffn_up.weight", kHidden, kDim);
  mat("blk.0.ffn_down.weight", kDim, kHidden);
  norm("output_norm.weight");
  return g;
}

struct result {
  ml_status s;
  std::string msg, warn;
};

result convert(const ml_test_dir& d, const std::vector<uint8_t>& file, uint32_t wtype = 0, const char* tmpl = nullptr) {
  const std::string in = d / "in.gguf", out = d / "out.mlb";
  ml_test_write(in, file);
  cv_gguf_opts o = cv_gguf_defaults();
  o.path = in.c_str();
  o.out = out.c_str();
  o.wtype = wtype;
  o.chat_template = tmpl;
  result r;
  o.warn = [](void* u, const char* m) { static_cast<result*>(u)->warn = m; };
  o.warn_user = &r;
  ml_error err;
  r.s = cv_gguf(&o, &err);
  r.msg = r.s == ML_OK ? "" : err.msg;
  return r;
}

// The .mlb's tensor name's data and scale bytes.
const char* const kMatrices[] = {"token_embd", "blk.0.attn_q", "blk.0.attn_k", "blk.0.attn_v", "blk.0.attn_output",
                                 "blk.0.ffn_gate", "blk.0.ffn_up", "blk.0.ffn_down"};

std::string mlb_name(const std::string& g) {
  if (g == "token_embd") return "tok_embd";
  return g;
}

// Splits GGUF blocks into the quants and f16 scale bytes the .mlb should hold (the oracle).
void split_blocks(const std::vector<uint8_t>& blocks, uint32_t bs, std::vector<uint8_t>* q, std::vector<uint8_t>* s) {
  for (size_t p = 0; p < blocks.size(); p += bs) {
    s->push_back(blocks[p]), s->push_back(blocks[p + 1]);
    q->insert(q->end(), blocks.begin() + (long)p + 2, blocks.begin() + (long)(p + bs));
  }
}

bool contains(const std::string& s, const std::string& n) { return s.find(n) != std::string::npos; }

}  // namespace

TEST_CASE("gguf: a valid file parses: keys, typed getters, tensors by name", "[gguf]") {
  gguf g = base(GGUF_T_Q8_0);
  g.kvs.push_back(kv_raw("x.u64", [] { bytes b; b.u32(10), b.u64(7); return b.b; }()));
  g.kvs.push_back(kv_i32("x.i32", 9));
  g.kvs.push_back(kv_raw("x.big", [] { bytes b; b.u32(10), b.u64(1ull << 40); return b.b; }()));
  g.kvs.push_back(kv_strs("x.strs", {"a", "", "ccc"}));
  const std::vector<uint8_t> file = g.build();
  gguf_file f;
  ml_error err;
  REQUIRE(gguf_parse(&f, file.data(), file.size(), "t.gguf", &err) == ML_OK);
  CHECK(f.n_tensors == g.ts.size());
  uint32_t v = 0;
  CHECK(gguf_get_u32(&f, "x.u64", true, &v, &err) == ML_OK);
  CHECK(v == 7);
  CHECK(gguf_get_u32(&f, "x.i32", true, &v, &err) == ML_OK);
  CHECK(v == 9);
  CHECK(gguf_get_u32(&f, "x.big", true, &v, &err) == ML_E_FORMAT);
  CHECK(contains(err.msg, "x.big"));
  v = 5;
  CHECK(gguf_get_u32(&f, "absent", false, &v, &err) == ML_OK);
  CHECK(v == 5);
  const gguf_kv* a;
  REQUIRE(gguf_get_array(&f, "x.strs", GGUF_V_STRING, true, &a, &err) == ML_OK);
  cv_buf sb;
  REQUIRE(gguf_arr_strings(&f, a, &sb, &err) == ML_OK);
  const gguf_str* s = sb.as<gguf_str>();
  CHECK(std::string(s[2].p, s[2].len) == "ccc");
  CHECK(s[1].len == 0);
  const gguf_tensor* t = gguf_find_tensor(&f, "blk.0.ffn_down.weight");
  REQUIRE(t);
  CHECK(t->ne[0] == kHidden);
  CHECK(t->ne[1] == kDim);
  CHECK(t->type == GGUF_T_Q8_0);
  CHECK(std::memcmp(t->data, g.tensor_named("blk.0.ffn_down.weight")->data.data(), t->size) == 0);
  CHECK(gguf_find_tensor(&f, "nope") == nullptr);
}

TEST_CASE("gguf: damaged or unsupported files are refused naming the key or tensor", "[gguf]") {
  struct bad {
    const char* what;
    std::function<std::vector<uint8_t>()> make;
    ml_status status;
    const char* needle;
  };
  auto with = [](std::function<void(gguf&)> f, uint32_t mt = GGUF_T_F32) {
    return [f, mt] {
      gguf g = base(mt);
      f(g);
      return g.build();
    };
  };
  auto raw = [](std::function<void(std::vector<uint8_t>&)> f) {
    return [f] {
      std::vector<uint8_t> b = base().build();
      f(b);
      return b;
    };
  };
  auto set_u64 = [](std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); };
  const std::vector<bad> cases = {
      {"bad magic", raw([](auto& b) { b[0] = 'X'; }), ML_E_FORMAT, "not a GGUF file"},
      {"version 1", with([](gguf& g) { g.version = 1; }), ML_E_FORMAT, "version 1"},
      {"version 4", with([](gguf& g) { g.version = 4; }), ML_E_FORMAT, "version 4"},
      {"empty file", [] { return std::vector<uint8_t>(); }, ML_E_FORMAT, "not a GGUF file"},
      {"truncated header", raw([](auto& b) { b.resize(20); }), ML_E_FORMAT, "key count"},
      {"tensor count beyond the file", raw([&](auto& b) { set_u64(b, 8, 1u << 20); }), ML_E_FORMAT, "tensor count"},
      {"key count beyond the file", raw([&](auto& b) { set_u64(b, 16, 1ull << 40); }), ML_E_FORMAT, "key count"},
      {"key length past the end", raw([&](auto& b) { set_u64(b, 24, 60000); }), ML_E_FORMAT, "key 0"},
      {"key length over the limit", raw([&](auto& b) { set_u64(b, 24, 1ull << 33); }), ML_E_FORMAT, "exceeds 65535"},
      {"string value past the end",
       with([](gguf& g) { g.kvs.push_back(kv_raw("x.s", [] { bytes b; b.u32(8), b.u64(1ull << 50); return b.b; }())); }),
       ML_E_FORMAT, "x.s: string 0"},
      {"array count overflow",
       with([](gguf& g) {
         g.kvs.push_back(kv_raw("x.a", [] { bytes b; b.u32(9), b.u32(4), b.u64(1ull << 62); return b.b; }()));
       }),
       ML_E_FORMAT, "x.a: array count"},
      {"string array count beyond the file",
       with([](gguf& g) {
         g.kvs.push_back(kv_raw("x.a", [] { bytes b; b.u32(9), b.u32(8), b.u64(1ull << 40); return b.b; }()));
       }),
       ML_E_FORMAT, "x.a: array count"},
      {"unknown value type",
       with([](gguf& g) { g.kvs.push_back(kv_raw("x.t", [] { bytes b; b.u32(13), b.u32(0); return b.b; }())); }),
       ML_E_FORMAT, "x.t: unknown value type 13"},
      {"unknown array element type",
       with([](gguf& g) {
         g.kvs.push_back(kv_raw("x.t", [] { bytes b; b.u32(9), b.u32(99), b.u64(1); return b.b; }()));
       }),
       ML_E_FORMAT, "unknown array element type 99"},
      {"array of arrays",
       with([](gguf& g) { g.kvs.push_back(kv_raw("x.t", [] { bytes b; b.u32(9), b.u32(9), b.u64(1); return b.b; }())); }),
       ML_E_FORMAT, "arrays of arrays"},
      {"bool not 0 or 1", with([](gguf& g) { g.kvs.push_back(kv_bool("x.b", 2)); }), ML_E_FORMAT, "bool value 2"},
      {"duplicate key", with([](gguf& g) { g.kvs.push_back(kv_u32("llama.block_count", 1)); }), ML_E_FORMAT,
       "llama.block_count appears twice"},
      {"alignment not a power of two", with([](gguf& g) { g.kvs.push_back(kv_u32("general.alignment", 48)); }),
       ML_E_FORMAT, "general.alignment is 48"},
      {"alignment of the wrong type", with([](gguf& g) { g.kvs.push_back(kv_f32("general.alignment", 32)); }),
       ML_E_FORMAT, "general.alignment has type f32"},
      {"n_dims 5", with([](gguf& g) { g.ts[1].ne = {kDim, 1, 1, 1, 1}; }), ML_E_FORMAT,
       "blk.0.attn_norm.weight: n_dims 5"},
      {"a zero dimension", with([](gguf& g) { g.ts[1].ne = {kDim, 0}; }), ML_E_FORMAT, "attn_norm.weight: dimension 1 is 0"},
      {"dims product overflow", with([](gguf& g) { g.ts[1].ne = {1ull << 32, 1ull << 32, 1ull << 32}; }), ML_E_FORMAT,
       "attn_norm.weight: the element count overflows"},
      {"offset misaligned", with([](gguf& g) { g.ts[2].offset = 8; }), ML_E_FORMAT,
       "attn_q.weight: offset 8 is not a multiple of the alignment 32"},
      {"offset outside the data", with([](gguf& g) { g.ts[2].offset = 1ll << 40; }), ML_E_FORMAT,
       "attn_q.weight: bytes"},
      {"tensor running past the end", raw([](auto& b) { b.resize(b.size() - 4); }), ML_E_FORMAT, "output_norm.weight"},
      {"overlapping tensors", with([](gguf& g) { g.ts[3].offset = 0; }), ML_E_FORMAT, "overlap"},
      {"unknown tensor type", with([](gguf& g) { g.ts[2].type = 99; }), ML_E_FORMAT, "attn_q.weight: unknown tensor type 99"},
      {"row not a whole number of blocks", with([](gguf& g) { g.ts[1].type = GGUF_T_Q8_0; g.ts[1].ne = {16}; }),
       ML_E_FORMAT, "attn_norm.weight: row length 16 is not a multiple of Q8_0"},
      {"duplicate tensor name", with([](gguf& g) { g.ts[3].name = g.ts[2].name; }), ML_E_FORMAT,
       "blk.0.attn_q.weight appears twice"},
      {"tensor name too long", with([](gguf& g) { g.ts[3].name = std::string(64, 'a'); }), ML_E_FORMAT, "exceeds 63"},
      {"missing required key", with([](gguf& g) { g.erase_kv("llama.embedding_length"); }), ML_E_FORMAT,
       "llama.embedding_length is missing"},
      {"key of the wrong type", with([](gguf& g) { *g.find("llama.block_count") = kv_str("llama.block_count", "1"); }),
       ML_E_FORMAT, "llama.block_count has type string, not an integer"},
      {"negative count", with([](gguf& g) { *g.find("llama.block_count") = kv_i32("llama.block_count", -1); }),
       ML_E_FORMAT, "llama.block_count is -1"},
      {"architecture missing", with([](gguf& g) { g.erase_kv("general.architecture"); }), ML_E_FORMAT,
       "general.architecture is missing"},
      {"unknown architecture",
       with([](gguf& g) { *g.find("general.architecture") = kv_str("general.architecture", "mamba"); }), ML_E_FORMAT,
       "architecture \"mamba\" is not supported"},
      {"qwen35moe refused",
       with([](gguf& g) { *g.find("general.architecture") = kv_str("general.architecture", "qwen35moe"); }), ML_E_FORMAT,
       "\"qwen35moe\" is not supported"},
      {"a Q8_0 quant of -128",
       with([](gguf& g) { g.tensor_named("blk.0.attn_q.weight")->data[2 + 5] = 0x80; }, GGUF_T_Q8_0), ML_E_FORMAT,
       "blk.0.attn_q: quant 5 of row 0 is -128"},
      {"a NaN Q8_0 scale",
       with([](gguf& g) { auto& d = g.tensor_named("blk.0.attn_k.weight")->data; d[0] = 0x00, d[1] = 0x7E; },
            GGUF_T_Q8_0),
       ML_E_FORMAT, "blk.0.attn_k: the scale of block 0"},
      {"shape mismatch with the header", with([](gguf& g) { g.tensor_named("blk.0.attn_q.weight")->ne = {kDim, 16}; }),
       ML_E_SHAPE, "blk.0.attn_q.weight: shape [32, 16"},
      {"missing tensor", with([](gguf& g) { g.erase_tensor("blk.0.ffn_up.weight"); }), ML_E_FORMAT,
       "blk.0.ffn_up.weight is missing"},
      {"tensor of a layer beyond block_count",
       with([](gguf& g) { g.ts.push_back({"blk.1.attn_norm.weight", {kDim}, GGUF_T_F32, std::vector<uint8_t>(128)}); }),
       ML_E_FORMAT, "blk.1.attn_norm.weight is not part of"},
      {"quantized norm", with([](gguf& g) {
         auto* t = g.tensor_named("output_norm.weight");
         t->type = GGUF_T_Q8_0, t->data.assign(34, 0);
       }),
       ML_E_FORMAT, "output_norm.weight: type Q8_0, not F32"},
      {"unsupported quant type",
       with([](gguf& g) {
         auto* t = g.tensor_named("blk.0.attn_v.weight");
         t->type = GGUF_T_Q8_1, t->data.assign(32 * 36, 0);
       }),
       ML_E_FORMAT, "blk.0.attn_v.weight: type Q8_1 is not supported"},
      {"yarn scaling", with([](gguf& g) { g.kvs.push_back(kv_str("llama.rope.scaling.type", "yarn")); }), ML_E_FORMAT,
       "rope.scaling.type \"yarn\""},
      {"dim not a multiple of 32 outside llama",
       with([](gguf& g) {
         *g.find("general.architecture") = kv_str("general.architecture", "qwen3");
         for (auto& k : g.kvs)
           if (k.key.rfind("llama.", 0) == 0) k.key = "qwen3." + k.key.substr(6);
         *g.find("qwen3.embedding_length") = kv_u32("qwen3.embedding_length", 40);
       }),
       ML_E_SHAPE, "embedding_length 40"},
      {"unknown tokenizer model", with([](gguf& g) { g.kvs.push_back(kv_str("tokenizer.ggml.model", "bert")); }),
       ML_E_FORMAT, "tokenizer.ggml.model: \"bert\""},
      {"tokenizer without tokens", with([](gguf& g) { g.kvs.push_back(kv_str("tokenizer.ggml.model", "llama")); }),
       ML_E_FORMAT, "tokenizer.ggml.tokens is missing"},
      {"SPM vocabulary smaller than the embedding",
       with([](gguf& g) {
         g.kvs.push_back(kv_str("tokenizer.ggml.model", "llama"));
         g.kvs.push_back(kv_strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"}));
       }),
       ML_E_SHAPE, "has 3 tokens, not the model's 8"},
      {"unknown BPE pre-tokenizer",
       with([](gguf& g) {
         g.kvs.push_back(kv_str("tokenizer.ggml.model", "gpt2"));
         g.kvs.push_back(kv_str("tokenizer.ggml.pre", "deepseek-coder"));
         g.kvs.push_back(kv_strs("tokenizer.ggml.tokens", {"a", "b"}));
       }),
       ML_E_FORMAT, "pre-tokenizer \"deepseek-coder\""},
      {"scores array of the wrong type",
       with([](gguf& g) {
         g.kvs.push_back(kv_str("tokenizer.ggml.model", "llama"));
         g.kvs.push_back(kv_strs("tokenizer.ggml.tokens", {"a", "b", "c", "d", "e", "f", "g", "h"}));
         g.kvs.push_back(kv_i32s("tokenizer.ggml.scores", {0, 0, 0, 0, 0, 0, 0, 0}));
       }),
       ML_E_FORMAT, "tokenizer.ggml.scores has type array of i32"},
  };
  ml_test_dir d;
  for (const bad& c : cases) {
    INFO(c.what);
    const result r = convert(d, c.make());
    CHECK(r.s == c.status);
    INFO(r.msg);
    CHECK(contains(r.msg, c.needle));
  }
  CHECK(cases.size() >= 25);
}

TEST_CASE("gguf: a FIFO is refused without blocking, naming it", "[gguf]") {
  ml_test_dir d;
  const std::string fifo = d / "pipe.gguf", out = d / "out.mlb";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  cv_gguf_opts o = cv_gguf_defaults();
  o.path = fifo.c_str();
  o.out = out.c_str();
  ml_error err;
  CHECK(cv_gguf(&o, &err) == ML_E_ARG);
  CHECK(contains(err.msg, "pipe.gguf"));
  CHECK(!fs::exists(out));
}

TEST_CASE("gguf: Q8_0 and Q4_0 tensors are copied bit for bit", "[gguf]") {
  for (uint32_t mt : {GGUF_T_Q8_0, GGUF_T_Q4_0}) {
    INFO("type " << mt);
    ml_test_dir d;
    gguf g = base(mt, 7 + mt);
    const result r = convert(d, g.build());
    REQUIRE(r.s == ML_OK);
    CHECK(r.warn.empty());
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.wtype == (mt == GGUF_T_Q8_0 ? (uint32_t)ML_DT_Q8 : (uint32_t)ML_DT_Q4));
    CHECK(f.m.h.scale_type == ML_SCALE_F16);
    CHECK((f.m.h.flags & ML_FLAG_TIED_CLASSIFIER) != 0);
    for (const char* n : kMatrices) {
      INFO(n);
      std::vector<uint8_t> q, s;
      split_blocks(g.tensor_named(std::string(n) + ".weight")->data, mt == GGUF_T_Q8_0 ? 34 : 18, &q, &s);
      const ml_mlb_tensor t = f.get(mlb_name(n).c_str());
      CHECK(f.data(t) == q);
      CHECK(f.scales(t) == s);
    }
    // And the engine loads it.
    ml_model m;
    ml_error err;
    CHECK(ml_model_load(&m, (d / "out.mlb").c_str(), &err) == ML_OK);
    ml_model_free(&m);
  }
}

TEST_CASE("gguf: Q4_0 into a Q8 model widens exactly, Q8_0 into Q4 and K-free F16 quantize", "[gguf]") {
  ml_test_dir d;
  gguf g = base(GGUF_T_Q4_0, 3);
  REQUIRE(convert(d, g.build(), ML_DT_Q8).s == ML_OK);
  {
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.wtype == (uint32_t)ML_DT_Q8);
    const auto& src = g.tensor_named("blk.0.attn_q.weight")->data;
    const ml_mlb_tensor t = f.get("blk.0.attn_q");
    const std::vector<uint8_t> q = f.data(t), s = f.scales(t);
    for (size_t b = 0; b < src.size() / 18; ++b) {
      CHECK(s[2 * b] == src[18 * b]);
      CHECK(s[2 * b + 1] == src[18 * b + 1]);
      for (int j = 0; j < 16; ++j) {
        CHECK((int8_t)q[32 * b + j] == (src[18 * b + 2 + j] & 15) - 8);
        CHECK((int8_t)q[32 * b + j + 16] == (src[18 * b + 2 + j] >> 4) - 8);
      }
    }
  }
  // Q8_0 into a Q4 model is decoded and requantized, with a warning naming the tensors.
  const result r = convert(d, base(GGUF_T_Q8_0).build(), ML_DT_Q4);
  REQUIRE(r.s == ML_OK);
  CHECK(contains(r.warn, "token_embd.weight (Q8_0)"));
  CHECK(contains(r.warn, "requantized to Q4"));
  // F16 matrices are quantized without a warning, and the model loads.
  const result h = convert(d, base(GGUF_T_F16).build());
  REQUIRE(h.s == ML_OK);
  CHECK(h.warn.empty());
  ml_model m;
  ml_error err;
  CHECK(ml_model_load(&m, (d / "out.mlb").c_str(), &err) == ML_OK);
  ml_model_free(&m);
}

TEST_CASE("gguf: a byte-level BPE vocabulary becomes a tokenizer.json with merges and special tokens", "[gguf]") {
  ml_test_dir d;
  gguf g = base();
  // Byte-level pieces: "Ġ" is the space.
  const std::vector<std::string> toks = {"H", "e", "l", "o", "\xC4\xA0", "ll", "He", "<|end|>"};
  g.kvs.push_back(kv_str("tokenizer.ggml.model", "gpt2"));
  g.kvs.push_back(kv_str("tokenizer.ggml.pre", "gpt2"));
  g.kvs.push_back(kv_strs("tokenizer.ggml.tokens", toks));
  g.kvs.push_back(kv_i32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 1, 3}));
  g.kvs.push_back(kv_strs("tokenizer.ggml.merges", {"l l", "H e"}));
  g.kvs.push_back(kv_u32("tokenizer.ggml.eos_token_id", 7));
  g.kvs.push_back(kv_str("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}<|end|>{% endfor %}"));
  const result r = convert(d, g.build());
  REQUIRE(r.s == ML_OK);
  ml_model m;
  ml_error err;
  REQUIRE(ml_model_load(&m, (d / "out.mlb").c_str(), &err) == ML_OK);
  ml_model_options mo;
  mo.pack = false;
  REQUIRE(ml_model_prepare(&m, &mo, &err) == ML_OK);
  REQUIRE(m.tok);
  CHECK(ml_tokenizer_kind(m.tok) == ML_TOK_HF);
  int32_t ids[16];
  size_t n = 0;
  REQUIRE(ml_tokenizer_encode(m.tok, "Hello Hello<|end|>", 18, false, ids, 16, &n, &err) == ML_OK);
  // The oracle: the merges by hand. "He" "ll" "o", then " " as Ġ, "He" "ll" "o", then the special token.
  const std::vector<int32_t> want = {6, 5, 3, 4, 6, 5, 3, 7};
  CHECK(std::vector<int32_t>(ids, ids + n) == want);
  CHECK(ml_tokenizer_is_special(m.tok, 7));
  CHECK(ml_tokenizer_eos(m.tok) == 7);
  CHECK(m.mlb.h.eos_id == 7);
  ml_model_free(&m);
}

TEST_CASE("gguf: stories260K.gguf gives stories260K.bin's model and tok512.bin's encodings", "[gguf][real]") {
  const std::string gpath = ml_test_shared("models/stories260K-gguf/stories260K.gguf");
  if (!fs::exists(gpath)) {
    WARN("skipped: no " << gpath);
    return;
  }
  ml_test_dir d;
  const std::string gout = d / "g.mlb", lout = d / "l.mlb";
  cv_gguf_opts o = cv_gguf_defaults();
  o.path = gpath.c_str();
  o.out = gout.c_str();
  ml_error err;
  REQUIRE(cv_gguf(&o, &err) == ML_OK);
  cv_llama2c_opts lo = cv_llama2c_defaults();
  const std::string ck = ml_test_shared("models/stories260K.bin"), tk = ml_test_shared("models/tok512.bin");
  lo.checkpoint = ck.c_str();
  lo.tokenizer = tk.c_str();
  lo.out = lout.c_str();
  lo.scale_type = ML_SCALE_F16;
  REQUIRE(cv_llama2c(&lo, &err) == ML_OK);
  mlb_file g(gout), l(lout);
  CHECK(g.m.h.dim == l.m.h.dim);
  CHECK(g.m.h.hidden_dim == l.m.h.hidden_dim);
  CHECK(g.m.h.n_kv_heads == l.m.h.n_kv_heads);
  CHECK(g.m.h.rope_type == (uint32_t)ML_ROPE_INTERLEAVED);
  CHECK(g.m.h.norm_eps == l.m.h.norm_eps);
  // Every tensor of the llama2.c conversion has the same bytes (the GGUF's output equals its embedding).
  for (uint32_t i = 0; i < l.m.n_tensors; ++i) {
    const ml_mlb_tensor lt = ml_mlb_tensor_at(&l.m, i);
    INFO(lt.name);
    const ml_mlb_tensor gt = g.get(lt.name);
    CHECK(g.data(gt) == l.data(lt));
    if (lt.scale_size) CHECK(g.scales(gt) == l.scales(lt));
  }
  // The converted SentencePiece vocabulary encodes as tok512.bin does.
  ml_model gm, lm;
  REQUIRE(ml_model_load(&gm, gout.c_str(), &err) == ML_OK);
  REQUIRE(ml_model_load(&lm, lout.c_str(), &err) == ML_OK);
  ml_model_options mo;
  mo.pack = false;
  REQUIRE(ml_model_prepare(&gm, &mo, &err) == ML_OK);
  REQUIRE(ml_model_prepare(&lm, &mo, &err) == ML_OK);
  for (const char* text : {"Once upon a time", "Lily's cat said: \"Hello!\"\n", "  two  spaces", "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC 42",
                           "<s></s><unk>", ""}) {
    INFO(text);
    int32_t a[256], b[256];
    size_t na = 0, nb = 0;
    REQUIRE(ml_tokenizer_encode(gm.tok, text, std::strlen(text), true, a, 256, &na, &err) == ML_OK);
    REQUIRE(ml_tokenizer_encode(lm.tok, text, std::strlen(text), true, b, 256, &nb, &err) == ML_OK);
    CHECK(std::vector<int32_t>(a, a + na) == std::vector<int32_t>(b, b + nb));
  }
  ml_model_free(&gm);
  // With a chat template the vocabulary becomes a tokenizer.json (merges derived from the scores,
  // byte fallback): it too encodes as tok512.bin does, and decodes back to the text.
  const std::string tmpl = d / "t.jinja", hout = d / "h.mlb";
  {
    std::ofstream(tmpl) << "{% for m in messages %}{{ m.content }}{% endfor %}";
  }
  o.chat_template = tmpl.c_str();
  o.out = hout.c_str();
  REQUIRE(cv_gguf(&o, &err) == ML_OK);
  ml_model hm;
  REQUIRE(ml_model_load(&hm, hout.c_str(), &err) == ML_OK);
  REQUIRE(ml_model_prepare(&hm, &mo, &err) == ML_OK);
  CHECK(ml_tokenizer_kind(hm.tok) == ML_TOK_HF);
  for (const char* text : {"Once upon a time", "Lily's cat said: \"Hello!\"\n", "  two  spaces", "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC 42",
                           "The little dog was very happy. He ran and ran and played with his friends all day long."}) {
    INFO(text);
    int32_t a[256], b[256];
    size_t na = 0, nb = 0;
    REQUIRE(ml_tokenizer_encode(hm.tok, text, std::strlen(text), true, a, 256, &na, &err) == ML_OK);
    REQUIRE(ml_tokenizer_encode(lm.tok, text, std::strlen(text), true, b, 256, &nb, &err) == ML_OK);
    CHECK(std::vector<int32_t>(a, a + na) == std::vector<int32_t>(b, b + nb));
    ml_vec<char> back;
    REQUIRE(ml_tokenizer_decode(hm.tok, a, na, true, &back, &err) == ML_OK);
    CHECK(std::string(back.data(), back.size()) == text);
  }
  ml_model_free(&hm);
  ml_model_free(&lm);
}

// The K-quant decoders against blocks encoded here from ggml's published layouts (the inverse
// direction: the test places each chosen 4/6-bit value and 6-bit/int8 scale where the layout says).
TEST_CASE("gguf: Q4_K and Q6_K blocks decode to the values they encode", "[gguf]") {
  {
    // Q4_K: f16 d, f16 dmin, 12 bytes of eight 6-bit scales and mins, 128 bytes of nibbles; element
    // l of 64-value chunk c is sub-block 2c (low nibble of byte 32c + l) or 2c + 1 (l >= 32, high).
    std::vector<uint8_t> b(144, 0);
    const float d = 0.25f, dmin = 0.5f;
    const uint16_t hd = ml_float_to_half(d), hm = ml_float_to_half(dmin);
    b[0] = (uint8_t)hd, b[1] = (uint8_t)(hd >> 8), b[2] = (uint8_t)hm, b[3] = (uint8_t)(hm >> 8);
    int sc[8], mn[8];
    uint8_t* s = b.data() + 4;
    for (int j = 0; j < 8; ++j) {
      sc[j] = 10 + 7 * j, mn[j] = 63 - 5 * j;
      if (j < 4) {
        s[j] |= (uint8_t)sc[j], s[j + 4] |= (uint8_t)mn[j];
      } else {
        s[j + 4] = (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
        s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
        s[j] |= (uint8_t)((mn[j] >> 4) << 6);
      }
    }
    std::vector<float> want(256);
    for (int i = 0; i < 256; ++i) {
      const int q = (i * 7 + 3) % 16, c = i / 64, l = i % 64, j = i / 32;
      uint8_t& byte = b[16 + 32 * c + l % 32];
      byte |= (uint8_t)(l < 32 ? q : q << 4);
      want[i] = d * sc[j] * q - dmin * mn[j];
    }
    std::vector<float> got(256);
    REQUIRE(cv_gguf_dequant(GGUF_T_Q4_K, b.data(), 256, got.data()));
    for (int i = 0; i < 256; ++i) {
      INFO("Q4_K element " << i);
      CHECK(got[i] == Approx(want[i]).margin(1e-5));
    }
  }
  {
    // Q6_K: ql[128], qh[64], int8 scales[16], f16 d. Element i: half n = i/128, quarter g = (i%128)/32,
    // l = i%32; low 4 bits in ql[64n + l + 32(g&1)] (low nibble for g < 2), high 2 bits in
    // qh[32n + l] at bit 2g, scale sc[8n + l/16 + 2g]; value d * sc * (q - 32).
    std::vector<uint8_t> b(210, 0);
    const float d = 0.125f;
    const uint16_t hd = ml_float_to_half(d);
    b[208] = (uint8_t)hd, b[209] = (uint8_t)(hd >> 8);
    int8_t sc[16];
    for (int k = 0; k < 16; ++k) sc[k] = (int8_t)(k * 9 - 70), b[192 + k] = (uint8_t)sc[k];
    std::vector<float> want(256);
    for (int i = 0; i < 256; ++i) {
      const int q = (i * 13 + 5) % 64, n = i / 128, g = (i % 128) / 32, l = i % 32;
      uint8_t& lo = b[64 * n + l + 32 * (g & 1)];
      lo |= (uint8_t)(g < 2 ? (q & 15) : (q & 15) << 4);
      b[128 + 32 * n + l] |= (uint8_t)((q >> 4) << (2 * g));
      want[i] = d * sc[8 * n + l / 16 + 2 * g] * (q - 32);
    }
    std::vector<float> got(256);
    REQUIRE(cv_gguf_dequant(GGUF_T_Q6_K, b.data(), 256, got.data()));
    for (int i = 0; i < 256; ++i) {
      INFO("Q6_K element " << i);
      CHECK(got[i] == Approx(want[i]).margin(1e-5));
    }
  }
}

namespace {

// base() renamed to another architecture, with its extra tensors.
gguf as_arch(const std::string& arch) {
  gguf g = base(GGUF_T_F16, 11);
  for (auto& k : g.kvs) {
    if (k.key.rfind("llama.", 0) == 0) k.key = arch + "." + k.key.substr(6);
  }
  *g.find("general.architecture") = kv_str("general.architecture", arch);
  std::mt19937 rng(5);
  auto vec = [&](const std::string& n, uint64_t k) {
    g.ts.push_back({n, {k}, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, k, rng)});
  };
  if (arch == "qwen2")
    for (const char* x : {"q", "k", "v"}) vec(std::string("blk.0.attn_") + x + ".bias", kDim);
  if (arch == "qwen3" || arch == "gemma3") vec("blk.0.attn_q_norm.weight", kDim), vec("blk.0.attn_k_norm.weight", kDim);
  if (arch == "gemma3") {
    vec("blk.0.post_attention_norm.weight", kDim), vec("blk.0.post_ffw_norm.weight", kDim);
    g.kvs.push_back(kv_u32("gemma3.attention.sliding_window", 512));
  }
  return g;
}

}  // namespace

TEST_CASE("gguf: qwen2, qwen3 and gemma3 headers follow llama.cpp's conventions", "[gguf]") {
  ml_test_dir d;
  {
    const result r = convert(d, as_arch("qwen2").build());
    REQUIRE(r.s == ML_OK);
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.arch == (uint32_t)ML_ARCH_QWEN2);
    CHECK(f.m.h.rope_type == (uint32_t)ML_ROPE_HALF);
    CHECK(f.m.h.flags == (ML_FLAG_QKV_BIAS | ML_FLAG_TIED_CLASSIFIER));
    CHECK(f.get("blk.0.attn_k.bias").cols == kDim);
  }
  {
    const result r = convert(d, as_arch("qwen3").build());
    REQUIRE(r.s == ML_OK);
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.arch == (uint32_t)ML_ARCH_QWEN3);
    CHECK(f.m.h.rope_type == (uint32_t)ML_ROPE_HALF);
    CHECK(f.m.h.flags == (ML_FLAG_QK_NORM | ML_FLAG_TIED_CLASSIFIER));
    CHECK(f.get("blk.0.attn_q_norm").cols == kDim);
  }
  {
    gguf g = as_arch("gemma3");
    g.kvs.push_back(kv_f32("gemma3.rope.freq_base", 1e6f));
    const result r = convert(d, g.build());
    REQUIRE(r.s == ML_OK);
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.arch == (uint32_t)ML_ARCH_GEMMA3);
    CHECK(f.m.h.flags == (ML_FLAG_QK_NORM | ML_FLAG_POST_NORMS | ML_FLAG_TIED_CLASSIFIER));
    CHECK(f.m.h.activation == (uint32_t)ML_ACT_GELU_TANH);
    CHECK(f.m.h.embed_scale == Approx(std::sqrt(32.0)));
    CHECK(f.m.h.sliding_window == 512);
    CHECK(f.m.h.sliding_pattern == 6);
    CHECK(f.m.h.rope_theta == 1e6f);
    CHECK(f.m.h.rope_local_theta == 10000.0f);
    // Norms are copied as they are (GGUF holds Gemma's 1 + w already).
    const ml_mlb_tensor t = f.get("blk.0.post_ffw_norm");
    CHECK(f.data(t) == g.tensor_named("blk.0.post_ffw_norm.weight")->data);
  }
  // A qwen3 file without its q/k norms is refused naming the tensor.
  gguf g = as_arch("qwen3");
  g.erase_tensor("blk.0.attn_k_norm.weight");
  const result r = convert(d, g.build());
  CHECK(r.s == ML_E_FORMAT);
  CHECK(contains(r.msg, "blk.0.attn_k_norm.weight is missing"));
}

TEST_CASE("gguf: Llama 3's rope_freqs.weight becomes the llama3 RoPE scaling", "[gguf]") {
  // The divisors as Meta's reference computes them (factor 32, low 1, high 4, original 8192).
  auto freqs = [](double factor, double theta) {
    std::vector<uint8_t> out;
    for (int i = 0; i < 16; ++i) {
      const double wavelen = 2 * M_PI * std::pow(theta, 2.0 * i / 32);
      double v;
      if (wavelen < 8192 / 4.0) v = 1;
      else if (wavelen > 8192 / 1.0) v = factor;
      else {
        const double smooth = (8192 / wavelen - 1) / (4 - 1);
        v = 1 / ((1 - smooth) / factor + smooth);
      }
      const float f = (float)v;
      out.insert(out.end(), (const uint8_t*)&f, (const uint8_t*)&f + 4);
    }
    return out;
  };
  ml_test_dir d;
  gguf g = base();
  g.kvs.push_back(kv_f32("llama.rope.freq_base", 500000.0f));
  g.ts.push_back({"rope_freqs.weight", {16}, GGUF_T_F32, freqs(32, 500000)});
  REQUIRE(convert(d, g.build()).s == ML_OK);
  mlb_file f(d / "out.mlb");
  CHECK(f.m.h.rope_scaling == (uint32_t)ML_ROPE_SCALING_LLAMA3);
  CHECK(f.m.h.rope_factor == 32.0f);
  CHECK(f.m.h.rope_low_freq_factor == 1.0f);
  CHECK(f.m.h.rope_high_freq_factor == 4.0f);
  CHECK(f.m.h.rope_orig_max_seq == 8192);
  CHECK(f.m.h.rope_theta == 500000.0f);
  // Divisors that no (factor, 1, 4, 8192) reproduces are refused naming the tensor.
  std::vector<uint8_t> bad = freqs(32, 500000);
  const float two = 2.0f;
  std::memcpy(bad.data(), &two, 4);
  g.tensor_named("rope_freqs.weight")->data = bad;
  const result r = convert(d, g.build());
  CHECK(r.s == ML_E_FORMAT);
  CHECK(contains(r.msg, "rope_freqs.weight: divisor 0"));
}

TEST_CASE("gguf: K-quant matrices are decoded and requantized with the Q8 rule, with a warning", "[gguf]") {
  // A 256-wide embedding (vocab 8) in Q6_K inside a model whose other matrices are F32 is not
  // possible with dim 32, so the embedding is the only tensor tested: a dim-256 model.
  std::mt19937 rng(9);
  gguf g;
  const uint64_t D = 256, V = 8;
  g.kvs = {kv_str("general.architecture", "llama"), kv_u32("llama.embedding_length", D),
           kv_u32("llama.block_count", 1), kv_u32("llama.feed_forward_length", 32),
           kv_u32("llama.attention.head_count", 8), kv_u32("llama.context_length", 16),
           kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)};
  std::vector<uint8_t> emb(V * 210);
  for (auto& b : emb) b = (uint8_t)rng();
  for (uint64_t r = 0; r < V; ++r) {  // a sane f16 d per block
    const uint16_t h = ml_float_to_half(0.01f);
    emb[r * 210 + 208] = (uint8_t)h, emb[r * 210 + 209] = (uint8_t)(h >> 8);
  }
  g.ts.push_back({"token_embd.weight", {D, V}, GGUF_T_Q6_K, emb});
  auto add = [&](const std::string& n, std::vector<uint64_t> ne) {
    uint64_t c = 1;
    for (auto x : ne) c *= x;
    g.ts.push_back({n, ne, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, c, rng)});
  };
  add("blk.0.attn_norm.weight", {D});
  for (const char* x : {"attn_q", "attn_k", "attn_v", "attn_output"}) add(std::string("blk.0.") + x + ".weight", {D, D});
  add("blk.0.ffn_norm.weight", {D});
  add("blk.0.ffn_gate.weight", {D, 32});
  add("blk.0.ffn_up.weight", {D, 32});
  add("blk.0.ffn_down.weight", {32, D});
  add("output_norm.weight", {D});
  ml_test_dir d;
  const result r = convert(d, g.build());
  REQUIRE(r.s == ML_OK);
  CHECK(contains(r.warn, "1 tensor decoded and requantized to Q8"));
  CHECK(contains(r.warn, "token_embd.weight (Q6_K)"));
  mlb_file f(d / "out.mlb");
  const ml_mlb_tensor t = f.get("tok_embd");
  const std::vector<uint8_t> q = f.data(t), s = f.scales(t);
  std::vector<float> x(V * D);
  REQUIRE(cv_gguf_dequant(GGUF_T_Q6_K, emb.data(), V * D, x.data()));
  // The oracle: docs/format.md's Q8 rule, d = amax/127, q = trunc(x*127/amax + copysign(0.5, x)),
  // the scale then rounded to f16.
  for (size_t b = 0; b < V * D / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    CHECK((uint16_t)(s[2 * b] | s[2 * b + 1] << 8) == ml_float_to_half(amax / 127.0f));
    for (int j = 0; j < 32; ++j) {
      const float v = x[32 * b + j];
      const int want = amax == 0 ? 0 : (int)(v * (127.0f / amax) + std::copysign(0.5f, v));
      INFO("block " << b << " element " << j);
      CHECK((int8_t)q[32 * b + j] == want);
    }
  }
}

namespace {

// Qwen3.5 as llama.cpp's converter writes it (conversion/qwen.py, llama.cpp's qwen35 loader): a
// gated-delta layer 0 and an attention layer 1 (full_attention_interval 2), dim 32, hidden 64,
// vocab 8, tied. The attention layer: 2 heads of 16 (8 rotated), 1 KV head, attn_q holding per
// head the query rows then the gate rows. The gated-delta layer: nk key heads and nv value heads,
// both 32 wide, a kernel of 4. Matrices are Q8_0 (copied bit for bit), the rest F32. The test's
// oracle is the .mlb's layout: `want` holds each .mlb tensor's data (Q8_0 blocks or F32 bytes),
// and the file is built from it as the converter does (value heads grouped by key head ->
// tiled, q and gate interleaved per head).
constexpr uint32_t kQ35Heads = 2, kQ35Hd = 16, kQ35Dv = 32, kQ35Conv = 4, kQ35Rot = 8;

// The converter's _reorder_v_heads: in each of `outer` equal slices, the units [n_before,
// n_before + nv * width) seen as [nk, nv/nk, width] are transposed to [nv/nk, nk, width].
std::vector<uint8_t> tile(const std::vector<uint8_t>& x, size_t outer, size_t unit, size_t n_before, size_t width,
                          uint32_t nk, uint32_t nv) {
  std::vector<uint8_t> y = x;
  const size_t per = nv / nk, slice = x.size() / outer;
  for (size_t o = 0; o < outer; ++o)
    for (size_t kh = 0; kh < nk; ++kh)
      for (size_t j = 0; j < per; ++j)
        std::memcpy(y.data() + o * slice + (n_before + (j * nk + kh) * width) * unit,
                    x.data() + o * slice + (n_before + (kh * per + j) * width) * unit, width * unit);
  return y;
}

struct q35_file {
  gguf file;
  std::map<std::string, std::vector<uint8_t>> want;  // .mlb tensor -> its data
};

q35_file qwen35(uint32_t nk, uint32_t nv) {
  std::mt19937 rng(17);
  q35_file q;
  gguf& g = q.file;
  const uint32_t dv = kQ35Dv, ch = 2 * nk * kQ35Dv + nv * dv, qd = kQ35Heads * kQ35Hd;
  g.kvs = {kv_str("general.architecture", "qwen35"),
           kv_u32("qwen35.embedding_length", kDim),
           kv_u32("qwen35.block_count", 2),
           kv_u32("qwen35.feed_forward_length", kHidden),
           kv_u32("qwen35.attention.head_count", kQ35Heads),
           kv_u32("qwen35.attention.head_count_kv", 1),
           kv_u32("qwen35.attention.key_length", kQ35Hd),
           kv_u32("qwen35.attention.value_length", kQ35Hd),
           kv_u32("qwen35.context_length", 64),
           kv_f32("qwen35.attention.layer_norm_rms_epsilon", 1e-6f),
           kv_f32("qwen35.rope.freq_base", 1e7f),
           kv_u32("qwen35.rope.dimension_count", kQ35Rot),
           kv_i32s("qwen35.rope.dimension_sections", {2, 1, 1, 0}),
           kv_u32("qwen35.ssm.conv_kernel", kQ35Conv),
           kv_u32("qwen35.ssm.state_size", kQ35Dv),
           kv_u32("qwen35.ssm.group_count", nk),
           kv_u32("qwen35.ssm.time_step_rank", nv),
           kv_u32("qwen35.ssm.inner_size", nv * dv),
           kv_u32("qwen35.full_attention_interval", 2)};
  const size_t row = kDim / 32 * 34;  // bytes of a Q8_0 row of dim values
  auto q8 = [&](uint64_t rows, uint64_t cols) { return rand_bytes(GGUF_T_Q8_0, rows, cols, rng); };
  auto put = [&](const std::string& gname, std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t> d) {
    g.ts.push_back({gname, std::move(ne), type, std::move(d)});
  };
  // A tensor stored as the .mlb holds it: F32 vectors {n}, Q8_0 matrices {cols, rows}.
  auto same = [&](const std::string& mlb, const std::string& gname, std::vector<uint64_t> ne) {
    std::vector<uint8_t> d = ne.size() == 1 ? rand_bytes(GGUF_T_F32, 1, ne[0], rng) : q8(ne[1], ne[0]);
    q.want[mlb] = d;
    put(gname, ne, ne.size() == 1 ? GGUF_T_F32 : GGUF_T_Q8_0, d);
  };
  same("tok_embd", "token_embd.weight", {kDim, kVocab});
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    same(b + "attn_norm", b + "attn_norm.weight", {kDim});
    if (l == 0) {
      auto& qkv = q.want[b + "attn_qkv"] = q8(ch, kDim);
      put(b + "attn_qkv.weight", {kDim, ch}, GGUF_T_Q8_0, tile(qkv, 1, row, 2 * nk * kQ35Dv, dv, nk, nv));
      auto& gate = q.want[b + "attn_gate"] = q8(nv * dv, kDim);
      put(b + "attn_gate.weight", {kDim, nv * dv}, GGUF_T_Q8_0, tile(gate, 1, row, 0, dv, nk, nv));
      for (const char* x : {"ssm_beta", "ssm_alpha"}) {
        auto& w = q.want[b + x] = q8(nv, kDim);
        put(b + x + ".weight", {kDim, nv}, GGUF_T_Q8_0, tile(w, 1, row, 0, 1, nk, nv));
      }
      auto& conv = q.want[b + "ssm_conv1d"] = rand_bytes(GGUF_T_F32, ch, kQ35Conv, rng);
      put(b + "ssm_conv1d.weight", {kQ35Conv, ch}, GGUF_T_F32, tile(conv, 1, 4 * kQ35Conv, 2 * nk * kQ35Dv, dv, nk, nv));
      auto& a = q.want[b + "ssm_a"] = rand_bytes(GGUF_T_F32, 1, nv, rng);
      put(b + "ssm_a", {nv}, GGUF_T_F32, tile(a, 1, 4, 0, 1, nk, nv));
      auto& dt = q.want[b + "ssm_dt"] = rand_bytes(GGUF_T_F32, 1, nv, rng);
      put(b + "ssm_dt.bias", {nv}, GGUF_T_F32, tile(dt, 1, 4, 0, 1, nk, nv));
      same(b + "ssm_norm", b + "ssm_norm.weight", {dv});
      // Columns: each of the dim rows holds nv heads of dv / 32 blocks.
      auto& out = q.want[b + "ssm_out"] = q8(kDim, nv * dv);
      put(b + "ssm_out.weight", {nv * dv, kDim}, GGUF_T_Q8_0, tile(out, kDim, 34, 0, dv / 32, nk, nv));
    } else {
      auto& wq = q.want[b + "attn_q"] = q8(qd, kDim);
      auto& wg = q.want[b + "attn_gate"] = q8(qd, kDim);
      std::vector<uint8_t> merged;
      for (uint32_t h = 0; h < kQ35Heads; ++h)
        for (auto* w : {&wq, &wg})
          merged.insert(merged.end(), w->begin() + (long)(h * kQ35Hd * row), w->begin() + (long)((h + 1) * kQ35Hd * row));
      put(b + "attn_q.weight", {kDim, 2 * qd}, GGUF_T_Q8_0, merged);
      same(b + "attn_k", b + "attn_k.weight", {kDim, kQ35Hd});
      same(b + "attn_v", b + "attn_v.weight", {kDim, kQ35Hd});
      same(b + "attn_q_norm", b + "attn_q_norm.weight", {kQ35Hd});
      same(b + "attn_k_norm", b + "attn_k_norm.weight", {kQ35Hd});
      same(b + "attn_output", b + "attn_output.weight", {qd, kDim});
    }
    same(b + "ffn_norm", b + "post_attention_norm.weight", {kDim});
    same(b + "ffn_gate", b + "ffn_gate.weight", {kDim, kHidden});
    same(b + "ffn_up", b + "ffn_up.weight", {kDim, kHidden});
    same(b + "ffn_down", b + "ffn_down.weight", {kHidden, kDim});
  }
  same("output_norm", "output_norm.weight", {kDim});
  return q;
}

// Every .mlb tensor holds the oracle's bytes (Q8 quants and f16 scales split from Q8_0 blocks).
void check_tensors(mlb_file& f, const q35_file& q) {
  CHECK(f.m.n_tensors == q.want.size());
  for (const auto& [name, bytes] : q.want) {
    INFO(name);
    const ml_mlb_tensor t = f.get(name.c_str());
    if (t.type == ML_DT_Q8) {
      std::vector<uint8_t> qs, sc;
      split_blocks(bytes, 34, &qs, &sc);
      CHECK(f.data(t) == qs);
      CHECK(f.scales(t) == sc);
    } else {
      CHECK(t.type == ML_DT_F32);
      CHECK(f.data(t) == bytes);
    }
  }
}

}  // namespace

TEST_CASE("gguf: qwen35 comes back in the .mlb's layout (q/gate split, value heads grouped)", "[gguf]") {
  ml_test_dir d;
  // nv = 3 nk: the tiled and grouped orders differ and are not each other's inverse.
  for (uint32_t nv : {2u, 6u}) {
    INFO("value heads " << nv);
    const q35_file q = qwen35(2, nv);
    const result r = convert(d, q.file.build());
    REQUIRE(r.msg == "");
    REQUIRE(r.s == ML_OK);
    CHECK(r.warn == "");
    mlb_file f(d / "out.mlb");
    const ml_mlb_header& h = f.m.h;
    CHECK(h.arch == (uint32_t)ML_ARCH_QWEN35);
    CHECK(h.rope_type == (uint32_t)ML_ROPE_HALF);
    CHECK(h.flags == (ML_FLAG_QK_NORM | ML_FLAG_ATTN_GATE | ML_FLAG_TIED_CLASSIFIER));
    CHECK(h.n_layers == 2);
    CHECK(h.head_dim == kQ35Hd);
    CHECK(h.n_rot == kQ35Rot);
    CHECK(h.rope_theta == 1e7f);
    CHECK(h.linear_period == 2);
    CHECK(h.linear_k_heads == 2);
    CHECK(h.linear_v_heads == nv);
    CHECK(h.linear_k_dim == kQ35Dv);
    CHECK(h.linear_v_dim == kQ35Dv);
    CHECK(h.linear_conv == kQ35Conv);
    CHECK(h.wtype == (uint32_t)ML_DT_Q8);
    check_tensors(f, q);
    ml_model m;
    ml_error err;
    CHECK(ml_model_load(&m, (d / "out.mlb").c_str(), &err) == ML_OK);
    ml_model_free(&m);
  }
}

TEST_CASE("gguf: qwen35's MTP layers are skipped with a warning, recurrent_layers gives the period", "[gguf]") {
  ml_test_dir d;
  q35_file q = qwen35(2, 2);
  gguf& g = q.file;
  *g.find("qwen35.block_count") = kv_u32("qwen35.block_count", 3);
  g.kvs.push_back(kv_u32("qwen35.nextn_predict_layers", 1));
  g.erase_kv("qwen35.full_attention_interval");
  g.kvs.push_back(kv_raw("qwen35.attention.recurrent_layers", [] {
    bytes b;
    b.u32(9), b.u32(7), b.u64(3);
    b.raw("\1\0\0", 3);
    return b.b;
  }()));
  std::mt19937 rng(3);
  g.ts.push_back({"blk.2.attn_norm.weight", {kDim}, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, kDim, rng)});
  g.ts.push_back({"blk.2.nextn.eh_proj.weight", {2 * kDim, kDim}, GGUF_T_Q8_0, rand_bytes(GGUF_T_Q8_0, kDim, 2 * kDim, rng)});
  g.ts.push_back({"blk.2.nextn.enorm.weight", {kDim}, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, kDim, rng)});
  {
    const result r = convert(d, g.build());
    REQUIRE(r.msg == "");
    CHECK(contains(r.warn, "skipped 3 tensors of the multi-token-prediction layer 2..2"));
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.n_layers == 2);
    CHECK(f.m.h.linear_period == 2);
    check_tensors(f, q);
  }
  // A tensor past block_count is still a stray one.
  g.ts.push_back({"blk.3.attn_norm.weight", {kDim}, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, kDim, rng)});
  const result r = convert(d, g.build());
  CHECK(r.s == ML_E_FORMAT);
  CHECK(contains(r.msg, "tensor blk.3.attn_norm.weight is not part of a qwen35 model with 2 layers"));
}

TEST_CASE("gguf: damaged qwen35 files are refused naming the key or tensor", "[gguf]") {
  struct bad {
    const char* what;
    std::function<void(gguf&)> edit;
    ml_status status;
    const char* needle;
  };
  auto recurrent = [](const char* flags) {
    return kv_raw("qwen35.attention.recurrent_layers", [flags] {
      bytes b;
      b.u32(9), b.u32(7), b.u64(2);
      b.raw(flags, 2);
      return b.b;
    }());
  };
  const std::vector<bad> cases = {
      {"missing ssm key", [](gguf& g) { g.erase_kv("qwen35.ssm.state_size"); }, ML_E_FORMAT,
       "key qwen35.ssm.state_size is missing"},
      {"missing M-RoPE sections", [](gguf& g) { g.erase_kv("qwen35.rope.dimension_sections"); }, ML_E_FORMAT,
       "key qwen35.rope.dimension_sections is missing"},
      {"value heads narrower than key heads",
       [](gguf& g) { *g.find("qwen35.ssm.inner_size") = kv_u32("qwen35.ssm.inner_size", 32); }, ML_E_SHAPE,
       "qwen35.ssm.inner_size 32 is not .ssm.time_step_rank x .ssm.state_size = 64"},
      {"value heads not a multiple of key heads",
       [](gguf& g) { *g.find("qwen35.ssm.time_step_rank") = kv_u32("qwen35.ssm.time_step_rank", 3); }, ML_E_SHAPE,
       "time_step_rank 3 (value heads) is not a multiple of .ssm.group_count 2"},
      {"every block MTP", [](gguf& g) { g.kvs.push_back(kv_u32("qwen35.nextn_predict_layers", 2)); }, ML_E_FORMAT,
       "nextn_predict_layers 2 leaves none of block_count 2"},
      {"layer pattern without a period",
       [&](gguf& g) { g.erase_kv("qwen35.full_attention_interval"), g.kvs.push_back(recurrent("\0\1")); }, ML_E_FORMAT,
       "layer 1 is recurrent, so the layers do not repeat with period 1"},
      {"wrong ssm_conv1d shape",
       [](gguf& g) {
         tensor* t = g.tensor_named("blk.0.ssm_conv1d.weight");
         t->ne[0] = 3, t->data.resize(t->data.size() / 4 * 3);
       },
       ML_E_SHAPE, "tensor blk.0.ssm_conv1d.weight: shape [3, 192, 1, 1] does not match the header's [4, 192]"},
      {"attn_q without its gate rows",
       [](gguf& g) {
         tensor* t = g.tensor_named("blk.1.attn_q.weight");
         t->ne[1] /= 2, t->data.resize(t->data.size() / 2);
       },
       ML_E_SHAPE, "blk.1.attn_q.weight: shape [32, 32, 1, 1] is not [32, 64]: qwen35's attn_q holds the query and the output gate"},
      {"a missing ssm tensor", [](gguf& g) { g.erase_tensor("blk.0.ssm_dt.bias"); }, ML_E_FORMAT,
       "tensor blk.0.ssm_dt.bias is missing"},
  };
  ml_test_dir d;
  for (const bad& c : cases) {
    INFO(c.what);
    q35_file q = qwen35(2, 2);
    c.edit(q.file);
    const result r = convert(d, q.file.build());
    CHECK(r.s == c.status);
    CHECK(contains(r.msg, c.needle));
    if (!contains(r.msg, c.needle)) WARN(r.msg);
  }
  // Sections leaving a rotated pair to the fourth (position 0 for text) convert with a warning.
  q35_file q = qwen35(2, 2);
  *q.file.find("qwen35.rope.dimension_sections") = kv_i32s("qwen35.rope.dimension_sections", {4, 0, 0, 0});
  const result r = convert(d, q.file.build());
  CHECK(r.s == ML_OK);
  CHECK(contains(r.warn, "leaves 2 of the 4 rotated pairs (the first: pair 1) unrotated"));
}

TEST_CASE("gguf: the qwen35 pre-tokenizer keeps combining marks in a letter run, qwen2's splits them", "[gguf]") {
  // "कि": क (E0 A4 95) and the vowel sign ि (E0 A4 BF, category Mc), as GPT-2 byte-level pieces
  // (bytes_to_unicode: E0 -> à, A4 -> ¤, 95 -> ķ, BF -> ¿), with merges up to the whole syllable.
  const std::string a = "\xC3\xA0", c = "\xC2\xA4", k = "\xC4\xB7", i = "\xC2\xBF";
  const std::vector<std::string> toks = {a, c, k, i, a + c, a + c + k, a + c + i, a + c + k + a + c + i};
  for (const char* pre : {"qwen35", "qwen2"}) {
    INFO(pre);
    ml_test_dir d;
    gguf g = base();
    g.kvs.push_back(kv_str("tokenizer.ggml.model", "gpt2"));
    g.kvs.push_back(kv_str("tokenizer.ggml.pre", pre));
    g.kvs.push_back(kv_strs("tokenizer.ggml.tokens", toks));
    g.kvs.push_back(kv_strs("tokenizer.ggml.merges", {a + " " + c, a + c + " " + k, a + c + " " + i,
                                                      a + c + k + " " + a + c + i}));
    const result r = convert(d, g.build());
    REQUIRE(r.msg == "");
    ml_model m;
    ml_error err;
    REQUIRE(ml_model_load(&m, (d / "out.mlb").c_str(), &err) == ML_OK);
    ml_model_options mo;
    mo.pack = false;
    REQUIRE(ml_model_prepare(&m, &mo, &err) == ML_OK);
    int32_t ids[8];
    size_t n = 0;
    REQUIRE(ml_tokenizer_encode(m.tok, "\xE0\xA4\x95\xE0\xA4\xBF", 6, false, ids, 8, &n, &err) == ML_OK);
    // qwen35: one pre-token, merged whole; qwen2: the sign is a pre-token of its own.
    const std::vector<int32_t> want = std::string(pre) == "qwen35" ? std::vector<int32_t>{7} : std::vector<int32_t>{5, 6};
    CHECK(std::vector<int32_t>(ids, ids + n) == want);
    ml_model_free(&m);
  }
}
