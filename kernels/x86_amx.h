// The amx ISA's packed matmul: the int32 sum of each 32-weight block for 16 weight rows x up to 16
// tokens from one AMX TDPBSUD, then kernels/x86_pack.h's float epilogue, so every token's column
// equals the avx512vnni packed matvec bit for bit. Written once over a tile type (kernels/
// amx_tiles.h): TilesHw in kernels/amx/matmul_pk.cpp, TilesEmu in tests/kernels/flagged/amx_emu.cpp.
// Include it only from files compiled with the avx512vnni flags at least (the epilogue, the offsets
// and the Q4 unpacking are AVX-512 and AVX2).
//
// Layout: the avx512vnni pack unchanged (core/pack.h, G = 16, Q8 stored q + 128, Q4 raw nibbles,
// f32 or f16 scales), so one packed arena serves avx512vnni's matvec (decode) and this matmul.
//   Q8: a group's block is 8 steps x (16 rows x 4 bytes) = 8 rows of 64 bytes whose row k, byte
//       4n + i, is value 4k + i of weight row n, plus 128: TDPBSUD's B operand (K/4 rows of N = 16
//       unsigned dwords) as it lies in memory, loaded in place with stride 64.
//   A:  the tokens' 32 activation quants of the block, row m = token m (signed), loaded in place
//       from the batch with stride n. So C[m][n] = sum x * (q + 128) = isum + 128 * sum(x), and
//       subtracting x86_pack.h's exact offset 128 * sum(x) per token and block gives the same int32
//       isum as vpdpbusd does.
//   Q4: nibbles cannot be tile operands: a round's blocks (4 steps of 64 bytes each) are unpacked
//       to 8 rows of 64 bytes (rows 0-3 the low nibbles = values 0-15, rows 4-7 the high ones =
//       values 16-31) in a stack buffer and loaded from there; isum = C - 8 * sum(x).
// Why TDPBSUD (A signed, B unsigned) rather than TDPBUSD: the weights must be the B operand, whose
// rows are the packed steps; the A operand needs each weight row's 32 bytes contiguous, which the
// interleaved pack does not have.
//
// Tiles: C tmm0-3 (a round of 4 blocks, m tokens x 16 int32 each), A tmm4/5 and B tmm6/7
// alternating between blocks. K is one block (32 bytes) per dot product, not the tile's 64: the
// rounding rule converts each block's sum on its own (acc + (float)isum * (d_w * d_x)), so the sums
// must come out per block. The round's C tiles are stored to the stack, then per token (one zmm
// accumulator per token, lane = weight row) and per block in order:
//   acc = acc + cvt(C - off) * (d_w * d_x[t][b])   (no FMA: x86_pack.h's operations and order)
// Offsets are computed per chunk of kChunk blocks; the accumulators live in Y between chunks (an
// exact store and reload), those of a partial last group in a local array.
//
// Contract (kernels/ops.h): r0 a multiple of 16, any r1 <= rows; rows outside [r0, r1) never
// written; no allocation, no global state. The tile configuration is loaded at the start of a call
// and released at its end: tiles are per-thread state, and each pool thread runs its own calls.
#pragma once
#ifndef __AVX512F__
#error "kernels/x86_amx.h needs the AVX-512 flags (ISA avx512vnni or amx)"
#endif
#include "kernels/amx_tiles.h"
#include "kernels/x86_pack.h"

namespace ml::k::x86amx {

using amx_tiles::Config;

inline constexpr int G = 16;       // weight rows per group (lanes of a zmm, columns of C)
inline constexpr int kM = 16;      // tokens per tile (rows of A and C)
inline constexpr int kRound = 4;   // blocks per round: C tiles tmm0-3
inline constexpr int kChunk = 64;  // blocks per offsets chunk: off[16][64] int32, 4 KB
inline constexpr int kBlockB = 8 * 64;  // bytes of a block in B's layout (8 rows of 64)

// The tile shapes for m tokens.
inline Config config_for(int m) {
  Config c;
  for (int i = 0; i < 4; ++i) c.rows[i] = (uint8_t)m, c.colsb[i] = 4 * G;     // C: m x 16 int32
  for (int i = 4; i < 6; ++i) c.rows[i] = (uint8_t)m, c.colsb[i] = ML_QK;     // A: m x 32 int8
  for (int i = 6; i < 8; ++i) c.rows[i] = ML_QK / 4, c.colsb[i] = 4 * G;      // B: 8 x 64 uint8
  return c;
}

// One packed Q4 block (4 steps x 64 bytes) into B's layout (see the file comment).
static inline void unpack_q4(uint8_t* dst, const uint8_t* src) {
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  for (int s = 0; s < 4; ++s) {
    const __m512i w = _mm512_loadu_si512(src + 64 * s);
    _mm512_store_si512(dst + 64 * s, _mm512_and_si512(w, lo4));
    _mm512_store_si512(dst + 64 * (4 + s), _mm512_and_si512(_mm512_srli_epi16(w, 4), lo4));
  }
}

// Block J of a round (when J < k): tmm J = its sums. xa: the round's first block of token 0's
// quants (token stride n); wb: the round's first block in B's layout (blocks kBlockB apart).
template <class Tiles, int J>
inline void block_dot(Tiles& tl, int k, const int8_t* xa, size_t n, const uint8_t* wb) {
  if (J < k) {
    tl.template zero<J>();
    tl.template load<4 + J % 2>(xa + (size_t)J * ML_QK, n);
    tl.template load<6 + J % 2>(wb + (size_t)J * kBlockB, 4 * G);
    tl.template dpbsud<J, 4 + J % 2, 6 + J % 2>();
  }
}

template <class Tiles, int J>
inline void block_store(Tiles& tl, int k, int32_t (*c)[kM][G]) {
  if (J < k) tl.template store<J>(c[J], 4 * G);
}

// m (1..kM) tokens (quants xq + t * n, scales xd + t * n / 32) into Y + t * ldy, rows [r0, r1);
// the tiles configured for m tokens.
template <class Tiles, bool Q4, bool F16>
void tile(Tiles& tl, float* Y, size_t ldy, const ml_qtensor* W, const int8_t* xq, const float* xd, int n, int m,
          int r0, int r1) {
  const int nb = n / ML_QK;
  constexpr size_t block_bytes = (Q4 ? 16 : 32) * G;  // packed
  const uint8_t* pq = static_cast<const uint8_t*>(W->pq);
  const uint8_t* pd = static_cast<const uint8_t*>(W->pd);
  alignas(64) int32_t off[kM][kChunk];
  alignas(64) int32_t c[kRound][kM][G];
  [[maybe_unused]] alignas(64) uint8_t wq4[Q4 ? kRound : 1][kBlockB];
  alignas(64) float tail[kM][G];  // accumulators of a partial last group (rows >= r1 never written)
  const int g0 = r0 / G, g_full = r1 / G, g1 = (r1 + G - 1) / G;
  for (int c0 = 0; c0 < nb; c0 += kChunk) {
    const int nblk = nb - c0 < kChunk ? nb - c0 : kChunk;
    for (int t = 0; t < m; ++t)
      for (int b = 0; b < nblk; ++b)
        off[t][b] = (Q4 ? 8 : 128) * x86pk::block_sum(xq + (size_t)t * n + (size_t)(c0 + b) * ML_QK);
    for (int g = g0; g < g1; ++g) {
      float* dst[kM];
      __m512 acc[kM];
      for (int t = 0; t < m; ++t) {
        dst[t] = g < g_full ? Y + (size_t)t * ldy + (size_t)g * G : tail[t];
        acc[t] = c0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(dst[t]);
      }
      const size_t at = (size_t)g * nb + c0;  // the group's first block of the chunk
      for (int b = 0; b < nblk; b += kRound) {
        const int k = nblk - b < kRound ? nblk - b : kRound;
        const uint8_t* wb = pq + (at + b) * block_bytes;
#if ML_PREFETCH  // as x86_pack.h: the quants and the scales ML_PREFETCH_DIST bytes of the weight stream ahead
        for (size_t l = 0; l < (size_t)k * block_bytes; l += 64) x86pk::prefetch(wb + x86pk::ML_PREFETCH_DIST + l);
        constexpr size_t scale_bytes = (F16 ? 2 : 4) * G;
        x86pk::prefetch(pd + (at + b) * scale_bytes + x86pk::ML_PREFETCH_DIST * scale_bytes / block_bytes);
#endif
        if constexpr (Q4) {
          for (int j = 0; j < k; ++j) unpack_q4(wq4[j], wb + (size_t)j * block_bytes);
          wb = wq4[0];
        }
        const int8_t* xa = xq + (size_t)(c0 + b) * ML_QK;
        block_dot<Tiles, 0>(tl, k, xa, n, wb);
        block_dot<Tiles, 1>(tl, k, xa, n, wb);
        block_dot<Tiles, 2>(tl, k, xa, n, wb);
        block_dot<Tiles, 3>(tl, k, xa, n, wb);
        block_store<Tiles, 0>(tl, k, c);
        block_store<Tiles, 1>(tl, k, c);
        block_store<Tiles, 2>(tl, k, c);
        block_store<Tiles, 3>(tl, k, c);
        for (int j = 0; j < k; ++j) {
          const __m512 dw = x86pk::scales512<F16>(pd, (at + b + j) * G);
          for (int t = 0; t < m; ++t) {
            const __m512i s = _mm512_sub_epi32(_mm512_load_si512(c[j][t]), _mm512_set1_epi32(off[t][b + j]));
            const __m512 dx = _mm512_set1_ps(xd[(size_t)t * nb + c0 + b + j]);
            acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dx)));
          }
        }
      }
      for (int t = 0; t < m; ++t) _mm512_storeu_ps(dst[t], acc[t]);
    }
  }
  if (g1 > g_full)
    for (int t = 0; t < m; ++t)
      for (int r = g_full * G; r < r1; ++r) Y[(size_t)t * ldy + r] = tail[t][r - g_full * G];
}

// Tiles of kM tokens, then one of the rest; configures the tile unit per tile shape and releases
// it at the end.
template <class Tiles, bool Q4, bool F16>
void matmul(Tiles& tl, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  const int n = X->n, nt = X->n_tokens;
  if (r1 <= r0 || nt <= 0) return;
  const size_t ld = (size_t)ldy;
  int shape = 0;  // the token count the tiles are configured for
  for (int t = 0; t < nt; t += kM) {
    const int m = nt - t < kM ? nt - t : kM;
    if (m != shape) tl.config(config_for(m)), shape = m;
    tile<Tiles, Q4, F16>(tl, Y + t * ld, ld, W, X->q + (size_t)t * n, X->d + (size_t)t * (n / ML_QK), n, m, r0, r1);
  }
  tl.release();
}

// The two entry points of a tile type: dispatch on the packed scales' type (W->pd_f16).
template <class Tiles>
void matmul_q8(Tiles& tl, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  if (W->pd_f16) matmul<Tiles, false, true>(tl, Y, ldy, W, X, r0, r1);
  else matmul<Tiles, false, false>(tl, Y, ldy, W, X, r0, r1);
}
template <class Tiles>
void matmul_q4(Tiles& tl, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  if (W->pd_f16) matmul<Tiles, true, true>(tl, Y, ldy, W, X, r0, r1);
  else matmul<Tiles, true, false>(tl, Y, ldy, W, X, r0, r1);
}

}  // namespace ml::k::x86amx
