// xxHash (Yann Collet, github.com/Cyan4973/xxHash, doc/xxhash_spec.md), implemented here from
// the specification: fast non-cryptographic hashes of a byte string. They guard files against
// accidental damage (the pack cache's body, the model's header); they are no defence against
// someone who crafts a collision on purpose.
//
//   XXH64     two 64-bit multiplies per 8 bytes; one-shot and streaming.
//   XXH3-64   one 32x32->64 multiply per 8 bytes, two lanes per SSE2 instruction on x86-64:
//             faster than XXH64 on long inputs. One-shot, seed 0, the default secret.
//
// Results equal the reference implementation's XXH64() / XXH3_64bits() and `xxhsum -H1` /
// `xxhsum -H3` for every input, on every platform (bytes are read little-endian);
// tests/core/test_hash.cpp checks this.
#pragma once
#include <cstddef>
#include <cstdint>

// XXH3-64 of n bytes at p (seed 0, the default secret).
uint64_t ml_xxh3_64(const void* p, size_t n);

// The XXH64 hash of n bytes at p with the given seed (xxhsum uses seed 0).
uint64_t ml_xxh64(const void* p, size_t n, uint64_t seed = 0);

// The same hash over data given in pieces: ml_xxh64_digest after updates of the pieces in order
// equals ml_xxh64 of their concatenation, however it is cut.
struct ml_xxh64_state {
  uint64_t v[4] = {0, 0, 0, 0};  // the four lane accumulators
  uint64_t total = 0;            // bytes fed so far
  uint64_t seed = 0;
  uint8_t buf[32] = {0};         // an incomplete 32-byte stripe
  uint32_t buffered = 0;
};
void ml_xxh64_init(ml_xxh64_state* s, uint64_t seed = 0);
void ml_xxh64_update(ml_xxh64_state* s, const void* p, size_t n);
uint64_t ml_xxh64_digest(const ml_xxh64_state* s);
