// Small SSE helper vocabulary shared by the x86 kernels (sse2/, sse41/, and 128-bit tails of
// the AVX ISAs). Every helper is static inline, touches no memory but its arguments, holds no
// state and uses SSE2 intrinsics only, except the ones under __SSSE3__ / __SSE4_1__, which exist
// only in builds whose flags imply them. Stable: other ISAs include this; add, don't change.
//
//   ml_hsum_ps, ml_hsum4_ps   horizontal float sums, pairing lanes as (0+2) + (1+3) in both
//   ml_hmax_ps                horizontal max (callers keep NaN out: maxps drops a NaN operand)
//   ml_hsum_epi32             horizontal int32 sum
//   ml_hsum4_epi32            [sum a, sum b, sum c, sum d] of four int32 vectors (exact)
//   ml_sext8_lo / ml_sext8_hi int8 -> int16 (punpck + psraw 8)
//   ml_dot_i8x16_sse2         16 int8 products summed into 4 int32 lanes (sign-extend + pmaddwd)
//   ml_dot_i8x16_ssse3        the same via pmaddubsw(abs(x), sign(w, x)) + pmaddwd(., 1)
//   ml_q4_unpack              16 Q4 bytes -> two int8 vectors of nibble - 8 (values j, j + 16)
//   ml_select_si128           bitwise select (pblendvb where SSE4.1 is enabled)
//   ml_half4_to_float         4 IEEE halves -> floats, bit-exact with ml_half_to_float
//   ml_exp_ps                 Cephes expf, relative error ~1e-7; 0 below -104, inf above 89
//   ml_sum16_ps               the canonical 16-partial sum of kernels/numerics.h
//   ml_loadu_ps_n             the first m floats (zeros past them), never reading past p + m
//   ml_silu_mul_ps            silu(g) * u in kernels/numerics.h's form
//   ml_gelu_mul_ps            gelu(g) * u in kernels/numerics.h's form (tanh form)
#pragma once
#include <emmintrin.h>
#ifdef __SSSE3__
#include <tmmintrin.h>
#endif
#ifdef __SSE4_1__
#include <smmintrin.h>
#endif
#include <cstdint>

// [sum a, sum b, sum c, sum d], each sum taken as (v0 + v2) + (v1 + v3).
static inline __m128 ml_hsum4_ps(__m128 a, __m128 b, __m128 c, __m128 d) {
  const __m128 ab = _mm_add_ps(_mm_unpacklo_ps(a, b), _mm_unpackhi_ps(a, b));  // a0+a2 b0+b2 a1+a3 b1+b3
  const __m128 cd = _mm_add_ps(_mm_unpacklo_ps(c, d), _mm_unpackhi_ps(c, d));
  return _mm_add_ps(_mm_movelh_ps(ab, cd), _mm_movehl_ps(cd, ab));
}

// (v0 + v2) + (v1 + v3): the same pairing as ml_hsum4_ps, so a row's sum does not depend on
// whether it was reduced alone or with three others.
static inline float ml_hsum_ps(__m128 v) {
  const __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

static inline float ml_hmax_ps(__m128 v) {
  const __m128 m = _mm_max_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

static inline int32_t ml_hsum_epi32(__m128i v) {
  const __m128i s = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1))));
}

// [sum a, sum b, sum c, sum d]: a 4x4 transpose folded into the adds. Integer, so exact.
static inline __m128i ml_hsum4_epi32(__m128i a, __m128i b, __m128i c, __m128i d) {
  const __m128i ab = _mm_add_epi32(_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b));  // a0+a2 b0+b2 a1+a3 b1+b3
  const __m128i cd = _mm_add_epi32(_mm_unpacklo_epi32(c, d), _mm_unpackhi_epi32(c, d));
  return _mm_add_epi32(_mm_unpacklo_epi64(ab, cd), _mm_unpackhi_epi64(ab, cd));
}

// Bytes 0..7 / 8..15 of v as int16: duplicate each byte into both halves of a word, then an
// arithmetic shift right by 8 leaves the sign-extended byte.
static inline __m128i ml_sext8_lo(__m128i v) { return _mm_srai_epi16(_mm_unpacklo_epi8(v, v), 8); }
static inline __m128i ml_sext8_hi(__m128i v) { return _mm_srai_epi16(_mm_unpackhi_epi8(v, v), 8); }

// 4 int32 lanes whose total is sum_i a[i] * b[i] over 16 int8 pairs. pmaddwd sums two
// int16 products per lane: |sum| <= 2 * 128 * 128, no overflow.
static inline __m128i ml_dot_i8x16_sse2(__m128i a, __m128i b) {
  return _mm_add_epi32(_mm_madd_epi16(ml_sext8_lo(a), ml_sext8_lo(b)), _mm_madd_epi16(ml_sext8_hi(a), ml_sext8_hi(b)));
}

#ifdef __SSSE3__
// The same total via pmaddubsw(|x|, sign(w, x)) = w * x in pairs, then pmaddwd by 1 into int32.
// Needs x != -128 (quants are in [-127, 127]); pair sums stay <= 2 * 127 * 127 = 32258, below
// pmaddubsw's int16 saturation. psignb zeroes w where x is 0, matching |x| = 0.
static inline __m128i ml_dot_i8x16_ssse3(__m128i w, __m128i x) {
  const __m128i p = _mm_maddubs_epi16(_mm_abs_epi8(x), _mm_sign_epi8(w, x));
  return _mm_madd_epi16(p, _mm_set1_epi16(1));
}
#endif

// One Q4 block's 16 bytes (GGUF order) -> *lo = values 0..15, *hi = values 16..31, each the
// signed int8 nibble - 8 in [-8, 7]. The 16-bit shift leaks bits across bytes; the mask drops them.
static inline void ml_q4_unpack(__m128i b, __m128i* lo, __m128i* hi) {
  const __m128i m = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  *lo = _mm_sub_epi8(_mm_and_si128(b, m), eight);
  *hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), m), eight);
}

// mask ? a : b, per bit. mask lanes must be all-ones or all-zeros (a compare result).
static inline __m128i ml_select_si128(__m128i mask, __m128i a, __m128i b) {
#ifdef __SSE4_1__
  return _mm_blendv_epi8(b, a, mask);
#else
  return _mm_or_si128(_mm_and_si128(mask, a), _mm_andnot_si128(mask, b));
#endif
}

// 4 halves, zero-extended in the low 16 bits of each 32-bit lane -> 4 floats, bit-exact with
// ml_half_to_float for all 65536 inputs (NaN payloads included). Subnormal halves go through
// an int -> float conversion (m * 2^-24, exact), so the result does not depend on MXCSR's DAZ.
static inline __m128 ml_half4_to_float(__m128i h) {
  const __m128i a = _mm_and_si128(h, _mm_set1_epi32(0x7FFF));
  const __m128i sign = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x8000)), 16);
  const __m128i e = _mm_and_si128(a, _mm_set1_epi32(0x7C00));
  const __m128i sh = _mm_slli_epi32(a, 13);
  const __m128i normal = _mm_add_epi32(sh, _mm_set1_epi32(112 << 23));  // rebias 15 -> 127
  const __m128i infnan = _mm_or_si128(sh, _mm_set1_epi32(0x7F800000));
  const __m128i sub = _mm_castps_si128(_mm_mul_ps(_mm_cvtepi32_ps(a), _mm_set1_ps(1.0f / 16777216.0f)));
  __m128i r = ml_select_si128(_mm_cmpeq_epi32(e, _mm_setzero_si128()), sub, normal);
  r = ml_select_si128(_mm_cmpeq_epi32(e, _mm_set1_epi32(0x7C00)), infnan, r);
  return _mm_castsi128_ps(_mm_or_si128(r, sign));
}

// 8 halves at p (unaligned) -> *lo = values 0..3, *hi = values 4..7.
static inline void ml_load_half8(const uint16_t* p, __m128* lo, __m128* hi) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  *lo = ml_half4_to_float(_mm_unpacklo_epi16(v, _mm_setzero_si128()));
  *hi = ml_half4_to_float(_mm_unpackhi_epi16(v, _mm_setzero_si128()));
}

// 4 halves at p (unaligned, reads exactly 8 bytes).
static inline __m128 ml_load_half4(const uint16_t* p) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return ml_half4_to_float(_mm_unpacklo_epi16(v, _mm_setzero_si128()));
}

// exp(x), the Cephes expf scheme: n = floor(x * log2(e) + 0.5); r = x - n * ln2 in two parts
// (Cody-Waite, exact for |n| <= 150); e^r by the degree-5 Cephes polynomial; times 2^n applied
// as 2^(n/2) * 2^(n - n/2), so results that are subnormal or overflow round once, like expf.
// x is clamped to [-104, 89] first (e^-104 rounds to 0, e^89 overflows to inf); -inf gives 0,
// NaN stays NaN (maxps/minps return their second operand, x, when it is NaN).
static inline __m128 ml_exp_ps(__m128 x) {
  x = _mm_min_ps(_mm_set1_ps(89.0f), _mm_max_ps(_mm_set1_ps(-104.0f), x));
  const __m128 fx = _mm_add_ps(_mm_mul_ps(x, _mm_set1_ps(1.44269504088896341f)), _mm_set1_ps(0.5f));
  __m128 n = _mm_cvtepi32_ps(_mm_cvttps_epi32(fx));                          // truncate toward 0 ...
  n = _mm_sub_ps(n, _mm_and_ps(_mm_cmpgt_ps(n, fx), _mm_set1_ps(1.0f)));    // ... then floor
  x = _mm_sub_ps(x, _mm_mul_ps(n, _mm_set1_ps(0.693359375f)));
  x = _mm_sub_ps(x, _mm_mul_ps(n, _mm_set1_ps(-2.12194440e-4f)));
  __m128 p = _mm_set1_ps(1.9875691500e-4f);
  p = _mm_add_ps(_mm_mul_ps(p, x), _mm_set1_ps(1.3981999507e-3f));
  p = _mm_add_ps(_mm_mul_ps(p, x), _mm_set1_ps(8.3334519073e-3f));
  p = _mm_add_ps(_mm_mul_ps(p, x), _mm_set1_ps(4.1665795894e-2f));
  p = _mm_add_ps(_mm_mul_ps(p, x), _mm_set1_ps(1.6666665459e-1f));
  p = _mm_add_ps(_mm_mul_ps(p, x), _mm_set1_ps(5.0000001201e-1f));
  p = _mm_add_ps(_mm_add_ps(_mm_mul_ps(p, _mm_mul_ps(x, x)), x), _mm_set1_ps(1.0f));
  const __m128i ni = _mm_cvttps_epi32(n);                                 // in [-150, 128]
  const __m128i n1 = _mm_srai_epi32(ni, 1), n2 = _mm_sub_epi32(ni, n1);  // each in [-75, 64]
  const __m128i bias = _mm_set1_epi32(127);
  const __m128 s1 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(n1, bias), 23));
  const __m128 s2 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(n2, bias), 23));
  return _mm_mul_ps(_mm_mul_ps(p, s1), s2);
}

// The canonical sum (kernels/numerics.h) of 16 partials held as r[0] = P0..3, r[1] = P4..7,
// r[2] = P8..11, r[3] = P12..15: P[l] += P[l + 8], then P[l] += P[l + 4], then ml_hsum_ps's
// (P0 + P2) + (P1 + P3).
static inline float ml_sum16_ps(const __m128 r[4]) {
  return ml_hsum_ps(_mm_add_ps(_mm_add_ps(r[0], r[2]), _mm_add_ps(r[1], r[3])));
}

// Four floats at p, or the first m (< 4) and zeros; reads nothing past p + m.
static inline __m128 ml_loadu_ps_n(const float* p, int m) {
  if (m >= 4) return _mm_loadu_ps(p);
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < m; ++i) t[i] = p[i];
  return _mm_loadu_ps(t);
}

// silu(g) * u as ml_k_silu_mul1: e = exp(-|g|), (g's sign bit set ? g * e : g) / (1 + e) * u.
static inline __m128 ml_silu_mul_ps(__m128 g, __m128 u) {
  const __m128 sign = _mm_set1_ps(-0.0f);
  const __m128 e = ml_exp_ps(_mm_or_ps(g, sign));
  const __m128 neg = _mm_castsi128_ps(_mm_srai_epi32(_mm_castps_si128(g), 31));  // all ones where the sign bit is set
  const __m128 num = _mm_or_ps(_mm_and_ps(neg, _mm_mul_ps(g, e)), _mm_andnot_ps(neg, g));
  return _mm_mul_ps(_mm_div_ps(num, _mm_add_ps(_mm_set1_ps(1.0f), e)), u);
}

// gelu(g) * u as ml_k_gelu_mul1: y = c (g + 0.044715 g^3), e = exp(-2 |y|), t = (1 - e) / (1 + e)
// with y's sign bit, then (0.5 g (1 + t)) u. t >= 0, so y's sign bit xored in is exactly -t.
static inline __m128 ml_gelu_mul_ps(__m128 g, __m128 u) {
  const __m128 sign = _mm_set1_ps(-0.0f), one = _mm_set1_ps(1.0f);
  const __m128 g3 = _mm_mul_ps(_mm_mul_ps(g, g), g);
  const __m128 y = _mm_mul_ps(_mm_set1_ps(0.7978845608028654f), _mm_add_ps(g, _mm_mul_ps(_mm_set1_ps(0.044715f), g3)));
  const __m128 e = ml_exp_ps(_mm_mul_ps(_mm_set1_ps(-2.0f), _mm_andnot_ps(sign, y)));
  const __m128 t = _mm_xor_ps(_mm_div_ps(_mm_sub_ps(one, e), _mm_add_ps(one, e)), _mm_and_ps(y, sign));
  return _mm_mul_ps(_mm_mul_ps(_mm_mul_ps(_mm_set1_ps(0.5f), g), _mm_add_ps(one, t)), u);
}
