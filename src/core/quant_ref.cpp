#include "core/quant_ref.h"

#include <cmath>

#include "core/types.h"

namespace {

// The rounding rule shared by every Q8 variant: x * id, plus a signed half, truncated, clamped.
inline int8_t round_q8(float x, float id) {
  float v = x * id;
  v = v + std::copysign(0.5f, x);
  int i = static_cast<int>(v);
  if (i > 127) i = 127;
  if (i < -127) i = -127;
  return static_cast<int8_t>(i);
}

void quantize_span_q8(int8_t* q, float* d, const float* x, size_t n) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  if (!(amax >= ML_QUANT_TINY)) {  // also catches NaN
    for (size_t i = 0; i < n; ++i) q[i] = 0;
    *d = 0.0f;
    return;
  }
  const float id = 127.0f / amax;
  *d = amax / 127.0f;
  for (size_t i = 0; i < n; ++i) q[i] = round_q8(x[i], id);
}

}  // namespace

void ml_quantize_q8_ref(int8_t* q, float* d, const float* x, size_t n) {
  for (size_t b = 0; b * ML_QK < n; ++b) {
    const size_t len = n - b * ML_QK < (size_t)ML_QK ? n - b * ML_QK : (size_t)ML_QK;
    quantize_span_q8(q + b * ML_QK, d + b, x + b * ML_QK, len);
  }
}

void ml_quantize_row_q8_ref(int8_t* q, float* d, const float* x, size_t n) {
  quantize_span_q8(q, d, x, n);
}

void ml_quantize_q4_ref(uint8_t* q, float* d, const float* x, size_t n) {
  for (size_t b = 0; b * ML_QK < n; ++b) {
    const float* xb = x + b * ML_QK;
    float amax = 0.0f, m = 0.0f;
    for (int i = 0; i < ML_QK; ++i) {
      if (std::fabs(xb[i]) > amax) {
        amax = std::fabs(xb[i]);
        m = xb[i];
      }
    }
    const float db = m / -8.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    d[b] = db;
    uint8_t* qb = q + b * (ML_QK / 2);
    for (int j = 0; j < ML_QK / 2; ++j) {
      // Clamped to [0, 15] as floats, then truncated: the same nibble as truncating first for any
      // finite value, and defined when a subnormal block max makes id infinite (x * id = -inf or
      // NaN, whose conversion to int is undefined; found by fuzz/llama2c).
      const int lo = static_cast<int>(std::fmin(std::fmax(xb[j] * id + 8.5f, 0.0f), 15.0f));
      const int hi = static_cast<int>(std::fmin(std::fmax(xb[j + 16] * id + 8.5f, 0.0f), 15.0f));
      qb[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}
