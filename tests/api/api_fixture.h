// Helpers for the public-API tests: random models written through ml_convert_random, RAII
// handles, and the path of the shared data. These tests see only krafla.h.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "krafla.h"
#include "test_tmp.h"

namespace api {

// This process's scratch folder (mkdtemp: unique even where getpid is a constant, as under
// Emscripten, when ctest runs two test processes at once).
inline std::string tmp_path(const std::string& name) {
  static const std::string dir = [] {
    const std::string d = ml_test_mkdtemp("krafla-api-");
    return d.empty() ? std::filesystem::temp_directory_path().string() : d;
  }();
  return dir + "/" + name;
}

// A random model of a small shape, written once per process per name (the converter's seed makes
// the bytes deterministic).
inline std::string random_model(const std::string& name, int wtype = ML_DT_Q8, int dim = 64, int kv_heads = 2,
                                int layers = 2, int vocab = 96, int max_seq = 256, bool scales_f16 = false) {
  const std::string path = tmp_path(name + ".mlb");
  ml_convert_random_params p = ml_convert_random_defaults();
  p.dim = dim;
  p.hidden = dim * 3 / 2 / 32 * 32 + 32;
  p.layers = layers;
  p.heads = 4;
  p.kv_heads = kv_heads;
  p.vocab = vocab;
  p.max_seq = max_seq;
  p.wtype = wtype;
  p.scales_f16 = scales_f16 ? 1 : 0;
  p.seed = 7;
  p.out = path.c_str();
  ml_error err;
  const ml_status s = ml_convert_random(&p, &err);
  INFO(err.msg);
  REQUIRE(s == ML_OK);
  return path;
}

inline std::string shared_dir() {
  const char* s = std::getenv("KRAFLA_SHARED");
  return s ? s : ML_SHARED_DIR_DEFAULT;
}

// stories260K, converted once per process from the llama2.c checkpoint in the shared data (512
// tokens, llama2.c's tokenizer).
inline std::string stories_model() {
  static std::string path;
  if (!path.empty()) return path;
  path = tmp_path("stories260K.mlb");
  const std::string ckpt = shared_dir() + "/models/stories260K.bin", tok = shared_dir() + "/models/tok512.bin";
  ml_convert_llama2c_params p = ml_convert_llama2c_defaults();
  p.checkpoint = ckpt.c_str();
  p.tokenizer = tok.c_str();
  p.out = path.c_str();
  ml_error err;
  const ml_status s = ml_convert_llama2c(&p, &err);
  INFO(err.msg);
  REQUIRE(s == ML_OK);
  return path;
}

inline std::vector<int32_t> encode(const ml_tokenizer* t, const std::string& text, int bos) {
  std::vector<int32_t> ids(text.size() + 3);
  size_t n = 0;
  ml_error err;
  REQUIRE(ml_tokenize(t, text.data(), text.size(), bos, ids.data(), ids.size(), &n, &err) == ML_OK);
  ids.resize(n);
  return ids;
}

struct model {
  ml_model* m = nullptr;
  explicit model(const std::string& path, const ml_model_params* p = nullptr) {
    ml_error err;
    const ml_status s = ml_model_open(&m, path.c_str(), p, &err);
    INFO(err.msg);
    REQUIRE(s == ML_OK);
  }
  ~model() { ml_model_close(m); }
  model(const model&) = delete;
  model& operator=(const model&) = delete;
};

struct exec {
  ml_exec* e = nullptr;
  // threads: a build without the pool (the single-threaded wasm builds) runs one.
  exec(const ml_model* m, int threads, int batch) {
    ml_exec_params p{};
    p.n_threads = ml_build_threads() ? threads : 1;
    p.batch = batch;
    ml_error err;
    const ml_status s = ml_exec_create(&e, m, &p, &err);
    INFO(err.msg);
    REQUIRE(s == ML_OK);
  }
  ~exec() { ml_exec_free(e); }
  exec(const exec&) = delete;
  exec& operator=(const exec&) = delete;
};

struct session {
  ml_session* s = nullptr;
  explicit session(const ml_model* m, int kv = ML_KV_F32, int ctx = 0) {
    ml_session_params p{};
    p.ctx = ctx;
    p.kv = kv;
    ml_error err;
    const ml_status st = ml_session_create(&s, m, &p, &err);
    INFO(err.msg);
    REQUIRE(st == ML_OK);
  }
  ~session() { ml_session_free(s); }
  session(const session&) = delete;
  session& operator=(const session&) = delete;
};

// Every position's logits of ids fed to a fresh session alone (one thread, one token per step).
inline std::vector<std::vector<float>> solo_logits(const ml_model* m, const std::vector<int32_t>& ids, int kv) {
  exec ex(m, 1, 1);
  session s(m, kv);
  std::vector<std::vector<float>> out;
  const int vocab = ml_model_get_info(m).vocab_size;
  auto cb = [](void* user, size_t, const float* l) {
    auto* o = static_cast<std::pair<std::vector<std::vector<float>>*, int>*>(user);
    o->first->emplace_back(l, l + o->second);
    return 0;
  };
  std::pair<std::vector<std::vector<float>>*, int> u{&out, vocab};
  ml_error err;
  REQUIRE(ml_session_feed_all(ex.e, s.s, ids.data(), ids.size(), cb, &u, &err) == ML_OK);
  return out;
}

}  // namespace api
