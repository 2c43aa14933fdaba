// Fuzzes the pack cache reader through the public path, as ml_run --pack-cache meets it: a small
// random model is written once into a private temporary folder and opened once with pack_cache
// on, which writes its valid cache MODEL.pk<G>. Each input then becomes a cache file, the model is
// opened again with pack_cache on (the cache is mapped when it matches, else the weights are
// packed and the cache rewritten) and one token is fed, so that a mapped cache's arrays are read
// by the packed kernels.
//
// A cache matches only when its header equals the one this run would write, and that header
// holds the model file's identity (device, inode, mtime, ctime), different in every process: a
// whole cache file saved by an earlier run never matches. So an input is mostly an edit of the
// valid cache made at start-up, and stays meaningful in any process:
//   byte 0: flags. bit 0 RAW: the rest of the input is the whole cache file (size checks, short
//           files); bit 1 REHASH: after the edits, the header's body hash is recomputed over the
//           edited body (docs/format.md), so an edited body passes the hash check and is mapped:
//           the packed kernels then read fuzzed quants and scales; bit 2 RESIZE: the next 4 bytes
//           (LE, modulo twice the valid size + 1) set the file's length (zero-padded).
//   then edits, each: u32 LE offset (modulo the file's length), u8 n, n bytes written there.
// The harness knows which edits must be mapped: exactly those whose file is as long as the valid
// one, whose header equals the valid header outside the body hash field, and whose body hash
// field is the body's hash. It aborts when the reader maps a cache outside that set (a check
// that let a damaged cache through) or refuses one inside it (a valid cache repacked).
// Needs a build with packed kernels (ml_build_pack_g() > 0: the asan preset is avx2); without
// them it says so and exits.
// Seeds: fuzz/corpus/pack_cache (edits, independent of the process); run.py's seed folder also
// gets the raw valid cache of the starting process.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/hash.h"
#include "fuzz_util.h"
#include "krafla.h"

namespace {

constexpr size_t kHeader = 512, kBodyHashAt = 104, kChunk = (size_t)1 << 20;
enum : uint8_t { kRaw = 1, kRehash = 2, kResize = 4 };

std::string g_model, g_cache, g_valid;

// The body hash of docs/format.md: XXH64 of the LE XXH3-64 digests of the body's 1 MiB chunks.
uint64_t body_hash(const uint8_t* p, size_t n) {
  ml_xxh64_state s;
  ml_xxh64_init(&s);
  for (size_t at = 0; at < n; at += kChunk) {
    const uint64_t d = ml_xxh3_64(p + at, n - at < kChunk ? n - at : kChunk);
    uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = (uint8_t)(d >> (8 * i));
    ml_xxh64_update(&s, le, 8);
  }
  return ml_xxh64_digest(&s);
}

uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

uint32_t get32(const uint8_t* p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

// Opens the model with the cache at g_cache and feeds two tokens; -1 when it does not open, else
// whether the packed arrays came from the cache.
int open_and_feed(bool want_cache) {
  ml_model_params mp{};
  mp.ctx = 8;
  mp.pack_cache = 1;
  ml_model* m = nullptr;
  ml_error err{};
  if (ml_model_open(&m, g_model.c_str(), &mp, &err) != ML_OK) {
    if (want_cache) std::fprintf(stderr, "pack_cache: %s\n", err.msg);
    return -1;
  }
  const int from_cache = ml_model_get_info(m).pack_from_cache;
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
  return from_cache;
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
  // Small enough to write thousands of times a second.
  ml_convert_random_params r = ml_convert_random_defaults();
  r.dim = 64, r.hidden = 128, r.layers = 1, r.heads = 2, r.kv_heads = 1, r.vocab = 64, r.max_seq = 16;
  r.wtype = ML_DT_Q4;
  r.out = g_model.c_str();
  ml_error err{};
  if (ml_convert_random(&r, &err) != ML_OK) {
    std::fprintf(stderr, "pack_cache: %s\n", err.msg);
    std::exit(1);
  }
  // The first open writes the valid cache; the second must map it.
  if (open_and_feed(true) != 0 || !fz::read_file(g_cache, &g_valid) || g_valid.size() <= kHeader) {
    std::fprintf(stderr, "pack_cache: the first open wrote no cache\n");
    std::exit(1);
  }
  if (open_and_feed(true) != 1) {
    std::fprintf(stderr, "pack_cache: the valid cache was not mapped\n");
    std::exit(1);
  }
  if (const char* dir = fz::seed_dir()) {
    const std::string raw = std::string(1, (char)kRaw) + g_valid;
    if (!fz::write_file(std::string(dir) + "/valid_raw.pk", raw.data(), raw.size())) std::exit(1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::string file;
  if (flags & kRaw) {
    file.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    file = g_valid;
    size_t i = 1;
    if (flags & kResize) {
      if (size - i < 4) return 0;
      file.resize(get32(data + i) % (2 * g_valid.size() + 1), '\0');
      i += 4;
    }
    while (!file.empty() && size - i >= 5) {
      const size_t at = get32(data + i) % file.size();
      size_t n = data[i + 4];
      i += 5;
      if (n > size - i) n = size - i;
      if (n > file.size() - at) n = file.size() - at;
      std::memcpy(&file[at], data + i, n);
      i += n;
    }
    if ((flags & kRehash) && file.size() > kHeader) {
      const uint64_t h = body_hash(reinterpret_cast<const uint8_t*>(file.data()) + kHeader, file.size() - kHeader);
      for (int k = 0; k < 8; ++k) file[kBodyHashAt + k] = (char)(h >> (8 * k));
    }
  }
  // Whether the reader must map this file (what its contract says matches).
  const uint8_t* f = reinterpret_cast<const uint8_t*>(file.data());
  const uint8_t* v = reinterpret_cast<const uint8_t*>(g_valid.data());
  const bool must_map = file.size() == g_valid.size() && std::memcmp(f, v, kBodyHashAt) == 0 &&
                        std::memcmp(f + kBodyHashAt + 8, v + kBodyHashAt + 8, kHeader - kBodyHashAt - 8) == 0 &&
                        get64(f + kBodyHashAt) == body_hash(f + kHeader, file.size() - kHeader);

  if (!fz::write_file(g_cache, file.data(), file.size())) std::abort();
  const int mapped = open_and_feed(false);
  if (mapped < 0) {
    std::fprintf(stderr, "pack_cache: the model no longer opens\n");
    std::abort();  // the cache can make the model repack, never fail
  }
  if (mapped != (must_map ? 1 : 0)) {
    std::fprintf(stderr, "pack_cache: the reader %s a cache it should %s\n", mapped ? "mapped" : "refused",
                 mapped ? "refuse" : "map");
    std::abort();
  }
  return 0;
}
