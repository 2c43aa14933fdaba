// Scalar activation quantization: the Q8_0 rule of ml_quantize_q8_ref (src/core/quant_ref.h),
// written out again as the kernel every ISA must match bit for bit (the test compares it with
// ml_quantize_q8_ref). Contract: any n >= 0; writes n quants and ceil(n / 32) scales; a short
// last block is quantized on its own; no allocation, no global state.
#include <cmath>

#include "kernels/scalar/scalar.h"

// Per block: amax = max |x|; amax < ML_QUANT_TINY (or NaN): q = 0, d = 0; else
// d = amax / 127, id = 127 / amax, q = clamp(trunc(x * id + copysign(0.5, x)), -127, 127),
// a float32 multiply then a separate add (no FMA; -ffp-contract=off).
extern "C" void ml_k_quantize_q8_scalar(int8_t* q, float* d, const float* x, int n) {
  for (int b = 0; b * ML_QK < n; ++b) {
    const int start = b * ML_QK;
    const int len = n - start < ML_QK ? n - start : ML_QK;
    const float* xb = x + start;
    int8_t* qb = q + start;
    float amax = 0.0f;
    for (int i = 0; i < len; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    if (!(amax >= ML_QUANT_TINY)) {
      for (int i = 0; i < len; ++i) qb[i] = 0;
      d[b] = 0.0f;
      continue;
    }
    const float id = 127.0f / amax;
    d[b] = amax / 127.0f;
    for (int i = 0; i < len; ++i) {
      float v = xb[i] * id;
      v = v + std::copysign(0.5f, xb[i]);
      int t = (int)v;  // truncation toward zero
      t = t > 127 ? 127 : (t < -127 ? -127 : t);
      qb[i] = (int8_t)t;
    }
  }
}
