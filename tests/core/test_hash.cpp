// XXH64 and XXH3-64 (src/core/hash.h) against the reference: digests that `xxhsum -H1` / `-H3`
// (xxHash 0.8.1, Debian's xxhash package) printed for fixed inputs, and, where the build found
// the reference library (libxxhash-dev), XXH64() and XXH3_64bits() themselves on random inputs
// of every length up to 300 (XXH64 with random seeds) and longer ones across XXH3's 1024-byte
// blocks. XXH64's streaming form equals its one-shot form however the input is cut.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "core/hash.h"
#if ML_HAVE_LIBXXHASH
#include <xxhash.h>
#endif

namespace {

// The bytes the vectors were made from: byte i = (131 i + 7) mod 256, written with
//   python3 -c "import sys; sys.stdout.buffer.write(bytes(((i*131+7)&255) for i in range(N)))" | xxhsum -H1
std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (uint8_t)((i * 131 + 7) & 255);
  return v;
}

struct Vector {
  size_t n;
  uint64_t h;
};
// Every path of the algorithm: no stripe, 8-, 4- and 1-byte tails, exactly one stripe, many.
const Vector kXxhsum[] = {
    {0, 0xef46db3751d8e999ull},    {1, 0xa96c7f0ce858bbb7ull},    {3, 0xbed43740ee6332bbull},
    {4, 0xfa212ae44b3bb23dull},    {5, 0xd339dcc9ac8e6776ull},    {7, 0x2744460dd675d2c0ull},
    {8, 0x994b676b71ce94ddull},    {9, 0x572b84c18b983af8ull},    {15, 0x09e6451ed2ff8b1dull},
    {16, 0x94ad0095e72b24d5ull},   {31, 0x6711d55e306b5d8full},   {32, 0x07f7b8e3bc5d6e25ull},
    {33, 0x09f85eeb4e1cbe9full},   {63, 0xb7c9968c066cb6a5ull},   {64, 0x50d4159a0411632eull},
    {65, 0xd277176bff863efcull},   {100, 0x9ddada11d3dc2d8full},  {255, 0x15a6db05d4e83df4ull},
    {1000, 0x0bf0bdbcc82eb373ull}, {4097, 0x00811ab3925b884aull},
};

// `xxhsum -H3` of the same inputs: each short path (0, 1-3, 4-8, 9-16), 17-128 at every pair
// count, 129-240, and the long path below, at and across a block.
const Vector kXxhsum3[] = {
    {0, 0x2d06800538d394c2ull},    {1, 0x4c5cca45d0f4811full},    {2, 0x29c60963cbfa4e6eull},
    {3, 0x6e3e2670e61106acull},    {4, 0x5c4c63133443d03full},    {8, 0xf9fd4dd0b04d78f5ull},
    {9, 0x7c20df9712c26edfull},    {16, 0x86abf6baccea0858ull},   {17, 0xb58bf5dc5022d071ull},
    {33, 0xa4dee99b093e1f73ull},   {65, 0x97c6bf83217e5ec9ull},   {97, 0xf145a45b658ab9ddull},
    {128, 0x10d17f72c0ccba41ull},  {129, 0x1648bdc3db49d1a2ull},  {200, 0xc0fbc0f4e181c826ull},
    {240, 0xb6cfaf343fab81e6ull},  {241, 0x956cae592c67279eull},  {1024, 0x70bd377d9574f4bbull},
    {1025, 0x66c4487c41e127a7ull}, {2047, 0xded1f434a1510c6aull}, {4097, 0x34eecaecd32195a4ull},
    {100000, 0x14ce8d6fc2c4868bull},
};

uint64_t streamed(const std::vector<uint8_t>& v, std::mt19937& rng, uint64_t seed) {
  ml_xxh64_state s;
  ml_xxh64_init(&s, seed);
  size_t at = 0;
  while (at < v.size()) {
    const size_t take = std::min(v.size() - at, (size_t)(rng() % 70));
    ml_xxh64_update(&s, v.data() + at, take);
    at += take;
  }
  return ml_xxh64_digest(&s);
}

}  // namespace

TEST_CASE("hash: XXH64 equals xxhsum -H1 on fixed inputs", "[hash]") {
  for (const Vector& t : kXxhsum) {
    INFO("length " << t.n);
    const std::vector<uint8_t> v = pattern(t.n);
    CHECK(ml_xxh64(v.data(), v.size()) == t.h);
  }
  CHECK(ml_xxh64("abc", 3) == 0x44bc2cf5ad770999ull);  // printf abc | xxhsum -H1
}

TEST_CASE("hash: XXH3-64 equals xxhsum -H3 on fixed inputs", "[hash]") {
  for (const Vector& t : kXxhsum3) {
    INFO("length " << t.n);
    const std::vector<uint8_t> v = pattern(t.n);
    CHECK(ml_xxh3_64(v.data(), v.size()) == t.h);
  }
  CHECK(ml_xxh3_64("abc", 3) == 0x78af5f94892f3950ull);  // printf abc | xxhsum -H3
}

TEST_CASE("hash: streaming equals one-shot for any cut", "[hash]") {
  std::mt19937 rng(5);
  for (const Vector& t : kXxhsum) {
    const std::vector<uint8_t> v = pattern(t.n);
    for (int rep = 0; rep < 8; ++rep) {
      INFO("length " << t.n << " rep " << rep);
      CHECK(streamed(v, rng, 0) == t.h);
    }
  }
  ml_xxh64_state s;
  ml_xxh64_init(&s, 0);
  ml_xxh64_update(&s, nullptr, 0);
  CHECK(ml_xxh64_digest(&s) == 0xef46db3751d8e999ull);
}

TEST_CASE("hash: XXH64 equals the reference library on random inputs and seeds", "[hash]") {
#if ML_HAVE_LIBXXHASH
  std::mt19937_64 rng(11);
  std::mt19937 cuts(3);
  for (size_t n = 0; n <= 300; ++n) {
    std::vector<uint8_t> v(n + 1);
    for (uint8_t& b : v) b = (uint8_t)rng();
    const uint64_t seed = n % 3 == 0 ? 0 : rng();
    for (size_t off = 0; off < 2; ++off) {  // aligned and unaligned starts
      INFO("length " << n << " offset " << off << " seed " << seed);
      const std::vector<uint8_t> w(v.begin() + off, v.begin() + off + n);
      CHECK(ml_xxh64(v.data() + off, n, seed) == XXH64(v.data() + off, n, seed));
      CHECK(streamed(w, cuts, seed) == XXH64(w.data(), n, seed));
    }
  }
  std::vector<uint8_t> big((1 << 20) + 77);
  for (uint8_t& b : big) b = (uint8_t)rng();
  CHECK(ml_xxh64(big.data(), big.size(), 7) == XXH64(big.data(), big.size(), 7));
  for (size_t n = 0; n <= 300; ++n) {
    INFO("XXH3 length " << n);
    CHECK(ml_xxh3_64(big.data() + 1, n) == XXH3_64bits(big.data() + 1, n));
  }
  for (size_t n = 301; n <= 4200; n += 7) {  // across 1024-byte blocks and partial last stripes
    INFO("XXH3 length " << n);
    CHECK(ml_xxh3_64(big.data() + 3, n) == XXH3_64bits(big.data() + 3, n));
  }
  CHECK(ml_xxh3_64(big.data(), big.size()) == XXH3_64bits(big.data(), big.size()));
#else
  WARN("SKIP: libxxhash (libxxhash-dev) was not found at configure time; the xxhsum vectors still ran");
#endif
}
