// The row-major Q8/Q4 matvec of the ARM ISAs, written once over the 16-byte integer dot D (a type
// with `static int32x4_t dot(int32x4_t acc, int8x16_t w, int8x16_t x)`: vmull_s8 + vpadalq_s16 on
// neon, vdotq_s32 on neon_dotprod). Include from one .cpp per ISA, compiled with that ISA's flags.
//
// Four rows per pass share each activation block; their four block sums are reduced together
// (exact int32), then each row does acc += (float)isum * (d_w * d_x), block by block: the scalar
// kernel's float operations in the scalar order, so y[r] equals ml_k_matvec_q*_scalar bit for bit
// (on AArch64; ARMv7 NEON flushes subnormal floats to zero, which real scales never reach).
#pragma once
#include <cstddef>

#include "kernels/arm_common.h"
#include "kernels/ops.h"

namespace ml_arm {
namespace {  // each ISA's .cpp instantiates its own copies, compiled with its own flags

// The row's 32-value block as two int8 vectors (values 0..15, 16..31).
template <bool Q4>
inline void load_row_block(const uint8_t* row, int b, int8x16_t* w0, int8x16_t* w1) {
  if constexpr (Q4) {
    ml_arm_q4_unpack(vld1q_u8(row + (size_t)b * 16), w0, w1);
  } else {
    *w0 = vld1q_s8(reinterpret_cast<const int8_t*>(row) + (size_t)b * 32);
    *w1 = vld1q_s8(reinterpret_cast<const int8_t*>(row) + (size_t)b * 32 + 16);
  }
}

template <class D, bool Q4>
inline void matvec_rows(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  const int nb = W->cols / ML_QK;
  const size_t row_bytes = Q4 ? (size_t)W->cols / 2 : (size_t)W->cols;
  const uint8_t* wq = static_cast<const uint8_t*>(W->q);
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint8_t* rows[4];
    for (int i = 0; i < 4; ++i) rows[i] = wq + (size_t)(r + i) * row_bytes;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int b = 0; b < nb; ++b) {
      const int8x16_t x0 = vld1q_s8(x->q + (size_t)b * 32), x1 = vld1q_s8(x->q + (size_t)b * 32 + 16);
      int32x4_t s[4];
      for (int i = 0; i < 4; ++i) {
        int8x16_t w0, w1;
        load_row_block<Q4>(rows[i], b, &w0, &w1);
        s[i] = D::dot(D::dot(vdupq_n_s32(0), w0, x0), w1, x1);
      }
      const int32x4_t isum = ml_arm_hsum4_s32(s[0], s[1], s[2], s[3]);
      const size_t sb = (size_t)r * nb + b;
      const float dw[4] = {ml_qtensor_scale(W, sb), ml_qtensor_scale(W, sb + nb), ml_qtensor_scale(W, sb + 2 * nb),
                           ml_qtensor_scale(W, sb + 3 * nb)};
      acc = vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(isum), vmulq_n_f32(vld1q_f32(dw), x->d[b])));
    }
    vst1q_f32(y + r, acc);
  }
  for (; r < r1; ++r) {
    const uint8_t* row = wq + (size_t)r * row_bytes;
    float acc = 0.0f;
    for (int b = 0; b < nb; ++b) {
      int8x16_t w0, w1;
      load_row_block<Q4>(row, b, &w0, &w1);
      const int32x4_t s = D::dot(D::dot(vdupq_n_s32(0), w0, vld1q_s8(x->q + (size_t)b * 32)), w1,
                                 vld1q_s8(x->q + (size_t)b * 32 + 16));
      acc += (float)ml_arm_hsum_s32(s) * (ml_qtensor_scale(W, (size_t)r * nb + b) * x->d[b]);
    }
    y[r] = acc;
  }
}

}  // namespace
}  // namespace ml_arm
