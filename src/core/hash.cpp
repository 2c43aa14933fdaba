// XXH64 (core/hash.h). Four 64-bit lanes each take one 8-byte word of every 32-byte stripe
// (multiply, rotate, multiply), so the lanes' multiplies overlap; the tail and the final
// avalanche follow the specification step by step.
#include "core/hash.h"

#include <cstring>

namespace {

constexpr uint64_t P1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t P2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t P3 = 0x165667B19E3779F9ull;
constexpr uint64_t P4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t P5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads on any host (the compiler folds these into one load on x86 and ARM).
inline uint64_t read64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
inline uint32_t read32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= (uint32_t)p[i] << (8 * i);
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

}  // namespace

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
  std::memcpy(s->buf, p + done, n - done);
  s->buffered = (uint32_t)(n - done);
}

uint64_t ml_xxh64_digest(const ml_xxh64_state* s) {
  return finish(s->v, s->seed, s->total, s->buf, s->buffered);
}
