// AVX2 matrix-vector kernels, row-major Q8 and Q4 weights times Q8 activations.
// Contract (kernels/ops.h): y[r] for r in [r0, r1) only; W->cols == x->n, a multiple of 32; any
// row range; f32 or f16 scales; unaligned loads; no allocation, no global state.
// Idiom: 4 rows per pass, so each activation block is loaded (and |x| computed) once for four
// rows. A block's exact int32 dot lands in 8 lanes (pmaddubsw(|x|, sign(w, x)) + pmaddwd for Q8;
// pmaddubsw(nibbles, x) + pmaddwd minus 8 * sum(x) for Q4), is converted to float and multiplied
// by d_w * d_x (the same float product as scalar) with an explicit FMA into 8 float lanes per row.
// The horizontal reduction happens once per row, so results differ from scalar only in the order
// of float additions (exact with unit scales; within 1e-5 of the product magnitude otherwise).
#include "kernels/avx2/avx2.h"
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
      const __m256 s = _mm256_cvtepi32_ps(dot32_maddubs(ax, xq, w));
      const float d = wscale<F16>(W->d, d0 + (size_t)k * (size_t)nb + (size_t)b) * dx;
      acc[k] = _mm256_fmadd_ps(s, _mm256_set1_ps(d), acc[k]);
    }
  }
  store_hsums<R>(y + r, acc);
}

// Rows [r, r + R) of a Q4 matrix: raw nibbles times x, minus 8 * sum(x) per lane (exact in int32).
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
    const __m256i off = dotu32_maddubs(_mm256_set1_epi8(8), xq);  // 8 * sum(x), per lane
    const float dx = x->d[b];
#pragma GCC unroll 4
    for (int k = 0; k < R; ++k) {
      const __m256i n = unpack_q4(wq + (size_t)k * row_bytes + (size_t)b * (ML_QK / 2));
      const __m256i isum = _mm256_sub_epi32(dotu32_maddubs(n, xq), off);
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

extern "C" void ml_k_matvec_q8_avx2(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  if (W->d_f16) matvec<true, false>(y, W, x, r0, r1);
  else matvec<false, false>(y, W, x, r0, r1);
}

extern "C" void ml_k_matvec_q4_avx2(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  if (W->d_f16) matvec<true, true>(y, W, x, r0, r1);
  else matvec<false, true>(y, W, x, r0, r1);
}
