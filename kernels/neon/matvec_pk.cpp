// NEON packed kernels (ARMv7 and AArch64, no dot product instruction): kernels/arm_pack.h over the
// vmull_s8 + vpadalq_s16 step (spec/architecture.txt: "NEON without a dot product uses
// vmull_s8/vpadalq_s16 on the same 4-row groups"). Layout: ml::k::neon::pack (G = 4, Q8 signed,
// Q4 bytes XORed with 0x88, so each nibble reads as the signed 4-bit value q - 8: two arithmetic
// shifts give it exactly). Matmul tiles of 4 tokens (16 NEON registers on ARMv7).
#include "kernels/arm_pack.h"
#include "kernels/neon/neon.h"

namespace {

static_assert(ml::k::neon::pack.g == 4 && ml::k::neon::pack.q8_offset == 0 && ml::k::neon::pack.q4_xor == 0x88 &&
                  !ml::k::neon::pack.d16,
              "kernels/neon/matvec_pk.cpp reads G = 4, signed Q8, Q4 ^ 0x88, f32 scales");

struct VmullStep {
  // lo lanes: row 0 (two pair sums), row 1; hi: rows 2, 3.
  struct Acc {
    int32x4_t lo, hi;
  };
  static Acc zero() { return {vdupq_n_s32(0), vdupq_n_s32(0)}; }
  template <int L>
  static void step(Acc& a, int8x16_t w, int8x16_t x) {
    const int8x16_t xb = ml_arm_dup_lane_s8<L>(x);
    a.lo = vpadalq_s16(a.lo, vmull_s8(vget_low_s8(w), vget_low_s8(xb)));
    a.hi = vpadalq_s16(a.hi, vmull_s8(vget_high_s8(w), vget_high_s8(xb)));
  }
  static int32x4_t finish(Acc a) { return ml_arm_pairsum_s32(a.lo, a.hi); }
  static void q4(uint8x16_t b, int8x16_t* lo, int8x16_t* hi) {
    const int8x16_t w = vreinterpretq_s8_u8(b);
    *lo = vshrq_n_s8(vshlq_n_s8(w, 4), 4);  // low nibble ^ 8, sign-extended: q - 8
    *hi = vshrq_n_s8(w, 4);
  }
  template <bool Q4>
  static float32x4_t to_float(int32x4_t v) { return vcvtq_f32_s32(v); }
};

}  // namespace

extern "C" void ml_k_matvec_q8_pk_neon(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  ml_arm::pk_tile<VmullStep, 1, false>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matvec_q4_pk_neon(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  ml_arm::pk_tile<VmullStep, 1, true>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matmul_q8_pk_neon(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  ml_arm::pk_matmul<VmullStep, 4, false>(Y, ldy, W, X, r0, r1);
}

extern "C" void ml_k_matmul_q4_pk_neon(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  ml_arm::pk_matmul<VmullStep, 4, true>(Y, ldy, W, X, r0, r1);
}
