// The GGUF importer tests' fixture (test_gguf.cpp, test_gguf_archs.cpp): a tiny GGUF writer written
// here from ggml's docs/gguf.md, a small Llama file to vary, and the conversion into a scratch folder.
#pragma once
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

namespace gguf_test {

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
inline kv kv_u32(const std::string& k, uint32_t v) { bytes b; b.u32(4), b.u32(v); return {k, b.b}; }
inline kv kv_i32(const std::string& k, int32_t v) { bytes b; b.u32(5), b.raw(&v, 4); return {k, b.b}; }
inline kv kv_f32(const std::string& k, float v) { bytes b; b.u32(6), b.f32(v); return {k, b.b}; }
inline kv kv_bool(const std::string& k, uint8_t v) { bytes b; b.u32(7), b.raw(&v, 1); return {k, b.b}; }
inline kv kv_str(const std::string& k, const std::string& v) { bytes b; b.u32(8), b.str(v); return {k, b.b}; }
inline kv kv_strs(const std::string& k, const std::vector<std::string>& v) {
  bytes b;
  b.u32(9), b.u32(8), b.u64(v.size());
  for (auto& s : v) b.str(s);
  return {k, b.b};
}
inline kv kv_f32s(const std::string& k, const std::vector<float>& v) {
  bytes b;
  b.u32(9), b.u32(6), b.u64(v.size());
  for (float x : v) b.f32(x);
  return {k, b.b};
}
inline kv kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
  bytes b;
  b.u32(9), b.u32(5), b.u64(v.size());
  for (int32_t x : v) b.raw(&x, 4);
  return {k, b.b};
}
inline kv kv_raw(const std::string& k, std::vector<uint8_t> v) { return {k, std::move(v)}; }

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

inline uint16_t half_bits(float f) { return ml_float_to_half(f); }

// Random data of a type for rows x cols (cols = ne[0]).
inline std::vector<uint8_t> rand_bytes(uint32_t type, uint64_t rows, uint64_t cols, std::mt19937& rng) {
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
inline gguf base(uint32_t mt = GGUF_T_F32, uint32_t seed = 1) {
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

inline result convert(const ml_test_dir& d, const std::vector<uint8_t>& file, uint32_t wtype = 0, const char* tmpl = nullptr) {
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

// The converted d / "out.mlb" loaded and prepared as the engine runs it, unpacked (free m with
// ml_model_free).
inline void load_converted(const ml_test_dir& d, ml_model* m) {
  ml_error err;
  REQUIRE(ml_model_load(m, (d / "out.mlb").c_str(), &err) == ML_OK);
  ml_model_options mo;
  mo.pack = false;
  REQUIRE(ml_model_prepare(m, &mo, &err) == ML_OK);
}

// The .mlb's tensor name's data and scale bytes.
const char* const kMatrices[] = {"token_embd", "blk.0.attn_q", "blk.0.attn_k", "blk.0.attn_v", "blk.0.attn_output",
                                 "blk.0.ffn_gate", "blk.0.ffn_up", "blk.0.ffn_down"};

inline std::string mlb_name(const std::string& g) {
  if (g == "token_embd") return "tok_embd";
  return g;
}

// Splits GGUF blocks into the quants and f16 scale bytes the .mlb should hold (the oracle).
inline void split_blocks(const std::vector<uint8_t>& blocks, uint32_t bs, std::vector<uint8_t>* q, std::vector<uint8_t>* s) {
  for (size_t p = 0; p < blocks.size(); p += bs) {
    s->push_back(blocks[p]), s->push_back(blocks[p + 1]);
    q->insert(q->end(), blocks.begin() + (long)p + 2, blocks.begin() + (long)(p + bs));
  }
}

inline bool contains(const std::string& s, const std::string& n) { return s.find(n) != std::string::npos; }

}  // namespace gguf_test
