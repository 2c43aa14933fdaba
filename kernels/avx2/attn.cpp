// AVX2 attention kernels over the three KV-cache layouts (F32, Q8 with one scale per cached row,
// F16 widened with F16C): scores (dot_*) and the weighted sum of values (axpy_*); and the F16
// cache's stores (f32_to_f16, F16C).
// Contract (kernels/ops.h): row j of a cache starts at j * stride elements; only head_dim values
// of each row are read (tails through vmaskmov or a zero-padded stack copy); s[j] for j < n_rows
// and out[i] for i < head_dim are the only writes; no allocation, no global state.
// Idiom: float dots take one cache row at a time, front to back, with two accumulators holding
// kernels/numerics.h's 16 partial sums (plain mul/add, no FMA) and its fixed reduction tree, so
// they match scalar bit for bit; the Q8 dot is the exact int32 pmaddubsw(|q|, sign(k, q)) +
// pmaddwd sum, scaled exactly as scalar code (bit-identical). axpy keeps a 64-value slice of out
// in registers across all rows (8 add chains, one load and one store per value), out + w * v as
// two roundings like scalar code.
#include "core/half.h"
#include "kernels/avx2/avx2.h"
#include "kernels/x86_avx.h"

namespace {
using namespace ml::k::x86;

// Loads 8 values of a cache row as floats, the first m only when m < 8.
inline __m256 ld(const float* p, int m) { return load_f32_n(p, m); }
inline __m256 ld(const uint16_t* p, int m) { return load_f16_n(p, m); }
inline __m256 ld(const int8_t* p, int m) { return load_i8f_n(p, m); }

// s = dot(q, k): sixteen values per pass, so partials 0-7 (a0) and 8-15 (a1) are fixed
// registers (with passes of 8 and a runtime half, GCC kept them on the stack and every add
// waited on a store and a reload). One row at a time, front to back: on Zen 4, 4 interleaved
// rows read a cache from memory at about half the speed.
template <class T>
inline float dot_row(const float* q, const T* k, int hd) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= hd; i += 16) {
    a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_loadu_ps(q + i), ld(k + i, 8)));
    a1 = _mm256_add_ps(a1, _mm256_mul_ps(_mm256_loadu_ps(q + i + 8), ld(k + i + 8, 8)));
  }
  if (i < hd) {  // 1..15 values left: the first 8 (or fewer) go to partials 0-7, the rest to 8-15
    const int m = hd - i;
    a0 = _mm256_add_ps(a0, _mm256_mul_ps(load_f32_n(q + i, m), ld(k + i, m)));
    if (m > 8) a1 = _mm256_add_ps(a1, _mm256_mul_ps(load_f32_n(q + i + 8, m - 8), ld(k + i + 8, m - 8)));
  }
  return sum16(a0, a1);
}

template <class T>
inline void dot(float* s, const float* q, const T* K, size_t ks, int n_rows, int hd) {
  for (int j = 0; j < n_rows; ++j) s[j] = dot_row(q, K + (size_t)j * ks, hd);
}

// out[i] += sum_j wt(j) * V[j * vs + i] for the NV * 8 values at out (the last vector holds
// only m values when m < 8), kept in registers while every row is added in order.
template <int NV, class T, class Wt>
inline void axpy_slice(float* out, const T* V, size_t vs, int n_rows, int m, const Wt& wt) {
  __m256 acc[NV];
  for (int k = 0; k < NV; ++k) acc[k] = load_f32_n(out + 8 * k, k == NV - 1 ? m : 8);
  for (int j = 0; j < n_rows; ++j) {
    const __m256 w = _mm256_set1_ps(wt(j));
    const T* v = V + (size_t)j * vs;
#pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(w, ld(v + 8 * k, k == NV - 1 ? m : 8)));
  }
  for (int k = 0; k < NV; ++k) store_f32_n(out + 8 * k, acc[k], k == NV - 1 ? m : 8);
}

template <class T, class Wt>
inline void axpy(float* out, const T* V, size_t vs, int n_rows, int hd, const Wt& wt) {
  int i = 0;  // 64-value slices: 8 independent add chains, enough to hide the add latency
  for (; i + 64 <= hd; i += 64) axpy_slice<8>(out + i, V + i, vs, n_rows, 8, wt);
  for (; i + 32 <= hd; i += 32) axpy_slice<4>(out + i, V + i, vs, n_rows, 8, wt);
  for (; i < hd; i += 8) axpy_slice<1>(out + i, V + i, vs, n_rows, hd - i, wt);
}

// Q8: isum[k] = exact int32 dot of q with row k, for k < R.
template <int R>
inline void dot_q8_rows(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd, size_t ks,
                        size_t ds, int hd) {
  __m256i acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm256_setzero_si256();
  for (int i = 0; i < hd; i += 32) {
    const int m = hd - i;
    const __m256i qv = load_i8x32_n(q + i, m);
    const __m256i aq = _mm256_abs_epi8(qv);
#pragma GCC unroll 4
    for (int k = 0; k < R; ++k)
      acc[k] = _mm256_add_epi32(acc[k], dot32_maddubs(aq, qv, load_i8x32_n(K + (size_t)k * ks + i, m)));
  }
  for (int k = 0; k < R; ++k) s[k] = (float)hsum_i32(acc[k]) * (qd * Kd[(size_t)k * ds]);
}

}  // namespace

extern "C" void ml_k_dot_f32_avx2(float* s, const float* q, const float* K, size_t k_stride, int n_rows,
                                  int head_dim) {
  dot(s, q, K, k_stride, n_rows, head_dim);
}

extern "C" void ml_k_dot_f16_avx2(float* s, const float* q, const uint16_t* K, size_t k_stride, int n_rows,
                                  int head_dim) {
  dot(s, q, K, k_stride, n_rows, head_dim);
}

extern "C" void ml_k_axpy_f32_avx2(float* out, const float* w, const float* V, size_t v_stride, int n_rows,
                                   int head_dim) {
  axpy(out, V, v_stride, n_rows, head_dim, [w](int j) { return w[j]; });
}

extern "C" void ml_k_axpy_f16_avx2(float* out, const float* w, const uint16_t* V, size_t v_stride, int n_rows,
                                   int head_dim) {
  axpy(out, V, v_stride, n_rows, head_dim, [w](int j) { return w[j]; });
}

// The row weight is w[j] * Vd[j * d_stride], the same float product as scalar code.
extern "C" void ml_k_axpy_q8_avx2(float* out, const float* w, const int8_t* V, const float* Vd, size_t v_stride,
                                  size_t d_stride, int n_rows, int head_dim) {
  axpy(out, V, v_stride, n_rows, head_dim, [w, Vd, d_stride](int j) { return w[j] * Vd[(size_t)j * d_stride]; });
}

extern "C" void ml_k_dot_q8_avx2(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd,
                                 size_t k_stride, size_t d_stride, int n_rows, int head_dim) {
  int j = 0;
  for (; j + 4 <= n_rows; j += 4)
    dot_q8_rows<4>(s + j, q, qd, K + (size_t)j * k_stride, Kd + (size_t)j * d_stride, k_stride, d_stride, head_dim);
  for (; j < n_rows; ++j)
    dot_q8_rows<1>(s + j, q, qd, K + (size_t)j * k_stride, Kd + (size_t)j * d_stride, k_stride, d_stride, head_dim);
}

// F16C's conversion rounds to nearest even as ml_float_to_half does; only a NaN keeps part of its
// payload there, so a group of 8 holding a NaN is converted by the scalar rule instead.
extern "C" void ml_k_f32_to_f16_avx2(uint16_t* dst, const float* src, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    if (_mm256_testz_ps(nan, nan)) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    } else {
      for (int j = i; j < i + 8; ++j) dst[j] = ml_float_to_half(src[j]);
    }
  }
  for (; i < n; ++i) dst[i] = ml_float_to_half(src[i]);
}
