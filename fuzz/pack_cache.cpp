// Fuzzes the pack cache reader through the public path, as ml_run --pack-cache meets it: a small
// random model is written once into a private temporary folder; each input becomes its pack
// cache MODEL.pk<G>, then the model is opened with pack_cache on (the cache is mapped when it
// matches, else the weights are packed and the cache rewritten) and one token is fed, so that a
// mapped cache's arrays are read by the packed kernels. Reads src/model/pack.cpp only through
// krafla.h, so it does not depend on how the cache is hashed or laid out.
// Needs a build with packed kernels (ml_build_pack_g() > 0: the asan preset is avx2); without
// them it says so and exits.
// Input: the cache file's bytes. Seed: the cache the build writes for that model, generated at
// start-up into $ML_FUZZ_SEED_DIR (fuzz/run.py): it depends on the build's G and pack layout,
// so none is committed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_util.h"
#include "krafla.h"

namespace {

std::string g_model, g_cache;

bool open_and_feed(bool want_cache) {
  ml_model_params mp{};
  mp.ctx = 8;
  mp.pack_cache = 1;
  ml_model* m = nullptr;
  ml_error err{};
  if (ml_model_open(&m, g_model.c_str(), &mp, &err) != ML_OK) {
    if (want_cache) std::fprintf(stderr, "pack_cache: %s\n", err.msg);
    return false;
  }
  ml_exec_params ep{};
  ep.n_threads = 1;
  ep.batch = 2;
  ml_exec* e = nullptr;
  ml_session* s = nullptr;
  ml_session_params sp{};
  bool ok = ml_exec_create(&e, m, &ep, &err) == ML_OK && ml_session_create(&s, m, &sp, &err) == ML_OK;
  const int32_t ids[2] = {1, 5};
  ok = ok && ml_session_feed(e, s, ids, 2, &err) == ML_OK;
  ml_session_free(s);
  ml_exec_free(e);
  ml_model_close(m);
  if (!ok) {
    std::fprintf(stderr, "pack_cache: the model opened but a step failed: %s\n", err.msg);
    std::abort();  // a cache accepted (or rewritten) must give a model that runs
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fz::remove_tmp_at_exit();
  const int g = ml_build_pack_g();
  if (g <= 0) {
    std::fprintf(stderr, "pack_cache: this build (%s) has no packed kernels, so no pack cache: nothing to fuzz\n",
                 ml_build_isa());
    std::exit(0);
  }
  g_model = fz::tmp_path("model.mlb");
  g_cache = g_model + ".pk" + std::to_string(g);
  // Large enough that the cache's sampled hashes leave most bytes unsampled (the fuzzer can
  // change quants the check does not see), small enough to write thousands of times a second.
  ml_convert_random_params r = ml_convert_random_defaults();
  r.dim = 64, r.hidden = 128, r.layers = 1, r.heads = 2, r.kv_heads = 1, r.vocab = 64, r.max_seq = 16;
  r.wtype = ML_DT_Q4;
  r.out = g_model.c_str();
  ml_error err{};
  if (ml_convert_random(&r, &err) != ML_OK) {
    std::fprintf(stderr, "pack_cache: %s\n", err.msg);
    std::exit(1);
  }
  // The first open writes a valid cache: the seed.
  if (!open_and_feed(true)) std::exit(1);
  if (const char* dir = fz::seed_dir()) {
    std::string bytes;
    if (!fz::read_file(g_cache, &bytes) || !fz::write_file(std::string(dir) + "/valid.pk", bytes.data(), bytes.size()))
      std::exit(1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!fz::write_file(g_cache, data, size)) std::abort();
  open_and_feed(false);
  return 0;
}
