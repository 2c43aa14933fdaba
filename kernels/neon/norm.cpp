// NEON rmsnorm, softmax, silu_mul and gelu_mul (AArch64 only; neon.h binds them there), bit-exact with the
// scalar kernels: sums in kernels/numerics.h's canonical order and ml_k_exp step for step
// (kernels/neon/canonical.h). rmsnorm: the sum of squares, the scale in scalar code, then
// o[i] = w[i] * (x[i] * scale) lane-wise.
#ifdef __aarch64__
#include <arm_neon.h>

#include <cmath>

#include "kernels/neon/canonical.h"
#include "kernels/neon/neon.h"

extern "C" void ml_k_rmsnorm_neon(float* o, const float* x, const float* w, int n, float eps) {
  if (n <= 0) return;
  const float ss = ml_arm::dot_canonical(x, x, n);
  const float scale = 1.0f / std::sqrt(ss / (float)n + eps);
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(o + i, vmulq_f32(vld1q_f32(w + i), vmulq_n_f32(vld1q_f32(x + i), scale)));
  for (; i < n; ++i) o[i] = w[i] * (x[i] * scale);
}
#endif

#ifdef __aarch64__
#include "kernels/numerics.h"

// g[i] = ml_k_silu_mul1(g[i], u[i]) on 4 lanes: e = exp(-|g|), (sign bit of g ? g * e : g) / (1 + e) * u.
extern "C" void ml_k_silu_mul_neon(float* g, const float* u, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(g + i);
    const float32x4_t e = ml_arm::exp4(vnegq_f32(vabsq_f32(v)));
    const uint32x4_t neg = vcltq_s32(vreinterpretq_s32_f32(v), vdupq_n_s32(0));  // the sign bit
    const float32x4_t num = vbslq_f32(neg, vmulq_f32(v, e), v);
    vst1q_f32(g + i, vmulq_f32(vdivq_f32(num, vaddq_f32(vdupq_n_f32(1.0f), e)), vld1q_f32(u + i)));
  }
  for (; i < n; ++i) g[i] = ml_k_silu_mul1(g[i], u[i]);
}

// g[i] = ml_k_gelu_mul1(g[i], u[i]) on 4 lanes: y = c (g + 0.044715 g^3), e = exp(-2 |y|),
// t = (1 - e) / (1 + e) with y's sign bit xored in (t >= 0, so that is exactly -t), (0.5 g (1 + t)) u.
extern "C" void ml_k_gelu_mul_neon(float* g, const float* u, int n) {
  const uint32x4_t sign = vdupq_n_u32(0x80000000u);
  const float32x4_t one = vdupq_n_f32(1.0f);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(g + i);
    const float32x4_t g3 = vmulq_f32(vmulq_f32(v, v), v);
    const float32x4_t y =
        vmulq_f32(vdupq_n_f32(0.7978845608028654f), vaddq_f32(v, vmulq_f32(vdupq_n_f32(0.044715f), g3)));
    const float32x4_t e = ml_arm::exp4(vmulq_f32(vdupq_n_f32(-2.0f), vabsq_f32(y)));
    const float32x4_t t0 = vdivq_f32(vsubq_f32(one, e), vaddq_f32(one, e));
    const float32x4_t t = vreinterpretq_f32_u32(
        veorq_u32(vreinterpretq_u32_f32(t0), vandq_u32(vreinterpretq_u32_f32(y), sign)));
    const float32x4_t r = vmulq_f32(vmulq_f32(vdupq_n_f32(0.5f), v), vaddq_f32(one, t));
    vst1q_f32(g + i, vmulq_f32(r, vld1q_f32(u + i)));
  }
  for (; i < n; ++i) g[i] = ml_k_gelu_mul1(g[i], u[i]);
}

// ml_k_softmax_scalar: the max in scalar order (NaN handling included), exp4, the canonical sum of
// the exponentials (term i into partial i % 16; the tail zero-padded), then a division.
extern "C" void ml_k_softmax_neon(float* x, int n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  if (mx == -INFINITY) {
    for (int i = 0; i < n; ++i) x[i] = 1.0f / (float)n;
    return;
  }
  const float32x4_t m = vdupq_n_f32(mx);
  float32x4_t r[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 4; ++k) {
      const float32x4_t e = ml_arm::exp4(vsubq_f32(vld1q_f32(x + i + 4 * k), m));
      vst1q_f32(x + i + 4 * k, e);
      r[k] = vaddq_f32(r[k], e);
    }
  if (i < n) {
    float t[16] = {};
    for (int j = i; j < n; ++j) t[j - i] = x[j] = ml_k_exp(x[j] - mx);
    for (int k = 0; k < 4; ++k) r[k] = vaddq_f32(r[k], vld1q_f32(t + 4 * k));
  }
  const float32x4_t s = vaddq_f32(vaddq_f32(r[0], r[2]), vaddq_f32(r[1], r[3]));
  const float32x2_t h = vadd_f32(vget_low_f32(s), vget_high_f32(s));
  const float sum = vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
  const float32x4_t vs = vdupq_n_f32(sum);
  int j = 0;
  for (; j + 4 <= n; j += 4) vst1q_f32(x + j, vdivq_f32(vld1q_f32(x + j), vs));
  for (; j < n; ++j) x[j] = x[j] / sum;
}
#endif
