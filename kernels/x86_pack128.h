// The packed matvec/matmul of the 128-bit x86 ISAs (sse2, sse41), written once over a traits type
// V that supplies the activation expansion and the integer step. Include it only from a
// kernels/<isa>/matvec_pk.cpp, which defines V and the four extern "C" functions
// (ML_X86_PACK128_ENTRIES below). Layout: core/pack.h with the ISA's ml_pack_params (G = 4, one
// 32-bit lane per row, so a 4-byte step of the group's 4 rows is one 16-byte load; Q4 raw
// nibbles; f32 scales). Only SSE2 intrinsics here: the ISA's own go in V.
//
// Contract (kernels/ops.h): r0 a multiple of 4, any r1 <= rows; rows outside [r0, r1) never
// written; unaligned loads; no allocation, no global state.
//
// Activations are expanded once per call into V::XBlock, one per (token, block), in chunks of
// V::kBufTokBlocks / T blocks (the stack buffer). V supplies:
//   XBlock                                 a block of one token, expanded; members off (the
//                                          block's offset * sum(x), int32) and dx (its scale)
//   expand(xb, q, d, b0, nblk, offset)     blocks [b0, b0 + nblk) of one token into xb
//   kQ8Offset                              128 when Q8 weights are stored + 128, else 0
//   Q8, Q4 with prep(w) / step(s, wp, x, k) / finish(s, x): step k of block x, s += w . x (Q4
//                                          step k: low nibbles against values 4k.., high ones
//                                          against 16 + 4k..)
// prep is the per-step weight work shared by every token of a tile; finish turns the step sums
// into the block's exact int32 sum (subtracting offset * sum(x) where the weights read as
// unsigned), so it equals scalar's isum.
//
// Rounding: per block and row, acc += (float)isum * (d_w * d_x), separate multiply and add, in
// block order: the scalar kernel's arithmetic, so every row matches ml_k_matvec_q*_scalar bit for
// bit. The matmul runs the same tile with 1..4 tokens per pass (a template per count), each weight
// step loaded once for every token and the same float operations per token: each column equals
// the packed matvec bit for bit. A group's float accumulators live in y between chunks (a float
// store and reload is exact), those of a partial last group in a local array, so rows >= r1 are
// never written.
#pragma once
#include <emmintrin.h>

#include <type_traits>

#include "core/pack.h"
#include "kernels/ops.h"

namespace ml::k::x86pk128 {

inline constexpr int kG = 4;     // rows per group
inline constexpr int kTile = 4;  // tokens per matmul tile

// The steps of one block: fully unrolled for one token (few live registers), rolled for a tile of
// several, where unrolling lets GCC reassociate the integer sums into trees that spill.
#define ML_PK_STEPS(n, step)                                           \
  if constexpr (T == 1) {                                              \
    _Pragma("GCC unroll 8") for (int k_ = 0; k_ < (n); ++k_) step(k_); \
  } else {                                                             \
    _Pragma("GCC unroll 1") for (int k_ = 0; k_ < (n); ++k_) step(k_); \
  }

// nblk blocks of one group (quants wq, scales wd) for T tokens: acc[t] lane i += row i's terms.
// The loops over tokens are unrolled (T is a constant), so the accumulators stay in registers.
template <class V, int T, bool Q4>
inline void group_blocks(__m128 acc[T], const uint8_t* wq, const float* wd, const typename V::XBlock* const xb[T],
                         int nblk) {
  using S = std::conditional_t<Q4, typename V::Q4, typename V::Q8>;
  for (int b = 0; b < nblk; ++b) {
    __m128i s[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) s[t] = _mm_setzero_si128();
    const uint8_t* wb = wq + (size_t)b * (Q4 ? 64 : 128);
    auto step = [&](int k) {
      const auto wp = S::prep(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 16 * k)));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) s[t] = S::step(s[t], wp, xb[t][b], k);
    };
    ML_PK_STEPS(Q4 ? 4 : 8, step);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) s[t] = S::finish(s[t], xb[t][b]);
    const __m128 dw = _mm_loadu_ps(wd + (size_t)b * kG);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      acc[t] = _mm_add_ps(acc[t], _mm_mul_ps(_mm_cvtepi32_ps(s[t]), _mm_mul_ps(dw, xb[t][b].dx)));
  }
}

#undef ML_PK_STEPS

// T tokens (quants xq + t * n, scales xd + t * n / 32) into Y + t * ldy, rows [r0, r1).
template <class V, int T, bool Q4>
void tile(float* Y, size_t ldy, const ml_qtensor* W, const int8_t* xq, const float* xd, int n, int r0, int r1) {
  using XBlock = typename V::XBlock;
  if (r1 <= r0) return;
  const int nb = W->cols / ML_QK;
  const size_t block_bytes = Q4 ? 64 : 128;  // one block of one group
  const uint8_t* pq = static_cast<const uint8_t*>(W->pq);
  const float* pd = static_cast<const float*>(W->pd);
  constexpr int chunk = V::kBufTokBlocks / T;
  XBlock buf[V::kBufTokBlocks];
  float tail[T][kG];  // accumulators of a partial last group (rows r1.. of it must not be written)
  const int g0 = r0 / kG, g_full = r1 / kG, g1 = (r1 + kG - 1) / kG;
  const XBlock* xb[T];
  int c0 = 0;
  do {
    const int nblk = nb - c0 < chunk ? nb - c0 : chunk;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      V::expand(buf + t * chunk, xq + (size_t)t * n, xd + (size_t)t * (n / ML_QK), c0, nblk, Q4 ? 8 : V::kQ8Offset);
      xb[t] = buf + t * chunk;
    }
    for (int g = g0; g < g1; ++g) {
      float* dst[T];
      __m128 acc[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        dst[t] = g < g_full ? Y + (size_t)t * ldy + (size_t)g * kG : tail[t];
        acc[t] = c0 == 0 ? _mm_setzero_ps() : _mm_loadu_ps(dst[t]);
      }
      group_blocks<V, T, Q4>(acc, pq + ((size_t)g * nb + c0) * block_bytes, pd + ((size_t)g * nb + c0) * kG, xb, nblk);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) _mm_storeu_ps(dst[t], acc[t]);
    }
    c0 += chunk;
  } while (c0 < nb);
  if (g1 > g_full)
    for (int t = 0; t < T; ++t)
      for (int r = g_full * kG; r < r1; ++r) Y[(size_t)t * ldy + r] = tail[t][r - g_full * kG];
}

// Tiles of 4 tokens, then one tile of the 1..3 left.
template <class V, bool Q4>
void matmul(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  const int n = X->n, nt = X->n_tokens;
  const size_t ld = (size_t)ldy;
  int t = 0;
  for (; t + kTile <= nt; t += kTile)
    tile<V, kTile, Q4>(Y + t * ld, ld, W, X->q + (size_t)t * n, X->d + (size_t)t * (n / ML_QK), n, r0, r1);
  const int8_t* q = X->q + (size_t)t * n;
  const float* d = X->d + (size_t)t * (n / ML_QK);
  switch (nt - t) {
    case 3: tile<V, 3, Q4>(Y + t * ld, ld, W, q, d, n, r0, r1); break;
    case 2: tile<V, 2, Q4>(Y + t * ld, ld, W, q, d, n, r0, r1); break;
    case 1: tile<V, 1, Q4>(Y + t * ld, ld, W, q, d, n, r0, r1); break;
    default: break;
  }
}

}  // namespace ml::k::x86pk128

// The four extern "C" entry points of ISA `isa` over traits V.
#define ML_X86_PACK128_ENTRIES(V, isa)                                                                        \
  extern "C" void ml_k_matvec_q8_pk_##isa(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {  \
    ml::k::x86pk128::tile<V, 1, false>(y, 0, W, x->q, x->d, x->n, r0, r1);                                    \
  }                                                                                                           \
  extern "C" void ml_k_matvec_q4_pk_##isa(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {  \
    ml::k::x86pk128::tile<V, 1, true>(y, 0, W, x->q, x->d, x->n, r0, r1);                                     \
  }                                                                                                           \
  extern "C" void ml_k_matmul_q8_pk_##isa(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, \
                                          int r1) {                                                           \
    ml::k::x86pk128::matmul<V, false>(Y, ldy, W, X, r0, r1);                                                  \
  }                                                                                                           \
  extern "C" void ml_k_matmul_q4_pk_##isa(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, \
                                          int r1) {                                                           \
    ml::k::x86pk128::matmul<V, true>(Y, ldy, W, X, r0, r1);                                                   \
  }
