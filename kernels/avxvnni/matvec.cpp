// AVX-VNNI matrix-vector kernels, row-major Q8 and Q4 weights times Q8 activations: the avx2
// kernels (kernels/avx2/matvec.cpp) with VEX vpdpbusd forming each block dot in one instruction.
// Contract (kernels/ops.h): y[r] for r in [r0, r1) only; W->cols == x->n, a multiple of 32; any
// row range; f32 or f16 scales; unaligned loads; no allocation, no global state.
// Idiom: 4 rows per pass, so each activation block is loaded once for four rows. Q8: the block's
// exact int32 lanes are vpdpbusd(0, |x|, sign(w, x)); Q4: vpdpbusd(-8 * sum(x), nibbles, x), the
// offset computed once per block and used as the accumulator's start (no saturation: the lanes
// stay far below 2^31). The four rows' lanes are reduced in int32 and scaled exactly as scalar
// code does (acc += (float)isum * (dw * dx), separate multiply and add): bit-identical to scalar.
#include "kernels/avxvnni/avxvnni.h"
#include "kernels/x86_avx.h"

namespace {
using namespace ml::k::x86;

// The exact int32 block dot of row k of wq (rows row_bytes apart) with x's block b, in 8 lanes.
template <bool Q4>
inline __m256i block_lanes(const uint8_t* wq, size_t row_bytes, int k, int b, __m256i xq, __m256i ax_or_off) {
  if constexpr (Q4) {
    const __m256i n = unpack_q4(wq + (size_t)k * row_bytes + (size_t)b * (ML_QK / 2));
    return _mm256_dpbusd_avx_epi32(ax_or_off, n, xq);  // starts from -8 * sum(x)
  } else {
    const __m256i w = loadu256(wq + (size_t)k * row_bytes + (size_t)b * ML_QK);
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), ax_or_off, _mm256_sign_epi8(w, xq));
  }
}

// |x| for Q8, the per-lane -8 * sum(x) for Q4: computed once per block for every row.
template <bool Q4>
inline __m256i block_prep(__m256i xq) {
  if constexpr (Q4)
    return _mm256_sub_epi32(_mm256_setzero_si256(),
                            _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), xq));
  else return _mm256_abs_epi8(xq);
}

// Block b of four rows: acc (lane k = row k) += (float)isum_k * d_k.
template <bool Q4>
inline __m128 block4(__m128 acc, const uint8_t* wq, size_t row_bytes, const ml_qact* x, int b, __m128 d) {
  const __m256i xq = loadu256(x->q + b * ML_QK);
  const __m256i p = block_prep<Q4>(xq);
  const __m256i v0 = block_lanes<Q4>(wq, row_bytes, 0, b, xq, p), v1 = block_lanes<Q4>(wq, row_bytes, 1, b, xq, p);
  const __m256i v2 = block_lanes<Q4>(wq, row_bytes, 2, b, xq, p), v3 = block_lanes<Q4>(wq, row_bytes, 3, b, xq, p);
  return _mm_add_ps(acc, _mm_mul_ps(_mm_cvtepi32_ps(hsum4_i32(v0, v1, v2, v3)), d));
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
      for (int j = 0; j < 4; ++j) {
        acc = block4<Q4>(acc, wq, row_bytes, x, b + 2 * j, _mm256_castps256_ps128(d[j]));
        acc = block4<Q4>(acc, wq, row_bytes, x, b + 2 * j + 1, _mm256_extractf128_ps(d[j], 1));
      }
    } else {
      alignas(32) float t[32];
      for (int j = 0; j < 4; ++j) _mm256_store_ps(t + 8 * j, d[j]);
      for (int j = 0; j < n; ++j) acc = block4<Q4>(acc, wq, row_bytes, x, b + j, _mm_load_ps(t + 4 * j));
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
  float acc = 0.0f;
  for (int b = 0; b < nb; ++b) {
    const __m256i xq = loadu256(x->q + b * ML_QK);
    const int32_t isum = hsum_i32(block_lanes<Q4>(wq, row_bytes, 0, b, xq, block_prep<Q4>(xq)));
    acc = acc + (float)isum * (wscale<F16>(W->d, (size_t)r * (size_t)nb + (size_t)b) * x->d[b]);
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

extern "C" void ml_k_matvec_q8_avxvnni(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  if (W->d_f16) matvec<true, false>(y, W, x, r0, r1);
  else matvec<false, false>(y, W, x, r0, r1);
}

extern "C" void ml_k_matvec_q4_avxvnni(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  if (W->d_f16) matvec<true, true>(y, W, x, r0, r1);
  else matvec<false, true>(y, W, x, r0, r1);
}
