// SSE4.1 packed kernels: matvec and matmul of Q8/Q4 weights in the row-interleaved layout of
// core/pack.h (G = 4, Q8 signed, Q4 nibbles raw 0..15, f32 scales) times Q8_0 activations.
// Contract (kernels/ops.h): r0 a multiple of 4, any r1 <= rows; y[r] for r in [r0, r1) only;
// W->pq/W->pd packed with ml::k::sse41::pack (pd float32); unaligned loads; no allocation, no
// global state. Same structure as kernels/sse2/matvec_pk.cpp; only the step's dot differs.
//
// Inner loop (spec/architecture.txt, "Weight packing"): a 4-byte step of 4 rows is one 16-byte
// load, dotted against the step's 4 activation bytes broadcast to every lane (one lane per row).
// Q8: pmaddubsw(|w|, sign(x, w)) = w * x in pairs (|w|, |x| <= 127: pair sums <= 32258, no
// saturation), then pmaddwd(., 1) into int32. Taking the sign of x rather than of w lets the
// matmul compute |w| once per step for every token of the tile. Q4: the raw nibbles (0..15) are
// pmaddubsw's unsigned operand, the activations its signed one; the block's 8 results (4 steps,
// low and high nibbles) are summed in int16 (|sum| <= 8 * 2 * 15 * 127 = 30480), then one
// pmaddwd(., 1), and 8 x sum(x) is subtracted per block in int32: the block sum is exact.
//
// Activations are broadcast once per call, in chunks of columns that fit a 20 KB stack buffer
// (4096 columns for one token, 1024 for a tile of 4; larger n takes several chunks). A group's
// float accumulators live in y between chunks (a float store and reload is exact), those of a
// partial last group in a local array, so rows >= r1 are never written. One block's steps are
// unrolled for one token and rolled for a tile (unrolled, GCC turns the integer sums into trees
// that spill).
//
// Rounding: per block and row, acc += (float)isum * (d_w * d_x), in block order: the scalar
// kernel's arithmetic, so every row matches ml_k_matvec_q*_scalar bit for bit. The matmul runs the
// same tile code with 1..4 tokens per pass, each weight step loaded once for every token of the
// tile, and the same float operations per token: each column equals the packed matvec bit for bit.
#include <smmintrin.h>

#include <cstring>

#include "kernels/sse41/sse41.h"
#include "kernels/x86_common.h"

namespace {

constexpr int kG = 4;              // rows per group (ml::k::sse41::pack.g)
constexpr int kBufTokBlocks = 128;  // (token, block) pairs of the broadcast buffer: 128 x 160 B = 20 KB
static_assert(ml::k::sse41::pack.g == kG && ml::k::sse41::pack.q8_offset == 0 && ml::k::sse41::pack.q4_xor == 0 &&
                  !ml::k::sse41::pack.d16,
              "kernels/sse41/matvec_pk.cpp reads G = 4, signed Q8, raw Q4, f32 scales");

// One 32-block of one token. q[k] = values 4k..4k+3 broadcast to the 4 lanes. A Q8 step s uses
// q[s]; a Q4 step s uses q[s] (low nibbles) and q[s + 4] (high nibbles).
struct XBlock {
  __m128i q[8];
  __m128i off;  // Q4: 8 * sum of the block's 32 quants (exact int32), broadcast; Q8: 0
  __m128 dx;    // the block's activation scale, broadcast
};

// Blocks [b0, b0 + nblk) of one token (quants q, scales d) into xb.
inline void expand(XBlock* xb, const int8_t* q, const float* d, int b0, int nblk, int offset) {
  for (int b = 0; b < nblk; ++b) {
    const int8_t* p = q + (size_t)(b0 + b) * ML_QK;
    int32_t sum = 0;
    for (int k = 0; k < 8; ++k) {
      int32_t v;
      std::memcpy(&v, p + 4 * k, 4);
      xb[b].q[k] = _mm_set1_epi32(v);
    }
    for (int i = 0; i < ML_QK; ++i) sum += p[i];
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
  const __m128i one = _mm_set1_epi16(1);
  for (int b = 0; b < nblk; ++b) {
    __m128i s[T];
    if constexpr (Q4) {
      const __m128i m = _mm_set1_epi8(0x0F);
      const uint8_t* wb = wq + (size_t)b * 64;
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) s[t] = _mm_setzero_si128();  // int16 pairs
      auto step = [&](int k) {
        const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 16 * k));
        const __m128i lo = _mm_and_si128(w, m), hi = _mm_and_si128(_mm_srli_epi16(w, 4), m);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const XBlock& x = xb[t][b];
          s[t] = _mm_add_epi16(s[t], _mm_add_epi16(_mm_maddubs_epi16(lo, x.q[k]), _mm_maddubs_epi16(hi, x.q[k + 4])));
        }
      };
      ML_PK_STEPS(4, step);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) s[t] = _mm_sub_epi32(_mm_madd_epi16(s[t], one), xb[t][b].off);
    } else {
      const uint8_t* wb = wq + (size_t)b * 128;
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) s[t] = _mm_setzero_si128();
      auto step = [&](int k) {
        const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 16 * k));
        const __m128i aw = _mm_abs_epi8(w);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m128i p = _mm_maddubs_epi16(aw, _mm_sign_epi8(xb[t][b].q[k], w));
          s[t] = _mm_add_epi32(s[t], _mm_madd_epi16(p, one));
        }
      };
      ML_PK_STEPS(8, step);
    }
    const __m128 dw = _mm_loadu_ps(wd + (size_t)b * kG);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      acc[t] = _mm_add_ps(acc[t], _mm_mul_ps(_mm_cvtepi32_ps(s[t]), _mm_mul_ps(dw, xb[t][b].dx)));
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
      expand(buf + t * chunk, xq + (size_t)t * n, xd + (size_t)t * (n / ML_QK), c0, nblk, Q4 ? 8 : 0);
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

extern "C" void ml_k_matvec_q8_pk_sse41(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  tile<1, false>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matvec_q4_pk_sse41(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  tile<1, true>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matmul_q8_pk_sse41(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  matmul<false>(Y, ldy, W, X, r0, r1);
}

extern "C" void ml_k_matmul_q4_pk_sse41(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  matmul<true>(Y, ldy, W, X, r0, r1);
}
