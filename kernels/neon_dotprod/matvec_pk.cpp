// NEON dotprod packed kernels: kernels/arm_pack.h over one vdotq_laneq_s32 per step, which reads the
// step's 4 activation bytes from a lane of the block's activation vector (no broadcast). Layout:
// ml::k::neon_dotprod::pack (G = 4, Q8 signed, Q4 bytes XORed with 0x88). Q4: shifting a byte left
// by 4 (low nibble) or masking it with 0xF0 (high nibble) gives 16 (q - 8) as a signed byte, so the
// block sum comes out times 16 and vcvtq_n_f32_s32(., 4) divides it back exactly (no per-block sum
// of the activations to subtract). Matmul tiles of 8 tokens (spec/kernels.txt).
#include "kernels/arm_pack.h"
#include "kernels/neon_dotprod/neon_dotprod.h"

namespace {

static_assert(ml::k::neon_dotprod::pack.g == 4 && ml::k::neon_dotprod::pack.q8_offset == 0 &&
                  ml::k::neon_dotprod::pack.q4_xor == 0x88 && !ml::k::neon_dotprod::pack.d16,
              "kernels/neon_dotprod/matvec_pk.cpp reads G = 4, signed Q8, Q4 ^ 0x88, f32 scales");

struct SdotStep {
  using Acc = int32x4_t;
  static Acc zero() { return vdupq_n_s32(0); }
  template <int L>
  static void step(Acc& a, int8x16_t w, int8x16_t x) { a = vdotq_laneq_s32(a, w, x, L); }
  static int32x4_t finish(Acc a) { return a; }
  static void q4(uint8x16_t b, int8x16_t* lo, int8x16_t* hi) {
    *lo = vreinterpretq_s8_u8(vshlq_n_u8(b, 4));
    *hi = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0xF0)));
  }
  template <bool Q4>
  static float32x4_t to_float(int32x4_t v) {
    if constexpr (Q4) return vcvtq_n_f32_s32(v, 4);
    else return vcvtq_f32_s32(v);
  }
};

}  // namespace

extern "C" void ml_k_matvec_q8_pk_neon_dotprod(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  ml_arm::pk_tile<SdotStep, 1, false>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matvec_q4_pk_neon_dotprod(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  ml_arm::pk_tile<SdotStep, 1, true>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matmul_q8_pk_neon_dotprod(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,
                                               int r1) {
  ml_arm::pk_matmul<SdotStep, 8, false>(Y, ldy, W, X, r0, r1);
}

extern "C" void ml_k_matmul_q4_pk_neon_dotprod(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,
                                               int r1) {
  ml_arm::pk_matmul<SdotStep, 8, true>(Y, ldy, W, X, r0, r1);
}
