// The tiling of the WebAssembly packed kernels (wasm_simd128 and wasm_relaxed), written once over
// a block-dot type D that each ISA's matvec_pk.cpp supplies. Include it only from those files,
// which then define their four extern "C" functions with ML_WASM_PK_ENTRIES.
//
// Layout: core/pack.h with G = 4 (one 32-bit lane per row, one 16-byte load per 4-byte step of a
// group) and f32 scales; D decides the byte encoding. Contract (kernels/ops.h): r0 a multiple of
// 4, any r1 <= rows; y[r] for r in [r0, r1) only; unaligned loads; no allocation, no global state.
//
// D supplies:
//   D::kQ4                     Q4 (64 bytes per block and group) or Q8 (128)
//   D::kPairs                  the matvec takes two groups per pass (sharing the activation loads)
//   D::expand(xb, p)           fills xb.c and xb.neg_off for the 32 activation quants at p
//   D::dot<T, NG>(s, wb, gstride, xb, b)
//                              adds the block's integer products to s[g * T + t] (which start from
//                              xb[t][b].neg_off, so they end as scalar's isum), for NG groups
//                              gstride bytes apart and T tokens
//
// Activations are expanded in chunks of columns that fit an 18 KB stack buffer; a group's float
// accumulators live in y between chunks (store and reload are exact), those of a partial last
// group in a local array, so rows >= r1 are never written.
//
// Rounding: per block and row, acc += (float)isum * (d_w * d_x), in block order: the scalar
// kernel's arithmetic, so every row matches ml_k_matvec_q*_scalar bit for bit. The matmul runs the
// same tile code with 1..4 tokens per pass, each weight step loaded once for every token of the
// tile, with the same float operations per token: each column equals the packed matvec bit for bit.
#pragma once
#include <wasm_simd128.h>

#include <cstddef>
#include <cstdint>

#include "core/pack.h"
#include "kernels/ops.h"

namespace ml::k::wasm_pk {

inline constexpr int kG = 4;
inline constexpr int kBufTokBlocks = 64;  // (token, block) pairs of the expansion buffer: 64 x 288 B = 18 KB

// One 32-block of one token, expanded into what D's dots read (broadcast to the 4 rows).
struct XBlock {
  v128_t c[16];
  v128_t neg_off;  // minus the block's int32 correction (exact), broadcast
  v128_t dx;       // the block's activation scale, broadcast
};

// Runs step(0) .. step(n - 1) inside D::dot, templated on its token count T: unrolled for one
// token, as a loop for a matmul tile, where V8 spills the unrolled body's hoisted loads (measured
// in node 20, wasm_simd128: prefill 40% faster, decode 10% slower when either choice is made for
// both). V8 versions disagree on the one-token body: a loop of 4 steps per iteration was 24%
// faster in node 22 but 17% slower in Chromium 156, the target (docs/benchmarks.md).
#define ML_W_STEPS(n, step)                                                          \
  if constexpr (T == 1) {                                                            \
    _Pragma("clang loop unroll(full)") for (int k_ = 0; k_ < (n); ++k_) step(k_);    \
  } else {                                                                           \
    _Pragma("clang loop unroll(disable)") for (int k_ = 0; k_ < (n); ++k_) step(k_); \
  }

template <class D>
inline void expand(XBlock* xb, const int8_t* q, const float* d, int b0, int nblk) {
  for (int b = 0; b < nblk; ++b) {
    D::expand(xb[b], q + (size_t)(b0 + b) * ML_QK);
    xb[b].dx = wasm_f32x4_splat(d[b0 + b]);
  }
}

// nblk blocks of NG consecutive groups (the second one gstride bytes / dstride scales after the
// first) for T tokens; acc[g * T + t] holds group g's four rows for token t.
template <class D, int T, int NG>
inline void group_blocks(v128_t acc[NG * T], const uint8_t* wq, size_t gstride, const float* wd, size_t dstride,
                         const XBlock* const xb[T], int nblk) {
  constexpr size_t block_bytes = D::kQ4 ? 64 : 128;
  for (int b = 0; b < nblk; ++b) {
    v128_t s[NG * T];
#pragma clang loop unroll(full)
    for (int g = 0; g < NG; ++g)
#pragma clang loop unroll(full)
      for (int t = 0; t < T; ++t) s[g * T + t] = xb[t][b].neg_off;
    D::template dot<T, NG>(s, wq + (size_t)b * block_bytes, gstride, xb, b);
#pragma clang loop unroll(full)
    for (int g = 0; g < NG; ++g) {
      const v128_t dw = wasm_v128_load(wd + g * dstride + (size_t)b * kG);
#pragma clang loop unroll(full)
      for (int t = 0; t < T; ++t) {
        acc[g * T + t] = wasm_f32x4_add(
            acc[g * T + t], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s[g * T + t]), wasm_f32x4_mul(dw, xb[t][b].dx)));
      }
    }
  }
}

// Groups [g, g + NG) for the chunk of blocks [c0, c0 + nblk): accumulators from dst (or zero on
// the first chunk) and back.
template <class D, int T, int NG>
inline void groups(float* const dst[NG * T], const ml_qtensor* W, int g, int nb, int c0, int nblk,
                   const XBlock* const xb[T]) {
  constexpr size_t block_bytes = D::kQ4 ? 64 : 128;
  v128_t acc[NG * T];
#pragma clang loop unroll(full)
  for (int i = 0; i < NG * T; ++i) acc[i] = c0 == 0 ? wasm_f32x4_splat(0.0f) : wasm_v128_load(dst[i]);
  group_blocks<D, T, NG>(acc, static_cast<const uint8_t*>(W->pq) + ((size_t)g * nb + c0) * block_bytes,
                         (size_t)nb * block_bytes, static_cast<const float*>(W->pd) + ((size_t)g * nb + c0) * kG,
                         (size_t)nb * kG, xb, nblk);
#pragma clang loop unroll(full)
  for (int i = 0; i < NG * T; ++i) wasm_v128_store(dst[i], acc[i]);
}

template <class D, int T>
void tile(float* Y, size_t ldy, const ml_qtensor* W, const int8_t* xq, const float* xd, int n, int r0, int r1) {
  if (r1 <= r0) return;
  const int nb = W->cols / ML_QK;
  constexpr int chunk = kBufTokBlocks / T;
  XBlock buf[kBufTokBlocks];
  float tail[T][kG];
  const int g0 = r0 / kG, g_full = r1 / kG, g1 = (r1 + kG - 1) / kG;
  const XBlock* xb[T];
  int c0 = 0;
  do {
    const int nblk = nb - c0 < chunk ? nb - c0 : chunk;
    for (int t = 0; t < T; ++t) {
      expand<D>(buf + t * chunk, xq + (size_t)t * n, xd + (size_t)t * (n / ML_QK), c0, nblk);
      xb[t] = buf + t * chunk;
    }
    int g = g0;
    if constexpr (T == 1 && D::kPairs)
      for (; g + 2 <= g_full; g += 2) {
        float* const dst[2] = {Y + (size_t)g * kG, Y + (size_t)(g + 1) * kG};
        groups<D, 1, 2>(dst, W, g, nb, c0, nblk, xb);
      }
    for (; g < g1; ++g) {
      float* dst[T];
#pragma clang loop unroll(full)
      for (int t = 0; t < T; ++t) dst[t] = g < g_full ? Y + (size_t)t * ldy + (size_t)g * kG : tail[t];
      groups<D, T, 1>(dst, W, g, nb, c0, nblk, xb);
    }
    c0 += chunk;
  } while (c0 < nb);
  if (g1 > g_full)
    for (int t = 0; t < T; ++t)
      for (int r = g_full * kG; r < r1; ++r) Y[(size_t)t * ldy + r] = tail[t][r - g_full * kG];
}

template <class D>
void matmul(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  const int n = X->n, nt = X->n_tokens;
  const size_t ld = (size_t)ldy;
  int t = 0;
  for (; t + 4 <= nt; t += 4)
    tile<D, 4>(Y + t * ld, ld, W, X->q + (size_t)t * n, X->d + (size_t)t * (n / ML_QK), n, r0, r1);
  const int8_t* q = X->q + (size_t)t * n;
  const float* d = X->d + (size_t)t * (n / ML_QK);
  switch (nt - t) {
    case 3: tile<D, 3>(Y + t * ld, ld, W, q, d, n, r0, r1); break;
    case 2: tile<D, 2>(Y + t * ld, ld, W, q, d, n, r0, r1); break;
    case 1: tile<D, 1>(Y + t * ld, ld, W, q, d, n, r0, r1); break;
    default: break;
  }
}

}  // namespace ml::k::wasm_pk

// The four packed entry points of ISA `isa` over its Q8 and Q4 block dots.
#define ML_WASM_PK_ENTRIES(D8, D4, isa)                                                                        \
  extern "C" void ml_k_matvec_q8_pk_##isa(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {  \
    ml::k::wasm_pk::tile<D8, 1>(y, 0, W, x->q, x->d, x->n, r0, r1);                                            \
  }                                                                                                            \
  extern "C" void ml_k_matvec_q4_pk_##isa(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {  \
    ml::k::wasm_pk::tile<D4, 1>(y, 0, W, x->q, x->d, x->n, r0, r1);                                            \
  }                                                                                                            \
  extern "C" void ml_k_matmul_q8_pk_##isa(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, \
                                          int r1) {                                                            \
    ml::k::wasm_pk::matmul<D8>(Y, ldy, W, X, r0, r1);                                                          \
  }                                                                                                            \
  extern "C" void ml_k_matmul_q4_pk_##isa(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, \
                                          int r1) {                                                            \
    ml::k::wasm_pk::matmul<D4>(Y, ldy, W, X, r0, r1);                                                          \
  }
