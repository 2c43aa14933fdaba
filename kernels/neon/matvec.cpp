// NEON row-major Q8/Q4 matvecs (ARMv7 and AArch64): the 16-byte integer dot is vmull_s8 + vpadalq_s16
// (spec/kernels.txt); the loop and the rounding rule are kernels/arm_matvec.h's.
#include "kernels/arm_matvec.h"
#include "kernels/neon/neon.h"

namespace {
struct VmullDot {
  static int32x4_t dot(int32x4_t acc, int8x16_t w, int8x16_t x) { return ml_arm_dot16_vmull(acc, w, x); }
};
}  // namespace

extern "C" void ml_k_matvec_q8_neon(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  ml_arm::matvec_rows<VmullDot, false>(y, W, x, r0, r1);
}

extern "C" void ml_k_matvec_q4_neon(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  ml_arm::matvec_rows<VmullDot, true>(y, W, x, r0, r1);
}

// Q8 KV cache scores: s[j] = (float)(int32 dot) * (qd * Kd[j]), as the scalar kernel.
extern "C" void ml_k_dot_q8_neon(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd,
                                 size_t k_stride, size_t d_stride, int n_rows, int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const int8_t* k = K + (size_t)j * k_stride;
    int32x4_t acc = vdupq_n_s32(0);
    int i = 0;
    for (; i + 16 <= head_dim; i += 16) acc = ml_arm_dot16_vmull(acc, vld1q_s8(k + i), vld1q_s8(q + i));
    int32_t isum = ml_arm_hsum_s32(acc);
    for (; i < head_dim; ++i) isum += (int32_t)q[i] * (int32_t)k[i];
    s[j] = (float)isum * (qd * Kd[(size_t)j * d_stride]);
  }
}
