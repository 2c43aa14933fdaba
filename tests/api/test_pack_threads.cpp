// Packing on several threads (ml_model_params.n_threads): the packed bytes are the same for any
// thread count. The pack cache is the packed region byte for byte behind a header that holds the
// body's hash, so comparing the caches written with 1 and with 3 threads compares both the packed
// weights and the hash computed on the pool; a later load on 3 threads verifies that hash (a hit),
// and a flipped body byte makes it a miss.
#include <cstdio>
#include <fstream>

#include "api_fixture.h"
#include "test_util.h"

namespace {

// The offset of the first byte where a and b differ (the shorter one's size if one is a prefix),
// or -1 when they are equal: a failure names one offset instead of printing megabytes.
long first_difference(const std::vector<char>& a, const std::vector<char>& b) {
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return (long)i;
  return a.size() == b.size() ? -1 : (long)n;
}

// Opens path with the pack cache on n threads and returns its info (the model is closed again).
ml_model_info open_packed(const std::string& path, int n_threads) {
  ml_model_params mp{};
  mp.pack_cache = 1;
  mp.n_threads = n_threads;
  ml_model* m = nullptr;
  ml_error err;
  const ml_status s = ml_model_open(&m, path.c_str(), &mp, &err);
  INFO(err.msg);
  REQUIRE(s == ML_OK);
  const ml_model_info info = ml_model_get_info(m);
  ml_model_close(m);
  return info;
}

}  // namespace

TEST_CASE("pack: 3 threads pack the same bytes as 1, and verify a cache on the pool", "[api][pack]") {
  for (const int wtype : {ML_DT_Q8, ML_DT_Q4}) {
    CAPTURE(wtype);
    // Bodies of several 1 MiB hash chunks (Q8 about 3 MB, Q4 half), in more matrices than threads.
    const std::string path = api::random_model(wtype == ML_DT_Q8 ? "pack_threads_q8" : "pack_threads_q4", wtype, 256,
                                               2, 4, 2000);
    const ml_model_info one = open_packed(path, 1);
    if (!one.packed) {
      WARN("this build has no packed kernels: nothing to pack");
      return;
    }
    const std::string cache = path + ".pk" + std::to_string(one.pack_g);
    REQUIRE(one.pack_cache_written == 1);
    const std::vector<char> by_one = ml_test_read<std::vector<char>>(cache);
    REQUIRE(by_one.size() > 512 + ((size_t)1 << 20));

    REQUIRE(std::remove(cache.c_str()) == 0);
    const ml_model_info three = open_packed(path, 3);
    CHECK(three.pack_from_cache == 0);
    REQUIRE(three.pack_cache_written == 1);
    CHECK(first_difference(ml_test_read<std::vector<char>>(cache), by_one) == -1);

    CHECK(open_packed(path, 3).pack_from_cache == 1);  // the body hash, computed on 3 threads, matches

    std::vector<char> bad = by_one;
    bad[bad.size() - 1] ^= 0x01;  // the last packed byte
    {
      std::ofstream f(cache, std::ios::binary | std::ios::trunc);
      f.write(bad.data(), (std::streamsize)bad.size());
    }
    const ml_model_info miss = open_packed(path, 3);
    CHECK(miss.pack_from_cache == 0);  // the flipped byte fails the hash: packed again, rewritten
    CHECK(miss.pack_cache_written == 1);
    CHECK(first_difference(ml_test_read<std::vector<char>>(cache), by_one) == -1);
  }
}
