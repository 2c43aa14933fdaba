// The packed Q8/Q4 matvec and matmul of the ARM ISAs (core/pack.h layout: G = 4 rows per group, Q8
// signed, Q4 bytes XORed with 0x88, f32 scales), written once over a step policy P. Include from one
// .cpp per ISA, compiled with that ISA's flags.
//
// A block of a group is 8 vectors of 16 bytes, each holding 4 bytes of each of the 4 rows (one row
// per 32-bit lane): Q8 steps 0..7 directly; Q4's 4 steps unpacked into their low nibbles (values
// 4s..4s+3) and high nibbles (16 + 4s..), in the same order. Vector k pairs with lane k % 4 of the
// activation vector k / 4 (values 0..15, 16..31), so Q8 and Q4 share the inner loop.
//
// P provides:
//   Acc, zero(), step<L>(Acc&, int8x16_t w, int8x16_t x)  acc lane i += row i's 4 products with lane L of x
//   finish(Acc) -> int32x4_t                              lane i = row i's block sum (times P::q4_scale for Q4)
//   q4(uint8x16_t, int8x16_t* lo, int8x16_t* hi)          one Q4 step's bytes -> low / high nibble operands
//   to_float<Q4>(int32x4_t) -> float32x4_t                the exact block sums as floats
//
// Rounding: per row, acc += (float)isum * (d_w * d_x), block by block, as the scalar kernel does,
// so every row equals ml_k_matvec_q*_scalar bit for bit; the matmul runs the same code per token of
// a tile of up to kMaxTile tokens (each block's weights loaded once for all of them), so each column
// equals the packed matvec bit for bit.
#pragma once
#include <cstddef>
#include <cstring>

#include "kernels/arm_common.h"
#include "kernels/ops.h"

namespace ml_arm {
namespace {  // each ISA's .cpp instantiates its own copies, compiled with its own flags

constexpr int kG = 4;

template <class P, bool Q4>
inline void load_group_block(int8x16_t w[8], const uint8_t* wb) {
  if constexpr (Q4) {
    for (int s = 0; s < 4; ++s) P::q4(vld1q_u8(wb + 16 * s), &w[s], &w[s + 4]);
  } else {
    for (int k = 0; k < 8; ++k) w[k] = vld1q_s8(reinterpret_cast<const int8_t*>(wb) + 16 * k);
  }
}

template <class P>
inline int32x4_t block_dot(const int8x16_t w[8], int8x16_t x0, int8x16_t x1) {
  typename P::Acc a = P::zero();
  P::template step<0>(a, w[0], x0);
  P::template step<1>(a, w[1], x0);
  P::template step<2>(a, w[2], x0);
  P::template step<3>(a, w[3], x0);
  P::template step<0>(a, w[4], x1);
  P::template step<1>(a, w[5], x1);
  P::template step<2>(a, w[6], x1);
  P::template step<3>(a, w[7], x1);
  return P::finish(a);
}

// T tokens (quants xq + t * n, scales xd + t * n / 32) into Y + t * ldy, rows [r0, r1).
template <class P, int T, bool Q4>
inline void pk_tile(float* Y, size_t ldy, const ml_qtensor* W, const int8_t* xq, const float* xd, int n, int r0,
                    int r1) {
  if (r1 <= r0) return;
  const int nb = W->cols / ML_QK;
  const size_t block_bytes = Q4 ? 64 : 128;
  const uint8_t* pq = static_cast<const uint8_t*>(W->pq);
  const float* pd = static_cast<const float*>(W->pd);
  const int g0 = r0 / kG, g1 = (r1 + kG - 1) / kG;
  for (int g = g0; g < g1; ++g) {
    float32x4_t acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = vdupq_n_f32(0.0f);
    const uint8_t* wg = pq + (size_t)g * nb * block_bytes;
    const float* dg = pd + (size_t)g * nb * kG;
    for (int b = 0; b < nb; ++b) {
      int8x16_t w[8];
      load_group_block<P, Q4>(w, wg + (size_t)b * block_bytes);
      const float32x4_t dw = vld1q_f32(dg + (size_t)b * kG);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* xb = xq + (size_t)t * n + (size_t)b * ML_QK;
        const int32x4_t isum = block_dot<P>(w, vld1q_s8(xb), vld1q_s8(xb + 16));
        const float dx = xd[(size_t)t * (n / ML_QK) + b];
        acc[t] = vaddq_f32(acc[t], vmulq_f32(P::template to_float<Q4>(isum), vmulq_n_f32(dw, dx)));
      }
    }
    const int r = g * kG;
    for (int t = 0; t < T; ++t) {
      float* dst = Y + (size_t)t * ldy + r;
      if (r + kG <= r1) {
        vst1q_f32(dst, acc[t]);
      } else {  // a partial last group: rows >= r1 are never written
        float tmp[kG];
        vst1q_f32(tmp, acc[t]);
        for (int i = 0; i < r1 - r; ++i) dst[i] = tmp[i];
      }
    }
  }
}

// Tiles of kMaxTile tokens, then one tile of the rest (the count is a constant in every tile, so the
// loops over tokens unroll and the accumulators stay in registers).
template <class P, int kMaxTile, bool Q4>
inline void pk_matmul(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  const int n = X->n, nt = X->n_tokens;
  const size_t ld = (size_t)ldy;
  int t = 0;
  for (; t + kMaxTile <= nt; t += kMaxTile)
    pk_tile<P, kMaxTile, Q4>(Y + t * ld, ld, W, X->q + (size_t)t * n, X->d + (size_t)t * (n / ML_QK), n, r0, r1);
  float* y = Y + t * ld;
  const int8_t* q = X->q + (size_t)t * n;
  const float* d = X->d + (size_t)t * (n / ML_QK);
  switch (nt - t) {
    case 7: if constexpr (kMaxTile > 7) pk_tile<P, 7, Q4>(y, ld, W, q, d, n, r0, r1); break;
    case 6: if constexpr (kMaxTile > 6) pk_tile<P, 6, Q4>(y, ld, W, q, d, n, r0, r1); break;
    case 5: if constexpr (kMaxTile > 5) pk_tile<P, 5, Q4>(y, ld, W, q, d, n, r0, r1); break;
    case 4: if constexpr (kMaxTile > 4) pk_tile<P, 4, Q4>(y, ld, W, q, d, n, r0, r1); break;
    case 3: pk_tile<P, 3, Q4>(y, ld, W, q, d, n, r0, r1); break;
    case 2: pk_tile<P, 2, Q4>(y, ld, W, q, d, n, r0, r1); break;
    case 1: pk_tile<P, 1, Q4>(y, ld, W, q, d, n, r0, r1); break;
    default: break;
  }
}

}  // namespace
}  // namespace ml_arm
