// WebAssembly SIMD128 packed kernels: matvec and matmul of Q8/Q4 weights in the row-interleaved
// layout of core/pack.h (G = 4, Q8 signed as stored, Q4 nibbles raw 0..15, f32 scales) times Q8_0
// activations. Contract (kernels/ops.h): r0 a multiple of 4, any r1 <= rows; y[r] for r in
// [r0, r1) only; W->pq/W->pd packed with ml::k::wasm_simd128::pack; unaligned loads; no
// allocation, no global state.
//
// The SSE2 idea (kernels/sse2/matvec_pk.cpp) in wasm instructions: a 4-byte step of 4 rows is one
// 16-byte load; each 16-bit lane holds two bytes of one row. Q8 sign-extends the even byte
// (shl 8, shr_s 8) and the odd byte (shr_s 8) in place, so no +128 offset is needed; Q4 masks out
// four nibbles (even/odd byte, low/high nibble), which read unsigned, and subtracts 8 x sum(x) per
// block in int32. Each part goes through i32x4.dot_i16x8_s against activations expanded once per
// call into broadcast int16 pairs, so one dot yields one partial sum per row and the loop has no
// shuffles. Integer block sums are exact.
//
// Activations are expanded in chunks of columns that fit an 18 KB stack buffer; a group's float
// accumulators live in y between chunks (store and reload are exact), those of a partial last
// group in a local array, so rows >= r1 are never written.
//
// Rounding: per block and row, acc += (float)isum * (d_w * d_x), in block order: the scalar
// kernel's arithmetic, so every row matches ml_k_matvec_q*_scalar bit for bit. The matmul runs the
// same tile code with 1..4 tokens per pass, each weight step loaded once for every token of the
// tile, with the same float operations per token: each column equals the packed matvec bit for bit.
#include "kernels/wasm_simd128/wasm_common.h"
#include "kernels/wasm_simd128/wasm_simd128.h"

namespace {

constexpr int kG = 4;
constexpr int kBufTokBlocks = 64;  // (token, block) pairs of the expansion buffer: 64 x 288 B = 18 KB
static_assert(ml::k::wasm_simd128::pack.g == kG && ml::k::wasm_simd128::pack.q8_offset == 0 &&
                  ml::k::wasm_simd128::pack.q4_xor == 0 && !ml::k::wasm_simd128::pack.d16,
              "kernels/wasm_simd128/matvec_pk.cpp reads G = 4, signed Q8, raw Q4, f32 scales");

// One 32-block of one token, expanded. Quad k holds values 4k..4k+3 (a, b, c, d):
// e[k] = (a, c) and o[k] = (b, d) as int16 pairs, broadcast to the 4 lanes (one lane per row).
struct XBlock {
  v128_t e[8], o[8];
  v128_t off;  // offset * sum of the block's 32 quants (exact int32), broadcast
  v128_t dx;   // the block's activation scale, broadcast
};

inline int32_t pair16(int8_t lo, int8_t hi) {
  return (int32_t)((uint32_t)(uint16_t)(int16_t)lo | ((uint32_t)(uint16_t)(int16_t)hi << 16));
}

inline void expand(XBlock* xb, const int8_t* q, const float* d, int b0, int nblk, int offset) {
  for (int b = 0; b < nblk; ++b) {
    const int8_t* p = q + (size_t)(b0 + b) * ML_QK;
    int32_t sum = 0;
    for (int k = 0; k < 8; ++k) {
      const int8_t* v = p + 4 * k;
      xb[b].e[k] = wasm_i32x4_splat(pair16(v[0], v[2]));
      xb[b].o[k] = wasm_i32x4_splat(pair16(v[1], v[3]));
      sum += (int32_t)v[0] + v[1] + v[2] + v[3];
    }
    xb[b].off = wasm_i32x4_splat(offset * sum);
    xb[b].dx = wasm_f32x4_splat(d[b0 + b]);
  }
}

template <int T, bool Q4>
inline void group_blocks(v128_t acc[T], const uint8_t* wq, const float* wd, const XBlock* const xb[T], int nblk) {
  for (int b = 0; b < nblk; ++b) {
    v128_t s[T];
#pragma clang loop unroll(full)
    for (int t = 0; t < T; ++t) s[t] = wasm_i32x4_splat(0);
    if constexpr (Q4) {
      const v128_t m = wasm_i16x8_splat(0x000F);
      const uint8_t* wb = wq + (size_t)b * 64;
#pragma clang loop unroll(full)
      for (int k = 0; k < 4; ++k) {
        const v128_t w = wasm_v128_load(wb + 16 * k);
        const v128_t el = wasm_v128_and(w, m), ol = wasm_v128_and(wasm_u16x8_shr(w, 8), m);
        const v128_t eh = wasm_v128_and(wasm_u16x8_shr(w, 4), m), oh = wasm_u16x8_shr(w, 12);
#pragma clang loop unroll(full)
        for (int t = 0; t < T; ++t) {
          const XBlock& x = xb[t][b];
          const v128_t lo = wasm_i32x4_add(wasm_i32x4_dot_i16x8(el, x.e[k]), wasm_i32x4_dot_i16x8(ol, x.o[k]));
          const v128_t hi = wasm_i32x4_add(wasm_i32x4_dot_i16x8(eh, x.e[k + 4]), wasm_i32x4_dot_i16x8(oh, x.o[k + 4]));
          s[t] = wasm_i32x4_add(s[t], wasm_i32x4_add(lo, hi));
        }
      }
    } else {
      const uint8_t* wb = wq + (size_t)b * 128;
#pragma clang loop unroll(full)
      for (int k = 0; k < 8; ++k) {
        const v128_t w = wasm_v128_load(wb + 16 * k);
        const v128_t e = wasm_i16x8_shr(wasm_i16x8_shl(w, 8), 8), o = wasm_i16x8_shr(w, 8);
#pragma clang loop unroll(full)
        for (int t = 0; t < T; ++t) {
          const XBlock& x = xb[t][b];
          s[t] = wasm_i32x4_add(s[t], wasm_i32x4_add(wasm_i32x4_dot_i16x8(e, x.e[k]), wasm_i32x4_dot_i16x8(o, x.o[k])));
        }
      }
    }
    const v128_t dw = wasm_v128_load(wd + (size_t)b * kG);
#pragma clang loop unroll(full)
    for (int t = 0; t < T; ++t) {
      const v128_t isum = Q4 ? wasm_i32x4_sub(s[t], xb[t][b].off) : s[t];
      acc[t] = wasm_f32x4_add(acc[t], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum), wasm_f32x4_mul(dw, xb[t][b].dx)));
    }
  }
}

template <int T, bool Q4>
void tile(float* Y, size_t ldy, const ml_qtensor* W, const int8_t* xq, const float* xd, int n, int r0, int r1) {
  if (r1 <= r0) return;
  const int nb = W->cols / ML_QK;
  const size_t block_bytes = Q4 ? 64 : 128;
  const uint8_t* pq = static_cast<const uint8_t*>(W->pq);
  const float* pd = static_cast<const float*>(W->pd);
  constexpr int chunk = kBufTokBlocks / T;
  XBlock buf[kBufTokBlocks];
  float tail[T][kG];
  const int g0 = r0 / kG, g_full = r1 / kG, g1 = (r1 + kG - 1) / kG;
  const XBlock* xb[T];
  int c0 = 0;
  do {
    const int nblk = nb - c0 < chunk ? nb - c0 : chunk;
    for (int t = 0; t < T; ++t) {
      expand(buf + t * chunk, xq + (size_t)t * n, xd + (size_t)t * (n / ML_QK), c0, nblk, Q4 ? 8 : 0);
      xb[t] = buf + t * chunk;
    }
    for (int g = g0; g < g1; ++g) {
      float* dst[T];
      v128_t acc[T];
#pragma clang loop unroll(full)
      for (int t = 0; t < T; ++t) {
        dst[t] = g < g_full ? Y + (size_t)t * ldy + (size_t)g * kG : tail[t];
        acc[t] = c0 == 0 ? wasm_f32x4_splat(0.0f) : wasm_v128_load(dst[t]);
      }
      group_blocks<T, Q4>(acc, pq + ((size_t)g * nb + c0) * block_bytes, pd + ((size_t)g * nb + c0) * kG, xb, nblk);
#pragma clang loop unroll(full)
      for (int t = 0; t < T; ++t) wasm_v128_store(dst[t], acc[t]);
    }
    c0 += chunk;
  } while (c0 < nb);
  if (g1 > g_full)
    for (int t = 0; t < T; ++t)
      for (int r = g_full * kG; r < r1; ++r) Y[(size_t)t * ldy + r] = tail[t][r - g_full * kG];
}

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

extern "C" void ml_k_matvec_q8_pk_wasm_simd128(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  tile<1, false>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matvec_q4_pk_wasm_simd128(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  tile<1, true>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matmul_q8_pk_wasm_simd128(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,
                                               int r1) {
  matmul<false>(Y, ldy, W, X, r0, r1);
}

extern "C" void ml_k_matmul_q4_pk_wasm_simd128(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,
                                               int r1) {
  matmul<true>(Y, ldy, W, X, r0, r1);
}
