// The helper vocabulary of the 256- and 512-bit x86 kernels (avx2, avxvnni, avx512vnni): block
// dots, nibble unpacking, scale loads, horizontal sums, masks and a SIMD exp. Everything here is
// static inline and constexpr-only (no namespace-scope object with a dynamic initialiser: ISA
// flagged code must not run before main_guard has checked the CPU). Include it only from files
// compiled with at least -mavx2 -mfma -mf16c; the AVX-512 part is compiled only where the build's
// flags enable AVX-512 BW and VNNI.
//
// Integer idioms (spec/kernels.txt): quants are in [-127, 127], so |x| fits an unsigned byte and
// pmaddubsw(|x|, sign(w, x)) pair sums stay <= 2 * 127 * 127 = 32258 (never saturating). Q4
// nibbles (0..15) are used raw as the unsigned operand, and the -8 offset is applied in int32 as
// 8 * sum(x) per lane, computed once per activation block: sum((n - 8) * x) == sum(n * x) - 8 * sum(x).
#pragma once
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics that merge into an
// _mm512_undefined_*() source (GCC PR105593, fixed in 12.3/13); the warning points into the
// header, so it is silenced for the header's own lines only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/types.h"

namespace ml::k::x86 {

// ---- horizontal sums -------------------------------------------------------------------------
static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// The horizontal sums of four accumulators as one vector {hsum(a), hsum(b), hsum(c), hsum(d)}.
static inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);  // lane k of each half: partial of row k
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// y[k] = hsum(acc[k]) for k < R (R = 4: one hadd tree and one 128-bit store).
template <int R>
static inline void store_hsums(float* y, const __m256* acc) {
  if constexpr (R == 4) {
    _mm_storeu_ps(y, hsum4(acc[0], acc[1], acc[2], acc[3]));
  } else {
    for (int k = 0; k < R; ++k) y[k] = hsum(acc[k]);
  }
}

static inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// ---- masks and loads -------------------------------------------------------------------------
// Lane mask for vmaskmov: lanes i < n (0 <= n <= 8) all ones.
static inline __m256i mask8(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __m256i loadu256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
static inline __m128i loadu128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// Eight IEEE halves widened exactly (F16C), and one.
static inline __m256 load_f16x8(const uint16_t* p) { return _mm256_cvtph_ps(loadu128(p)); }
static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

// Tail loads: the first m values (m >= 8, or m >= 32 for bytes: a full vector) and zeros in the
// lanes past them; nothing past p + m is read (vmaskmov, or a copy into a zeroed stack buffer).
static inline __m256 load_f32_n(const float* p, int m) {
  return m >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask8(m));
}
static inline __m256 load_f16_n(const uint16_t* p, int m) {
  if (m >= 8) return load_f16x8(p);
  alignas(16) uint16_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < m; ++i) t[i] = p[i];
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
}
static inline __m256 load_i8f_n(const int8_t* p, int m) {  // 8 int8 widened to float
  int64_t b = 0;
  if (m >= 8) std::memcpy(&b, p, 8);
  else for (int i = 0; i < m; ++i) reinterpret_cast<int8_t*>(&b)[i] = p[i];
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(b)));
}
static inline __m256i load_i8x32_n(const int8_t* p, int m) {
  if (m >= 32) return loadu256(p);
  alignas(32) int8_t t[32] = {};
  for (int i = 0; i < m; ++i) t[i] = p[i];
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(t));
}
static inline void store_f32_n(float* p, __m256 v, int m) {
  if (m >= 8) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, mask8(m), v);
}

// Scale i of a weight tensor, its d_f16 flag known at compile time.
template <bool F16>
static inline float wscale(const void* d, size_t i) {
  if constexpr (F16)
    return f16(static_cast<const uint16_t*>(d)[i]);
  else
    return static_cast<const float*>(d)[i];
}

// ---- Q8 / Q4 block dots, 256-bit -------------------------------------------------------------
// Eight int32 lanes whose sum is the exact dot of 32 quants: pmaddubsw(|x|, sign(w, x)), then
// pmaddwd with ones (avx2, sse41 idiom). ax = |x| is computed once per activation block.
static inline __m256i dot32_maddubs(__m256i ax, __m256i x, __m256i w) {
  const __m256i p16 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(w, x));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// Unsigned bytes u (<= 15 for nibbles, 8 for the offset) times signed x, eight int32 lanes.
// Pair sums <= 2 * 15 * 127, far from the int16 limit.
static inline __m256i dotu32_maddubs(__m256i u, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
}

// A Q4 block's 16 bytes as 32 unsigned nibbles in value order: byte j's low nibble is value j
// (low 128 bits), its high nibble value j + 16 (high 128 bits).
static inline __m256i unpack_q4(const uint8_t* p) {
  const __m128i b = loadu128(p);
  const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(b), _mm_srli_epi16(b, 4), 1);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// ---- exp (Cephes expf) -----------------------------------------------------------------------
// exp(x) to about 1e-7 relative for x in [-87.3, 88.3]; inputs below clamp to 0 (or a subnormal
// order of magnitude), -inf gives 0, inputs above 88.37 give exp(88.37). Callers keep arguments <= 0
// (softmax subtracts the max, silu takes exp(-|v|)), so the upper clamp is never reached there.
static inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f));
  // n = floor(x / ln 2 + 0.5); r = x - n ln 2 in two parts (C1 exact in float).
  __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
  fx = _mm256_floor_ps(fx);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, z, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  // 2^n by building the exponent; n = -127 gives +0 (the result is below 1.2e-38 anyway).
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// ---- AVX-512 (avx512vnni build only) ---------------------------------------------------------
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)

// 64 quants = two blocks: sixteen int32 lanes, lanes 0-7 block one, 8-15 block two. There is no
// 512-bit psignb: w is negated where x < 0 (xneg, one mask bit per byte), and |x| is unsigned.
static inline __m512i dot64_vnni(__m512i acc, __m512i ax, __mmask64 xneg, __m512i w) {
  const __m512i sw = _mm512_mask_sub_epi8(w, xneg, _mm512_setzero_si512(), w);
  return _mm512_dpbusd_epi32(acc, ax, sw);
}

// Two consecutive Q4 blocks (32 bytes) as 64 unsigned nibbles in value order:
// [blk0 lo | blk0 hi | blk1 lo | blk1 hi], one 128-bit lane each.
static inline __m512i unpack_q4x2(const uint8_t* p) {
  const __m512i v = _mm512_castsi256_si512(loadu256(p));
  const __m512i dup = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), v);
  const __m512i sh = _mm512_srlv_epi64(dup, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
  return _mm512_and_si512(sh, _mm512_set1_epi8(0x0F));
}

// As unpack_q4x2 for a single block: the upper 256 bits are zero.
static inline __m512i unpack_q4x1(const uint8_t* p) {
  return _mm512_zextsi256_si512(unpack_q4(p));
}

// Scales i and i + 1 spread as {s_i x 8, s_i+1 x 8}. ONE (a lone last block) reads only s_i and
// leaves the upper lanes 0.
template <bool F16, bool ONE>
static inline __m512 wscale2(const void* d, size_t i) {
  __m128 s;
  if constexpr (F16) {
    const uint16_t* h = static_cast<const uint16_t*>(d) + i;
    uint32_t v = h[0];
    if constexpr (!ONE) v |= (uint32_t)h[1] << 16;
    s = _mm_cvtph_ps(_mm_cvtsi32_si128((int)v));
  } else {
    const float* f = static_cast<const float*>(d) + i;
    s = ONE ? _mm_load_ss(f) : _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(f)));
  }
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s));
}

// Byte mask of the first m (0..64) bytes.
static inline __mmask64 mask64(int m) { return m >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << m) - 1); }

// The 256-bit halves of a 512-bit vector. GCC 12 builds even _mm512_cast*512_*256 from an
// extract with an _mm256_undefined_* source and then warns -Wmaybe-uninitialized about it; the
// zero-masked extracts (all lanes kept) are the same instruction without that source.
static inline __m256 lo256(__m512 v) { return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(v), 0)); }
static inline __m256 hi256(__m512 v) { return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(v), 1)); }
static inline __m256i lo256(__m512i v) { return _mm512_maskz_extracti64x4_epi64(0xFF, v, 0); }
static inline __m256i hi256(__m512i v) { return _mm512_maskz_extracti64x4_epi64(0xFF, v, 1); }
static inline __m256 fold512(__m512 v) { return _mm256_add_ps(lo256(v), hi256(v)); }
static inline __m256i fold512(__m512i v) { return _mm256_add_epi32(lo256(v), hi256(v)); }

#endif

}  // namespace ml::k::x86
