// NEON attention scores over the F32 and F16 KV caches, and the F16 weighted sum (AArch64 only;
// neon.h binds them there). Halves are widened with vcvt_f32_f16 (fcvtl), exactly. The scores are
// kernels/numerics.h's canonical sums (kernels/neon/canonical.h), bit-exact with scalar; axpy_f16
// is lane-wise in row order, as scalar.
#ifdef __aarch64__
#include <arm_neon.h>

#include "core/half.h"
#include "kernels/neon/canonical.h"
#include "kernels/neon/neon.h"

extern "C" void ml_k_dot_f32_neon(float* s, const float* q, const float* K, size_t k_stride, int n_rows,
                                  int head_dim) {
  for (int j = 0; j < n_rows; ++j) s[j] = ml_arm::dot_canonical(q, K + (size_t)j * k_stride, head_dim);
}

extern "C" void ml_k_dot_f16_neon(float* s, const float* q, const uint16_t* K, size_t k_stride, int n_rows,
                                  int head_dim) {
  for (int j = 0; j < n_rows; ++j) s[j] = ml_arm::dot_canonical(q, K + (size_t)j * k_stride, head_dim);
}

extern "C" void ml_k_axpy_f16_neon(float* out, const float* w, const uint16_t* V, size_t v_stride, int n_rows,
                                   int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const uint16_t* v = V + (size_t)j * v_stride;
    const float32x4_t wj = vdupq_n_f32(w[j]);
    int i = 0;
    for (; i + 4 <= head_dim; i += 4)
      vst1q_f32(out + i, vaddq_f32(vld1q_f32(out + i), vmulq_f32(wj, ml_arm::load4(v + i))));
    for (; i < head_dim; ++i) out[i] = out[i] + w[j] * ml_half_to_float(v[i]);
  }
}
#endif
