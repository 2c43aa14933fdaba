// Small NEON helper vocabulary shared by the ARM kernels (neon/, neon_dotprod/, neon_i8mm/). Every
// helper is static inline and compiles for ARMv7 NEON (-mfpu=neon) and AArch64; AArch64-only
// instructions sit under __aarch64__ with an ARMv7 equivalent. Integer results are exact, so the
// choice between the two never changes a result.
//
//   ml_arm_hsum_s32        horizontal int32 sum
//   ml_arm_pairsum_s32     [a0+a1, a2+a3, b0+b1, b2+b3] (vpaddq)
//   ml_arm_hsum4_s32       [sum a, sum b, sum c, sum d] of four int32 vectors
//   ml_arm_dup_lane_s8<L>  lane L (4 bytes) of x broadcast to all four 32-bit lanes
//   ml_arm_dot16_vmull     acc lanes += the 16 int8 products of w and x (vmull_s8 + vpadalq_s16)
//   ml_arm_q4_unpack       16 Q4 bytes -> values 0..15 and 16..31 as int8 nibble - 8
#pragma once
#include <arm_neon.h>

#include <cstdint>

static inline int32_t ml_arm_hsum_s32(int32x4_t v) {
#ifdef __aarch64__
  return vaddvq_s32(v);
#else
  const int32x2_t s = vadd_s32(vget_low_s32(v), vget_high_s32(v));
  return vget_lane_s32(vpadd_s32(s, s), 0);
#endif
}

static inline int32x4_t ml_arm_pairsum_s32(int32x4_t a, int32x4_t b) {
#ifdef __aarch64__
  return vpaddq_s32(a, b);
#else
  return vcombine_s32(vpadd_s32(vget_low_s32(a), vget_high_s32(a)), vpadd_s32(vget_low_s32(b), vget_high_s32(b)));
#endif
}

static inline int32x4_t ml_arm_hsum4_s32(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  return ml_arm_pairsum_s32(ml_arm_pairsum_s32(a, b), ml_arm_pairsum_s32(c, d));
}

template <int L>
static inline int8x16_t ml_arm_dup_lane_s8(int8x16_t x) {
#ifdef __aarch64__
  return vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), L));
#else
  const int32x4_t v = vreinterpretq_s32_s8(x);
  return vreinterpretq_s8_s32(L < 2 ? vdupq_lane_s32(vget_low_s32(v), L & 1) : vdupq_lane_s32(vget_high_s32(v), L & 1));
#endif
}

// Products are at most 127 * 127 in int16 and pairs are added into int32: never saturates.
static inline int32x4_t ml_arm_dot16_vmull(int32x4_t acc, int8x16_t w, int8x16_t x) {
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(x)));
  return vpadalq_s16(acc, vmull_s8(vget_high_s8(w), vget_high_s8(x)));
}

// GGUF Q4_0 block (16 bytes): byte j holds value j (low nibble) and value j + 16 (high nibble).
static inline void ml_arm_q4_unpack(uint8x16_t b, int8x16_t* lo, int8x16_t* hi) {
  const int8x16_t eight = vdupq_n_s8(8);
  *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0F))), eight);
  *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), eight);
}
