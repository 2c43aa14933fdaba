// The row-major Q8/Q4 matvec of the 256- and 512-bit x86 ISAs (avx2, avxvnni, avx512vnni),
// written once over a traits type V that supplies the block dot. Include it only from a
// kernels/<isa>/matvec.cpp, which defines V and the two extern "C" functions
// (ML_X86_MATVEC_ENTRIES below).
//
// Contract (kernels/ops.h): y[r] for r in [r0, r1) only; W->cols == x->n, a multiple of 32; any
// row range and any block count; f32 or f16 scales; unaligned loads; no allocation, no global state.
//
// Four rows per pass share each activation block. The driver walks blocks in pairs (b, b + 1),
// 8 blocks per group so that each row's scales are one vector load (wscale_4x8 gives the pair's
// {d_w * d_x} as one 256-bit vector); an odd last block is a pair with ONE set. V supplies:
//   step4<Q4, ONE>(acc, wq, row_bytes, x, b, d)   four rows (lane k = row k) and the pair:
//       acc += (float)isum(b) * d.lo, then acc += (float)isum(b + 1) * d.hi (skipped for ONE),
//       each isum the exact int32 block dot, reduced for the four rows in int32
//   sums1<Q4, ONE>(wq, x, b, s0, s1)   one row's exact block sums of blocks b and b + 1
// so each row does scalar's acc += (float)isum * (dw * dx), separate multiply and add, block by
// block: y is bit-identical to ml_k_matvec_q*_scalar for any scales, and does not depend on the
// row range. (Scaling the lanes and reducing once per row is no faster with the reduction shared
// by four rows, and its rounding follows the lanes, which can be far larger than the block sum
// when they cancel.)
//
// Block256<L> turns a one-block lane dot L (avx2, avxvnni: 8 int32 lanes per block) into V.
#pragma once
#include "kernels/ops.h"
#include "kernels/x86_avx.h"

namespace ml::k::x86mv {

// Rows [r, r + 4), 8 blocks per group so that each row's scales are one vector load.
template <class V, bool F16, bool Q4>
inline void rows4(float* y, const ml_qtensor* W, const ml_qact* x, int r) {
  const int nb = W->cols / ML_QK;
  const size_t row_bytes = Q4 ? (size_t)W->cols / 2 : (size_t)W->cols;
  const uint8_t* wq = static_cast<const uint8_t*>(W->q) + (size_t)r * row_bytes;
  __m128 acc = _mm_setzero_ps();
  for (int b = 0; b < nb; b += 8) {
    const int n = nb - b < 8 ? nb - b : 8;
    __m256 d[4];  // d[j]: scales of blocks b + 2j (low half) and b + 2j + 1 (high half)
    x86::wscale_4x8<F16>(d, W->d, (size_t)r * (size_t)nb + (size_t)b, (size_t)nb, x->d + b, n);
    if (n == 8) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc = V::template step4<Q4, false>(acc, wq, row_bytes, x, b + 2 * j, d[j]);
    } else {
      int j = 0;
      for (; 2 * j + 1 < n; ++j) acc = V::template step4<Q4, false>(acc, wq, row_bytes, x, b + 2 * j, d[j & 3]);
      if (2 * j < n) acc = V::template step4<Q4, true>(acc, wq, row_bytes, x, b + 2 * j, d[j & 3]);
    }
  }
  _mm_storeu_ps(y + r, acc);
}

// One row (the last r1 - r0 mod 4 rows).
template <class V, bool F16, bool Q4>
inline void rows1(float* y, const ml_qtensor* W, const ml_qact* x, int r) {
  const int nb = W->cols / ML_QK;
  const size_t row_bytes = Q4 ? (size_t)W->cols / 2 : (size_t)W->cols;
  const uint8_t* wq = static_cast<const uint8_t*>(W->q) + (size_t)r * row_bytes;
  const size_t d0 = (size_t)r * (size_t)nb;
  float acc = 0.0f;
  int b = 0;
  for (; b + 2 <= nb; b += 2) {
    int32_t s0, s1;
    V::template sums1<Q4, false>(wq, x, b, s0, s1);
    acc = acc + (float)s0 * (x86::wscale<F16>(W->d, d0 + (size_t)b) * x->d[b]);
    acc = acc + (float)s1 * (x86::wscale<F16>(W->d, d0 + (size_t)b + 1) * x->d[b + 1]);
  }
  if (b < nb) {
    int32_t s0, s1;
    V::template sums1<Q4, true>(wq, x, b, s0, s1);
    acc = acc + (float)s0 * (x86::wscale<F16>(W->d, d0 + (size_t)b) * x->d[b]);
  }
  y[r] = acc;
}

template <class V, bool F16, bool Q4>
inline void matvec(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  int r = r0;
  for (; r + 4 <= r1; r += 4) rows4<V, F16, Q4>(y, W, x, r);
  for (; r < r1; ++r) rows1<V, F16, Q4>(y, W, x, r);
}

// V for a lane dot of one block at a time. L supplies
//   prep<Q4>(xq)                        per block, shared by the four rows: |x| for Q8, the
//                                       per-lane offset term of 8 * sum(x) for Q4
//   lanes<Q4>(w, xq, p)                 the exact int32 block dot of one row's block w in 8 lanes
template <class L>
struct Block256 {
  template <bool Q4>
  static __m256i row_lanes(const uint8_t* wq, size_t row_bytes, int k, int b, __m256i xq, __m256i p) {
    return L::template lanes<Q4>(wq + (size_t)k * row_bytes + (size_t)b * (Q4 ? ML_QK / 2 : ML_QK), xq, p);
  }

  // Block b of four rows: acc (lane k = row k) += (float)isum_k * d_k.
  template <bool Q4>
  static __m128 block4(__m128 acc, const uint8_t* wq, size_t row_bytes, const ml_qact* x, int b, __m128 d) {
    const __m256i xq = x86::loadu256(x->q + b * ML_QK);
    const __m256i p = L::template prep<Q4>(xq);
    const __m256i v0 = row_lanes<Q4>(wq, row_bytes, 0, b, xq, p), v1 = row_lanes<Q4>(wq, row_bytes, 1, b, xq, p);
    const __m256i v2 = row_lanes<Q4>(wq, row_bytes, 2, b, xq, p), v3 = row_lanes<Q4>(wq, row_bytes, 3, b, xq, p);
    return _mm_add_ps(acc, _mm_mul_ps(_mm_cvtepi32_ps(x86::hsum4_i32(v0, v1, v2, v3)), d));
  }

  template <bool Q4, bool ONE>
  static __m128 step4(__m128 acc, const uint8_t* wq, size_t row_bytes, const ml_qact* x, int b, __m256 d) {
    acc = block4<Q4>(acc, wq, row_bytes, x, b, _mm256_castps256_ps128(d));
    if constexpr (!ONE) acc = block4<Q4>(acc, wq, row_bytes, x, b + 1, _mm256_extractf128_ps(d, 1));
    return acc;
  }

  template <bool Q4>
  static int32_t sum1(const uint8_t* wq, const ml_qact* x, int b) {
    const __m256i xq = x86::loadu256(x->q + b * ML_QK);
    return x86::hsum_i32(row_lanes<Q4>(wq, 0, 0, b, xq, L::template prep<Q4>(xq)));
  }

  template <bool Q4, bool ONE>
  static void sums1(const uint8_t* wq, const ml_qact* x, int b, int32_t& s0, int32_t& s1) {
    s0 = sum1<Q4>(wq, x, b);
    s1 = 0;
    if constexpr (!ONE) s1 = sum1<Q4>(wq, x, b + 1);
  }
};

}  // namespace ml::k::x86mv

// The two extern "C" entry points of ISA `isa` over traits V, dispatching on the scales' type.
#define ML_X86_MATVEC_ENTRIES(V, isa)                                                                     \
  extern "C" void ml_k_matvec_q8_##isa(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) { \
    if (W->d_f16) ml::k::x86mv::matvec<V, true, false>(y, W, x, r0, r1);                                  \
    else ml::k::x86mv::matvec<V, false, false>(y, W, x, r0, r1);                                          \
  }                                                                                                       \
  extern "C" void ml_k_matvec_q4_##isa(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) { \
    if (W->d_f16) ml::k::x86mv::matvec<V, true, true>(y, W, x, r0, r1);                                   \
    else ml::k::x86mv::matvec<V, false, true>(y, W, x, r0, r1);                                           \
  }
