// NEON F16 KV-cache kernels (AArch64 only; neon.h binds them there): halves widened with
// vcvt_f32_f16 (fcvtl), exact. axpy_f16 keeps the scalar kernel's operations per element and its
// row order, so it is bit-exact; dot_f16 sums in 4 lanes, then (l0 + l1) + (l2 + l3), then the tail.
#ifdef __aarch64__
#include <arm_neon.h>

#include "core/half.h"
#include "kernels/neon/neon.h"

static inline float32x4_t ml_arm_load_half4(const uint16_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

extern "C" void ml_k_dot_f16_neon(float* s, const float* q, const uint16_t* K, size_t k_stride, int n_rows,
                                  int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const uint16_t* k = K + (size_t)j * k_stride;
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
    int i = 0;
    for (; i + 8 <= head_dim; i += 8) {
      a0 = vaddq_f32(a0, vmulq_f32(vld1q_f32(q + i), ml_arm_load_half4(k + i)));
      a1 = vaddq_f32(a1, vmulq_f32(vld1q_f32(q + i + 4), ml_arm_load_half4(k + i + 4)));
    }
    const float32x4_t a = vaddq_f32(a0, a1);
    float acc = (vgetq_lane_f32(a, 0) + vgetq_lane_f32(a, 1)) + (vgetq_lane_f32(a, 2) + vgetq_lane_f32(a, 3));
    for (; i < head_dim; ++i) acc += q[i] * ml_half_to_float(k[i]);
    s[j] = acc;
  }
}

extern "C" void ml_k_axpy_f16_neon(float* out, const float* w, const uint16_t* V, size_t v_stride, int n_rows,
                                   int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const uint16_t* v = V + (size_t)j * v_stride;
    const float32x4_t wj = vdupq_n_f32(w[j]);
    int i = 0;
    for (; i + 4 <= head_dim; i += 4)
      vst1q_f32(out + i, vaddq_f32(vld1q_f32(out + i), vmulq_f32(wj, ml_arm_load_half4(v + i))));
    for (; i < head_dim; ++i) out[i] = out[i] + w[j] * ml_half_to_float(v[i]);
  }
}
#endif
