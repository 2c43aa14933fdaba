// Small WebAssembly SIMD128 helper vocabulary for kernels/wasm_simd128/ (and wasm ISAs built on
// it). Every helper is static inline, touches no memory but its arguments and holds no state.
// The float helpers keep the pairings of kernels/x86_common.h, so lane reductions round alike.
//
//   ml_w_hsum_f32      horizontal float sum, (v0 + v2) + (v1 + v3)
//   ml_w_hmax_f32      horizontal max via pmax (a NaN lane is dropped, as maxps does)
//   ml_w_hsum_i32      horizontal int32 sum
//   ml_w_hsum4_i32     [sum a, sum b, sum c, sum d] of four int32 vectors (exact)
//   ml_w_dot_i8x16     16 int8 products into 4 int32 lanes (sign-extend + i32x4.dot_i16x8_s)
//   ml_w_q4_unpack     16 Q4 bytes -> two int8 vectors of nibble - 8 (values j, j + 16)
//   ml_w_half4_to_f32  4 IEEE halves (zero-extended in 32-bit lanes) -> floats, bit-exact
//   ml_w_exp_f32       Cephes expf (kernels/x86_common.h's ml_exp_ps, operation for operation)
//   ml_w_sum16_f32     the canonical 16-partial sum of kernels/numerics.h (as ml_sum16_ps)
//   ml_w_load_n        the first m floats (zeros past them), never reading past p + m
//   ml_w_silu_mul      silu(g) * u in kernels/numerics.h's form (ml_k_silu_mul1)
//   ml_w_gelu_mul      gelu(g) * u in kernels/numerics.h's form (ml_k_gelu_mul1)
#pragma once
#include <wasm_simd128.h>

#include <cstdint>

static inline float ml_w_hsum_f32(v128_t v) {
  const v128_t s = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 2, 3));  // v0+v2, v1+v3
  return wasm_f32x4_extract_lane(s, 0) + wasm_f32x4_extract_lane(s, 1);
}

static inline float ml_w_hmax_f32(v128_t v) {
  const v128_t m = wasm_f32x4_pmax(v, wasm_i32x4_shuffle(v, v, 2, 3, 2, 3));
  const float a = wasm_f32x4_extract_lane(m, 0), b = wasm_f32x4_extract_lane(m, 1);
  return a < b ? b : a;
}

static inline int32_t ml_w_hsum_i32(v128_t v) {
  const v128_t s = wasm_i32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
  return wasm_i32x4_extract_lane(s, 0) + wasm_i32x4_extract_lane(s, 1);
}

static inline v128_t ml_w_hsum4_i32(v128_t a, v128_t b, v128_t c, v128_t d) {
  const v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
  const v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
  // ab = a0+a2 b0+b2 a1+a3 b1+b3
  return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

// |sum| per lane <= 4 * 128 * 128: no overflow.
static inline v128_t ml_w_dot_i8x16(v128_t a, v128_t b) {
  return wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(a), wasm_i16x8_extend_low_i8x16(b)),
                        wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(a), wasm_i16x8_extend_high_i8x16(b)));
}

static inline void ml_w_q4_unpack(v128_t b, v128_t* lo, v128_t* hi) {
  const v128_t m = wasm_i8x16_splat(0x0F), eight = wasm_i8x16_splat(8);
  *lo = wasm_i8x16_sub(wasm_v128_and(b, m), eight);
  *hi = wasm_i8x16_sub(wasm_u8x16_shr(b, 4), eight);
}

// As ml_half4_to_float: normal halves rebias the exponent, inf/NaN keep their payload, subnormal
// halves go through an exact int -> float conversion (m * 2^-24).
static inline v128_t ml_w_half4_to_f32(v128_t h) {
  const v128_t a = wasm_v128_and(h, wasm_i32x4_splat(0x7FFF));
  const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
  const v128_t e = wasm_v128_and(a, wasm_i32x4_splat(0x7C00));
  const v128_t sh = wasm_i32x4_shl(a, 13);
  const v128_t normal = wasm_i32x4_add(sh, wasm_i32x4_splat(112 << 23));
  const v128_t infnan = wasm_v128_or(sh, wasm_i32x4_splat(0x7F800000));
  const v128_t sub = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(a), wasm_f32x4_splat(1.0f / 16777216.0f));
  v128_t r = wasm_v128_bitselect(sub, normal, wasm_i32x4_eq(e, wasm_i32x4_splat(0)));
  r = wasm_v128_bitselect(infnan, r, wasm_i32x4_eq(e, wasm_i32x4_splat(0x7C00)));
  return wasm_v128_or(r, sign);
}

// 4 halves at p (reads exactly 8 bytes).
static inline v128_t ml_w_load_half4(const uint16_t* p) {
  return ml_w_half4_to_f32(wasm_u32x4_load16x4(p));
}

// exp(x): kernels/x86_common.h's ml_exp_ps step for step (clamp to [-104, 89], n = floor(x log2 e
// + 1/2), Cody-Waite, degree-5 Cephes polynomial, 2^n applied in two halves). pmin/pmax keep a
// NaN x (they return their first operand when the comparison is false), like minps/maxps there.
static inline v128_t ml_w_exp_f32(v128_t x) {
  x = wasm_f32x4_pmin(wasm_f32x4_pmax(x, wasm_f32x4_splat(-104.0f)), wasm_f32x4_splat(89.0f));
  const v128_t fx = wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269504088896341f)), wasm_f32x4_splat(0.5f));
  const v128_t n = wasm_f32x4_floor(fx);
  x = wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_splat(0.693359375f)));
  x = wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_splat(-2.12194440e-4f)));
  v128_t p = wasm_f32x4_splat(1.9875691500e-4f);
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x), wasm_f32x4_splat(1.3981999507e-3f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x), wasm_f32x4_splat(8.3334519073e-3f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x), wasm_f32x4_splat(4.1665795894e-2f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x), wasm_f32x4_splat(1.6666665459e-1f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, x), wasm_f32x4_splat(5.0000001201e-1f));
  p = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_mul(p, wasm_f32x4_mul(x, x)), x), wasm_f32x4_splat(1.0f));
  const v128_t ni = wasm_i32x4_trunc_sat_f32x4(n);  // in [-150, 128]; NaN x gives 0 (p is NaN anyway)
  const v128_t n1 = wasm_i32x4_shr(ni, 1), n2 = wasm_i32x4_sub(ni, n1);
  const v128_t bias = wasm_i32x4_splat(127);
  const v128_t s1 = wasm_i32x4_shl(wasm_i32x4_add(n1, bias), 23);
  const v128_t s2 = wasm_i32x4_shl(wasm_i32x4_add(n2, bias), 23);
  return wasm_f32x4_mul(wasm_f32x4_mul(p, s1), s2);
}

// The canonical sum of 16 partials held as r[0] = P0..3, r[1] = P4..7, r[2] = P8..11,
// r[3] = P12..15: P[l] += P[l + 8], P[l] += P[l + 4], then (P0 + P2) + (P1 + P3).
static inline float ml_w_sum16_f32(const v128_t r[4]) {
  return ml_w_hsum_f32(wasm_f32x4_add(wasm_f32x4_add(r[0], r[2]), wasm_f32x4_add(r[1], r[3])));
}

static inline v128_t ml_w_load_n(const float* p, int m) {
  if (m >= 4) return wasm_v128_load(p);
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < m; ++i) t[i] = p[i];
  return wasm_v128_load(t);
}

// e = exp(-|g|), (g's sign bit set ? g * e : g) / (1 + e) * u.
static inline v128_t ml_w_silu_mul(v128_t g, v128_t u) {
  const v128_t e = ml_w_exp_f32(wasm_v128_or(g, wasm_f32x4_splat(-0.0f)));
  const v128_t neg = wasm_i32x4_shr(g, 31);
  const v128_t num = wasm_v128_bitselect(wasm_f32x4_mul(g, e), g, neg);
  return wasm_f32x4_mul(wasm_f32x4_div(num, wasm_f32x4_add(wasm_f32x4_splat(1.0f), e)), u);
}

// gelu(g) * u as ml_k_gelu_mul1: y = c (g + 0.044715 g^3), e = exp(-2 |y|), t = (1 - e) / (1 + e)
// with y's sign bit xored in (t >= 0, so that is exactly -t), then (0.5 g (1 + t)) u.
static inline v128_t ml_w_gelu_mul(v128_t g, v128_t u) {
  const v128_t sign = wasm_f32x4_splat(-0.0f), one = wasm_f32x4_splat(1.0f);
  const v128_t g3 = wasm_f32x4_mul(wasm_f32x4_mul(g, g), g);
  const v128_t y = wasm_f32x4_mul(wasm_f32x4_splat(0.7978845608028654f),
                                  wasm_f32x4_add(g, wasm_f32x4_mul(wasm_f32x4_splat(0.044715f), g3)));
  const v128_t e = ml_w_exp_f32(wasm_f32x4_mul(wasm_f32x4_splat(-2.0f), wasm_v128_andnot(y, sign)));
  const v128_t t0 = wasm_f32x4_div(wasm_f32x4_sub(one, e), wasm_f32x4_add(one, e));
  const v128_t t = wasm_v128_xor(t0, wasm_v128_and(y, sign));
  return wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_splat(0.5f), g), wasm_f32x4_add(one, t)), u);
}
