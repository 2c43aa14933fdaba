// Every architecture the forward pass runs, on random models written by cv_random from a header
// (the way `ml_convert random --config` does): each loads, and its logits do not depend on the
// thread count or the batch split, bit for bit; ml_forward_matrices (ml_bench's "matrices alone")
// reads each of its matrices once. Each feature is checked against what it must
// compute where that can be stated exactly through the engine itself: a window as long as the
// context and a local RoPE base equal to the global one change nothing; soft-capping gives
// c * tanh(logits / c) of the uncapped logits. (tools/ref_forward, the independent oracle, is held
// against every architecture in e2e.run.archs.)
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <filesystem>
#include <vector>

#include "convert/convert.h"
#include "core/threads.h"
#include "model/exec.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/session.h"
#include "model/tensor_table.h"
#include "test_tmp.h"

namespace {

std::string tmp(const std::string& name) {
  static const std::string dir = [] {
    const std::string d = ml_test_mkdtemp("krafla-archs-");
    return d.empty() ? std::filesystem::temp_directory_path().string() : d;
  }();
  return dir + "/" + name;
}

// A small Llama header; each case turns features on.
ml_mlb_header base_header() {
  ml_mlb_header h;
  h.dim = 64;
  h.hidden_dim = 96;
  h.n_layers = 3;
  h.n_heads = 4;
  h.n_kv_heads = 2;
  h.head_dim = 16;
  h.vocab_size = 80;
  h.max_seq = 64;
  h.norm_eps = 1e-6f;
  h.rope_theta = 10000.0f;
  h.rope_type = ML_ROPE_HALF;
  return h;
}

std::string write_model(const std::string& name, const ml_mlb_header& h, uint32_t wtype = ML_DT_Q8) {
  const std::string path = tmp(name + ".mlb");
  cv_random_opts o = cv_random_defaults();
  o.config = &h;
  o.wtype = wtype;
  o.seed = 11;
  o.out = path.c_str();
  ml_error err;
  const ml_status s = cv_random(&o, &err);
  INFO(err.msg);
  REQUIRE(s == ML_OK);
  return path;
}

// Every position's logits of ids, fed `batch` tokens per step on `threads` threads.
std::vector<float> run(const std::string& path, const std::vector<int32_t>& ids, int threads, int batch) {
  ml_model m;
  ml_error err;
  REQUIRE(ml_model_load(&m, path.c_str(), &err) == ML_OK);
  ml_model_options mo;
  mo.pack = true;
  INFO(err.msg);
  REQUIRE(ml_model_prepare(&m, &mo, &err) == ML_OK);
  ml_exec e;
  ml_exec_opts eo;
  eo.n_threads = ml_pool_threads_built() ? threads : 1;  // the single-threaded wasm builds run one
  eo.max_batch = batch;
  REQUIRE(ml_exec_init(&e, &m, &eo, &err) == ML_OK);
  ml_session s;
  ml_session_opts so;
  REQUIRE(ml_session_init(&s, &m, &so, &err) == ML_OK);
  const int vocab = m.cfg.vocab_size;
  std::vector<float> out;
  for (size_t at = 0; at < ids.size(); at += (size_t)batch) {
    const int n = (int)std::min(ids.size() - at, (size_t)batch);
    std::vector<ml_session*> ss(n, &s);
    std::vector<int> pos(n);
    std::vector<uint8_t> want(n, 1);
    for (int i = 0; i < n; ++i) pos[i] = (int)at + i;
    ml_batch b;
    b.n = n;
    b.tokens = ids.data() + at;
    b.sessions = ss.data();
    b.pos = pos.data();
    b.logits = want.data();
    const int rows = ml_forward(&m, &e, &b);
    REQUIRE(rows == n);
    out.insert(out.end(), e.logits, e.logits + (size_t)n * vocab);
  }
  ml_session_release(&s);
  ml_exec_release(&e);
  ml_model_free(&m);
  return out;
}

std::vector<int32_t> prompt(int n, int vocab) {
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = (int32_t)((i * 37 + 5) % vocab);
  return ids;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct arch_case {
  const char* name;
  void (*apply)(ml_mlb_header*);
};

const arch_case kArchs[] = {
    {"llama3", [](ml_mlb_header* h) {
       h->rope_scaling = ML_ROPE_SCALING_LLAMA3;
       h->rope_factor = 32;
       h->rope_low_freq_factor = 1;
       h->rope_high_freq_factor = 4;
       h->rope_orig_max_seq = 16;
       h->rope_theta = 500000;
     }},
    {"qwen2", [](ml_mlb_header* h) {
       h->arch = ML_ARCH_QWEN2;
       h->flags = ML_FLAG_QKV_BIAS | ML_FLAG_TIED_CLASSIFIER;
     }},
    {"qwen3", [](ml_mlb_header* h) {
       h->arch = ML_ARCH_QWEN3;
       h->flags = ML_FLAG_QK_NORM;
       h->head_dim = 32;  // head_dim != dim / n_heads
     }},
    {"gemma3", [](ml_mlb_header* h) {
       h->arch = ML_ARCH_GEMMA3;
       h->flags = ML_FLAG_QK_NORM | ML_FLAG_POST_NORMS | ML_FLAG_TIED_CLASSIFIER;
       h->activation = ML_ACT_GELU_TANH;
       h->embed_scale = 8.0f;
       h->attn_scale = 0.25f;
       h->sliding_window = 5;
       h->sliding_pattern = 3;
       h->rope_local_theta = 10000;
       h->rope_theta = 1000000;
       h->logit_softcap = 3.0f;
     }},
    {"gated partial rotary", [](ml_mlb_header* h) {
       h->flags = ML_FLAG_QK_NORM | ML_FLAG_ATTN_GATE;
       h->n_rot = 4;
       h->head_dim = 32;
     }},
    {"qwen3.5 hybrid", [](ml_mlb_header* h) {
       h->arch = ML_ARCH_QWEN35;
       h->flags = ML_FLAG_QK_NORM | ML_FLAG_ATTN_GATE | ML_FLAG_TIED_CLASSIFIER;
       h->head_dim = 32;
       h->n_rot = 8;
       h->n_layers = 4;
       h->linear_period = 2;
       h->linear_k_heads = 2;
       h->linear_v_heads = 4;
       h->linear_k_dim = 16;
       h->linear_v_dim = 8;
       h->linear_conv = 4;
     }},
    {"mistral window", [](ml_mlb_header* h) {
       h->sliding_window = 4;
       h->rope_type = ML_ROPE_INTERLEAVED;
     }},
};

}  // namespace

TEST_CASE("archs: every architecture's logits are the same for any thread count and batch split", "[archs]") {
  for (const arch_case& a : kArchs) {
    for (uint32_t wtype : {ML_DT_Q8, ML_DT_Q4}) {
      ml_mlb_header h = base_header();
      a.apply(&h);
      INFO(a.name << (wtype == ML_DT_Q8 ? " q8" : " q4"));
      const std::string path = write_model(std::string(a.name) + std::to_string(wtype), h, wtype);
      const auto ids = prompt(13, (int)h.vocab_size);
      const auto one = run(path, ids, 1, 1);
      for (float v : one) REQUIRE(std::isfinite(v));
      CHECK(same_bytes(one, run(path, ids, 3, 1)));
      CHECK(same_bytes(one, run(path, ids, 1, 13)));
      CHECK(same_bytes(one, run(path, ids, 2, 5)));
    }
  }
}

TEST_CASE("archs: neutral values of the new fields change nothing", "[archs]") {
  const auto ids = prompt(20, 80);
  ml_mlb_header h = base_header();
  const auto plain = run(write_model("plain", h), ids, 1, 4);
  SECTION("a window as long as the context, with the local base equal to the global one") {
    ml_mlb_header w = h;
    w.sliding_window = 64;
    w.sliding_pattern = 2;
    w.rope_local_theta = h.rope_theta;
    CHECK(same_bytes(plain, run(write_model("wide_window", w), ids, 1, 4)));
  }
  SECTION("n_rot = head_dim and attn_scale = 1/sqrt(head_dim) spelled out") {
    ml_mlb_header w = h;
    w.n_rot = h.head_dim;
    w.attn_scale = 1.0f / std::sqrt((float)h.head_dim);
    CHECK(same_bytes(plain, run(write_model("explicit", w), ids, 1, 4)));
  }
  SECTION("and the features that matter do change the logits") {
    for (const arch_case& a : kArchs) {
      ml_mlb_header w = h;
      a.apply(&w);
      if (w.head_dim != h.head_dim || (w.flags & ~ML_FLAG_TIED_CLASSIFIER) != 0) continue;  // other tensors
      INFO(a.name);
      CHECK(!same_bytes(plain, run(write_model(std::string("diff_") + a.name, w), ids, 1, 4)));
    }
  }
}

TEST_CASE("archs: soft-capping gives c * tanh(logits / c) of the uncapped logits", "[archs]") {
  const auto ids = prompt(6, 80);
  ml_mlb_header h = base_header();
  const auto plain = run(write_model("uncapped", h), ids, 1, 6);
  h.logit_softcap = 2.5f;
  const auto capped = run(write_model("capped", h), ids, 1, 6);
  REQUIRE(plain.size() == capped.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    CHECK(std::fabs(capped[i]) < 2.5f);
    CHECK(capped[i] == 2.5f * std::tanh(plain[i] / 2.5f));
  }
}

// The matrix products of a decode step alone read every matrix the tensor table lists, once: their
// bytes equal the sum over that independent list (quants and scales of each), and fit in the packed
// region.
TEST_CASE("archs: the matrices alone read every matrix of each architecture once", "[archs]") {
  for (const arch_case& a : kArchs) {
    ml_mlb_header h = base_header();
    a.apply(&h);
    INFO(a.name);
    const std::string path = write_model(std::string(a.name) + "_matrices", h, ML_DT_Q4);
    ml_model m;
    ml_error err;
    REQUIRE(ml_model_load(&m, path.c_str(), &err) == ML_OK);
    ml_model_options mo;
    mo.pack = true;
    REQUIRE(ml_model_prepare(&m, &mo, &err) == ML_OK);
    double want = 0;
    ml_for_each_packed(&m, [&](ml_qtensor* W) {
      const double n = (double)W->rows * W->cols;
      want += (W->type == ML_DT_Q4 ? n / 2 : n) + n / ML_QK * ((W->pq ? W->pd_f16 : W->d_f16) ? 2 : 4);
    });
    ml_exec e;
    ml_exec_opts eo;
    eo.n_threads = ml_pool_threads_built() ? 2 : 1;
    REQUIRE(ml_exec_init(&e, &m, &eo, &err) == ML_OK);
    double bytes = 0;
    CHECK(ml_forward_matrices(&m, &e, &bytes) > 0);
    CHECK(bytes == want);
    if (m.packed) CHECK(bytes <= (double)m.packed_bytes);
    ml_exec_release(&e);
    ml_model_free(&m);
  }
}
