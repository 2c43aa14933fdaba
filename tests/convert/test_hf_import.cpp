// The Hugging Face importer (convert/hf_import.cpp, hf_config.h, safetensors.h), called directly.
// Oracles: the real config.json files in shared/data/hf map to header values checked by hand
// against the files (and transformers' defaults where a key is absent); tiny models written here
// as safetensors folders convert to .mlb files that are read back with the engine's parser and
// dequantized, and every tensor is compared with the values the test wrote, transformed as the
// Hugging Face layout defines (1 + w norms, Qwen3.5's interleaved query/gate rows, -exp(A_log),
// the FFN padding) -- the test computes each from the source values itself; a table of damaged
// inputs must fail with the documented status and a message naming the key or tensor.
// The end-to-end run of a real model (tinystories-656k-hf) is e2e/cli/test_hf_import.py.
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "model/format.h"
#include "model/tokenizer/bundle.h"
#include "model/tokenizer/tokenizer.h"
#include "mlb_reader.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// --- safetensors written by the test --------------------------------------------------------------

struct tensor {
  std::string name, dtype = "F32";
  std::vector<uint64_t> shape;
  std::vector<float> v;  // the values (exactly representable in dtype)
};

uint16_t bf16_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return (uint16_t)(b >> 16);
}
// IEEE half: only values with <= 10 mantissa bits and small exponents are generated for F16.
uint16_t f16_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const int e = (int)((b >> 23) & 0xFF) - 127;
  if ((b & 0x7FFFFFFFu) == 0) return (uint16_t)sign;
  REQUIRE(e >= -14);
  REQUIRE(e <= 15);
  REQUIRE((b & 0x1FFFu) == 0);
  return (uint16_t)(sign | (uint32_t)(e + 15) << 10 | ((b >> 13) & 0x3FFu));
}

std::vector<uint8_t> bytes_of(const tensor& t) {
  std::vector<uint8_t> out;
  for (float f : t.v) {
    if (t.dtype == "F32") {
      uint32_t b;
      std::memcpy(&b, &f, 4);
      for (int i = 0; i < 4; ++i) out.push_back((uint8_t)(b >> (8 * i)));
    } else {
      const uint16_t h = t.dtype == "BF16" ? bf16_bits(f) : f16_bits(f);
      out.push_back((uint8_t)h);
      out.push_back((uint8_t)(h >> 8));
    }
  }
  return out;
}

void put_u64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back((char)(uint8_t)(v >> (8 * i)));
}

// A file from a header text and a data area (the damaged-file cases write these directly).
std::string st_raw(const std::string& header, const std::string& data) {
  std::string s;
  put_u64(&s, header.size());
  return s + header + data;
}

std::string st_file(const std::vector<tensor>& ts, const std::string& meta = "") {
  std::string hdr = "{", data;
  if (!meta.empty()) hdr += "\"__metadata__\":" + meta + (ts.empty() ? "" : ",");
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::vector<uint8_t> b = bytes_of(ts[i]);
    std::string shape;
    for (size_t k = 0; k < ts[i].shape.size(); ++k) {
      if (k) shape += ',';
      shape += std::to_string(ts[i].shape[k]);
    }
    if (i) hdr += ',';
    hdr += "\"" + ts[i].name + "\":{\"dtype\":\"" + ts[i].dtype + "\",\"shape\":[" + shape + "],\"data_offsets\":[";
    hdr += std::to_string(data.size()) + "," + std::to_string(data.size() + b.size()) + "]}";
    data.append(b.begin(), b.end());
  }
  hdr += "}";
  while (hdr.size() % 8) hdr += ' ';
  return st_raw(hdr, data);
}

// Deterministic values in [-scale, scale), rounded to what dtype holds.
uint64_t g_seed = 12345;
float next_value(float scale) {
  g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
  return ((float)(g_seed >> 40) / (float)(1u << 24) * 2.0f - 1.0f) * scale;
}
tensor make(const std::string& name, std::vector<uint64_t> shape, const std::string& dtype = "F32", float scale = 0.5f) {
  tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  // BF16: the top 16 bits. (Written as an unconditional mask: GCC 12.2 -O2 dropped the truncation
  // when it sat in an `if (dtype == "BF16")` branch.)
  const uint32_t mask = dtype == "BF16" ? 0xFFFF0000u : 0xFFFFFFFFu;
  const bool f16 = dtype == "F16";
  for (uint64_t i = 0; i < n; ++i) {
    float f = next_value(scale);
    f = std::bit_cast<float>(std::bit_cast<uint32_t>(f) & mask);
    if (f16) f = std::ldexp(std::round(std::ldexp(f, 10)), -10);  // a multiple of 2^-10: exact in F16
    t.v.push_back(f);
  }
  return t;
}

// --- tiny model folders --------------------------------------------------------------------------

// The tokenizer is tinystories-656k-hf's (2048 tokens), copied into each folder.
struct model_dir {
  std::string config;
  std::vector<tensor> ts;
  std::string meta;
  bool tokenizer = true;
  std::string raw;  // when not empty: model.safetensors's bytes instead of ts
  std::function<void(const ml_test_dir&)> after;  // changes to the written files

  tensor* find(const std::string& name) {
    for (tensor& t : ts)
      if (t.name == name) return &t;
    FAIL("no tensor " << name);
    return nullptr;
  }
  void drop(const std::string& name) {
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i].name == name) {
        ts.erase(ts.begin() + (long)i);
        return;
      }
    FAIL("no tensor " << name);
  }
  void write(const ml_test_dir& d) const {
    ml_test_write(d / "config.json", config);
    ml_test_write(d / "model.safetensors", raw.empty() ? st_file(ts, meta) : raw);
    if (tokenizer) {
      const std::string src = ml_test_shared("models/tinystories-656k-hf/");
      const std::vector<uint8_t> tj = ml_test_read(src + "tokenizer.json"), tc = ml_test_read(src + "tokenizer_config.json");
      ml_test_write(d / "tokenizer.json", tj.data(), tj.size());
      ml_test_write(d / "tokenizer_config.json", tc.data(), tc.size());
    }
    if (after) after(d);
  }
};

// Replaces "key": value (value up to the next ',' or '}') in a config text.
std::string set_key(std::string cfg, const std::string& key, const std::string& value) {
  const std::string k = "\"" + key + "\":";
  const size_t at = cfg.find(k);
  if (at == std::string::npos) {
    cfg.insert(1, k + value + ",");
    return cfg;
  }
  size_t end = at + k.size();
  int depth = 0;
  while (end < cfg.size() && (depth > 0 || (cfg[end] != ',' && cfg[end] != '}'))) {
    if (cfg[end] == '{' || cfg[end] == '[') ++depth;
    if (cfg[end] == '}' || cfg[end] == ']') --depth;
    ++end;
  }
  return cfg.substr(0, at + k.size()) + value + cfg.substr(end);
}
std::string del_key(std::string cfg, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  const size_t at = cfg.find(k);
  REQUIRE(at != std::string::npos);
  size_t end = at + k.size();
  while (cfg[end] != ',' && cfg[end] != '}') ++end;
  if (cfg[end] == ',') ++end;
  return cfg.substr(0, at) + cfg.substr(end);
}

constexpr uint32_t DIM = 64, VOCAB = 2048;

// A Llama with dim 64, FFN 72 (padded to 96), 2 layers, 4 heads of 16, 2 KV heads.
model_dir tiny_llama(const std::string& dtype = "F32", bool tied = false) {
  model_dir m;
  m.config = std::string("{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":64,") +
             "\"intermediate_size\":72,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2," +
             "\"vocab_size\":2048,\"max_position_embeddings\":128,\"rms_norm_eps\":1e-05,\"rope_theta\":10000.0," +
             "\"tie_word_embeddings\":" + (tied ? "true" : "false") + ",\"bos_token_id\":1,\"eos_token_id\":2}";
  m.ts.push_back(make("model.embed_tokens.weight", {VOCAB, DIM}, dtype));
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    m.ts.push_back(make(p + "input_layernorm.weight", {DIM}, dtype));
    m.ts.push_back(make(p + "self_attn.q_proj.weight", {64, DIM}, dtype));
    m.ts.push_back(make(p + "self_attn.k_proj.weight", {32, DIM}, dtype));
    m.ts.push_back(make(p + "self_attn.v_proj.weight", {32, DIM}, dtype));
    m.ts.push_back(make(p + "self_attn.o_proj.weight", {DIM, 64}, dtype));
    m.ts.push_back(make(p + "post_attention_layernorm.weight", {DIM}, dtype));
    m.ts.push_back(make(p + "mlp.gate_proj.weight", {72, DIM}, dtype));
    m.ts.push_back(make(p + "mlp.up_proj.weight", {72, DIM}, dtype));
    m.ts.push_back(make(p + "mlp.down_proj.weight", {DIM, 72}, dtype));
  }
  m.ts.push_back(make("model.norm.weight", {DIM}, dtype));
  if (!tied) m.ts.push_back(make("lm_head.weight", {VOCAB, DIM}, dtype));
  return m;
}

// --- reading the output back ---------------------------------------------------------------------

// Checks tensor `name` (rows x cols) against want (src_rows x src_cols, zero beyond).
void expect_tensor(const mlb_file& f, const std::string& name, uint32_t rows, uint32_t cols, const std::vector<float>& want,
                   uint32_t src_rows, uint32_t src_cols) {
  std::vector<float> bound;
  const std::vector<float> got = f.values(name, rows, cols, &bound);
  REQUIRE(want.size() == size_t(src_rows) * src_cols);
  size_t bad = 0;
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < cols; ++c) {
      const float w = r < src_rows && c < src_cols ? want[size_t(r) * src_cols + c] : 0.0f;
      const size_t i = size_t(r) * cols + c;
      if (!(std::fabs(got[i] - w) <= bound[i])) {
        if (bad++ < 3) UNSCOPED_INFO(name << "[" << r << "," << c << "] = " << got[i] << ", want " << w);
      }
    }
  CHECK(bad == 0);
}

std::vector<float> plus_one(std::vector<float> v) {
  for (float& f : v) f = 1.0f + f;
  return v;
}

struct convert_result {
  ml_status s;
  std::string msg;
  std::vector<std::string> notes;
};

convert_result convert(const std::string& dir, const std::string& out, uint32_t wtype = ML_DT_Q8) {
  cv_hf_opts o = cv_hf_defaults();
  o.dir = dir.c_str();
  o.out = out.c_str();
  o.wtype = wtype;
  convert_result r;
  o.note = [](void* u, const char* msg) { static_cast<convert_result*>(u)->notes.push_back(msg); };
  o.note_user = &r;
  ml_error err;
  r.s = cv_hf(&o, &err);
  r.msg = r.s == ML_OK ? "" : err.msg;
  return r;
}

ml_mlb_header read_config(const std::string& rel, const std::string& gen = "") {
  ml_mlb_header h;
  ml_error err;
  const std::string base = ml_test_shared("data/hf/" + rel);
  const std::string g = gen.empty() ? "" : ml_test_shared("data/hf/" + gen);
  const ml_status s = cv_hf_config_read(base.c_str(), g.empty() ? nullptr : g.c_str(), &h, &err);
  INFO(err.msg);
  REQUIRE(s == ML_OK);
  return h;
}

}  // namespace

// --- config.json ---------------------------------------------------------------------------------

TEST_CASE("hf config: Llama 3.2 1B, with its llama3 RoPE scaling", "[hf_import]") {
  const ml_mlb_header h = read_config("llama-3.2-1b-instruct/config.json", "llama-3.2-1b-instruct/generation_config.json");
  CHECK(h.arch == ML_ARCH_LLAMA);
  CHECK(h.dim == 2048);
  CHECK(h.hidden_dim == 8192);
  CHECK(h.hidden_dim_orig == 8192);
  CHECK(h.n_layers == 16);
  CHECK(h.n_heads == 32);
  CHECK(h.n_kv_heads == 8);
  CHECK(h.head_dim == 64);
  CHECK(h.vocab_size == 128256);
  CHECK(h.max_seq == 131072);
  CHECK(h.norm_eps == 1e-5f);
  CHECK(h.rope_theta == 500000.0f);
  CHECK(h.rope_type == ML_ROPE_HALF);
  CHECK(h.rope_scaling == ML_ROPE_SCALING_LLAMA3);
  CHECK(h.rope_factor == 32.0f);
  CHECK(h.rope_low_freq_factor == 1.0f);
  CHECK(h.rope_high_freq_factor == 4.0f);
  CHECK(h.rope_orig_max_seq == 8192);
  CHECK(h.flags == ML_FLAG_TIED_CLASSIFIER);
  CHECK(h.activation == ML_ACT_SILU);
  CHECK(h.embed_scale == 1.0f);
  CHECK(h.sliding_window == 0);
  CHECK(h.bos_id == 128000);
  CHECK(h.eos_id == 128001);  // the first of [128001, 128008, 128009]
  CHECK(h.n_rot == 0);
  CHECK(h.attn_scale == 0.0f);
}

TEST_CASE("hf config: Qwen2.5 0.5B has q/k/v biases and no sliding window", "[hf_import]") {
  const ml_mlb_header h = read_config("qwen2.5-0.5b-instruct/config.json", "qwen2.5-0.5b-instruct/generation_config.json");
  CHECK(h.arch == ML_ARCH_QWEN2);
  CHECK(h.dim == 896);
  CHECK(h.hidden_dim == 4864);
  CHECK(h.n_layers == 24);
  CHECK(h.n_heads == 14);
  CHECK(h.n_kv_heads == 2);
  CHECK(h.head_dim == 64);
  CHECK(h.vocab_size == 151936);
  CHECK(h.max_seq == 32768);
  CHECK(h.norm_eps == 1e-6f);
  CHECK(h.rope_theta == 1e6f);
  CHECK(h.rope_scaling == ML_ROPE_SCALING_NONE);
  CHECK(h.flags == (ML_FLAG_QKV_BIAS | ML_FLAG_TIED_CLASSIFIER));
  CHECK(h.sliding_window == 0);  // sliding_window 32768 but use_sliding_window false
  CHECK(h.bos_id == 151643);
  CHECK(h.eos_id == 151645);
}

TEST_CASE("hf config: Qwen3 0.6B has q/k norms and head_dim 128 != dim/heads", "[hf_import]") {
  const ml_mlb_header h = read_config("qwen3-0.6b/config.json");
  CHECK(h.arch == ML_ARCH_QWEN3);
  CHECK(h.dim == 1024);
  CHECK(h.hidden_dim == 3072);
  CHECK(h.n_layers == 28);
  CHECK(h.n_heads == 16);
  CHECK(h.n_kv_heads == 8);
  CHECK(h.head_dim == 128);
  CHECK(h.vocab_size == 151936);
  CHECK(h.max_seq == 40960);
  CHECK(h.rope_theta == 1e6f);
  CHECK(h.flags == (ML_FLAG_QK_NORM | ML_FLAG_TIED_CLASSIFIER));
}

TEST_CASE("hf config: Gemma 3 1B (reconstructed config)", "[hf_import]") {
  const ml_mlb_header h = read_config("gemma-3-1b-it/config.json");
  CHECK(h.arch == ML_ARCH_GEMMA3);
  CHECK(h.dim == 1152);
  CHECK(h.hidden_dim == 6912);
  CHECK(h.n_layers == 26);
  CHECK(h.n_heads == 4);
  CHECK(h.n_kv_heads == 1);
  CHECK(h.head_dim == 256);
  CHECK(h.vocab_size == 262144);
  CHECK(h.max_seq == 32768);
  CHECK(h.activation == ML_ACT_GELU_TANH);
  CHECK(h.embed_scale == Approx(33.941125).epsilon(1e-7));  // sqrt(1152)
  // tie_word_embeddings is absent: Gemma3TextConfig's default is true.
  CHECK(h.flags == (ML_FLAG_POST_NORMS | ML_FLAG_QK_NORM | ML_FLAG_TIED_CLASSIFIER));
  CHECK(h.attn_scale == 0.0625f);  // query_pre_attn_scalar 256
  CHECK(h.sliding_window == 512);
  CHECK(h.sliding_pattern == 6);
  CHECK(h.rope_theta == 1e6f);
  CHECK(h.rope_local_theta == 10000.0f);
  CHECK(h.logit_softcap == 0.0f);  // final_logit_softcapping null
  CHECK(h.norm_eps == 1e-6f);
  CHECK(h.bos_id == 2);
  CHECK(h.eos_id == 1);
}

TEST_CASE("hf config: Qwen3.5 0.8B (nested text_config, reconstructed)", "[hf_import]") {
  const ml_mlb_header h = read_config("qwen3.5-0.8b/config.reconstructed.json");
  CHECK(h.arch == ML_ARCH_QWEN35);
  CHECK(h.dim == 1024);
  CHECK(h.hidden_dim == 3584);
  CHECK(h.n_layers == 24);
  CHECK(h.n_heads == 8);
  CHECK(h.n_kv_heads == 2);
  CHECK(h.head_dim == 256);
  CHECK(h.vocab_size == 248320);
  CHECK(h.max_seq == 262144);
  CHECK(h.linear_period == 4);
  CHECK(h.linear_k_heads == 16);
  CHECK(h.linear_v_heads == 16);
  CHECK(h.linear_k_dim == 128);
  CHECK(h.linear_v_dim == 128);
  CHECK(h.linear_conv == 4);
  CHECK(h.n_rot == 64);  // 256 x 0.25
  CHECK(h.rope_theta == 1e7f);
  CHECK(h.flags == (ML_FLAG_QK_NORM | ML_FLAG_ATTN_GATE | ML_FLAG_TIED_CLASSIFIER));
  CHECK(h.eos_id == 248044);
}

TEST_CASE("hf config: SmolLM2 135M and TinyLlama 1.1B", "[hf_import]") {
  const ml_mlb_header s = read_config("smollm2-135m-instruct/config.json");
  CHECK(s.arch == ML_ARCH_LLAMA);
  CHECK(s.dim == 576);
  CHECK(s.hidden_dim == 1536);
  CHECK(s.n_layers == 30);
  CHECK(s.n_heads == 9);
  CHECK(s.n_kv_heads == 3);
  CHECK(s.head_dim == 64);
  CHECK(s.vocab_size == 49152);
  CHECK(s.max_seq == 8192);
  CHECK(s.rope_theta == 100000.0f);
  CHECK(s.flags == ML_FLAG_TIED_CLASSIFIER);
  const ml_mlb_header t = read_config("tinyllama-1.1b-chat-v1.0/config.json", "tinyllama-1.1b-chat-v1.0/generation_config.json");
  CHECK(t.dim == 2048);
  CHECK(t.hidden_dim == 5632);
  CHECK(t.n_layers == 22);
  CHECK(t.n_heads == 32);
  CHECK(t.n_kv_heads == 4);
  CHECK(t.vocab_size == 32000);
  CHECK(t.max_seq == 2048);
  CHECK(t.flags == 0);  // tie_word_embeddings false
  CHECK(t.bos_id == 1);
  CHECK(t.eos_id == 2);
}

TEST_CASE("hf config: defaults, padding, generation_config ids and transformers 5 rope_parameters", "[hf_import]") {
  ml_mlb_header h;
  ml_error err;
  const std::string base = "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":100,\"num_hidden_layers\":1,"
                           "\"num_attention_heads\":4,\"vocab_size\":300,\"max_position_embeddings\":64}";
  const std::string gen = "{\"bos_token_id\":7,\"eos_token_id\":[9,10]}";
  REQUIRE(cv_hf_config_parse(base.data(), base.size(), gen.data(), gen.size(), "config.json", &h, &err) == ML_OK);
  CHECK(h.hidden_dim == 128);  // 100 padded to a multiple of 32
  CHECK(h.hidden_dim_orig == 100);
  CHECK(h.n_kv_heads == 4);   // default: num_attention_heads
  CHECK(h.head_dim == 16);    // default: hidden_size / heads
  CHECK(h.flags == 0);        // LlamaConfig's tie_word_embeddings default is false
  CHECK(h.norm_eps == 1e-6f);
  CHECK(h.rope_theta == 10000.0f);
  CHECK(h.bos_id == 7);
  CHECK(h.eos_id == 9);
  const std::string v5 = set_key(base, "rope_parameters",
                                 "{\"rope_type\":\"linear\",\"factor\":4.0,\"rope_theta\":250000}");
  REQUIRE(cv_hf_config_parse(v5.data(), v5.size(), nullptr, 0, "config.json", &h, &err) == ML_OK);
  CHECK(h.rope_scaling == ML_ROPE_SCALING_LINEAR);
  CHECK(h.rope_factor == 4.0f);
  CHECK(h.rope_theta == 250000.0f);
  CHECK(h.bos_id == 0);  // no ids anywhere
  const std::string mistral = set_key(set_key(base, "model_type", "\"mistral\""), "sliding_window", "4096");
  REQUIRE(cv_hf_config_parse(mistral.data(), mistral.size(), nullptr, 0, "config.json", &h, &err) == ML_OK);
  CHECK(h.sliding_window == 4096);
  CHECK(h.sliding_pattern == 0);
  // Gemma 3 with layer_types instead of sliding_window_pattern, and transformers 5's per-kind RoPE.
  const std::string gemma =
      "{\"model_type\":\"gemma3_text\",\"hidden_size\":64,\"intermediate_size\":64,\"num_hidden_layers\":4,"
      "\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":32,\"vocab_size\":300,\"max_position_embeddings\":64,"
      "\"layer_types\":[\"sliding_attention\",\"full_attention\",\"sliding_attention\",\"full_attention\"],"
      "\"query_pre_attn_scalar\":16,\"final_logit_softcapping\":30.0,"
      "\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\",\"rope_theta\":1000000.0},"
      "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}}}";
  REQUIRE(cv_hf_config_parse(gemma.data(), gemma.size(), nullptr, 0, "config.json", &h, &err) == ML_OK);
  CHECK(h.sliding_pattern == 2);
  CHECK(h.sliding_window == 4096);  // Gemma3TextConfig's default
  CHECK(h.attn_scale == 0.25f);
  CHECK(h.logit_softcap == 30.0f);
  CHECK(h.rope_theta == 1e6f);
  CHECK(h.rope_local_theta == 1e4f);
  CHECK(h.embed_scale == 8.0f);
}

// --- conversions read back -----------------------------------------------------------------------

TEST_CASE("hf import: a tiny Llama (F32, untied) converts tensor for tensor", "[hf_import]") {
  ml_test_dir d;
  model_dir m = tiny_llama();
  m.write(d);
  const convert_result r = convert(d.p.string(), d / "out.mlb");
  INFO(r.msg);
  REQUIRE(r.s == ML_OK);
  mlb_file f(d / "out.mlb");
  CHECK(f.m.h.arch == ML_ARCH_LLAMA);
  CHECK(f.m.h.rope_type == ML_ROPE_HALF);
  CHECK(f.m.h.hidden_dim == 96);
  CHECK(f.m.h.hidden_dim_orig == 72);
  CHECK(f.m.h.flags == 0);
  CHECK(f.m.n_tensors == 1 + 2 * 9 + 1 + 1);
  CHECK(f.m.tokenizer_kind == 2);
  expect_tensor(f, "tok_embd", VOCAB, DIM, m.find("model.embed_tokens.weight")->v, VOCAB, DIM);
  expect_tensor(f, "output", VOCAB, DIM, m.find("lm_head.weight")->v, VOCAB, DIM);
  expect_tensor(f, "output_norm", 1, DIM, m.find("model.norm.weight")->v, 1, DIM);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", b = "blk." + std::to_string(l) + ".";
    expect_tensor(f, b + "attn_norm", 1, DIM, m.find(p + "input_layernorm.weight")->v, 1, DIM);
    expect_tensor(f, b + "attn_q", 64, DIM, m.find(p + "self_attn.q_proj.weight")->v, 64, DIM);  // not permuted
    expect_tensor(f, b + "attn_k", 32, DIM, m.find(p + "self_attn.k_proj.weight")->v, 32, DIM);
    expect_tensor(f, b + "attn_v", 32, DIM, m.find(p + "self_attn.v_proj.weight")->v, 32, DIM);
    expect_tensor(f, b + "attn_output", DIM, 64, m.find(p + "self_attn.o_proj.weight")->v, DIM, 64);
    expect_tensor(f, b + "ffn_norm", 1, DIM, m.find(p + "post_attention_layernorm.weight")->v, 1, DIM);
    expect_tensor(f, b + "ffn_gate", 96, DIM, m.find(p + "mlp.gate_proj.weight")->v, 72, DIM);  // zero rows 72..95
    expect_tensor(f, b + "ffn_up", 96, DIM, m.find(p + "mlp.up_proj.weight")->v, 72, DIM);
    expect_tensor(f, b + "ffn_down", DIM, 96, m.find(p + "mlp.down_proj.weight")->v, DIM, 72);  // zero columns
  }
}

TEST_CASE("hf import: BF16 and F16 weights are widened exactly, a tied matrix stored as lm_head only", "[hf_import]") {
  for (const char* dtype : {"BF16", "F16"}) {
    INFO(dtype);
    ml_test_dir d;
    model_dir m = tiny_llama(dtype, true);
    // As tinystories-656k-hf: the tied matrix saved once, under lm_head's name.
    m.find("model.embed_tokens.weight")->name = "lm_head.weight";
    m.meta = "{\"format\":\"pt\",\"model.embed_tokens.weight\":\"lm_head.weight\"}";
    m.write(d);
    const convert_result r = convert(d.p.string(), d / "out.mlb");
    INFO(r.msg);
    REQUIRE(r.s == ML_OK);
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.flags == ML_FLAG_TIED_CLASSIFIER);
    CHECK_FALSE(f.has("output"));
    expect_tensor(f, "tok_embd", VOCAB, DIM, m.find("lm_head.weight")->v, VOCAB, DIM);
    // F32 norms hold the widened values exactly.
    const std::vector<float> n = f.values("blk.1.attn_norm", 1, DIM);
    CHECK(n == m.find("model.layers.1.input_layernorm.weight")->v);
  }
}

TEST_CASE("hf import: Qwen2 biases, Qwen3 q/k norms", "[hf_import]") {
  for (const char* arch : {"Qwen2ForCausalLM", "Qwen3ForCausalLM"}) {
    INFO(arch);
    const bool qwen2 = std::strcmp(arch, "Qwen2ForCausalLM") == 0;
    ml_test_dir d;
    model_dir m = tiny_llama();
    m.config = set_key(set_key(m.config, "architectures", std::string("[\"") + arch + "\"]"), "model_type",
                       qwen2 ? "\"qwen2\"" : "\"qwen3\"");
    for (int l = 0; l < 2; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
      if (qwen2) {
        m.ts.push_back(make(p + "q_proj.bias", {64}));
        m.ts.push_back(make(p + "k_proj.bias", {32}));
        m.ts.push_back(make(p + "v_proj.bias", {32}));
      } else {
        m.ts.push_back(make(p + "q_norm.weight", {16}));
        m.ts.push_back(make(p + "k_norm.weight", {16}));
      }
    }
    m.write(d);
    const convert_result r = convert(d.p.string(), d / "out.mlb");
    INFO(r.msg);
    REQUIRE(r.s == ML_OK);
    mlb_file f(d / "out.mlb");
    const std::string p = "model.layers.1.self_attn.";
    if (qwen2) {
      CHECK(f.values("blk.1.attn_q.bias", 1, 64) == m.find(p + "q_proj.bias")->v);
      CHECK(f.values("blk.1.attn_k.bias", 1, 32) == m.find(p + "k_proj.bias")->v);
      CHECK(f.values("blk.1.attn_v.bias", 1, 32) == m.find(p + "v_proj.bias")->v);
      CHECK_FALSE(f.has("blk.1.attn_q_norm"));
    } else {
      // Qwen3's RMSNorm multiplies by w (no 1 + w).
      CHECK(f.values("blk.1.attn_q_norm", 1, 16) == m.find(p + "q_norm.weight")->v);
      CHECK(f.values("blk.1.attn_k_norm", 1, 16) == m.find(p + "k_norm.weight")->v);
      CHECK_FALSE(f.has("blk.1.attn_q.bias"));
    }
  }
}

TEST_CASE("hf import: Gemma 3 stores 1 + w for every norm and maps the four layer norms", "[hf_import]") {
  ml_test_dir d;
  model_dir m;
  m.config = "{\"architectures\":[\"Gemma3ForCausalLM\"],\"model_type\":\"gemma3_text\",\"hidden_size\":64,"
             "\"intermediate_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
             "\"head_dim\":32,\"vocab_size\":2048,\"max_position_embeddings\":128,\"sliding_window\":16,"
             "\"sliding_window_pattern\":2,\"hidden_activation\":\"gelu_pytorch_tanh\"}";
  m.ts.push_back(make("model.embed_tokens.weight", {VOCAB, DIM}, "BF16"));
  const char* norms[] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                         "post_feedforward_layernorm"};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : norms) m.ts.push_back(make(p + n + ".weight", {DIM}, "BF16"));
    m.ts.push_back(make(p + "self_attn.q_proj.weight", {64, DIM}, "BF16"));
    m.ts.push_back(make(p + "self_attn.k_proj.weight", {32, DIM}, "BF16"));
    m.ts.push_back(make(p + "self_attn.v_proj.weight", {32, DIM}, "BF16"));
    m.ts.push_back(make(p + "self_attn.o_proj.weight", {DIM, 64}, "BF16"));
    m.ts.push_back(make(p + "self_attn.q_norm.weight", {32}, "BF16"));
    m.ts.push_back(make(p + "self_attn.k_norm.weight", {32}, "BF16"));
    m.ts.push_back(make(p + "mlp.gate_proj.weight", {64, DIM}, "BF16"));
    m.ts.push_back(make(p + "mlp.up_proj.weight", {64, DIM}, "BF16"));
    m.ts.push_back(make(p + "mlp.down_proj.weight", {DIM, 64}, "BF16"));
  }
  m.ts.push_back(make("model.norm.weight", {DIM}, "BF16"));
  m.write(d);
  const convert_result r = convert(d.p.string(), d / "out.mlb");
  INFO(r.msg);
  REQUIRE(r.s == ML_OK);
  mlb_file f(d / "out.mlb");
  CHECK(f.m.h.arch == ML_ARCH_GEMMA3);
  CHECK(f.m.h.flags == (ML_FLAG_POST_NORMS | ML_FLAG_QK_NORM | ML_FLAG_TIED_CLASSIFIER));
  CHECK_FALSE(f.has("output"));
  const std::string p = "model.layers.1.";
  CHECK(f.values("blk.1.attn_norm", 1, DIM) == plus_one(m.find(p + "input_layernorm.weight")->v));
  CHECK(f.values("blk.1.post_attention_norm", 1, DIM) == plus_one(m.find(p + "post_attention_layernorm.weight")->v));
  CHECK(f.values("blk.1.ffn_norm", 1, DIM) == plus_one(m.find(p + "pre_feedforward_layernorm.weight")->v));
  CHECK(f.values("blk.1.post_ffw_norm", 1, DIM) == plus_one(m.find(p + "post_feedforward_layernorm.weight")->v));
  CHECK(f.values("blk.1.attn_q_norm", 1, 32) == plus_one(m.find(p + "self_attn.q_norm.weight")->v));
  CHECK(f.values("blk.1.attn_k_norm", 1, 32) == plus_one(m.find(p + "self_attn.k_norm.weight")->v));
  CHECK(f.values("output_norm", 1, DIM) == plus_one(m.find("model.norm.weight")->v));
  expect_tensor(f, "blk.0.attn_q", 64, DIM, m.find("model.layers.0.self_attn.q_proj.weight")->v, 64, DIM);
}

TEST_CASE("hf import: Qwen3.5 (multimodal checkpoint) splits q_proj, maps the gated delta tensors", "[hf_import]") {
  // Layer 0 linear attention, layer 1 full attention (period 2). dim 64, 2 heads of 32, 1 KV head;
  // linear: 2 key heads and 4 value heads of 16, conv 4: ch = 2*2*16 + 4*16 = 128.
  ml_test_dir d;
  model_dir m;
  m.config = "{\"architectures\":[\"Qwen3_5ForConditionalGeneration\"],\"model_type\":\"qwen3_5\","
             "\"tie_word_embeddings\":true,\"text_config\":{\"model_type\":\"qwen3_5_text\",\"hidden_size\":64,"
             "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":32,"
             "\"intermediate_size\":64,\"vocab_size\":2048,\"max_position_embeddings\":256,\"rms_norm_eps\":1e-06,"
             "\"layer_types\":[\"linear_attention\",\"full_attention\"],\"full_attention_interval\":2,"
             "\"linear_num_key_heads\":2,\"linear_num_value_heads\":4,\"linear_key_head_dim\":16,"
             "\"linear_value_head_dim\":16,\"linear_conv_kernel_dim\":4,\"partial_rotary_factor\":0.25,"
             "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000000,\"mrope_section\":[11,11,10]}}}";
  const std::string P = "model.language_model.";
  m.ts.push_back(make(P + "embed_tokens.weight", {VOCAB, DIM}, "F16"));
  for (int l = 0; l < 2; ++l) {
    const std::string p = P + "layers." + std::to_string(l) + ".";
    m.ts.push_back(make(p + "input_layernorm.weight", {DIM}, "F16"));
    m.ts.push_back(make(p + "post_attention_layernorm.weight", {DIM}, "F16"));
    m.ts.push_back(make(p + "mlp.gate_proj.weight", {64, DIM}, "F16"));
    m.ts.push_back(make(p + "mlp.up_proj.weight", {64, DIM}, "F16"));
    m.ts.push_back(make(p + "mlp.down_proj.weight", {DIM, 64}, "F16"));
  }
  const std::string a = P + "layers.0.linear_attn.";
  m.ts.push_back(make(a + "in_proj_qkv.weight", {128, DIM}, "F16"));
  m.ts.push_back(make(a + "in_proj_z.weight", {64, DIM}, "F16"));
  m.ts.push_back(make(a + "in_proj_b.weight", {4, DIM}, "F16"));
  m.ts.push_back(make(a + "in_proj_a.weight", {4, DIM}, "F16"));
  m.ts.push_back(make(a + "conv1d.weight", {128, 1, 4}, "F32"));
  m.ts.push_back(make(a + "A_log", {4}, "F32", 2.0f));
  m.ts.push_back(make(a + "dt_bias", {4}, "F32"));
  m.ts.push_back(make(a + "norm.weight", {16}, "F32"));
  m.ts.push_back(make(a + "out_proj.weight", {DIM, 64}, "F16"));
  const std::string s = P + "layers.1.self_attn.";
  m.ts.push_back(make(s + "q_proj.weight", {128, DIM}, "F16"));  // 2 heads x (32 query + 32 gate rows)
  m.ts.push_back(make(s + "k_proj.weight", {32, DIM}, "F16"));
  m.ts.push_back(make(s + "v_proj.weight", {32, DIM}, "F16"));
  m.ts.push_back(make(s + "o_proj.weight", {DIM, 64}, "F16"));
  m.ts.push_back(make(s + "q_norm.weight", {32}, "F16"));
  m.ts.push_back(make(s + "k_norm.weight", {32}, "F16"));
  m.ts.push_back(make(P + "norm.weight", {DIM}, "F16"));
  m.ts.push_back(make("model.visual.blocks.0.attn.qkv.weight", {96, 32}, "BF16"));
  m.ts.push_back(make("model.visual.patch_embed.proj.weight", {4, 3, 2, 2, 2}, "BF16"));
  m.ts.push_back(make("mtp.fc.weight", {64, 128}, "BF16"));
  m.write(d);
  const convert_result r = convert(d.p.string(), d / "out.mlb");
  INFO(r.msg);
  REQUIRE(r.s == ML_OK);
  REQUIRE(r.notes.size() == 2);
  CHECK(r.notes[0].find("skipped 2 tensors of the vision tower") != std::string::npos);
  CHECK(r.notes[1].find("skipped 1 tensors of the multi-token prediction head") != std::string::npos);
  mlb_file f(d / "out.mlb");
  CHECK(f.m.h.arch == ML_ARCH_QWEN35);
  CHECK(f.m.h.linear_period == 2);
  CHECK(f.m.h.n_rot == 8);
  CHECK(f.m.h.rope_theta == 1e7f);
  CHECK_FALSE(f.has("output"));
  // Linear layer 0.
  CHECK(f.values("blk.0.attn_norm", 1, DIM) == plus_one(m.find(P + "layers.0.input_layernorm.weight")->v));
  CHECK(f.values("blk.0.ffn_norm", 1, DIM) == plus_one(m.find(P + "layers.0.post_attention_layernorm.weight")->v));
  expect_tensor(f, "blk.0.attn_qkv", 128, DIM, m.find(a + "in_proj_qkv.weight")->v, 128, DIM);
  expect_tensor(f, "blk.0.attn_gate", 64, DIM, m.find(a + "in_proj_z.weight")->v, 64, DIM);
  expect_tensor(f, "blk.0.ssm_beta", 4, DIM, m.find(a + "in_proj_b.weight")->v, 4, DIM);
  expect_tensor(f, "blk.0.ssm_alpha", 4, DIM, m.find(a + "in_proj_a.weight")->v, 4, DIM);
  expect_tensor(f, "blk.0.ssm_out", DIM, 64, m.find(a + "out_proj.weight")->v, DIM, 64);
  CHECK(f.values("blk.0.ssm_conv1d", 128, 4) == m.find(a + "conv1d.weight")->v);
  std::vector<float> A = m.find(a + "A_log")->v;
  for (float& x : A) x = (float)-std::exp((double)x);
  CHECK(f.values("blk.0.ssm_a", 1, 4) == A);
  CHECK(f.values("blk.0.ssm_dt", 1, 4) == m.find(a + "dt_bias")->v);
  CHECK(f.values("blk.0.ssm_norm", 1, 16) == m.find(a + "norm.weight")->v);  // plain w: the gated norm
  CHECK_FALSE(f.has("blk.0.attn_q"));
  // Full-attention layer 1: q_proj's rows per head are [32 query rows; 32 gate rows].
  const std::vector<float>& q = m.find(s + "q_proj.weight")->v;
  std::vector<float> wq, wg;
  for (int h = 0; h < 2; ++h) {
    wq.insert(wq.end(), q.begin() + (2 * h) * 32 * DIM, q.begin() + (2 * h + 1) * 32 * DIM);
    wg.insert(wg.end(), q.begin() + (2 * h + 1) * 32 * DIM, q.begin() + (2 * h + 2) * 32 * DIM);
  }
  expect_tensor(f, "blk.1.attn_q", 64, DIM, wq, 64, DIM);
  expect_tensor(f, "blk.1.attn_gate", 64, DIM, wg, 64, DIM);
  expect_tensor(f, "blk.1.attn_k", 32, DIM, m.find(s + "k_proj.weight")->v, 32, DIM);
  CHECK(f.values("blk.1.attn_q_norm", 1, 32) == plus_one(m.find(s + "q_norm.weight")->v));
  CHECK(f.values("blk.1.attn_k_norm", 1, 32) == plus_one(m.find(s + "k_norm.weight")->v));
  CHECK(f.values("output_norm", 1, DIM) == plus_one(m.find(P + "norm.weight")->v));
  CHECK_FALSE(f.has("blk.1.ssm_a"));
}

TEST_CASE("hf import: generation_config.json goes into the model and its eos ids end generation", "[hf_import]") {
  ml_test_dir d;
  model_dir m = tiny_llama();
  m.write(d);
  ml_test_write(d / "generation_config.json", "{\"bos_token_id\":1,\"eos_token_id\":[2,7,9]}");
  REQUIRE(convert(d.p.string(), d / "out.mlb").s == ML_OK);
  mlb_file f(d / "out.mlb");
  REQUIRE(f.m.tokenizer_kind == 2);
  ml_hf_files files;
  ml_error err;
  REQUIRE(ml_hf_bundle_parse(f.m.tokenizer, f.m.tokenizer_size, &files, &err) == ML_OK);
  REQUIRE(files.generation_json != nullptr);
  CHECK(std::string(files.generation_json, files.generation_json_len) == "{\"bos_token_id\":1,\"eos_token_id\":[2,7,9]}");
  ml_tokenizer* t = nullptr;
  REQUIRE(ml_tokenizer_load_hf(&t, &files, &err) == ML_OK);
  CHECK(ml_tokenizer_is_eog(t, 7));
  CHECK(ml_tokenizer_is_eog(t, 9));
  CHECK_FALSE(ml_tokenizer_is_eog(t, 8));
  ml_tokenizer_free(t);
}

TEST_CASE("hf import: cv_hf_memory gives the bytes cv_hf writes", "[hf_import]") {
  ml_test_dir d;
  model_dir m = tiny_llama("BF16");
  m.write(d);
  REQUIRE(convert(d.p.string(), d / "out.mlb").s == ML_OK);
  cv_hf_opts o = cv_hf_defaults();
  const std::string dir = d.p.string();
  o.dir = dir.c_str();
  uint8_t* bytes = nullptr;
  size_t size = 0;
  ml_error err;
  REQUIRE(cv_hf_memory(&o, &bytes, &size, &err) == ML_OK);
  CHECK(std::vector<uint8_t>(bytes, bytes + size) == ml_test_read(d / "out.mlb"));
  std::free(bytes);
  fs::remove(d / "config.json");
  CHECK(cv_hf_memory(&o, &bytes, &size, &err) == ML_E_IO);
}

TEST_CASE("hf import: a sharded checkpoint gives the same file as a single one", "[hf_import]") {
  ml_test_dir d1, d2;
  model_dir m = tiny_llama();
  m.write(d1);
  REQUIRE(convert(d1.p.string(), d1 / "out.mlb").s == ML_OK);
  m.write(d2);
  fs::remove(d2 / "model.safetensors");
  const std::vector<tensor> a(m.ts.begin(), m.ts.begin() + 7), b(m.ts.begin() + 7, m.ts.end());
  ml_test_write(d2 / "model-00001-of-00002.safetensors", st_file(a));
  ml_test_write(d2 / "model-00002-of-00002.safetensors", st_file(b));
  std::string idx = "{\"metadata\":{\"total_size\":1},\"weight_map\":{";
  for (size_t i = 0; i < m.ts.size(); ++i)
    idx += (i ? "," : "") + std::string("\"") + m.ts[i].name + "\":\"model-0000" + (i < 7 ? "1" : "2") + "-of-00002.safetensors\"";
  ml_test_write(d2 / "model.safetensors.index.json", idx + "}}");
  const convert_result r = convert(d2.p.string(), d2 / "out.mlb");
  INFO(r.msg);
  REQUIRE(r.s == ML_OK);
  CHECK(ml_test_read(d1 / "out.mlb") == ml_test_read(d2 / "out.mlb"));
}

// --- damaged inputs ------------------------------------------------------------------------------

namespace {

struct bad_case {
  const char* what;
  std::function<void(model_dir&, const ml_test_dir&)> damage;  // applied to the folder spec, then after writing
  ml_status status;
  const char* msg;
};

std::string one_tensor_header(const std::string& entry) { return "{\"model.norm.weight\":" + entry + "}"; }

}  // namespace

TEST_CASE("hf import: damaged folders fail with a message naming the key or tensor", "[hf_import]") {
  const std::string D8(8, '\0');
  const std::vector<bad_case> cases = {
      // safetensors headers
      {"header length past the end", [](model_dir& m, const ml_test_dir&) { std::string s; put_u64(&s, 1000); m.raw = s + "{}"; },
       ML_E_FORMAT, "runs past the end of the file"},
      {"header length 1", [](model_dir& m, const ml_test_dir&) { std::string s; put_u64(&s, 1); m.raw = s + "{"; },
       ML_E_FORMAT, "header length 1 is outside"},
      {"header length above the limit", [](model_dir& m, const ml_test_dir&) { std::string s; put_u64(&s, ~0ull); m.raw = s + "{}"; },
       ML_E_FORMAT, "is outside 2.."},
      {"file of 5 bytes", [](model_dir& m, const ml_test_dir&) { m.raw = "abcde"; }, ML_E_FORMAT, "too short for the 8-byte"},
      {"header not JSON", [](model_dir& m, const ml_test_dir&) { m.raw = st_raw("{\"a\":}  ", ""); }, ML_E_FORMAT, "header: json"},
      {"header a list", [](model_dir& m, const ml_test_dir&) { m.raw = st_raw("[]", ""); }, ML_E_FORMAT,
       "the header is a array, not an object"},
      {"offsets outside the data area",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}"), D8);
       },
       ML_E_FORMAT, "data_offsets [4, 12] lie outside the data area of 8 bytes"},
      {"offsets begin > end",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}"), D8);
       },
       ML_E_FORMAT, "lie outside the data area"},
      {"overlapping tensors",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                        D8);
       },
       ML_E_FORMAT, "overlaps tensor a"},
      {"a gap between tensors",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", D8);
       },
       ML_E_FORMAT, "a gap of 4 bytes before tensor a"},
      {"bytes after the last tensor",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", D8);
       },
       ML_E_FORMAT, "4 bytes after the last tensor"},
      {"size not shape x itemsize",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "hold 8 bytes, but BF16 x 2 elements need 4"},
      {"dtype I64",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "tensor model.norm.weight: dtype I64 is not supported"},
      {"shape not a list",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "shape is missing or not a list"},
      {"negative dimension",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "shape[0] is not an integer"},
      {"rank 9",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "rank 9 is above 8"},
      {"element count overflow",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "the element count overflows"},
      {"byte size overflow",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[1099511627776,8388608],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "the byte size overflows"},
      {"data_offsets with three numbers",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}"), D8);
       },
       ML_E_FORMAT, "data_offsets is not a list of two"},
      {"a tensor named twice",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                        D8);
       },
       ML_E_FORMAT, "tensor a appears twice"},
      {"__metadata__ with a number", [](model_dir& m, const ml_test_dir&) { m.meta = "{\"format\":1}"; }, ML_E_FORMAT,
       "__metadata__.format is not a string"},
      {"a tensor entry that is a string",
       [](model_dir& m, const ml_test_dir&) { m.raw = st_raw("{\"a\":\"x\"}", ""); }, ML_E_FORMAT,
       "tensor a: the entry is a string"},
      // the model's tensors
      {"a missing tensor", [](model_dir& m, const ml_test_dir&) { m.drop("model.layers.1.mlp.up_proj.weight"); }, ML_E_FORMAT,
       "tensor model.layers.1.mlp.up_proj.weight is missing"},
      {"a transposed matrix",
       [](model_dir& m, const ml_test_dir&) { m.find("model.layers.0.self_attn.k_proj.weight")->shape = {64, 32}; }, ML_E_SHAPE,
       "tensor model.layers.0.self_attn.k_proj.weight has shape [64, 32], but config.json implies [32, 64]"},
      {"a rank-3 matrix",
       [](model_dir& m, const ml_test_dir&) { m.find("model.layers.0.self_attn.q_proj.weight")->shape = {4, 16, 64}; },
       ML_E_SHAPE, "q_proj.weight has shape [4, 16, 64]"},
      {"a norm of the wrong width", [](model_dir& m, const ml_test_dir&) { m.find("model.norm.weight")->v.resize(32), m.find("model.norm.weight")->shape = {32}; },
       ML_E_SHAPE, "model.norm.weight has shape [32], but config.json implies [64]"},
      {"an embedding with fewer rows than vocab_size",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "vocab_size", "4096"); }, ML_E_SHAPE,
       "model.embed_tokens.weight has shape [2048, 64], but config.json implies [4096, 64]"},
      {"an unknown tensor", [](model_dir& m, const ml_test_dir&) { m.ts.push_back(make("model.layers.0.mlp.gate_proj.bias", {72})); },
       ML_E_FORMAT, "tensor model.layers.0.mlp.gate_proj.bias in"},
      {"a layer beyond num_hidden_layers",
       [](model_dir& m, const ml_test_dir&) { m.ts.push_back(make("model.layers.2.input_layernorm.weight", {64})); }, ML_E_FORMAT,
       "model.layers.2.input_layernorm.weight in"},
      {"an untied model without lm_head", [](model_dir& m, const ml_test_dir&) { m.drop("lm_head.weight"); }, ML_E_FORMAT,
       "tensor lm_head.weight is missing"},
      {"a tied model whose lm_head differs",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "tie_word_embeddings", "true"); }, ML_E_FORMAT,
       "lm_head.weight differs from model.embed_tokens.weight"},
      {"a NaN weight",
       [](model_dir& m, const ml_test_dir&) { m.find("model.layers.1.self_attn.v_proj.weight")->v[70] = NAN; }, ML_E_FORMAT,
       "tensor blk.1.attn_v: value at row 1 col 6 is nan"},
      {"an infinite norm weight",
       [](model_dir& m, const ml_test_dir&) { m.find("model.norm.weight")->v[3] = INFINITY; }, ML_E_FORMAT,
       "tensor output_norm: value 3 is inf"},
      // files
      {"no weights", [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) { fs::remove(d / "model.safetensors"); }; }, ML_E_ARG,
       "the folder has no model.safetensors or model.safetensors.index.json"},
      {"weights in a FIFO",
       [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) {
         fs::remove(d / "model.safetensors");
         REQUIRE(mkfifo((d / "model.safetensors").c_str(), 0600) == 0);
       }; },
       ML_E_ARG, "FIFO"},
      {"config.json a FIFO",
       [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) {
         fs::remove(d / "config.json");
         REQUIRE(mkfifo((d / "config.json").c_str(), 0600) == 0);
       }; },
       ML_E_ARG, "FIFO"},
      {"no config.json", [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) { fs::remove(d / "config.json"); }; }, ML_E_IO, "config.json"},
      {"no tokenizer.json", [](model_dir& m, const ml_test_dir&) { m.tokenizer = false; }, ML_E_ARG, "the folder has no tokenizer.json"},
      {"an index naming a shard outside the folder",
       [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) {
         fs::remove(d / "model.safetensors");
         ml_test_write(d / "model.safetensors.index.json", "{\"weight_map\":{\"model.norm.weight\":\"../x.safetensors\"}}");
       }; },
       ML_E_FORMAT, "weight_map.model.norm.weight is not the name of a file in the folder"},
      {"an index naming a tensor its shard lacks",
       [](model_dir& m, const ml_test_dir&) { m.after = [ts = m.ts](const ml_test_dir& d) {
         fs::remove(d / "model.safetensors");
         ml_test_write(d / "a.safetensors", st_file(ts));
         ml_test_write(d / "model.safetensors.index.json", "{\"weight_map\":{\"model.nope\":\"a.safetensors\"}}");
       }; },
       ML_E_FORMAT, "weight_map puts tensor model.nope in a.safetensors, which does not hold it"},
      {"a shard tensor missing from the index",
       [](model_dir& m, const ml_test_dir&) { m.after = [ts = m.ts](const ml_test_dir& d) {
         fs::remove(d / "model.safetensors");
         ml_test_write(d / "a.safetensors", st_file(ts));
         ml_test_write(d / "model.safetensors.index.json", "{\"weight_map\":{\"model.norm.weight\":\"a.safetensors\"}}");
       }; },
       ML_E_FORMAT, "is not in"},
      {"an index without weight_map",
       [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) {
         fs::remove(d / "model.safetensors");
         ml_test_write(d / "model.safetensors.index.json", "{\"metadata\":{}}");
       }; },
       ML_E_FORMAT, "weight_map is missing or not an object"},
      // config.json
      {"an unknown architecture",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "architectures", "[\"GPT2LMHeadModel\"]"); },
       ML_E_FORMAT, "architectures[0] \"GPT2LMHeadModel\" is not supported"},
      {"an unknown model_type without architectures",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(del_key(m.config, "architectures"), "model_type", "\"phi3\""); },
       ML_E_FORMAT, "model_type \"phi3\" is not supported"},
      {"no hidden_size", [](model_dir& m, const ml_test_dir&) { m.config = del_key(m.config, "hidden_size"); }, ML_E_FORMAT,
       "config.json: hidden_size is missing"},
      {"hidden_size a string", [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "hidden_size", "\"64\""); },
       ML_E_FORMAT, "hidden_size is \"64\", not an integer"},
      {"vocab_size zero", [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "vocab_size", "0"); }, ML_E_FORMAT,
       "vocab_size is 0, not an integer in 3.."},
      {"config.json not JSON", [](model_dir& m, const ml_test_dir&) { m.config = "{\"hidden_size\": 64,"; }, ML_E_FORMAT,
       "config.json: json: byte"},
      {"config.json empty", [](model_dir& m, const ml_test_dir&) { m.config = ""; }, ML_E_FORMAT, "config.json: json"},
      {"kv heads not dividing heads",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "num_key_value_heads", "3"); }, ML_E_SHAPE,
       "num_key_value_heads 3 does not divide num_attention_heads 4"},
      {"hidden_size not a multiple of 32",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(set_key(set_key(m.config, "hidden_size", "48"), "num_attention_heads", "3"), "num_key_value_heads", "3"); },
       ML_E_SHAPE, "dim 48 is not a positive multiple of 32"},
      {"rope_scaling yarn",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "rope_scaling", "{\"rope_type\":\"yarn\",\"factor\":4.0}"); },
       ML_E_FORMAT, "rope_scaling.rope_type \"yarn\" is not supported"},
      {"llama3 scaling without low_freq_factor",
       [](model_dir& m, const ml_test_dir&) {
         m.config = set_key(m.config, "rope_scaling",
                            "{\"rope_type\":\"llama3\",\"factor\":8.0,\"high_freq_factor\":4.0,"
                            "\"original_max_position_embeddings\":8192}");
       },
       ML_E_FORMAT, "rope_scaling.low_freq_factor is missing"},
      {"attention_bias on a Llama", [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "attention_bias", "true"); },
       ML_E_FORMAT, "attention_bias is true"},
      {"another activation", [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "hidden_act", "\"gelu\""); },
       ML_E_FORMAT, "hidden_act \"gelu\" is not supported"},
      {"tie_word_embeddings a string",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "tie_word_embeddings", "\"yes\""); }, ML_E_FORMAT,
       "tie_word_embeddings is \"yes\", not true or false"},
      {"Qwen3.5 without text_config",
       [](model_dir& m, const ml_test_dir&) {
         m.config = set_key(set_key(m.config, "architectures", "[\"Qwen3_5ForConditionalGeneration\"]"), "model_type", "\"qwen3_5\"");
       },
       ML_E_FORMAT, "text_config is missing"},
      {"Gemma 3 layer_types out of pattern",
       [](model_dir& m, const ml_test_dir&) {
         m.config = set_key(set_key(m.config, "architectures", "[\"Gemma3ForCausalLM\"]"), "layer_types",
                            "[\"full_attention\",\"sliding_attention\"]");
       },
       ML_E_FORMAT, "layer_types[1] is \"sliding_attention\": the layers do not repeat with period 1"},
      {"Qwen2 with use_sliding_window",
       [](model_dir& m, const ml_test_dir&) {
         m.config = set_key(set_key(m.config, "architectures", "[\"Qwen2ForCausalLM\"]"), "use_sliding_window", "true");
       },
       ML_E_FORMAT, "use_sliding_window is true"},
      {"a pre-quantized checkpoint",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "quantization_config", "{\"quant_method\":\"gptq\"}"); },
       ML_E_FORMAT, "quantization_config is set"},
      {"an eos_token_id that is not an id",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "eos_token_id", "[\"x\"]"); }, ML_E_FORMAT,
       "eos_token_id[0] is \"x\", not a token id"},
  };
  REQUIRE(cases.size() >= 40);
  for (const bad_case& c : cases) {
    INFO("case: " << c.what);
    ml_test_dir d;
    model_dir m = tiny_llama();
    c.damage(m, d);  // changes to the spec, or (m.after) to the written files
    m.write(d);
    const convert_result r = convert(d.p.string(), d / "out.mlb");
    INFO("message: " << r.msg);
    CHECK(r.s == c.status);
    CHECK(r.msg.find(c.msg) != std::string::npos);
    CHECK_FALSE(fs::exists(d / "out.mlb"));
  }
}

TEST_CASE("hf import: safetensors reader over memory (lookup, metadata, exact widening)", "[hf_import]") {
  tensor a = make("a", {2, 3}, "F32"), b = make("b", {4}, "BF16"), c = make("c", {2}, "F16"), e;
  e.name = "empty";
  e.shape = {0, 5};
  const std::string s = st_file({b, a, e, c}, "{\"format\":\"pt\"}");
  cv_st_file f;
  ml_error err;
  REQUIRE(cv_st_parse(&f, reinterpret_cast<const uint8_t*>(s.data()), s.size(), "mem", &err) == ML_OK);
  CHECK(f.n == 4);
  CHECK(std::string(cv_st_metadata(&f, "format")) == "pt");
  CHECK(cv_st_metadata(&f, "nope") == nullptr);
  CHECK(cv_st_find(&f, "zzz") == nullptr);
  for (const tensor* t : {&a, &b, &c}) {
    const cv_st_tensor* x = cv_st_find(&f, t->name.c_str());
    REQUIRE(x);
    CHECK(x->rank == t->shape.size());
    cv_buf v;
    REQUIRE(cv_st_to_f32(x, &v, &err) == ML_OK);
    CHECK(std::vector<float>(v.as<float>(), v.as<float>() + x->count) == t->v);
  }
  const cv_st_tensor* z = cv_st_find(&f, "empty");
  REQUIRE(z);
  CHECK(z->count == 0);
}
