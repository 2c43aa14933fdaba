// The GGUF writer (src/convert/gguf_write.h) through cv_random's --gguf: the file is read back with
// a GGUF parser written here from ggml's docs/gguf.md (not the writer's code), and every tensor is
// compared with the .mlb the same call wrote, read with the engine's own .mlb parser: a Q8_0/Q4_0
// block must be the .mlb block's f16 scale followed by its quants, byte for byte. Also: the keys
// llama.cpp reads, the vocabulary from tok512.bin (U+2581 for spaces, byte and control types, a
// repeated piece renamed), and the refusals (f32 scales, the wrong RoPE layout) that write nothing.
// That llama.cpp runs these files as krafla does is e2e/llamacpp's test.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "model/format.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// A GGUF file read back: scalar values as double or string, arrays of strings / numbers.
struct gguf_file {
  struct value {
    uint32_t type = 0;
    double num = 0;
    std::string str;
    std::vector<std::string> strs;
    std::vector<double> nums;
  };
  struct tensor {
    std::vector<uint64_t> dims;
    uint32_t type = 0;
    uint64_t offset = 0;  // from the file's start
  };
  std::map<std::string, value> kv;
  std::map<std::string, tensor> tensors;
  std::vector<std::string> order;
  uint32_t version = 0;
};

struct reader {
  const std::vector<uint8_t>& d;
  size_t pos = 0;
  template <class T>
  T get() {
    REQUIRE(pos + sizeof(T) <= d.size());
    T v;
    std::memcpy(&v, d.data() + pos, sizeof v);  // little-endian host (x86-64, aarch64)
    pos += sizeof v;
    return v;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    REQUIRE(pos + n <= d.size());
    std::string s(reinterpret_cast<const char*>(d.data() + pos), n);
    pos += n;
    return s;
  }
  double num(uint32_t t) {
    switch (t) {
      case 0: return get<uint8_t>();
      case 1: return get<int8_t>();
      case 2: return get<uint16_t>();
      case 3: return get<int16_t>();
      case 4: return get<uint32_t>();
      case 5: return get<int32_t>();
      case 6: return get<float>();
      case 7: return get<uint8_t>();
      case 10: return (double)get<uint64_t>();
      case 11: return (double)get<int64_t>();
      case 12: return get<double>();
    }
    FAIL("value type " << t);
    return 0;
  }
};

gguf_file parse_gguf(const std::vector<uint8_t>& d) {
  gguf_file g;
  reader r{d};
  REQUIRE(r.get<uint32_t>() == 0x46554747u);
  g.version = r.get<uint32_t>();
  const uint64_t n_tensors = r.get<uint64_t>(), n_kv = r.get<uint64_t>();
  uint64_t align = 32;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string k = r.str();
    gguf_file::value v;
    v.type = r.get<uint32_t>();
    if (v.type == 8) {
      v.str = r.str();
    } else if (v.type == 9) {
      const uint32_t et = r.get<uint32_t>();
      const uint64_t n = r.get<uint64_t>();
      for (uint64_t j = 0; j < n; ++j) {
        if (et == 8) v.strs.push_back(r.str());
        else v.nums.push_back(r.num(et));
      }
    } else {
      v.num = r.num(v.type);
    }
    if (k == "general.alignment") align = (uint64_t)v.num;
    REQUIRE(g.kv.count(k) == 0);
    g.kv[k] = v;
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = r.str();
    gguf_file::tensor t;
    const uint32_t nd = r.get<uint32_t>();
    for (uint32_t j = 0; j < nd; ++j) t.dims.push_back(r.get<uint64_t>());
    t.type = r.get<uint32_t>();
    t.offset = r.get<uint64_t>();
    REQUIRE(t.offset % align == 0);
    REQUIRE(g.tensors.count(name) == 0);
    g.tensors[name] = t;
    g.order.push_back(name);
  }
  const uint64_t start = (r.pos + align - 1) / align * align;
  for (auto& [name, t] : g.tensors) t.offset += start;
  return g;
}

cv_random_opts shape(const std::string& out, const std::string& gguf) {
  cv_random_opts o = cv_random_defaults();
  o.dim = 64, o.hidden = 96, o.layers = 2, o.heads = 4, o.kv_heads = 2, o.vocab = 512, o.max_seq = 48;
  o.scale_type = ML_SCALE_F16;
  o.out = out.c_str();
  o.gguf = gguf.c_str();
  return o;
}

std::string gguf_name_of(const std::string& n) {
  if (n == "tok_embd") return "token_embd.weight";
  return n + ".weight";
}

}  // namespace

TEST_CASE("gguf_write: every tensor is the .mlb's, block for block, under llama.cpp's name and dims", "[gguf]") {
  // Q8 and Q4; interleaved RoPE as is, and rotate-half (Hugging Face's) with q/k's rows reordered
  // per head into llama.cpp's interleaved pairs: GGUF row h*hd + 2i + j is the .mlb's h*hd + j*hd/2 + i.
  for (const auto& [wtype, rope] : {std::pair{ML_DT_Q8, ML_ROPE_INTERLEAVED}, std::pair{ML_DT_Q4, ML_ROPE_INTERLEAVED},
                                    std::pair{ML_DT_Q8, ML_ROPE_HALF}, std::pair{ML_DT_Q4, ML_ROPE_HALF}}) {
    INFO("wtype " << wtype << " rope " << rope);
    ml_test_dir t;
    const std::string mlb = t / "m.mlb", gg = t / "m.gguf";
    cv_random_opts o = shape(mlb, gg);
    o.wtype = wtype;
    o.rope_type = rope;
    ml_error err;
    REQUIRE(cv_random(&o, &err) == ML_OK);
    const std::vector<uint8_t> gd = ml_test_read(gg), md = ml_test_read(mlb);
    const gguf_file g = parse_gguf(gd);
    CHECK(g.version == 3);
    ml_mlb m;
    REQUIRE(ml_mlb_parse(&m, md.data(), md.size(), &err) == ML_OK);
    REQUIRE(g.tensors.size() == m.n_tensors);
    for (uint32_t i = 0; i < m.n_tensors; ++i) {
      const ml_mlb_tensor mt = ml_mlb_tensor_at(&m, i);
      const std::string name = gguf_name_of(mt.name);
      INFO(name);
      REQUIRE(g.tensors.count(name) == 1);
      const gguf_file::tensor& gt = g.tensors.at(name);
      const uint8_t* q = md.data() + mt.data_offset;
      if (mt.type == ML_DT_F32) {
        CHECK(gt.type == 0);
        CHECK(gt.dims == std::vector<uint64_t>{mt.cols});
        CHECK(std::memcmp(gd.data() + gt.offset, q, mt.data_size) == 0);
        continue;
      }
      CHECK(gt.type == (wtype == ML_DT_Q8 ? 8u : 2u));
      CHECK(gt.dims == std::vector<uint64_t>{mt.cols, mt.rows});
      const size_t qb = wtype == ML_DT_Q8 ? 32 : 16, nb = (size_t)mt.rows * mt.cols / 32;
      REQUIRE(gt.offset + nb * (2 + qb) <= gd.size());
      const uint8_t* sc = md.data() + mt.scale_offset;
      const bool qk = name.find("attn_q.") != std::string::npos || name.find("attn_k.") != std::string::npos;
      const size_t hd = 16, bpr = mt.cols / 32;  // head_dim 64/4, blocks per row
      size_t bad = 0;
      for (size_t b = 0; b < nb; ++b) {
        size_t row = b / bpr;
        if (qk && rope == ML_ROPE_HALF) row = row / hd * hd + (row % hd % 2) * (hd / 2) + row % hd / 2;
        const size_t src = row * bpr + b % bpr;
        const uint8_t* blk = gd.data() + gt.offset + b * (2 + qb);
        bad += std::memcmp(blk, sc + 2 * src, 2) != 0 || std::memcmp(blk + 2, q + qb * src, qb) != 0;
      }
      CHECK(bad == 0);
    }
    // The hyperparameters llama.cpp reads.
    CHECK(g.kv.at("general.architecture").str == "llama");
    CHECK(g.kv.at("llama.embedding_length").num == 64);
    CHECK(g.kv.at("llama.feed_forward_length").num == 96);
    CHECK(g.kv.at("llama.block_count").num == 2);
    CHECK(g.kv.at("llama.attention.head_count").num == 4);
    CHECK(g.kv.at("llama.attention.head_count_kv").num == 2);
    CHECK(g.kv.at("llama.attention.key_length").num == 16);
    CHECK(g.kv.at("llama.rope.dimension_count").num == 16);
    CHECK(g.kv.at("llama.context_length").num == 48);
    CHECK(g.kv.at("llama.rope.freq_base").num == 10000.0);
    CHECK(g.kv.at("llama.attention.layer_norm_rms_epsilon").num == Approx(1e-5));
    CHECK(g.kv.at("tokenizer.ggml.model").str == "llama");
    CHECK(g.kv.at("tokenizer.ggml.tokens").strs.size() == 512);
    CHECK(g.kv.at("tokenizer.ggml.tokens").strs[1] == "<s>");
    CHECK(g.kv.at("tokenizer.ggml.tokens").strs[13] == "<0x0A>");
    CHECK(g.kv.at("tokenizer.ggml.token_type").nums[13] == 6);
    CHECK(g.kv.at("tokenizer.ggml.tokens").strs[300] == "<tok_300>");
    CHECK(g.kv.at("tokenizer.ggml.bos_token_id").num == 1);
    CHECK(g.kv.at("tokenizer.ggml.eos_token_id").num == 2);
  }
}

TEST_CASE("gguf_write: tok512.bin becomes a llama.cpp SPM vocabulary", "[gguf]") {
  ml_test_dir t;
  const std::string mlb = t / "m.mlb", gg = t / "m.gguf", tok = ml_test_shared("models/tok512.bin");
  cv_random_opts o = shape(mlb, gg);
  o.tokenizer = tok.c_str();
  ml_error err;
  REQUIRE(cv_random(&o, &err) == ML_OK);
  const gguf_file g = parse_gguf(ml_test_read(gg));
  // The llama2.c file read here independently: u32 max_len, then f32 score, i32 len, bytes.
  const std::vector<uint8_t> tb = ml_test_read(tok);
  size_t at = 4;
  const auto& toks = g.kv.at("tokenizer.ggml.tokens").strs;
  const auto& scores = g.kv.at("tokenizer.ggml.scores").nums;
  const auto& types = g.kv.at("tokenizer.ggml.token_type").nums;
  REQUIRE(toks.size() == 512);
  REQUIRE(scores.size() == 512);
  REQUIRE(types.size() == 512);
  int spaces = 0;
  for (int i = 0; i < 512; ++i) {
    float score;
    int32_t len;
    std::memcpy(&score, tb.data() + at, 4);
    std::memcpy(&len, tb.data() + at + 4, 4);
    std::string piece(reinterpret_cast<const char*>(tb.data() + at + 8), (size_t)len);
    at += 8 + (size_t)len;
    INFO(i << " " << piece);
    CHECK(scores[i] == score);
    std::string want;
    for (char c : piece) want += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
    if (i <= 2) {
      CHECK(toks[i] == (i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>"));
      CHECK(types[i] == (i == 0 ? 2 : 3));
    } else if (piece.size() == 6 && piece.rfind("<0x", 0) == 0) {
      CHECK(toks[i] == piece);
      CHECK(types[i] == 6);
    } else {
      CHECK(toks[i] == want);
      CHECK(types[i] == 1);
      spaces += want != piece;
    }
  }
  CHECK(at == tb.size());
  CHECK(spaces > 50);  // tok512 has many "▁word" pieces
}

TEST_CASE("gguf_write: a repeated piece is renamed (llama.cpp requires unique pieces)", "[gguf]") {
  ml_test_dir t;
  // A llama2.c tokenizer of 4 tokens: <unk>, <s>, </s>, and "a" twice would be 5; vocab 5.
  std::vector<uint8_t> tb;
  auto u32 = [&](uint32_t v) { for (int i = 0; i < 4; ++i) tb.push_back((uint8_t)(v >> (8 * i))); };
  auto tokp = [&](const char* s) {
    u32(0);  // score 0.0f
    u32((uint32_t)std::strlen(s));
    tb.insert(tb.end(), s, s + std::strlen(s));
  };
  u32(8);
  for (const char* s : {"<unk>", "\n<s>\n", "\n</s>\n", "a", "a", "b"}) tokp(s);
  const std::string tok = t / "tok.bin";
  {
    std::ofstream out(tok, std::ios::binary);
    out.write(reinterpret_cast<const char*>(tb.data()), (std::streamsize)tb.size());
  }
  const std::string mlb = t / "m.mlb", gg = t / "m.gguf";
  cv_random_opts o = shape(mlb, gg);
  o.vocab = 6;
  o.tokenizer = tok.c_str();
  ml_error err;
  REQUIRE(cv_random(&o, &err) == ML_OK);
  const auto toks = parse_gguf(ml_test_read(gg)).kv.at("tokenizer.ggml.tokens").strs;
  CHECK(toks == std::vector<std::string>{"<unk>", "<s>", "</s>", "a", "[DUP_4]", "b"});
}

TEST_CASE("gguf_write: refuses what llama.cpp would compute differently, writing nothing", "[gguf]") {
  ml_test_dir t;
  const std::string mlb = t / "m.mlb", gg = t / "m.gguf";
  struct bad {
    const char* what;
    void (*apply)(cv_random_opts*);
    const char* msg;
  };
  const bad cases[] = {
      {"f32 scales", [](cv_random_opts* o) { o->scale_type = ML_SCALE_F32; }, "--scales f16"},
      {"placeholder vocabulary too small", [](cv_random_opts* o) { o->vocab = 258; }, "do not fit --vocab 258"},
  };
  for (const bad& b : cases) {
    INFO(b.what);
    cv_random_opts o = shape(mlb, gg);
    b.apply(&o);
    ml_error err;
    CHECK(cv_random(&o, &err) == ML_E_ARG);
    CHECK(std::strstr(err.msg, b.msg) != nullptr);
    CHECK_FALSE(fs::exists(gg));
    CHECK_FALSE(fs::exists(mlb));
  }
  cv_random_opts o = shape(mlb, mlb);
  ml_error err;
  CHECK(cv_random(&o, &err) == ML_E_ARG);
  CHECK(std::strstr(err.msg, "same file") != nullptr);
}

TEST_CASE("gguf_write: Llama 3's RoPE scaling becomes rope_freqs.weight, Hugging Face's frequencies over ours", "[gguf]") {
  ml_test_dir t;
  const std::string mlb = t / "m.mlb", gg = t / "m.gguf";
  ml_mlb_header c;  // Llama 3.2's scaling on a small shape (head_dim 32: high, medium and low bands)
  c.arch = ML_ARCH_LLAMA;
  c.rope_type = ML_ROPE_HALF;
  c.rope_theta = 500000.0f;
  c.rope_scaling = ML_ROPE_SCALING_LLAMA3;
  c.rope_factor = 32.0f, c.rope_low_freq_factor = 1.0f, c.rope_high_freq_factor = 4.0f, c.rope_orig_max_seq = 8192;
  c.dim = 128, c.hidden_dim = 256, c.n_layers = 1, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 32;
  c.vocab_size = 512, c.max_seq = 64, c.norm_eps = 1e-5f, c.bos_id = 1, c.eos_id = 2;
  cv_random_opts o = shape(mlb, gg);
  o.dim = o.hidden = o.layers = o.heads = o.kv_heads = o.head_dim = 0;
  o.config = &c;
  ml_error err;
  REQUIRE(cv_random(&o, &err) == ML_OK);
  const std::vector<uint8_t> gd = ml_test_read(gg);
  const gguf_file g = parse_gguf(gd);
  REQUIRE(g.tensors.count("rope_freqs.weight") == 1);
  const gguf_file::tensor& rf = g.tensors.at("rope_freqs.weight");
  CHECK(rf.type == 0);
  REQUIRE(rf.dims == std::vector<uint64_t>{16});
  // transformers' _compute_llama3_parameters: inv_freq_llama from inv_freq; llama.cpp divides
  // each frequency by rope_freqs, so rope_freqs = inv_freq / inv_freq_llama.
  int bands[3] = {0, 0, 0};
  for (int i = 0; i < 16; ++i) {
    const double inv_freq = 1.0 / std::pow(500000.0, (2.0 * i) / 32.0);
    const double wavelen = 2 * M_PI / inv_freq, low_wl = 8192 / 1.0, high_wl = 8192 / 4.0;
    double llama = wavelen > low_wl ? inv_freq / 32.0 : inv_freq;
    if (!(wavelen < high_wl) && !(wavelen > low_wl)) {
      const double smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0);
      llama = (1 - smooth) * llama / 32.0 + smooth * llama;
    }
    bands[wavelen < high_wl ? 0 : wavelen > low_wl ? 2 : 1]++;
    float got;
    std::memcpy(&got, gd.data() + rf.offset + 4 * i, 4);
    INFO("i " << i);
    CHECK(got == Approx(inv_freq / llama).epsilon(1e-6));
  }
  CHECK(bands[0] > 0);
  CHECK(bands[1] > 0);
  CHECK(bands[2] > 0);
}

TEST_CASE("gguf_write: Qwen3.5 as llama.cpp's qwen35: names, keys, attn_q holding q and the gate per head", "[gguf]") {
  ml_test_dir t;
  const std::string mlb = t / "m.mlb", gg = t / "m.gguf";
  ml_mlb_header c;  // Qwen3.5's kind on a small shape: layers 0-2 gated delta, layer 3 attention
  c.arch = ML_ARCH_QWEN35;
  c.rope_type = ML_ROPE_HALF;
  c.rope_theta = 1e7f;
  c.flags = ML_FLAG_QK_NORM | ML_FLAG_ATTN_GATE | ML_FLAG_TIED_CLASSIFIER;
  c.dim = 64, c.hidden_dim = 96, c.n_layers = 4, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 32, c.n_rot = 8;
  c.linear_period = 4, c.linear_k_heads = 2, c.linear_v_heads = 2, c.linear_k_dim = 32, c.linear_v_dim = 32;
  c.linear_conv = 4;
  c.vocab_size = 512, c.max_seq = 64, c.norm_eps = 1e-6f, c.bos_id = 1, c.eos_id = 2;
  cv_random_opts o = shape(mlb, gg);
  o.dim = o.hidden = o.layers = o.heads = o.kv_heads = o.head_dim = 0;
  o.config = &c;
  ml_error err;
  REQUIRE(cv_random(&o, &err) == ML_OK);
  const std::vector<uint8_t> gd = ml_test_read(gg), md = ml_test_read(mlb);
  const gguf_file g = parse_gguf(gd);
  CHECK(g.kv.at("general.architecture").str == "qwen35");
  CHECK(g.kv.at("qwen35.ssm.conv_kernel").num == 4);
  CHECK(g.kv.at("qwen35.ssm.state_size").num == 32);
  CHECK(g.kv.at("qwen35.ssm.group_count").num == 2);
  CHECK(g.kv.at("qwen35.ssm.time_step_rank").num == 2);
  CHECK(g.kv.at("qwen35.ssm.inner_size").num == 64);
  CHECK(g.kv.at("qwen35.full_attention_interval").num == 4);
  CHECK(g.kv.at("qwen35.rope.dimension_count").num == 8);
  const auto& sec = g.kv.at("qwen35.rope.dimension_sections").nums;
  REQUIRE(sec.size() == 4);
  CHECK(sec[0] + sec[1] + sec[2] + sec[3] == 4);
  for (const char* n : {"blk.0.ssm_dt.bias", "blk.0.ssm_a", "blk.0.ssm_conv1d.weight", "blk.0.attn_qkv.weight",
                        "blk.0.attn_gate.weight", "blk.0.post_attention_norm.weight", "blk.3.attn_q_norm.weight",
                        "blk.3.post_attention_norm.weight"}) {
    INFO(n);
    CHECK(g.tensors.count(n) == 1);
  }
  CHECK(g.tensors.count("blk.3.attn_gate.weight") == 0);  // merged into attn_q
  CHECK(g.tensors.at("blk.0.ssm_conv1d.weight").dims == std::vector<uint64_t>{4, 2 * 2 * 32 + 2 * 32});
  // attn_q of the attention layer: 2 x q_dim rows; per head h, .mlb attn_q's rows h*32.. then attn_gate's.
  ml_mlb m;
  REQUIRE(ml_mlb_parse(&m, md.data(), md.size(), &err) == ML_OK);
  ml_mlb_tensor q{}, gate{};
  for (uint32_t i = 0; i < m.n_tensors; ++i) {
    const ml_mlb_tensor x = ml_mlb_tensor_at(&m, i);
    if (std::string(x.name) == "blk.3.attn_q") q = x;
    if (std::string(x.name) == "blk.3.attn_gate") gate = x;
  }
  REQUIRE(q.rows == 64);
  REQUIRE(gate.rows == 64);
  const gguf_file::tensor& gq = g.tensors.at("blk.3.attn_q.weight");
  REQUIRE(gq.dims == std::vector<uint64_t>{64, 128});
  const size_t bpr = 64 / 32, blk = 34;  // Q8_0
  size_t bad = 0;
  for (size_t r = 0; r < 128; ++r) {
    const size_t head = r / 64, k = r % 64;
    const ml_mlb_tensor& src = k < 32 ? q : gate;
    const size_t sr = head * 32 + k % 32;
    for (size_t b = 0; b < bpr; ++b) {
      const uint8_t* out = gd.data() + gq.offset + (r * bpr + b) * blk;
      bad += std::memcmp(out, md.data() + src.scale_offset + 2 * (sr * bpr + b), 2) != 0 ||
             std::memcmp(out + 2, md.data() + src.data_offset + 32 * (sr * bpr + b), 32) != 0;
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("gguf_write: the placeholder vocabulary puts its 256 byte tokens beside BOS and EOS", "[gguf]") {
  ml_test_dir t;
  const std::string mlb = t / "m.mlb", gg = t / "m.gguf";
  ml_mlb_header c;
  c.arch = ML_ARCH_LLAMA;
  c.dim = 64, c.hidden_dim = 96, c.n_layers = 1, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 16;
  c.vocab_size = 600, c.max_seq = 32, c.norm_eps = 1e-5f, c.bos_id = 100, c.eos_id = 599;
  cv_random_opts o = shape(mlb, gg);
  o.dim = o.hidden = o.layers = o.heads = o.kv_heads = o.head_dim = 0;
  o.vocab = 0;
  o.config = &c;
  ml_error err;
  REQUIRE(cv_random(&o, &err) == ML_OK);
  const gguf_file g = parse_gguf(ml_test_read(gg));
  const auto& toks = g.kv.at("tokenizer.ggml.tokens").strs;
  const auto& types = g.kv.at("tokenizer.ggml.token_type").nums;
  REQUIRE(toks.size() == 600);
  CHECK(toks[0] == "<unk>");
  CHECK(toks[100] == "<s>");
  CHECK(toks[599] == "</s>");
  CHECK(toks[101] == "<0x00>");
  CHECK(toks[101 + 0x0A] == "<0x0A>");
  CHECK(toks[356] == "<0xFF>");
  CHECK(toks[3] == "<tok_3>");
  int bytes = 0;
  for (double ty : types) bytes += ty == 6;
  CHECK(bytes == 256);
  CHECK(g.kv.at("tokenizer.ggml.bos_token_id").num == 100);
}
