// Overflow-checked size arithmetic. wasm32 and ARMv7 have a 32-bit size_t, so every product
// of hyperparameters that sizes a buffer goes through these and fails with ML_E_NOMEM.
#pragma once
#include <cstddef>
#include <cstdint>

// *out = a * b; false on overflow.
inline bool ml_mul(size_t a, size_t b, size_t* out) { return !__builtin_mul_overflow(a, b, out); }
// *out = a + b; false on overflow.
inline bool ml_add(size_t a, size_t b, size_t* out) { return !__builtin_add_overflow(a, b, out); }
// *out = a * b * c; false on overflow.
inline bool ml_mul3(size_t a, size_t b, size_t c, size_t* out) {
  size_t t;
  return ml_mul(a, b, &t) && ml_mul(t, c, out);
}
// 64-bit variants for file offsets, which may exceed size_t on 32-bit targets.
inline bool ml_mul64(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool ml_add64(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }
// Rounds v up to a multiple of a power-of-two align; false on overflow.
inline bool ml_align_up(size_t v, size_t align, size_t* out) {
  size_t t;
  if (!ml_add(v, align - 1, &t)) return false;
  *out = t & ~(align - 1);
  return true;
}
