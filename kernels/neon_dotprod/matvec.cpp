// NEON dotprod row-major Q8/Q4 matvecs and the Q8 cache scores: the 16-byte integer dot is vdotq_s32
// (sdot); the loop and rounding rule are kernels/arm_matvec.h's, bit-exact with scalar.
#include "kernels/arm_matvec.h"
#include "kernels/neon_dotprod/neon_dotprod.h"

namespace {
struct SdotDot {
  static int32x4_t dot(int32x4_t acc, int8x16_t w, int8x16_t x) { return vdotq_s32(acc, w, x); }
};
}  // namespace

extern "C" void ml_k_matvec_q8_neon_dotprod(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  ml_arm::matvec_rows<SdotDot, false>(y, W, x, r0, r1);
}

extern "C" void ml_k_matvec_q4_neon_dotprod(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  ml_arm::matvec_rows<SdotDot, true>(y, W, x, r0, r1);
}

extern "C" void ml_k_dot_q8_neon_dotprod(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd,
                                         size_t k_stride, size_t d_stride, int n_rows, int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const int8_t* k = K + (size_t)j * k_stride;
    int32x4_t acc = vdupq_n_s32(0);
    int i = 0;
    for (; i + 16 <= head_dim; i += 16) acc = vdotq_s32(acc, vld1q_s8(k + i), vld1q_s8(q + i));
    int32_t isum = vaddvq_s32(acc);
    for (; i < head_dim; ++i) isum += (int32_t)q[i] * (int32_t)k[i];
    s[j] = (float)isum * (qd * Kd[(size_t)j * d_stride]);
  }
}
