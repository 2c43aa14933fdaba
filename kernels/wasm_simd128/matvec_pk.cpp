// WebAssembly SIMD128 packed kernels: matvec and matmul of Q8/Q4 weights in the row-interleaved
// layout of core/pack.h (G = 4, f32 scales; Q8 with the low byte of each 16-bit lane stored
// unsigned, q + 128; Q4 raw nibbles but the top nibble of each 16-bit lane stored as nibble ^ 8)
// times Q8_0 activations. Contract (kernels/ops.h): r0 a multiple of 4, any r1 <= rows; y[r] for r
// in [r0, r1) only; W->pq/W->pd packed with ml::k::wasm_simd128::pack; activations in [-127, 127]
// (what quantize_q8 writes); unaligned loads; no allocation, no global state.
//
// A 4-byte step of 4 rows is one 16-byte load; each 16-bit lane holds two bytes of one row. The
// only multiply is i32x4.dot_i16x8_s, so every weight has to reach it as int16, and the cheapest
// way is to feed it whole lanes and arithmetic shifts of them, and to fold the shifted-in bits
// into the activation side: per lane, with the lane read as a signed int16 v,
//   Q8: v = (w0 + 128) + 256 w1, and v >> 8 = w1. dot(v, a) + dot(v >> 8, b - 256 a)
//       = w0 a + w1 b + 128 a: one shift and two dots per step (sign-extending each byte took
//       three ops). 128 x sum(a) per block is subtracted in int32.
//   Q4: v = l0 + 16 h0 + 256 l1 + 4096 (h1 - 8), and v >> 4, v >> 8, v >> 12 strip the low
//       nibbles off in turn. With coefficients c1 = x0, c2 = x1 - 16 x0, c3 = x2 - 16 x1,
//       c4 = x3 - 16 x2 the four dots give l0 x0 + h0 x1 + l1 x2 + (h1 - 8) x3: three shifts and
//       four dots (masking out four nibbles took six ops). 8 x (x0 + x1 + x2) per block is
//       subtracted in int32, which turns nibbles into values (q = nibble - 8).
// Every coefficient fits int16 (|b - 256 a| <= 32639, |x1 - 16 x0| <= 2159) and a block's int32
// sum stays below 2^28, so the integer block sums are exact. The coefficients are expanded once
// per call into broadcast int16 pairs, so the loop has no shuffles.
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
                  ml::k::wasm_simd128::pack.q4_xor == 0 && !ml::k::wasm_simd128::pack.d16 &&
                  ml::k::wasm_simd128::pack.q8_step_xor == 0x00800080u &&
                  ml::k::wasm_simd128::pack.q4_step_xor == 0x80008000u,
              "kernels/wasm_simd128/matvec_pk.cpp reads G = 4, Q8 lanes (q0 + 128, q1), Q4 lanes with h1 ^ 8, "
              "f32 scales");

// One 32-block of one token, expanded: the coefficients of each step's dots, as int16 pairs (one
// per 16-bit lane of a row) broadcast to the 4 rows. Q8 step k: c[2k], c[2k + 1]; Q4 step k:
// c[4k .. 4k + 3].
struct XBlock {
  v128_t c[16];
  v128_t neg_off;  // minus the int32 correction of the block (exact), broadcast
  v128_t dx;   // the block's activation scale, broadcast
};

inline int32_t pair16(int32_t lo, int32_t hi) {
  return (int32_t)((uint32_t)(uint16_t)(int16_t)lo | ((uint32_t)(uint16_t)(int16_t)hi << 16));
}

inline void expand(XBlock* xb, const int8_t* q, const float* d, int b0, int nblk, bool q4) {
  for (int b = 0; b < nblk; ++b) {
    const int8_t* p = q + (size_t)(b0 + b) * ML_QK;
    int32_t off = 0;
    if (q4) {
      // Step k, lane (bytes j, j + 1), j = 0, 2: low nibbles are values 4k + j, 4k + j + 1, high
      // nibbles 16 + 4k + j, 17 + 4k + j; (x0, x1, x2, x3) = (lo j, hi j, lo j + 1, hi j + 1).
      for (int k = 0; k < 4; ++k) {
        int32_t c[4][2];
        for (int h = 0; h < 2; ++h) {
          const int j = 4 * k + 2 * h;
          const int32_t x0 = p[j], x1 = p[16 + j], x2 = p[j + 1], x3 = p[17 + j];
          c[0][h] = x0, c[1][h] = x1 - 16 * x0, c[2][h] = x2 - 16 * x1, c[3][h] = x3 - 16 * x2;
          off += 8 * (x0 + x1 + x2);
        }
        for (int i = 0; i < 4; ++i) xb[b].c[4 * k + i] = wasm_i32x4_splat(pair16(c[i][0], c[i][1]));
      }
    } else {
      for (int k = 0; k < 8; ++k) {
        const int8_t* v = p + 4 * k;
        xb[b].c[2 * k] = wasm_i32x4_splat(pair16(v[0], v[2]));
        xb[b].c[2 * k + 1] = wasm_i32x4_splat(pair16(v[1] - 256 * v[0], v[3] - 256 * v[2]));
        off += 128 * (v[0] + v[2]);
      }
    }
    xb[b].neg_off = wasm_i32x4_splat(-off);
    xb[b].dx = wasm_f32x4_splat(d[b0 + b]);
  }
}

// nblk blocks of NG consecutive groups (the second one gstride bytes / dstride scales after the
// first) for T tokens; acc[g * T + t] holds group g's four rows for token t. NG = 2 (the Q4
// matvec) shares each activation load between two groups.
template <int T, int NG, bool Q4>
inline void group_blocks(v128_t acc[NG * T], const uint8_t* wq, size_t gstride, const float* wd, size_t dstride,
                         const XBlock* const xb[T], int nblk) {
  for (int b = 0; b < nblk; ++b) {
    v128_t s[NG * T];  // each starts from minus the block's correction, so it ends as scalar's isum
#pragma clang loop unroll(full)
    for (int g = 0; g < NG; ++g)
#pragma clang loop unroll(full)
      for (int t = 0; t < T; ++t) s[g * T + t] = xb[t][b].neg_off;
    if constexpr (Q4) {
      const uint8_t* wb = wq + (size_t)b * 64;
      auto step = [&](int k) {
#pragma clang loop unroll(full)
        for (int g = 0; g < NG; ++g) {
          const v128_t v1 = wasm_v128_load(wb + g * gstride + 16 * k);
          const v128_t v2 = wasm_i16x8_shr(v1, 4), v3 = wasm_i16x8_shr(v1, 8), v4 = wasm_i16x8_shr(v1, 12);
#pragma clang loop unroll(full)
          for (int t = 0; t < T; ++t) {
            const v128_t* c = xb[t][b].c + 4 * k;
            const v128_t lo = wasm_i32x4_add(wasm_i32x4_dot_i16x8(v1, c[0]), wasm_i32x4_dot_i16x8(v2, c[1]));
            const v128_t hi = wasm_i32x4_add(wasm_i32x4_dot_i16x8(v3, c[2]), wasm_i32x4_dot_i16x8(v4, c[3]));
            s[g * T + t] = wasm_i32x4_add(s[g * T + t], wasm_i32x4_add(lo, hi));
          }
        }
      };
      ML_W_STEPS(4, step)
    } else {
      const uint8_t* wb = wq + (size_t)b * 128;
      auto step = [&](int k) {
#pragma clang loop unroll(full)
        for (int g = 0; g < NG; ++g) {
          const v128_t v = wasm_v128_load(wb + g * gstride + 16 * k);
          const v128_t hi = wasm_i16x8_shr(v, 8);
#pragma clang loop unroll(full)
          for (int t = 0; t < T; ++t) {
            const v128_t* c = xb[t][b].c + 2 * k;
            s[g * T + t] = wasm_i32x4_add(s[g * T + t], wasm_i32x4_add(wasm_i32x4_dot_i16x8(v, c[0]),
                                                                       wasm_i32x4_dot_i16x8(hi, c[1])));
          }
        }
      };
      ML_W_STEPS(8, step)
    }
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
template <int T, int NG, bool Q4>
inline void groups(float* const dst[NG * T], const ml_qtensor* W, int g, int nb, int c0, int nblk,
                   const XBlock* const xb[T]) {
  constexpr size_t block_bytes = Q4 ? 64 : 128;
  v128_t acc[NG * T];
#pragma clang loop unroll(full)
  for (int i = 0; i < NG * T; ++i) acc[i] = c0 == 0 ? wasm_f32x4_splat(0.0f) : wasm_v128_load(dst[i]);
  group_blocks<T, NG, Q4>(acc, static_cast<const uint8_t*>(W->pq) + ((size_t)g * nb + c0) * block_bytes,
                          (size_t)nb * block_bytes, static_cast<const float*>(W->pd) + ((size_t)g * nb + c0) * kG,
                          (size_t)nb * kG, xb, nblk);
#pragma clang loop unroll(full)
  for (int i = 0; i < NG * T; ++i) wasm_v128_store(dst[i], acc[i]);
}

template <int T, bool Q4>
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
      expand(buf + t * chunk, xq + (size_t)t * n, xd + (size_t)t * (n / ML_QK), c0, nblk, Q4);
      xb[t] = buf + t * chunk;
    }
    int g = g0;
    // Two groups per pass for the Q4 matvec (6% faster decode); the Q8 matvec runs one (two
    // were 30% slower in V8, which spills the second group's registers).
    if constexpr (T == 1 && Q4)
      for (; g + 2 <= g_full; g += 2) {
        float* const dst[2] = {Y + (size_t)g * kG, Y + (size_t)(g + 1) * kG};
        groups<1, 2, Q4>(dst, W, g, nb, c0, nblk, xb);
      }
    for (; g < g1; ++g) {
      float* dst[T];
#pragma clang loop unroll(full)
      for (int t = 0; t < T; ++t) dst[t] = g < g_full ? Y + (size_t)t * ldy + (size_t)g * kG : tail[t];
      groups<T, 1, Q4>(dst, W, g, nb, c0, nblk, xb);
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
