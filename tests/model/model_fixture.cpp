#include "model/model_fixture.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include "core/half.h"
#include "core/quant_ref.h"
#include "model/format_write.h"

namespace {

// A small deterministic generator (splitmix64) for weights in [-1, 1).
struct rng {
  uint64_t s;
  float next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
};

struct owned_tensor {
  ml_mlb_tensor_src src;
  std::vector<uint8_t> data, scales;
};

owned_tensor matrix(const char* name, uint32_t rows, uint32_t cols, const ml_fixture_shape& s, rng& r) {
  owned_tensor t;
  std::snprintf(t.src.t.name, sizeof t.src.t.name, "%s", name);
  t.src.t.type = s.wtype;
  t.src.t.scale_type = s.scale_type;
  t.src.t.rows = rows;
  t.src.t.cols = cols;
  std::vector<float> x((size_t)rows * cols), d((size_t)rows * cols / 32);
  for (auto& v : x) v = r.next() / std::sqrt((float)cols);
  if (s.wtype == ML_DT_Q8) {
    t.data.resize(x.size());
    ml_quantize_q8_ref(reinterpret_cast<int8_t*>(t.data.data()), d.data(), x.data(), x.size());
  } else {
    t.data.resize(x.size() / 2);
    ml_quantize_q4_ref(t.data.data(), d.data(), x.data(), x.size());
  }
  if (s.scale_type == ML_SCALE_F16) {
    t.scales.resize(d.size() * 2);
    for (size_t i = 0; i < d.size(); ++i) {
      const uint16_t h = ml_float_to_half(d[i]);
      t.scales[2 * i] = (uint8_t)(h & 0xFF);
      t.scales[2 * i + 1] = (uint8_t)(h >> 8);
    }
  } else {
    t.scales.resize(d.size() * 4);
    std::memcpy(t.scales.data(), d.data(), t.scales.size());
  }
  return t;
}

owned_tensor vector(const char* name, uint32_t n, rng& r) {
  owned_tensor t;
  std::snprintf(t.src.t.name, sizeof t.src.t.name, "%s", name);
  t.src.t.type = ML_DT_F32;
  t.src.t.rows = 1;
  t.src.t.cols = n;
  std::vector<float> v(n);
  for (auto& x : v) x = 1.0f + 0.1f * r.next();
  t.data.resize(n * 4);
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

}  // namespace

std::string ml_fixture_tmp(const std::string& name) {
  return "/tmp/krafla_test_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<uint8_t> ml_fixture_model(const std::string& path, const ml_fixture_shape& s) {
  ml_mlb_header h;
  h.dim = s.dim;
  h.hidden_dim = s.hidden;
  h.n_layers = s.layers;
  h.n_heads = s.heads;
  h.n_kv_heads = s.kv_heads;
  h.head_dim = s.dim / s.heads;
  h.vocab_size = s.vocab;
  h.max_seq = s.max_seq;
  h.wtype = s.wtype;
  h.scale_type = s.scale_type;
  h.hidden_dim_orig = s.hidden;
  if (s.tied) h.flags |= ML_FLAG_TIED_CLASSIFIER;
  rng r{42};
  std::vector<owned_tensor> ts;
  const uint32_t q_dim = s.heads * h.head_dim, kv_dim = s.kv_heads * h.head_dim;
  ts.push_back(matrix("tok_embd", s.vocab, s.dim, s, r));
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ts.push_back(vector((p + "attn_norm").c_str(), s.dim, r));
    ts.push_back(matrix((p + "attn_q").c_str(), q_dim, s.dim, s, r));
    ts.push_back(matrix((p + "attn_k").c_str(), kv_dim, s.dim, s, r));
    ts.push_back(matrix((p + "attn_v").c_str(), kv_dim, s.dim, s, r));
    ts.push_back(matrix((p + "attn_output").c_str(), s.dim, q_dim, s, r));
    ts.push_back(vector((p + "ffn_norm").c_str(), s.dim, r));
    ts.push_back(matrix((p + "ffn_gate").c_str(), s.hidden, s.dim, s, r));
    ts.push_back(matrix((p + "ffn_down").c_str(), s.dim, s.hidden, s, r));
    ts.push_back(matrix((p + "ffn_up").c_str(), s.hidden, s.dim, s, r));
  }
  ts.push_back(vector("output_norm", s.dim, r));
  if (!s.tied) ts.push_back(matrix("output", s.vocab, s.dim, s, r));
  std::vector<ml_mlb_tensor_src> srcs;
  for (auto& t : ts) {
    t.src.data = t.data.data();
    t.src.scales = t.scales.empty() ? nullptr : t.scales.data();
    srcs.push_back(t.src);
  }
  ml_error err;
  const ml_status st = ml_mlb_write(path.c_str(), &h, srcs.data(), srcs.size(), nullptr, 0, &err);
  INFO(err.msg);
  REQUIRE(st == ML_OK);
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}
