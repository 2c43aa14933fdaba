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
// GCC 12 warns -W(maybe-)uninitialized inside AVX-512 intrinsics that merge into an
// _mm512_undefined_*() source, even _mm512_castsi512_si256 (GCC PR105593, fixed in 12.3/13).
// The warning points into the intrinsics header, so it is silenced for that header's lines only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
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

static inline int32_t hsum_i32(__m128i s) {
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
static inline int32_t hsum_i32(__m256i v) {
  return hsum_i32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// The exact int32 sums of four rows' lanes as {sum(a), sum(b), sum(c), sum(d)}.
static inline __m128i hsum4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
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

// The block scales d_w * d_x of four rows for up to 8 consecutive blocks, transposed for the
// 4-row matvecs: rows k < 4 start at d + i + k * stride (their scales for blocks b..b+n-1, n <= 8),
// dx at the activation's scale of block b. out[j] = {d_w * d_x of rows 0-3, block b + 2j |
// the same for block b + 2j + 1}; blocks past n are 0 and nothing past them is read. Each product
// is the same float multiply as scalar code's dw * dx. One load per row instead of one per block.
template <bool F16>
static inline void wscale_4x8(__m256 out[4], const void* d, size_t i, size_t stride, const float* dx, int n) {
  __m256 m[4];
  const __m256 vdx = load_f32_n(dx, n);
  for (int k = 0; k < 4; ++k) {
    if constexpr (F16)
      m[k] = load_f16_n(static_cast<const uint16_t*>(d) + i + (size_t)k * stride, n);
    else
      m[k] = load_f32_n(static_cast<const float*>(d) + i + (size_t)k * stride, n);
    m[k] = _mm256_mul_ps(m[k], vdx);
  }
  // 4 x 8 transpose: u_c holds rows 0-3 of blocks c (low lane) and c + 4 (high lane).
  const __m256 t0 = _mm256_unpacklo_ps(m[0], m[1]), t1 = _mm256_unpackhi_ps(m[0], m[1]);
  const __m256 t2 = _mm256_unpacklo_ps(m[2], m[3]), t3 = _mm256_unpackhi_ps(m[2], m[3]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  out[0] = _mm256_permute2f128_ps(u0, u1, 0x20);
  out[1] = _mm256_permute2f128_ps(u2, u3, 0x20);
  out[2] = _mm256_permute2f128_ps(u0, u1, 0x31);
  out[3] = _mm256_permute2f128_ps(u2, u3, 0x31);
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
// (vbroadcasti128 is a plain load; one variable shift moves the high lane's nibbles down.)
static inline __m256i unpack_q4(const uint8_t* p) {
  const __m256i v = _mm256_broadcastsi128_si256(loadu128(p));
  return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0F));
}

// ---- exp (Cephes expf) -----------------------------------------------------------------------
// ml_exp_ps of x86_common.h (and ml_k_exp of kernels/numerics.h) on 8 lanes, operation for
// operation: plain multiplies and adds (no FMA), so every ISA gets the same bits. Clamped to
// [-104, 89]: -inf gives 0, NaN stays NaN; 2^n is applied in two halves so subnormal results
// round once.
static inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
  const __m256 fx = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _mm256_set1_ps(0.5f));
  const __m256 n = _mm256_floor_ps(fx);
  x = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f)));
  x = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(-2.12194440e-4f)));
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_add_ps(_mm256_mul_ps(p, x), _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x), _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x), _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x), _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x), _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(x, x)), x), _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvttps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

// The canonical 16-partial sum (kernels/numerics.h) of r0 = P0..7, r1 = P8..15: P[l] += P[l + 8],
// then hsum's (lo128 + hi128), (l + 2), (l + 1) steps are the rest of the tree.
static inline float sum16(__m256 r0, __m256 r1) { return hsum(_mm256_add_ps(r0, r1)); }

// ---- AVX-512 (avx512vnni build only) ---------------------------------------------------------
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)

// 64 quants = two blocks: sixteen int32 lanes. There is no 512-bit psignb: w is negated where
// x < 0 (xneg, one mask bit per byte), and |x| is the unsigned operand.
static inline __m512i dot64_vnni(__m512i acc, __m512i ax, __mmask64 xneg, __m512i w) {
  const __m512i sw = _mm512_mask_sub_epi8(w, xneg, _mm512_setzero_si512(), w);
  return _mm512_dpbusd_epi32(acc, ax, sw);
}

// The 256-bit halves of a 512-bit vector, and their sum.
static inline __m256i lo256(__m512i v) { return _mm512_castsi512_si256(v); }
static inline __m256i hi256(__m512i v) { return _mm512_extracti64x4_epi64(v, 1); }
static inline __m256 lo256(__m512 v) { return _mm512_castps512_ps256(v); }
static inline __m256 hi256(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }
static inline __m256i fold512(__m512i v) { return _mm256_add_epi32(lo256(v), hi256(v)); }

// Byte mask of the first m (0..64) bytes.
static inline __mmask64 mask64(int m) { return m >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << m) - 1); }
// Lane mask of the first m (0..16) 32-bit lanes.
static inline __mmask16 mask16(int m) { return m >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << m) - 1); }

// Two blocks in the "Q4 order" of 128-bit lanes {blk0 values 0-15 | blk1 0-15 | blk0 16-31 |
// blk1 16-31}: Q4 weights unpack to it cheaply (below), and the activation pair is permuted to
// it once for all rows. hsum4x2_i32<true> reads block sums from it.
static inline __m512i q4_order(__m512i x) {
  return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 4, 5, 2, 3, 6, 7), x);
}

// Two consecutive Q4 blocks (32 bytes) as 64 unsigned nibbles in Q4 order: a broadcast load (no
// ALU work), one variable shift for the high nibbles, one and. ONE: a lone block (16 bytes),
// its lanes 1 and 3 then hold copies that the zero activation lanes cancel.
template <bool ONE>
static inline __m512i unpack_q4x2(const uint8_t* p) {
  const __m512i v = ONE ? _mm512_broadcast_i32x4(loadu128(p)) : _mm512_broadcast_i64x4(loadu256(p));
  const __m512i sh = _mm512_srlv_epi64(v, _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4));
  return _mm512_and_si512(sh, _mm512_set1_epi8(0x0F));
}

// The exact block sums of four rows over two blocks. v_k holds row k's lanes: lanes 0-7 block i
// and 8-15 block i + 1, or in Q4 order (Q4ORDER). Returns {rows 0-3 of block i | rows 0-3 of
// block i + 1}.
template <bool Q4ORDER>
static inline __m256i hsum4x2_i32(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
  const __m512i a01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
  const __m512i a23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
  // each 128-bit lane: {row 0, row 1, row 2, row 3} over that lane's quarter-block
  __m512i q = _mm512_add_epi32(_mm512_unpacklo_epi64(a01, a23), _mm512_unpackhi_epi64(a01, a23));
  if constexpr (!Q4ORDER) q = q4_order(q);  // quarters {b0, b0, b1, b1} -> {b0, b1, b0, b1}
  return fold512(q);
}

// exp256 in 16 lanes, step for step (floor as roundscale toward -inf: the same value).
static inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 fx = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(0.5f));
  const __m512 n = _mm512_roundscale_ps(fx, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  x = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f)));
  x = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(-2.12194440e-4f)));
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_add_ps(_mm512_mul_ps(p, x), _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x), _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x), _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x), _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x), _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, _mm512_mul_ps(x, x)), x), _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvttps_epi32(n);
  const __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
}

#endif

}  // namespace ml::k::x86
