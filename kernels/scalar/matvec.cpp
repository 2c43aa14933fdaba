// Scalar matrix-vector kernels: the reference every ISA's matvec is tested against.
// Contract (kernels/ops.h): y[r] for r in [r0, r1) only; W->cols == x->n, a multiple of 32;
// no allocation, no global state. Rounding rule, which SIMD ports must reproduce up to the
// order of the float additions: each 32-block's dot is an exact int32 sum, converted to float
// and multiplied by (d_w * d_x) in float32, then added to a float32 accumulator.
#include "kernels/scalar/scalar.h"

// y[r] = sum_b (sum_{i in b} Wq[r][i] * xq[i]) * (d_w[r][b] * d_x[b])
extern "C" void ml_k_matvec_q8_scalar(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  const int cols = W->cols;
  const int nb = cols / ML_QK;
  const int8_t* wq = static_cast<const int8_t*>(W->q);
  for (int r = r0; r < r1; ++r) {
    const int8_t* wr = wq + (size_t)r * (size_t)cols;
    float acc = 0.0f;
    for (int b = 0; b < nb; ++b) {
      const int8_t* wb = wr + b * ML_QK;
      const int8_t* xb = x->q + b * ML_QK;
      int32_t isum = 0;  // |isum| <= 32 * 127 * 127: no overflow
      for (int i = 0; i < ML_QK; ++i) isum += (int32_t)wb[i] * (int32_t)xb[i];
      const float dw = ml_qtensor_scale(W, (size_t)r * (size_t)nb + (size_t)b);
      acc += (float)isum * (dw * x->d[b]);
    }
    y[r] = acc;
  }
}

// As matvec_q8 with W's value i of block b = nibble - 8 (GGUF Q4_0: byte j of a block holds
// value j in its low nibble and value j + 16 in its high nibble).
extern "C" void ml_k_matvec_q4_scalar(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  const int cols = W->cols;
  const int nb = cols / ML_QK;
  const uint8_t* wq = static_cast<const uint8_t*>(W->q);
  for (int r = r0; r < r1; ++r) {
    const uint8_t* wr = wq + (size_t)r * (size_t)(cols / 2);
    float acc = 0.0f;
    for (int b = 0; b < nb; ++b) {
      const uint8_t* wb = wr + b * (ML_QK / 2);
      const int8_t* xb = x->q + b * ML_QK;
      int32_t isum = 0;
      for (int j = 0; j < ML_QK / 2; ++j) {
        isum += ((int32_t)(wb[j] & 0x0F) - 8) * (int32_t)xb[j];
        isum += ((int32_t)(wb[j] >> 4) - 8) * (int32_t)xb[j + ML_QK / 2];
      }
      const float dw = ml_qtensor_scale(W, (size_t)r * (size_t)nb + (size_t)b);
      acc += (float)isum * (dw * x->d[b]);
    }
    y[r] = acc;
  }
}
