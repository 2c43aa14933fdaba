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
// The tiling, chunking and rounding are kernels/wasm_simd128/pack_tile.h's.
#include "kernels/wasm_simd128/pack_tile.h"
#include "kernels/wasm_simd128/wasm_simd128.h"

namespace {

using ml::k::wasm_pk::XBlock;
static_assert(ml::k::wasm_simd128::pack.g == ml::k::wasm_pk::kG && ml::k::wasm_simd128::pack.q8_offset == 0 &&
                  ml::k::wasm_simd128::pack.q4_xor == 0 && !ml::k::wasm_simd128::pack.d16 &&
                  ml::k::wasm_simd128::pack.q8_step_xor == 0x00800080u &&
                  ml::k::wasm_simd128::pack.q4_step_xor == 0x80008000u,
              "kernels/wasm_simd128/matvec_pk.cpp reads G = 4, Q8 lanes (q0 + 128, q1), Q4 lanes with h1 ^ 8, "
              "f32 scales");

inline int32_t pair16(int32_t lo, int32_t hi) {
  return (int32_t)((uint32_t)(uint16_t)(int16_t)lo | ((uint32_t)(uint16_t)(int16_t)hi << 16));
}

// Q8 step k: coefficients c[2k] (the whole lane) and c[2k + 1] (its high byte).
struct DotQ8 {
  static constexpr bool kQ4 = false;
  static constexpr bool kPairs = false;  // two groups per pass were 30% slower: V8 spills them
  static void expand(XBlock& xb, const int8_t* p) {
    int32_t off = 0;
    for (int k = 0; k < 8; ++k) {
      const int8_t* v = p + 4 * k;
      xb.c[2 * k] = wasm_i32x4_splat(pair16(v[0], v[2]));
      xb.c[2 * k + 1] = wasm_i32x4_splat(pair16(v[1] - 256 * v[0], v[3] - 256 * v[2]));
      off += 128 * (v[0] + v[2]);
    }
    xb.neg_off = wasm_i32x4_splat(-off);
  }
  template <int T, int NG>
  static void dot(v128_t s[NG * T], const uint8_t* wb, size_t gstride, const XBlock* const xb[T], int b) {
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
};

// Q4 step k: coefficients c[4k .. 4k + 3] of the lane and its shifts by 4, 8 and 12.
struct DotQ4 {
  static constexpr bool kQ4 = true;
  static constexpr bool kPairs = true;  // 6% faster decode
  static void expand(XBlock& xb, const int8_t* p) {
    int32_t off = 0;
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
      for (int i = 0; i < 4; ++i) xb.c[4 * k + i] = wasm_i32x4_splat(pair16(c[i][0], c[i][1]));
    }
    xb.neg_off = wasm_i32x4_splat(-off);
  }
  template <int T, int NG>
  static void dot(v128_t s[NG * T], const uint8_t* wb, size_t gstride, const XBlock* const xb[T], int b) {
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
  }
};

}  // namespace

ML_WASM_PK_ENTRIES(DotQ8, DotQ4, wasm_simd128)
