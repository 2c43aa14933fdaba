// kernels/numerics.h's canonical float sum on AArch64 NEON, shared by kernels/neon/attn.cpp and
// norm.cpp (AArch64 only). Term i goes to partial i % 16, held as four 4-lane accumulators
// r[(i / 4) % 4]; each product is a vmulq then a vaddq (never fmla). The tree: r0 + r2, r1 + r3,
// then their sum, then lanes (0 + 2), (1 + 3), then lane 0 + lane 1. A tail shorter than 16 goes
// through zero-padded copies (0 * 0 = +0 leaves a partial unchanged).
#pragma once
#ifdef __aarch64__
#include <arm_neon.h>

#include <cstdint>

#include "core/half.h"

namespace ml_arm {
namespace {

inline float32x4_t load4(const float* p) { return vld1q_f32(p); }
inline float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
inline float widen(float v) { return v; }
inline float widen(uint16_t h) { return ml_half_to_float(h); }

inline float32x4_t add_prod(float32x4_t acc, float32x4_t a, float32x4_t b) { return vaddq_f32(acc, vmulq_f32(a, b)); }

// sum_i q[i] * k[i], i < n (k: floats or halves), in the canonical order.
template <class T>
float dot_canonical(const float* q, const T* k, int n) {
  float32x4_t r0 = vdupq_n_f32(0.0f), r1 = r0, r2 = r0, r3 = r0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    r0 = add_prod(r0, vld1q_f32(q + i), load4(k + i));
    r1 = add_prod(r1, vld1q_f32(q + i + 4), load4(k + i + 4));
    r2 = add_prod(r2, vld1q_f32(q + i + 8), load4(k + i + 8));
    r3 = add_prod(r3, vld1q_f32(q + i + 12), load4(k + i + 12));
  }
  if (i < n) {  // the tail, zero-padded to 16 (reads nothing past n)
    float qt[16] = {}, kt[16] = {};
    for (int t = 0; t < n - i; ++t) {
      qt[t] = q[i + t];
      kt[t] = widen(k[i + t]);
    }
    r0 = add_prod(r0, vld1q_f32(qt), vld1q_f32(kt));
    r1 = add_prod(r1, vld1q_f32(qt + 4), vld1q_f32(kt + 4));
    r2 = add_prod(r2, vld1q_f32(qt + 8), vld1q_f32(kt + 8));
    r3 = add_prod(r3, vld1q_f32(qt + 12), vld1q_f32(kt + 12));
  }
  const float32x4_t s = vaddq_f32(vaddq_f32(r0, r2), vaddq_f32(r1, r3));
  const float32x2_t h = vadd_f32(vget_low_f32(s), vget_high_f32(s));  // lanes (0 + 2), (1 + 3)
  return vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
}

}  // namespace
}  // namespace ml_arm
#endif

#ifdef __aarch64__
namespace ml_arm {
namespace {

// ml_k_exp (kernels/numerics.h) on 4 lanes, operation for operation (vmulq then vaddq, never fmla):
// clamp to [-104, 89]; n = floor(x * log2(e) + 0.5); Cody-Waite; the Cephes polynomial; times
// 2^(n >> 1), then 2^(n - (n >> 1)). NaN lanes return x itself, as the scalar function does.
inline float32x4_t exp4(float32x4_t x0) {
  float32x4_t x = vminq_f32(vmaxq_f32(x0, vdupq_n_f32(-104.0f)), vdupq_n_f32(89.0f));
  const float32x4_t fx = vaddq_f32(vmulq_n_f32(x, 1.44269504088896341f), vdupq_n_f32(0.5f));
  float32x4_t n = vcvtq_f32_s32(vcvtq_s32_f32(fx));  // truncate toward zero, then floor
  n = vsubq_f32(n, vbslq_f32(vcgtq_f32(n, fx), vdupq_n_f32(1.0f), vdupq_n_f32(0.0f)));
  x = vsubq_f32(x, vmulq_n_f32(n, 0.693359375f));
  x = vsubq_f32(x, vmulq_n_f32(n, -2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vaddq_f32(vmulq_f32(p, x), vdupq_n_f32(1.3981999507e-3f));
  p = vaddq_f32(vmulq_f32(p, x), vdupq_n_f32(8.3334519073e-3f));
  p = vaddq_f32(vmulq_f32(p, x), vdupq_n_f32(4.1665795894e-2f));
  p = vaddq_f32(vmulq_f32(p, x), vdupq_n_f32(1.6666665459e-1f));
  p = vaddq_f32(vmulq_f32(p, x), vdupq_n_f32(5.0000001201e-1f));
  p = vaddq_f32(vaddq_f32(vmulq_f32(p, vmulq_f32(x, x)), x), vdupq_n_f32(1.0f));
  const int32x4_t ni = vcvtq_s32_f32(n), n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
  const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
  const float32x4_t r = vmulq_f32(vmulq_f32(p, s1), s2);
  return vbslq_f32(vceqq_f32(x0, x0), r, x0);
}

}  // namespace
}  // namespace ml_arm
#endif
