// SSE2 packed kernels: matvec and matmul of Q8/Q4 weights in the row-interleaved layout of
// core/pack.h (G = 4, Q8 stored with a +128 offset, Q4 nibbles raw 0..15, f32 scales) times Q8_0
// activations. Contract (kernels/ops.h): r0 a multiple of 4, any r1 <= rows; y[r] for r in
// [r0, r1) only; W->pq/W->pd packed with ml::k::sse2::pack (pd float32); unaligned loads; no
// allocation, no global state.
//
// Inner loop (spec/architecture.txt, "Weight packing", SSE2): a 4-byte step of 4 rows is one
// 16-byte load; each 16-bit lane holds two bytes of one row. Q8 splits it into the even byte
// (w & 0xFF) and the odd byte (w >> 8); Q4 into four nibbles (even/odd byte, low/high nibble). Each
// part goes through pmaddwd against activations expanded beforehand into matching broadcast int16
// pairs, so one pmaddwd yields one partial sum per row and the loop has no shuffles. The weights
// read as unsigned (q + 128, or the raw nibble), so offset x sum(x) (128 or 8) is subtracted per
// block in int32: the block sum is exact.
//
// Activations are expanded once per call, in chunks of columns that fit an 18 KB stack buffer
// (2048 columns for one token, 512 for a tile of 4; larger n takes several chunks). A group's
// float accumulators live in y between chunks (a float store and reload is exact), those of a
// partial last group in a local array, so rows >= r1 are never written. One block's steps are
// unrolled for one token and rolled for a tile (unrolled, GCC turns the integer sums into trees
// that spill).
//
// Rounding: per block and row, acc += (float)isum * (d_w * d_x), in block order: the scalar
// kernel's arithmetic, so every row matches ml_k_matvec_q*_scalar bit for bit. The matmul runs the
// same tile code with 1..4 tokens per pass, each weight step loaded once for every token of the
// tile, and the same float operations per token: each column equals the packed matvec bit for bit.
#include <emmintrin.h>

#include "kernels/sse2/sse2.h"
#include "kernels/x86_common.h"

namespace {

constexpr int kG = 4;              // rows per group (ml::k::sse2::pack.g)
constexpr int kBufTokBlocks = 64;  // (token, block) pairs of the expansion buffer: 64 x 288 B = 18 KB
static_assert(ml::k::sse2::pack.g == kG && ml::k::sse2::pack.q8_offset == 128 && ml::k::sse2::pack.q4_xor == 0 &&
                  !ml::k::sse2::pack.d16,
              "kernels/sse2/matvec_pk.cpp reads G = 4, Q8 + 128, raw Q4, f32 scales");

// One 32-block of one token, expanded. Quad k holds values 4k..4k+3 (a, b, c, d):
// e[k] = (a, c) and o[k] = (b, d) as int16 pairs, broadcast to the 4 lanes (one lane per row).
// A Q8 step s uses quad s; a Q4 step s uses quad s (low nibbles) and quad s + 4 (high nibbles).
struct XBlock {
  __m128i e[8], o[8];
  __m128i off;  // offset * sum of the block's 32 quants (exact int32), broadcast
  __m128 dx;    // the block's activation scale, broadcast
};

inline int32_t pair16(int8_t lo, int8_t hi) {
  return (int32_t)((uint32_t)(uint16_t)(int16_t)lo | ((uint32_t)(uint16_t)(int16_t)hi << 16));
}

// Blocks [b0, b0 + nblk) of one token (quants q, scales d) into xb.
inline void expand(XBlock* xb, const int8_t* q, const float* d, int b0, int nblk, int offset) {
  for (int b = 0; b < nblk; ++b) {
    const int8_t* p = q + (size_t)(b0 + b) * ML_QK;
    int32_t sum = 0;
    for (int k = 0; k < 8; ++k) {
      const int8_t* v = p + 4 * k;
      xb[b].e[k] = _mm_set1_epi32(pair16(v[0], v[2]));
      xb[b].o[k] = _mm_set1_epi32(pair16(v[1], v[3]));
      sum += (int32_t)v[0] + v[1] + v[2] + v[3];
    }
    xb[b].off = _mm_set1_epi32(offset * sum);
    xb[b].dx = _mm_set1_ps(d[b0 + b]);
  }
}

// The steps of one block: fully unrolled for one token (few live registers), rolled for a tile of
// several, where unrolling lets GCC reassociate the integer sums into trees that spill.
#define ML_PK_STEPS(n, step)                      \
  if constexpr (T == 1) {                         \
    _Pragma("GCC unroll 8") for (int k_ = 0; k_ < (n); ++k_) step(k_); \
  } else {                                        \
    _Pragma("GCC unroll 1") for (int k_ = 0; k_ < (n); ++k_) step(k_); \
  }

// nblk blocks of one group (quants wq, scales wd) for T tokens: acc[t] lane i += row i's terms.
// The loops over tokens are unrolled (T is a constant), so the accumulators stay in registers.
template <int T, bool Q4>
inline void group_blocks(__m128 acc[T], const uint8_t* wq, const float* wd, const XBlock* const xb[T], int nblk) {
  for (int b = 0; b < nblk; ++b) {
    __m128i s[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) s[t] = _mm_setzero_si128();
    if constexpr (Q4) {
      const __m128i m = _mm_set1_epi16(0x000F);
      const uint8_t* wb = wq + (size_t)b * 64;
      auto step = [&](int k) {
        const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 16 * k));
        const __m128i el = _mm_and_si128(w, m), ol = _mm_and_si128(_mm_srli_epi16(w, 8), m);
        const __m128i eh = _mm_and_si128(_mm_srli_epi16(w, 4), m), oh = _mm_srli_epi16(w, 12);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const XBlock& x = xb[t][b];
          const __m128i lo = _mm_add_epi32(_mm_madd_epi16(el, x.e[k]), _mm_madd_epi16(ol, x.o[k]));
          const __m128i hi = _mm_add_epi32(_mm_madd_epi16(eh, x.e[k + 4]), _mm_madd_epi16(oh, x.o[k + 4]));
          s[t] = _mm_add_epi32(s[t], _mm_add_epi32(lo, hi));
        }
      };
      ML_PK_STEPS(4, step);
    } else {
      const __m128i m = _mm_set1_epi16(0x00FF);
      const uint8_t* wb = wq + (size_t)b * 128;
      auto step = [&](int k) {
        const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 16 * k));
        const __m128i e = _mm_and_si128(w, m), o = _mm_srli_epi16(w, 8);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const XBlock& x = xb[t][b];
          s[t] = _mm_add_epi32(s[t], _mm_add_epi32(_mm_madd_epi16(e, x.e[k]), _mm_madd_epi16(o, x.o[k])));
        }
      };
      ML_PK_STEPS(8, step);
    }
    const __m128 dw = _mm_loadu_ps(wd + (size_t)b * kG);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m128i isum = _mm_sub_epi32(s[t], xb[t][b].off);
      acc[t] = _mm_add_ps(acc[t], _mm_mul_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(dw, xb[t][b].dx)));
    }
  }
}

#undef ML_PK_STEPS

// T tokens (quants xq + t * n, scales xd + t * n / 32) into Y + t * ldy, rows [r0, r1).
template <int T, bool Q4>
void tile(float* Y, size_t ldy, const ml_qtensor* W, const int8_t* xq, const float* xd, int n, int r0, int r1) {
  if (r1 <= r0) return;
  const int nb = W->cols / ML_QK;
  const size_t block_bytes = Q4 ? 64 : 128;  // one block of one group
  const uint8_t* pq = static_cast<const uint8_t*>(W->pq);
  const float* pd = static_cast<const float*>(W->pd);
  constexpr int chunk = kBufTokBlocks / T;
  XBlock buf[kBufTokBlocks];
  float tail[T][kG];  // accumulators of a partial last group (rows r1.. of it must not be written)
  const int g0 = r0 / kG, g_full = r1 / kG, g1 = (r1 + kG - 1) / kG;
  const XBlock* xb[T];
  int c0 = 0;
  do {
    const int nblk = nb - c0 < chunk ? nb - c0 : chunk;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      expand(buf + t * chunk, xq + (size_t)t * n, xd + (size_t)t * (n / ML_QK), c0, nblk, Q4 ? 8 : 128);
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
      group_blocks<T, Q4>(acc, pq + ((size_t)g * nb + c0) * block_bytes, pd + ((size_t)g * nb + c0) * kG, xb, nblk);
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
template <bool Q4>
void matmul(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  const int n = X->n, nt = X->n_tokens;
  const size_t ld = (size_t)ldy;
  int t = 0;
  for (; t + 4 <= nt; t += 4)
    tile<4, Q4>(Y + t * ld, ld, W, X->q + (size_t)t * n, X->d + (size_t)t * (n / ML_QK), n, r0, r1);
  const int8_t* q = X->q + (size_t)t * n;
  const float* d = X->d + (size_t)t * (n / ML_QK);
  switch (nt - t) {
    case 3: tile<3, Q4>(Y + t * ld, ld, W, q, d, n, r0, r1); break;
    case 2: tile<2, Q4>(Y + t * ld, ld, W, q, d, n, r0, r1); break;
    case 1: tile<1, Q4>(Y + t * ld, ld, W, q, d, n, r0, r1); break;
    default: break;
  }
}

}  // namespace

extern "C" void ml_k_matvec_q8_pk_sse2(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  tile<1, false>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matvec_q4_pk_sse2(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  tile<1, true>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matmul_q8_pk_sse2(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  matmul<false>(Y, ldy, W, X, r0, r1);
}

extern "C" void ml_k_matmul_q4_pk_sse2(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  matmul<true>(Y, ldy, W, X, r0, r1);
}
