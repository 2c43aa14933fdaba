// NEON Q8_0 activation quantization (AArch64 only; neon.h binds it there): bit-exact with
// ml_k_quantize_q8_scalar. amax with vmaxnmq (fmax semantics: a NaN input is ignored), id = 127 / amax
// in scalar code, then per value a separate multiply and add of copysign(0.5, x), truncation
// (fcvtzs), clamp to +-127. A short last block goes through the scalar rule.
#ifdef __aarch64__
#include <arm_neon.h>

#include <cmath>

#include "kernels/neon/neon.h"

extern "C" void ml_k_quantize_q8_neon(int8_t* q, float* d, const float* x, int n) {
  const int full = n / ML_QK;
  const uint32x4_t sign = vdupq_n_u32(0x80000000u);
  const uint32x4_t half = vreinterpretq_u32_f32(vdupq_n_f32(0.5f));
  for (int b = 0; b < full; ++b) {
    const float* xb = x + (size_t)b * ML_QK;
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(xb + 4 * k);
      m = vmaxnmq_f32(m, vabsq_f32(v[k]));
    }
    const float amax = vmaxnmvq_f32(m);
    int8_t* qb = q + (size_t)b * ML_QK;
    if (!(amax >= ML_QUANT_TINY)) {
      vst1q_s8(qb, vdupq_n_s8(0));
      vst1q_s8(qb + 16, vdupq_n_s8(0));
      d[b] = 0.0f;
      continue;
    }
    const float id = 127.0f / amax;
    d[b] = amax / 127.0f;
    int16x4_t h[8];
    for (int k = 0; k < 8; ++k) {
      const float32x4_t r = vmulq_n_f32(v[k], id);
      const float32x4_t c = vreinterpretq_f32_u32(vorrq_u32(vandq_u32(vreinterpretq_u32_f32(v[k]), sign), half));
      int32x4_t t = vcvtq_s32_f32(vaddq_f32(r, c));
      t = vminq_s32(vmaxq_s32(t, vdupq_n_s32(-127)), vdupq_n_s32(127));
      h[k] = vmovn_s32(t);
    }
    vst1q_s8(qb, vcombine_s8(vmovn_s16(vcombine_s16(h[0], h[1])), vmovn_s16(vcombine_s16(h[2], h[3]))));
    vst1q_s8(qb + 16, vcombine_s8(vmovn_s16(vcombine_s16(h[4], h[5])), vmovn_s16(vcombine_s16(h[6], h[7]))));
  }
  if (full * ML_QK < n) {
    const int start = full * ML_QK;
    ml::k::scalar::quantize_q8(q + start, d + full, x + start, n - start);
  }
}
#endif
