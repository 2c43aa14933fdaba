// AVX-512 VNNI matrix-vector kernels, row-major Q8 and Q4 weights times Q8 activations.
// Contract (kernels/ops.h): y[r] for r in [r0, r1) only; W->cols == x->n, a multiple of 32; any
// row range and any block count (an odd last block runs as a half-width step whose upper lanes
// are zero); f32 or f16 scales; unaligned loads; no allocation, no global state.
// Idiom: 4 rows per pass, and two 32-blocks per 512-bit vpdpbusd (lanes 0-7 block b, 8-15 block
// b + 1), so each activation pair is loaded once for four rows. Q8: there is no 512-bit psignb,
// so w is negated with a byte-masked subtract where x < 0 and vpdpbusd(0, |x|, that) gives the
// exact block dots. Q4: vpdpbusd(-8 * sum(x), nibbles, x), the offset computed once per pair.
// Lanes are converted to float and multiplied by {d_w * d_x} per block (scalar's float product,
// spread 8 lanes per block) with an FMA; one horizontal sum per row.
#include "kernels/avx512vnni/avx512vnni.h"
#include "kernels/x86_avx.h"

namespace {
using namespace ml::k::x86;

// Blocks b and b + 1 (ONE: block b alone) of rows [r, r + R), added into acc.
template <int R, bool F16, bool Q4, bool ONE>
inline void step(__m512* acc, const ml_qtensor* W, const ml_qact* x, int r, int b) {
  const int nb = W->cols / ML_QK;
  const int8_t* xp = x->q + b * ML_QK;
  const __m512i xv = ONE ? _mm512_zextsi256_si512(loadu256(xp)) : _mm512_loadu_si512(xp);
  const __m512 dx = wscale2<false, ONE>(x->d, (size_t)b);
  __m512i pre, ax;
  __mmask64 neg = 0;
  if constexpr (Q4) {
    pre = _mm512_sub_epi32(_mm512_setzero_si512(),
                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), xv));
    ax = xv;
  } else {
    pre = _mm512_setzero_si512();
    ax = _mm512_abs_epi8(xv);
    neg = _mm512_movepi8_mask(xv);
  }
#pragma GCC unroll 4
  for (int k = 0; k < R; ++k) {
    __m512i isum;
    if constexpr (Q4) {
      const uint8_t* w = static_cast<const uint8_t*>(W->q) + (size_t)(r + k) * (size_t)(W->cols / 2) + (size_t)b * 16;
      isum = _mm512_dpbusd_epi32(pre, ONE ? unpack_q4x1(w) : unpack_q4x2(w), ax);
    } else {
      const int8_t* w = static_cast<const int8_t*>(W->q) + (size_t)(r + k) * (size_t)W->cols + (size_t)b * ML_QK;
      const __m512i wv = ONE ? _mm512_zextsi256_si512(loadu256(w)) : _mm512_loadu_si512(w);
      isum = dot64_vnni(pre, ax, neg, wv);
    }
    const __m512 d = _mm512_mul_ps(wscale2<F16, ONE>(W->d, (size_t)(r + k) * (size_t)nb + (size_t)b), dx);
    acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[k]);
  }
}

template <int R, bool F16, bool Q4>
inline void rows(float* y, const ml_qtensor* W, const ml_qact* x, int r) {
  const int nb = W->cols / ML_QK;
  __m512 acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm512_setzero_ps();
  int b = 0;
  for (; b + 2 <= nb; b += 2) step<R, F16, Q4, false>(acc, W, x, r, b);
  if (b < nb) step<R, F16, Q4, true>(acc, W, x, r, b);
  __m256 acc8[R];
  for (int k = 0; k < R; ++k) acc8[k] = fold512(acc[k]);
  store_hsums<R>(y + r, acc8);
}

// Four rows per pass, then single rows.
template <bool F16, bool Q4>
inline void matvec(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  int r = r0;
  for (; r + 4 <= r1; r += 4) rows<4, F16, Q4>(y, W, x, r);
  for (; r < r1; ++r) rows<1, F16, Q4>(y, W, x, r);
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
