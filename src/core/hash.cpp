// XXH64 and XXH3-64 (core/hash.h). XXH64: four 64-bit lanes each take one 8-byte word of every
// 32-byte stripe (multiply, rotate, multiply), so the lanes' multiplies overlap. XXH3: eight
// lanes per 64-byte stripe, each adding its word and the 32x32->64 product of its word XOR the
// secret (SSE2 on x86-64, plain loops elsewhere). Short inputs and the final steps follow the
// specification step by step.
#include "core/hash.h"

#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace {

constexpr uint64_t P1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t P2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t P3 = 0x165667B19E3779F9ull;
constexpr uint64_t P4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t P5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads on any host: one unaligned load, byte-swapped on a big-endian one.
inline uint64_t read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}
inline uint32_t read32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}

inline uint64_t lane_round(uint64_t acc, uint64_t input) { return rotl(acc + input * P2, 31) * P1; }
inline uint64_t merge_round(uint64_t acc, uint64_t v) { return (acc ^ lane_round(0, v)) * P1 + P4; }

// Consumes whole 32-byte stripes of [p, p + n); returns the bytes consumed.
size_t stripes(uint64_t v[4], const uint8_t* p, size_t n) {
  uint64_t v1 = v[0], v2 = v[1], v3 = v[2], v4 = v[3];
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    v1 = lane_round(v1, read64(p + i));
    v2 = lane_round(v2, read64(p + i + 8));
    v3 = lane_round(v3, read64(p + i + 16));
    v4 = lane_round(v4, read64(p + i + 24));
  }
  v[0] = v1, v[1] = v2, v[2] = v3, v[3] = v4;
  return i;
}

void init_lanes(uint64_t v[4], uint64_t seed) {
  v[0] = seed + P1 + P2;
  v[1] = seed + P2;
  v[2] = seed;
  v[3] = seed - P1;
}

// The last steps: fold the lanes (when total >= 32), add the length, mix in the < 32 tail bytes
// and avalanche.
uint64_t finish(const uint64_t v[4], uint64_t seed, uint64_t total, const uint8_t* tail, size_t n) {
  uint64_t h;
  if (total >= 32) {
    h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
    for (int i = 0; i < 4; ++i) h = merge_round(h, v[i]);
  } else {
    h = seed + P5;
  }
  h += total;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) h = rotl(h ^ lane_round(0, read64(tail + i)), 27) * P1 + P4;
  if (i + 4 <= n) {
    h = rotl(h ^ ((uint64_t)read32(tail + i) * P1), 23) * P2 + P3;
    i += 4;
  }
  for (; i < n; ++i) h = rotl(h ^ (tail[i] * P5), 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

// --- XXH3-64 ---------------------------------------------------------------------------------

constexpr uint64_t P32_1 = 0x9E3779B1u, P32_2 = 0x85EBCA77u, P32_3 = 0xC2B2AE3Du;
constexpr size_t SECRET = 192;
constexpr size_t STRIPE = 64;
constexpr size_t STRIPES_PER_BLOCK = (SECRET - STRIPE) / 8;  // 16: a block is 1024 bytes

// The default secret (the specification's kSecret).
alignas(64) constexpr uint8_t kSecret[SECRET] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

// The 128-bit product of a and b, its halves XORed.
inline uint64_t mul128_fold64(uint64_t a, uint64_t b) {
#if defined(__SIZEOF_INT128__)
  const unsigned __int128 p = (unsigned __int128)a * b;
  return (uint64_t)p ^ (uint64_t)(p >> 64);
#else  // 32-bit targets (armhf, wasm32): four 32x32->64 products
  const uint64_t lo_lo = (a & 0xFFFFFFFF) * (b & 0xFFFFFFFF), hi_lo = (a >> 32) * (b & 0xFFFFFFFF);
  const uint64_t lo_hi = (a & 0xFFFFFFFF) * (b >> 32), hi_hi = (a >> 32) * (b >> 32);
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFF) + lo_hi;
  const uint64_t upper = (hi_lo >> 32) + (cross >> 32) + hi_hi;
  const uint64_t lower = (cross << 32) | (lo_lo & 0xFFFFFFFF);
  return lower ^ upper;
#endif
}

inline uint64_t xxh64_avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  return h ^ (h >> 32);
}
inline uint64_t xxh3_avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  return h ^ (h >> 32);
}
inline uint64_t rrmxmx(uint64_t h, uint64_t len) {
  h ^= rotl(h, 49) ^ rotl(h, 24);
  h *= 0x9FB21C651E98DF25ull;
  h ^= (h >> 35) + len;
  h *= 0x9FB21C651E98DF25ull;
  return h ^ (h >> 28);
}
inline uint64_t mix16(const uint8_t* in, const uint8_t* sec) {
  return mul128_fold64(read64(in) ^ read64(sec), read64(in + 8) ^ read64(sec + 8));
}

uint64_t xxh3_short(const uint8_t* p, size_t n) {  // n <= 16
  const uint8_t* s = kSecret;
  if (n > 8) {
    const uint64_t lo = read64(p) ^ (read64(s + 24) ^ read64(s + 32));
    const uint64_t hi = read64(p + n - 8) ^ (read64(s + 40) ^ read64(s + 48));
    return xxh3_avalanche(n + __builtin_bswap64(lo) + hi + mul128_fold64(lo, hi));
  }
  if (n >= 4) {
    const uint64_t in = read32(p + n - 4) + ((uint64_t)read32(p) << 32);
    return rrmxmx(in ^ (read64(s + 8) ^ read64(s + 16)), n);
  }
  if (n > 0) {
    const uint32_t c = ((uint32_t)p[0] << 16) | ((uint32_t)p[n >> 1] << 24) | p[n - 1] | ((uint32_t)n << 8);
    return xxh64_avalanche((uint64_t)c ^ (uint64_t)(read32(s) ^ read32(s + 4)));
  }
  return xxh64_avalanche(read64(s + 56) ^ read64(s + 64));
}

uint64_t xxh3_mid(const uint8_t* p, size_t n) {  // 17..240
  const uint8_t* s = kSecret;
  uint64_t acc = n * P1;
  if (n <= 128) {
    for (size_t i = 0, k = (n - 1) / 32; i <= k; ++i) {  // pairs from both ends, inward
      acc += mix16(p + 16 * i, s + 32 * i);
      acc += mix16(p + n - 16 * (i + 1), s + 32 * i + 16);
    }
    return xxh3_avalanche(acc);
  }
  for (size_t i = 0; i < 8; ++i) acc += mix16(p + 16 * i, s + 16 * i);
  acc = xxh3_avalanche(acc);
  for (size_t i = 8; i < n / 16; ++i) acc += mix16(p + 16 * i, s + 16 * (i - 8) + 3);
  acc += mix16(p + n - 16, s + 136 - 17);
  return xxh3_avalanche(acc);
}

// One 64-byte stripe into the eight lanes. On x86-64, SSE2 (the baseline every x86-64 CPU has,
// no ISA flags needed) does two lanes per pmuludq: GCC and Clang do not find it themselves (they
// emulate a full 64x64 product), and it is 1.8x the scalar loop's speed (23 vs 12.6 GB/s on an AMD EPYC).
#if defined(__SSE2__) && !defined(ML_HASH_SCALAR)
inline void accumulate(uint64_t acc[8], const uint8_t* in, const uint8_t* sec) {
  for (int j = 0; j < 4; ++j) {
    __m128i* a = reinterpret_cast<__m128i*>(acc) + j;
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16 * j));
    const __m128i k = _mm_xor_si128(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(sec + 16 * j)));
    const __m128i prod = _mm_mul_epu32(k, _mm_shuffle_epi32(k, _MM_SHUFFLE(0, 3, 0, 1)));  // lo32 * hi32
    const __m128i swapped = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2));                // acc[i ^ 1] += v
    _mm_store_si128(a, _mm_add_epi64(_mm_load_si128(a), _mm_add_epi64(prod, swapped)));
  }
}
#else
inline void accumulate(uint64_t acc[8], const uint8_t* in, const uint8_t* sec) {
  for (int i = 0; i < 8; ++i) {
    const uint64_t v = read64(in + 8 * i);
    const uint64_t k = v ^ read64(sec + 8 * i);
    acc[i ^ 1] += v;
    acc[i] += (k & 0xFFFFFFFF) * (k >> 32);
  }
}
#endif
inline void scramble(uint64_t acc[8], const uint8_t* sec) {
  for (int i = 0; i < 8; ++i) acc[i] = (acc[i] ^ (acc[i] >> 47) ^ read64(sec + 8 * i)) * P32_1;
}

uint64_t xxh3_long(const uint8_t* p, size_t n) {  // > 240
  const uint8_t* s = kSecret;
  alignas(64) uint64_t acc[8] = {P32_3, P1, P2, P3, P4, P32_2, P5, P32_1};
  const size_t block = STRIPE * STRIPES_PER_BLOCK;
  const size_t blocks = (n - 1) / block;
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t k = 0; k < STRIPES_PER_BLOCK; ++k) accumulate(acc, p + b * block + k * STRIPE, s + 8 * k);
    scramble(acc, s + SECRET - STRIPE);
  }
  const size_t stripes_left = ((n - 1) - block * blocks) / STRIPE;
  for (size_t k = 0; k < stripes_left; ++k) accumulate(acc, p + blocks * block + k * STRIPE, s + 8 * k);
  accumulate(acc, p + n - STRIPE, s + SECRET - STRIPE - 7);
  uint64_t h = n * P1;
  for (int i = 0; i < 4; ++i) h += mul128_fold64(acc[2 * i] ^ read64(s + 11 + 16 * i), acc[2 * i + 1] ^ read64(s + 19 + 16 * i));
  return xxh3_avalanche(h);
}

}  // namespace

uint64_t ml_xxh3_64(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (n <= 16) return xxh3_short(p, n);
  if (n <= 240) return xxh3_mid(p, n);
  return xxh3_long(p, n);
}

uint64_t ml_xxh64(const void* data, size_t n, uint64_t seed) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t v[4];
  init_lanes(v, seed);
  const size_t done = stripes(v, p, n);
  return finish(v, seed, n, p + done, n - done);
}

void ml_xxh64_init(ml_xxh64_state* s, uint64_t seed) {
  *s = ml_xxh64_state{};
  s->seed = seed;
  init_lanes(s->v, seed);
}

void ml_xxh64_update(ml_xxh64_state* s, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  s->total += n;
  if (s->buffered > 0) {  // complete the pending stripe first
    const size_t take = n < 32 - s->buffered ? n : 32 - s->buffered;
    std::memcpy(s->buf + s->buffered, p, take);
    s->buffered += (uint32_t)take;
    p += take;
    n -= take;
    if (s->buffered < 32) return;
    stripes(s->v, s->buf, 32);
    s->buffered = 0;
  }
  const size_t done = stripes(s->v, p, n);
  if (n > done) std::memcpy(s->buf, p + done, n - done);  // p may be null when n is 0
  s->buffered = (uint32_t)(n - done);
}

uint64_t ml_xxh64_digest(const ml_xxh64_state* s) {
  return finish(s->v, s->seed, s->total, s->buf, s->buffered);
}
