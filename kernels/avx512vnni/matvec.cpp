// AVX-512 VNNI matrix-vector kernels, row-major Q8 and Q4 weights times Q8 activations.
// Contract (kernels/ops.h): y[r] for r in [r0, r1) only; W->cols == x->n, a multiple of 32; any
// row range and any block count (an odd last block runs as a half-width step whose upper lanes
// are zero); f32 or f16 scales; unaligned loads; no allocation, no global state.
// Idiom: 4 rows per pass, and two 32-blocks per 512-bit vpdpbusd (lanes 0-7 block b, 8-15 block
// b + 1; Q4 uses x86_avx.h's q4_order), so each activation pair is loaded once for four rows.
// Q8: there is no 512-bit psignb, so w is negated with a byte-masked subtract where x < 0 and
// vpdpbusd(0, |x|, that) gives the exact block lanes. Q4: vpdpbusd(-8 * sum(x), nibbles, x), the
// offset computed once per pair. The four rows' lanes are reduced in int32 to 8 block sums
// (hsum4x2_i32), converted, multiplied by {d_w * d_x} and added to a 4-lane float accumulator,
// block b first, then block b + 1: exactly scalar's acc += (float)isum * (dw * dx), so the result
// is bit-identical to scalar. Each row's scales for 8 blocks are one vector load (wscale_4x8).
#include "kernels/avx512vnni/avx512vnni.h"
#include "kernels/x86_avx.h"

namespace {
using namespace ml::k::x86;

// The exact int32 lanes of row k of wq (rows row_bytes apart) against x's blocks b and b + 1
// (ONE: block b alone, upper lanes 0). xv: the activation pair; p: -8 * sum(x) per lane for Q4,
// |x| for Q8 (neg: the bytes where x < 0).
template <bool Q4, bool ONE>
inline __m512i pair_lanes(const uint8_t* wq, size_t row_bytes, int k, int b, __m512i xv, __m512i p, __mmask64 neg) {
  if constexpr (Q4) {
    const uint8_t* w = wq + (size_t)k * row_bytes + (size_t)b * (ML_QK / 2);
    return _mm512_dpbusd_epi32(p, unpack_q4x2<ONE>(w), xv);
  } else {
    const uint8_t* w = wq + (size_t)k * row_bytes + (size_t)b * ML_QK;
    const __m512i wv = ONE ? _mm512_zextsi256_si512(loadu256(w)) : _mm512_loadu_si512(w);
    return dot64_vnni(_mm512_setzero_si512(), p, neg, wv);
  }
}

// The activation pair (ONE: block b, upper half 0), in Q4 order for Q4.
template <bool Q4, bool ONE>
inline __m512i load_pair(const int8_t* p) {
  const __m512i v = ONE ? _mm512_zextsi256_si512(loadu256(p)) : _mm512_loadu_si512(p);
  return Q4 ? q4_order(v) : v;
}

// The two block sums of one row's lanes (Q4 order for Q4).
template <bool Q4>
inline void pair_sums(__m512i v, int32_t& s0, int32_t& s1) {
  const __m256i lo = lo256(v), hi = hi256(v);
  if constexpr (Q4) {
    const __m256i t = _mm256_add_epi32(lo, hi);  // {block b | block b + 1}
    s0 = hsum_i32(_mm256_castsi256_si128(t));
    s1 = hsum_i32(_mm256_extracti128_si256(t, 1));
  } else {
    s0 = hsum_i32(lo);
    s1 = hsum_i32(hi);
  }
}

// What every row's pair_lanes needs from the activation pair: -8 * sum(x) per lane, or |x|.
template <bool Q4>
inline __m512i pair_prep(__m512i xv) {
  if constexpr (Q4)
    return _mm512_sub_epi32(_mm512_setzero_si512(),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), xv));
  else
    return _mm512_abs_epi8(xv);
}

// Blocks b, b + 1 of four rows: acc (lane k = row k) += (float)isum_k(b) * d_k(b), then the same
// for block b + 1 (skipped for ONE). d = {scales of block b | scales of block b + 1}.
template <bool Q4, bool ONE>
inline __m128 step4(__m128 acc, const uint8_t* wq, size_t row_bytes, const ml_qact* x, int b, __m256 d) {
  const __m512i xv = load_pair<Q4, ONE>(x->q + b * ML_QK);
  const __m512i p = pair_prep<Q4>(xv);
  const __mmask64 neg = Q4 ? 0 : _mm512_movepi8_mask(xv);
  const __m512i v0 = pair_lanes<Q4, ONE>(wq, row_bytes, 0, b, xv, p, neg);
  const __m512i v1 = pair_lanes<Q4, ONE>(wq, row_bytes, 1, b, xv, p, neg);
  const __m512i v2 = pair_lanes<Q4, ONE>(wq, row_bytes, 2, b, xv, p, neg);
  const __m512i v3 = pair_lanes<Q4, ONE>(wq, row_bytes, 3, b, xv, p, neg);
  const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(hsum4x2_i32<Q4>(v0, v1, v2, v3)), d);
  acc = _mm_add_ps(acc, _mm256_castps256_ps128(t));
  if constexpr (!ONE) acc = _mm_add_ps(acc, _mm256_extractf128_ps(t, 1));
  return acc;
}

// Rows [r, r + 4), 8 blocks per group so that each row's scales are one vector load.
template <bool F16, bool Q4>
inline void rows4(float* y, const ml_qtensor* W, const ml_qact* x, int r) {
  const int nb = W->cols / ML_QK;
  const size_t row_bytes = Q4 ? (size_t)W->cols / 2 : (size_t)W->cols;
  const uint8_t* wq = static_cast<const uint8_t*>(W->q) + (size_t)r * row_bytes;
  __m128 acc = _mm_setzero_ps();
  for (int b = 0; b < nb; b += 8) {
    const int n = nb - b < 8 ? nb - b : 8;
    __m256 d[4];  // d[j]: scales of blocks b + 2j (low half) and b + 2j + 1 (high half)
    wscale_4x8<F16>(d, W->d, (size_t)r * (size_t)nb + (size_t)b, (size_t)nb, x->d + b, n);
    if (n == 8) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc = step4<Q4, false>(acc, wq, row_bytes, x, b + 2 * j, d[j]);
    } else {
      int j = 0;
      for (; 2 * j + 1 < n; ++j) acc = step4<Q4, false>(acc, wq, row_bytes, x, b + 2 * j, d[j & 3]);
      if (2 * j < n) acc = step4<Q4, true>(acc, wq, row_bytes, x, b + 2 * j, d[j & 3]);
    }
  }
  _mm_storeu_ps(y + r, acc);
}

// One row (the last r1 - r0 mod 4 rows).
template <bool F16, bool Q4>
inline void rows1(float* y, const ml_qtensor* W, const ml_qact* x, int r) {
  const int nb = W->cols / ML_QK;
  const size_t row_bytes = Q4 ? (size_t)W->cols / 2 : (size_t)W->cols;
  const uint8_t* wq = static_cast<const uint8_t*>(W->q) + (size_t)r * row_bytes;
  const size_t d0 = (size_t)r * (size_t)nb;
  float acc = 0.0f;
  int b = 0;
  for (; b + 2 <= nb; b += 2) {
    const __m512i xv = load_pair<Q4, false>(x->q + b * ML_QK);
    const __m512i xp = pair_prep<Q4>(xv);
    int32_t s0, s1;
    pair_sums<Q4>(pair_lanes<Q4, false>(wq, row_bytes, 0, b, xv, xp, Q4 ? 0 : _mm512_movepi8_mask(xv)), s0, s1);
    acc = acc + (float)s0 * (wscale<F16>(W->d, d0 + (size_t)b) * x->d[b]);
    acc = acc + (float)s1 * (wscale<F16>(W->d, d0 + (size_t)b + 1) * x->d[b + 1]);
  }
  if (b < nb) {
    const __m512i xv = load_pair<Q4, true>(x->q + b * ML_QK);
    const __m512i xp = pair_prep<Q4>(xv);
    int32_t s0, s1;
    pair_sums<Q4>(pair_lanes<Q4, true>(wq, row_bytes, 0, b, xv, xp, Q4 ? 0 : _mm512_movepi8_mask(xv)), s0, s1);
    acc = acc + (float)s0 * (wscale<F16>(W->d, d0 + (size_t)b) * x->d[b]);
  }
  y[r] = acc;
}

template <bool F16, bool Q4>
inline void matvec(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  int r = r0;
  for (; r + 4 <= r1; r += 4) rows4<F16, Q4>(y, W, x, r);
  for (; r < r1; ++r) rows1<F16, Q4>(y, W, x, r);
}

}  // namespace

extern "C" void ml_k_matvec_q8_avx512vnni(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  if (W->d_f16) matvec<true, false>(y, W, x, r0, r1);
  else matvec<false, false>(y, W, x, r0, r1);
}

extern "C" void ml_k_matvec_q4_avx512vnni(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  if (W->d_f16) matvec<true, true>(y, W, x, r0, r1);
  else matvec<false, true>(y, W, x, r0, r1);
}
