// NEON i8mm packed matmuls (batched prefill): vmmlaq_s32 (smmla) multiplies 2 rows x 8 bytes by
// 2 tokens x 8 bytes into a 2x2 int32 tile, on neon_dotprod's packed layout (G = 4, Q8 signed,
// Q4 ^ 0x88; spec/kernels.txt). Decode (one token) stays on neon_dotprod's packed matvec.
//
// A block's 8 step vectors w[k] (values 4k..4k+3 of the 4 rows, Q4 unpacked to 16 (q - 8) as on
// dotprod) are zipped in pairs: zip1_s32(w[2c], w[2c+1]) holds rows 0 and 1, 8 values each, and
// zip2 rows 2 and 3. A token pair's operand is the two tokens' values 8c..8c+7 (zip of 64-bit lanes).
// After the block, uzp1/uzp2 of the two 2x2 tiles give each token's [row 0..3] block sums, exact.
//
// Rounding: per token and row, acc += (float)isum * (d_w * d_x), block by block: the packed
// matvec's operations, so each column equals ml_k_matvec_q*_pk_neon_dotprod bit for bit. Tiles
// of 8 tokens (4 pairs); an odd last token goes through that matvec.
#include <arm_neon.h>

#include "kernels/neon_i8mm/neon_i8mm.h"

namespace {

constexpr int kG = 4;
static_assert(ml::k::neon_i8mm::pack.g == kG && ml::k::neon_i8mm::pack.q8_offset == 0 &&
                  ml::k::neon_i8mm::pack.q4_xor == 0x88 && !ml::k::neon_i8mm::pack.d16,
              "kernels/neon_i8mm/matmul_pk.cpp reads neon_dotprod's layout");

// One block of a group as 8 operand vectors: a[2c] = rows 0,1 and a[2c + 1] = rows 2,3 of values 8c..8c+7.
template <bool Q4>
inline void load_block(int8x16_t a[8], const uint8_t* wb) {
  int8x16_t w[8];
  if constexpr (Q4) {
    for (int s = 0; s < 4; ++s) {
      const uint8x16_t b = vld1q_u8(wb + 16 * s);
      w[s] = vreinterpretq_s8_u8(vshlq_n_u8(b, 4));
      w[s + 4] = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0xF0)));
    }
  } else {
    for (int k = 0; k < 8; ++k) w[k] = vld1q_s8(reinterpret_cast<const int8_t*>(wb) + 16 * k);
  }
  for (int c = 0; c < 4; ++c) {
    const int32x4_t p = vreinterpretq_s32_s8(w[2 * c]), q = vreinterpretq_s32_s8(w[2 * c + 1]);
    a[2 * c] = vreinterpretq_s8_s32(vzip1q_s32(p, q));
    a[2 * c + 1] = vreinterpretq_s8_s32(vzip2q_s32(p, q));
  }
}

template <bool Q4>
inline float32x4_t to_float(int32x4_t v) {
  if constexpr (Q4) return vcvtq_n_f32_s32(v, 4);
  else return vcvtq_f32_s32(v);
}

// P token pairs (2P tokens: quants xq + t * n, scales xd + t * n / 32) into Y + t * ldy, rows [r0, r1).
template <int P, bool Q4>
void tile(float* Y, size_t ldy, const ml_qtensor* W, const int8_t* xq, const float* xd, int n, int r0, int r1) {
  constexpr int T = 2 * P;
  const int nb = W->cols / ML_QK;
  const size_t block_bytes = Q4 ? 64 : 128;
  const uint8_t* pq = static_cast<const uint8_t*>(W->pq);
  const float* pd = static_cast<const float*>(W->pd);
  const int g0 = r0 / kG, g1 = (r1 + kG - 1) / kG;
  for (int g = g0; g < g1; ++g) {
    float32x4_t acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = vdupq_n_f32(0.0f);
    for (int b = 0; b < nb; ++b) {
      int8x16_t a[8];
      load_block<Q4>(a, pq + ((size_t)g * nb + b) * block_bytes);
      const float32x4_t dw = vld1q_f32(pd + ((size_t)g * nb + b) * kG);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const int8_t* x0 = xq + (size_t)(2 * p) * n + (size_t)b * ML_QK;
        const int8_t* x1 = x0 + n;
        int32x4_t s01 = vdupq_n_s32(0), s23 = vdupq_n_s32(0);
        for (int h = 0; h < 2; ++h) {  // values 0..15, then 16..31
          const int64x2_t u = vreinterpretq_s64_s8(vld1q_s8(x0 + 16 * h));
          const int64x2_t v = vreinterpretq_s64_s8(vld1q_s8(x1 + 16 * h));
          const int8x16_t lo = vreinterpretq_s8_s64(vzip1q_s64(u, v)), hi = vreinterpretq_s8_s64(vzip2q_s64(u, v));
          s01 = vmmlaq_s32(s01, a[4 * h], lo);
          s23 = vmmlaq_s32(s23, a[4 * h + 1], lo);
          s01 = vmmlaq_s32(s01, a[4 * h + 2], hi);
          s23 = vmmlaq_s32(s23, a[4 * h + 3], hi);
        }
        const int32x4_t i0 = vuzp1q_s32(s01, s23), i1 = vuzp2q_s32(s01, s23);
        const float d0 = xd[(size_t)(2 * p) * (n / ML_QK) + b], d1 = xd[(size_t)(2 * p + 1) * (n / ML_QK) + b];
        acc[2 * p] = vaddq_f32(acc[2 * p], vmulq_f32(to_float<Q4>(i0), vmulq_n_f32(dw, d0)));
        acc[2 * p + 1] = vaddq_f32(acc[2 * p + 1], vmulq_f32(to_float<Q4>(i1), vmulq_n_f32(dw, d1)));
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

template <bool Q4>
void matmul(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  if (r1 <= r0) return;
  const int n = X->n, nt = X->n_tokens;
  const size_t ld = (size_t)ldy;
  auto at = [&](int t, int pairs) {
    float* y = Y + t * ld;
    const int8_t* q = X->q + (size_t)t * n;
    const float* d = X->d + (size_t)t * (n / ML_QK);
    switch (pairs) {
      case 4: tile<4, Q4>(y, ld, W, q, d, n, r0, r1); break;
      case 3: tile<3, Q4>(y, ld, W, q, d, n, r0, r1); break;
      case 2: tile<2, Q4>(y, ld, W, q, d, n, r0, r1); break;
      case 1: tile<1, Q4>(y, ld, W, q, d, n, r0, r1); break;
      default: break;
    }
  };
  int t = 0;
  for (; t + 8 <= nt; t += 8) at(t, 4);
  const int pairs = (nt - t) / 2;
  at(t, pairs);
  t += 2 * pairs;
  if (t < nt) {  // the odd last token
    ml_qact x;
    x.q = X->q + (size_t)t * n;
    x.d = X->d + (size_t)t * (n / ML_QK);
    x.n = n;
    if constexpr (Q4) ml::k::neon_dotprod::matvec_q4_pk(Y + t * ld, W, &x, r0, r1);
    else ml::k::neon_dotprod::matvec_q8_pk(Y + t * ld, W, &x, r0, r1);
  }
}

}  // namespace

extern "C" void ml_k_matmul_q8_pk_neon_i8mm(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,
                                            int r1) {
  matmul<false>(Y, ldy, W, X, r0, r1);
}

extern "C" void ml_k_matmul_q4_pk_neon_i8mm(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,
                                            int r1) {
  matmul<true>(Y, ldy, W, X, r0, r1);
}
