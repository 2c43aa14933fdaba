// WebAssembly relaxed-SIMD packed kernels: matvec and matmul over core/pack.h's plain G = 4 layout
// (signed Q8, raw Q4 nibbles, f32 scales). The tiling mirrors kernels/wasm_simd128/matvec_pk.cpp;
// the block dot differs.
// The dot: i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, acc) adds, per 32-bit lane, the four
// products a[4l+j] * b[4l+j]. A lane is one row's 4 bytes of a step; b must stay in 0..127 for
// every engine to agree, and pair sums stay within int16 (2 x 127 x 127 = 32258):
//   Q8: b = |x| (the activation quad, broadcast), a = w with the sign of x applied
//       ((w ^ m) - m, m = x >> 7), so a * b = w * x; w in [-127, 127] negates safely.
//   Q4: b = the nibble (0..15), a = x, then 8 x sum(x) is subtracted per block as in simd128.
// Integer block sums are exact, so each row is the scalar kernel's arithmetic: bit-exact, and the
// matmul's columns equal the packed matvec bit for bit.
#include "kernels/wasm_relaxed/wasm_relaxed.h"
#include "kernels/wasm_simd128/wasm_common.h"

#include <wasm_simd128.h>

namespace {

constexpr int kG = 4;
constexpr int kBufTokBlocks = 64;  // (token, block) pairs of the expansion buffer: 64 x 288 B = 18 KB
static_assert(ml::k::wasm_relaxed::pack.g == kG && ml::k::wasm_relaxed::pack.q8_offset == 0 &&
                  ml::k::wasm_relaxed::pack.q4_xor == 0 && !ml::k::wasm_relaxed::pack.d16,
              "kernels/wasm_relaxed/matvec_pk.cpp reads G = 4, signed Q8, raw Q4, f32 scales");

inline v128_t rdot(v128_t a, v128_t b_i7, v128_t acc) {
  return __builtin_wasm_relaxed_dot_i8x16_i7x16_add_s_i32x4(a, b_i7, acc);
}

// One 32-block of one token. Quad k = values 4k..4k+3, broadcast to the 4 lanes.
// Q8: ax[k] = |quad k|, sm[k] = its sign mask; Q4: ax[k] = quad k as is (sm unused).
struct XBlock {
  v128_t ax[8], sm[8];
  v128_t off;  // offset * sum of the block's 32 quants (exact int32), broadcast
  v128_t dx;
};

inline void expand(XBlock* xb, const int8_t* q, const float* d, int b0, int nblk, bool q4) {
  for (int b = 0; b < nblk; ++b) {
    const int8_t* p = q + (size_t)(b0 + b) * ML_QK;
    int32_t sum = 0;
    for (int k = 0; k < 8; ++k) {
      const v128_t v = wasm_v128_load32_splat(p + 4 * k);
      xb[b].ax[k] = q4 ? v : wasm_i8x16_abs(v);
      xb[b].sm[k] = wasm_i8x16_shr(v, 7);
      sum += (int32_t)p[4 * k] + p[4 * k + 1] + p[4 * k + 2] + p[4 * k + 3];
    }
    xb[b].off = wasm_i32x4_splat(q4 ? 8 * sum : 0);
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
      const v128_t m = wasm_i8x16_splat(0x0F);
      const uint8_t* wb = wq + (size_t)b * 64;
      auto step = [&](int k) {
        const v128_t w = wasm_v128_load(wb + 16 * k);
        const v128_t lo = wasm_v128_and(w, m), hi = wasm_u8x16_shr(w, 4);
#pragma clang loop unroll(full)
        for (int t = 0; t < T; ++t) s[t] = rdot(xb[t][b].ax[k + 4], hi, rdot(xb[t][b].ax[k], lo, s[t]));
      };
      ML_W_STEPS(4, step)
    } else {
      const uint8_t* wb = wq + (size_t)b * 128;
      auto step = [&](int k) {
        const v128_t w = wasm_v128_load(wb + 16 * k);
#pragma clang loop unroll(full)
        for (int t = 0; t < T; ++t) {
          const v128_t sm = xb[t][b].sm[k];
          s[t] = rdot(wasm_i8x16_sub(wasm_v128_xor(w, sm), sm), xb[t][b].ax[k], s[t]);
        }
      };
      ML_W_STEPS(8, step)
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
      expand(buf + t * chunk, xq + (size_t)t * n, xd + (size_t)t * (n / ML_QK), c0, nblk, Q4);
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

extern "C" void ml_k_matvec_q8_pk_wasm_relaxed(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  tile<1, false>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matvec_q4_pk_wasm_relaxed(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  tile<1, true>(y, 0, W, x->q, x->d, x->n, r0, r1);
}

extern "C" void ml_k_matmul_q8_pk_wasm_relaxed(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,
                                               int r1) {
  matmul<false>(Y, ldy, W, X, r0, r1);
}

extern "C" void ml_k_matmul_q4_pk_wasm_relaxed(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,
                                               int r1) {
  matmul<true>(Y, ldy, W, X, r0, r1);
}
