// The Hugging Face importer tests' fixture (test_hf_config.cpp, test_hf_import.cpp,
// test_hf_import_bad.cpp): safetensors files written here, tiny model folders, the conversion
// and the output read back.
#pragma once
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

namespace hf_test {

namespace fs = std::filesystem;

// --- safetensors written by the test --------------------------------------------------------------

struct tensor {
  std::string name, dtype = "F32";
  std::vector<uint64_t> shape;
  std::vector<float> v;  // the values (exactly representable in dtype)
};

inline uint16_t bf16_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return (uint16_t)(b >> 16);
}
// IEEE half: only values with <= 10 mantissa bits and small exponents are generated for F16.
inline uint16_t f16_bits(float f) {
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

inline std::vector<uint8_t> bytes_of(const tensor& t) {
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

inline void put_u64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back((char)(uint8_t)(v >> (8 * i)));
}

// A file from a header text and a data area (the damaged-file cases write these directly).
inline std::string st_raw(const std::string& header, const std::string& data) {
  std::string s;
  put_u64(&s, header.size());
  return s + header + data;
}

inline std::string st_file(const std::vector<tensor>& ts, const std::string& meta = "") {
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
inline uint64_t g_seed = 12345;
inline float next_value(float scale) {
  g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
  return ((float)(g_seed >> 40) / (float)(1u << 24) * 2.0f - 1.0f) * scale;
}
inline tensor make(const std::string& name, std::vector<uint64_t> shape, const std::string& dtype = "F32", float scale = 0.5f) {
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
inline std::string set_key(std::string cfg, const std::string& key, const std::string& value) {
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
inline std::string del_key(std::string cfg, const std::string& key) {
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
inline model_dir tiny_llama(const std::string& dtype = "F32", bool tied = false) {
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
inline void expect_tensor(const mlb_file& f, const std::string& name, uint32_t rows, uint32_t cols, const std::vector<float>& want,
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

inline std::vector<float> plus_one(std::vector<float> v) {
  for (float& f : v) f = 1.0f + f;
  return v;
}

struct convert_result {
  ml_status s;
  std::string msg;
  std::vector<std::string> notes;
};

inline convert_result convert(const std::string& dir, const std::string& out, uint32_t wtype = ML_DT_Q8) {
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

inline ml_mlb_header read_config(const std::string& rel, const std::string& gen = "") {
  ml_mlb_header h;
  ml_error err;
  const std::string base = ml_test_shared("data/hf/" + rel);
  const std::string g = gen.empty() ? "" : ml_test_shared("data/hf/" + gen);
  const ml_status s = cv_hf_config_read(base.c_str(), g.empty() ? nullptr : g.c_str(), &h, &err);
  INFO(err.msg);
  REQUIRE(s == ML_OK);
  return h;
}

}  // namespace hf_test
