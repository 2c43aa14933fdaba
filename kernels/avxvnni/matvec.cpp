// AVX-VNNI matrix-vector kernels, row-major Q8 and Q4 weights times Q8 activations: the avx2
// kernels (kernels/avx2/matvec.cpp) with vpdpbusd (VEX) accumulating the block dot in one
// instruction. Contract (kernels/ops.h): y[r] for r in [r0, r1) only; W->cols == x->n, a multiple
// of 32; any row range; f32 or f16 scales; unaligned loads; no allocation, no global state.
// Idiom: 4 rows per pass, so each activation block is loaded once for four rows. Q8: a block's
// exact int32 dot is vpdpbusd(0, |x|, sign(w, x)); Q4: vpdpbusd(-8 * sum(x), nibbles, x), the
// offset computed once per block and used as the accumulator's start (exact: no saturation, the
// lanes stay far below 2^31). The 8 lanes are converted to float and multiplied by d_w * d_x
// (scalar's float product) with an FMA into 8 float lanes per row; one horizontal sum per row.
#include "kernels/avxvnni/avxvnni.h"
#include "kernels/x86_avx.h"

namespace {
using namespace ml::k::x86;

// Rows [r, r + R) of a Q8 matrix.
template <int R, bool F16>
inline void q8_rows(float* y, const ml_qtensor* W, const ml_qact* x, int r) {
  const int nb = W->cols / ML_QK;
  const int8_t* wq = static_cast<const int8_t*>(W->q) + (size_t)r * (size_t)W->cols;
  const size_t d0 = (size_t)r * (size_t)nb;
  __m256 acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    const __m256i xq = loadu256(x->q + b * ML_QK);
    const __m256i ax = _mm256_abs_epi8(xq);
    const float dx = x->d[b];
#pragma GCC unroll 4
    for (int k = 0; k < R; ++k) {
      const __m256i w = loadu256(wq + (size_t)k * (size_t)W->cols + (size_t)b * ML_QK);
      const __m256i isum = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), ax, _mm256_sign_epi8(w, xq));
      const __m256 s = _mm256_cvtepi32_ps(isum);
      const float d = wscale<F16>(W->d, d0 + (size_t)k * (size_t)nb + (size_t)b) * dx;
      acc[k] = _mm256_fmadd_ps(s, _mm256_set1_ps(d), acc[k]);
    }
  }
  store_hsums<R>(y + r, acc);
}

// Rows [r, r + R) of a Q4 matrix: raw nibbles times x, accumulated onto -8 * sum(x) per lane.
template <int R, bool F16>
inline void q4_rows(float* y, const ml_qtensor* W, const ml_qact* x, int r) {
  const int nb = W->cols / ML_QK;
  const size_t row_bytes = (size_t)W->cols / 2;
  const uint8_t* wq = static_cast<const uint8_t*>(W->q) + (size_t)r * row_bytes;
  const size_t d0 = (size_t)r * (size_t)nb;
  __m256 acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    const __m256i xq = loadu256(x->q + b * ML_QK);
    const __m256i off8 = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), xq);
    const __m256i off = _mm256_sub_epi32(_mm256_setzero_si256(), off8);  // -8 * sum(x), per lane
    const float dx = x->d[b];
#pragma GCC unroll 4
    for (int k = 0; k < R; ++k) {
      const __m256i n = unpack_q4(wq + (size_t)k * row_bytes + (size_t)b * (ML_QK / 2));
      const __m256i isum = _mm256_dpbusd_avx_epi32(off, n, xq);
      const float d = wscale<F16>(W->d, d0 + (size_t)k * (size_t)nb + (size_t)b) * dx;
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), acc[k]);
    }
  }
  store_hsums<R>(y + r, acc);
}

// Four rows per pass, then single rows.
template <bool F16, bool Q4>
inline void matvec(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    if constexpr (Q4) q4_rows<4, F16>(y, W, x, r);
    else q8_rows<4, F16>(y, W, x, r);
  }
  for (; r < r1; ++r) {
    if constexpr (Q4) q4_rows<1, F16>(y, W, x, r);
    else q8_rows<1, F16>(y, W, x, r);
  }
}

}  // namespace

extern "C" void ml_k_matvec_q8_avxvnni(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  if (W->d_f16) matvec<true, false>(y, W, x, r0, r1);
  else matvec<false, false>(y, W, x, r0, r1);
}

extern "C" void ml_k_matvec_q4_avxvnni(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  if (W->d_f16) matvec<true, true>(y, W, x, r0, r1);
  else matvec<false, true>(y, W, x, r0, r1);
}
