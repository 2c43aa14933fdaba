// SSE2 matrix-vector kernels (Q8 and Q4 weights times Q8_0 activations).
// Contract (kernels/ops.h): y[r] for r in [r0, r1) only; W->cols == x->n, a multiple of 32;
// unaligned loads; no allocation, no global state.
// Idiom (spec/kernels.txt, sse2): sign-extend both operands to int16 (punpck + psraw 8), then
// pmaddwd. Four rows per pass, so each activation block is loaded and widened once and used
// four times; Q4 blocks are unpacked to int8 (& 0x0F, >> 4, - 8) and then take the Q8 path.
// Rounding: per block, the four rows' int32 lanes are transposed and summed in integers
// (ml_hsum4_epi32, exact), giving one vector [isum_r .. isum_r+3]; one cvtdq2ps, one multiply
// by [d_w(r+k) * d_x] and one add into a float accumulator whose lane k is row r+k. That is
// the scalar kernel's float arithmetic in its order, so every row matches it bit for bit, and
// there is no horizontal float reduction at all (it costs fewer instructions per block than
// converting and scaling four rows' lanes separately). A partial pass pads with zero rows.
#include <emmintrin.h>

#include "kernels/sse2/sse2.h"
#include "kernels/x86_common.h"

namespace {

// Int32 lanes of one 32-block dot: w0/w1 are the weight's int8 values 0..15 / 16..31, xs the
// activation block already widened to int16 (4 vectors of 8).
inline __m128i block_dot(__m128i w0, __m128i w1, const __m128i xs[4]) {
  const __m128i a = _mm_add_epi32(_mm_madd_epi16(ml_sext8_lo(w0), xs[0]), _mm_madd_epi16(ml_sext8_hi(w0), xs[1]));
  const __m128i b = _mm_add_epi32(_mm_madd_epi16(ml_sext8_lo(w1), xs[2]), _mm_madd_epi16(ml_sext8_hi(w1), xs[3]));
  return _mm_add_epi32(a, b);
}

// Rows r .. r+R-1 (R <= 4). Q4: row stride cols/2 bytes, 16 bytes per block; Q8: cols, 32.
template <int R, bool Q4>
inline void rows_pass(float* y, const ml_qtensor* W, const ml_qact* x, int r) {
  const int cols = W->cols, nb = cols / ML_QK;
  const size_t row_bytes = Q4 ? (size_t)cols / 2 : (size_t)cols;
  const size_t block_bytes = Q4 ? ML_QK / 2 : ML_QK;
  const uint8_t* w[R];
  for (int k = 0; k < R; ++k) w[k] = static_cast<const uint8_t*>(W->q) + (size_t)(r + k) * row_bytes;
  __m128 acc = _mm_setzero_ps();  // lane k: row r + k
  for (int b = 0; b < nb; ++b) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x->q + b * ML_QK));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x->q + b * ML_QK + 16));
    const __m128i xs[4] = {ml_sext8_lo(x0), ml_sext8_hi(x0), ml_sext8_lo(x1), ml_sext8_hi(x1)};
    __m128i dot[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
#pragma GCC unroll 4
    for (int k = 0; k < R; ++k) {
      const uint8_t* wb = w[k] + (size_t)b * block_bytes;
      __m128i w0, w1;
      if constexpr (Q4) {
        ml_q4_unpack(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb)), &w0, &w1);
      } else {
        w0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb));
        w1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 16));
      }
      dot[k] = block_dot(w0, w1, xs);
    }
    auto dw = [&](int k) { return k < R ? ml_qtensor_scale(W, (size_t)(r + k) * (size_t)nb + (size_t)b) : 0.0f; };
    const __m128 d = _mm_mul_ps(_mm_set_ps(dw(3), dw(2), dw(1), dw(0)), _mm_set1_ps(x->d[b]));
    const __m128i isum = ml_hsum4_epi32(dot[0], dot[1], dot[2], dot[3]);
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm_cvtepi32_ps(isum), d));
  }
  if constexpr (R == 4) {
    _mm_storeu_ps(y + r, acc);
  } else {
    float out[4];
    _mm_storeu_ps(out, acc);
    for (int k = 0; k < R; ++k) y[r + k] = out[k];
  }
}

// Passes of 4 rows over [r0, r1), then one pass of the 1..3 rows left.
template <bool Q4>
inline void matvec(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  int r = r0;
  for (; r + 4 <= r1; r += 4) rows_pass<4, Q4>(y, W, x, r);
  switch (r1 - r) {
    case 3: rows_pass<3, Q4>(y, W, x, r); break;
    case 2: rows_pass<2, Q4>(y, W, x, r); break;
    case 1: rows_pass<1, Q4>(y, W, x, r); break;
    default: break;
  }
}

}  // namespace

extern "C" void ml_k_matvec_q8_sse2(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  matvec<false>(y, W, x, r0, r1);
}

extern "C" void ml_k_matvec_q4_sse2(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  matvec<true>(y, W, x, r0, r1);
}
