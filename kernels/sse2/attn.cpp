// SSE2 attention kernels over the three KV-cache layouts (F32, Q8 with one scale per cached
// row, F16): scores (dot_*) and the weighted sum of values (axpy_*).
// Contract (kernels/ops.h): rows j < n_rows start at j * stride elements; only head_dim values
// of each row are read (tails use narrower loads or scalar code, never a read past the row);
// s[j] for j < n_rows and out[i] for i < head_dim are the only writes; no allocation.
// Numerics: float dots keep kernels/numerics.h's 16 partial sums in four registers and reduce
// them in its fixed tree, so they match scalar bit for bit. Q8 dots are exact int32 (sign-extend + pmaddwd), so dot_q8
// matches scalar bit for bit. The axpys add rows in order j = 0, 1, ... per element, exactly
// the scalar operations, with out kept in registers across rows for each chunk of columns.
// Halves are widened by ml_half4_to_float, bit-exact with ml_half_to_float.
#include <emmintrin.h>

#include <cstring>

#include "core/half.h"
#include "kernels/sse2/sse2.h"
#include "kernels/x86_common.h"

namespace {
// Four floats of a cache row widened from halves, the first m (< 4) only when m < 4.
inline __m128 load4(const float* p, int m) { return ml_loadu_ps_n(p, m); }
inline __m128 load4(const uint16_t* p, int m) {
  if (m >= 4) return ml_load_half4(p);
  uint16_t t[4] = {0, 0, 0, 0};
  for (int i = 0; i < m; ++i) t[i] = p[i];
  return ml_load_half4(t);
}

// s[j] = dot(q, row j) in the canonical order: values i..i+3 go to register (i / 4) % 4.
template <class T>
inline void dot_rows(float* s, const float* q, const T* K, size_t k_stride, int n_rows, int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const T* k = K + (size_t)j * k_stride;
    __m128 r[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int i = 0; i < head_dim; i += 4) {
      const int m = head_dim - i;
      r[(i >> 2) & 3] = _mm_add_ps(r[(i >> 2) & 3], _mm_mul_ps(ml_loadu_ps_n(q + i, m), load4(k + i, m)));
    }
    s[j] = ml_sum16_ps(r);
  }
}
}  // namespace

// s[j] = sum_i q[i] * K[j*k_stride + i]
extern "C" void ml_k_dot_f32_sse2(float* s, const float* q, const float* K, size_t k_stride, int n_rows,
                                  int head_dim) {
  dot_rows(s, q, K, k_stride, n_rows, head_dim);
}

// As dot_f32 with K's halves widened exactly to float.
extern "C" void ml_k_dot_f16_sse2(float* s, const float* q, const uint16_t* K, size_t k_stride, int n_rows,
                                  int head_dim) {
  dot_rows(s, q, K, k_stride, n_rows, head_dim);
}

// s[j] = (float)(int32 sum_i q[i] * K[j*k_stride + i]) * (qd * Kd[j*d_stride])
extern "C" void ml_k_dot_q8_sse2(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd,
                                 size_t k_stride, size_t d_stride, int n_rows, int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const int8_t* k = K + (size_t)j * k_stride;
    __m128i acc = _mm_setzero_si128();  // head_dim * 127 * 127 < 2^31 for head_dim < 133000
    int i = 0;
    for (; i + 16 <= head_dim; i += 16)
      acc = _mm_add_epi32(acc, ml_dot_i8x16_sse2(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)),
                                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i))));
    if (i + 8 <= head_dim) {
      const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k + i));
      acc = _mm_add_epi32(acc, _mm_madd_epi16(ml_sext8_lo(a), ml_sext8_lo(b)));
      i += 8;
    }
    int32_t isum = ml_hsum_epi32(acc);
    for (; i < head_dim; ++i) isum += (int32_t)q[i] * (int32_t)k[i];
    s[j] = (float)isum * (qd * Kd[(size_t)j * d_stride]);
  }
}

namespace {
// Overloads that widen V's element type to float: 4 values, 16 values, 1 value. Each reads
// exactly the bytes of the values it returns.
inline __m128 load4(const float* p) { return _mm_loadu_ps(p); }
inline __m128 load4(const uint16_t* p) { return ml_load_half4(p); }
inline __m128 load4(const int8_t* p) {
  int32_t bits;
  std::memcpy(&bits, p, 4);
  const __m128i v = ml_sext8_lo(_mm_cvtsi32_si128(bits));
  return _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(v, v), 16));
}
inline void load16(const float* p, __m128 v[4]) {
  for (int c = 0; c < 4; ++c) v[c] = _mm_loadu_ps(p + 4 * c);
}
inline void load16(const uint16_t* p, __m128 v[4]) {
  ml_load_half8(p, &v[0], &v[1]);
  ml_load_half8(p + 8, &v[2], &v[3]);
}
inline void load16(const int8_t* p, __m128 v[4]) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i lo = ml_sext8_lo(b), hi = ml_sext8_hi(b);
  v[0] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(lo, lo), 16));
  v[1] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpackhi_epi16(lo, lo), 16));
  v[2] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(hi, hi), 16));
  v[3] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpackhi_epi16(hi, hi), 16));
}
inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) { return ml_half_to_float(*p); }
inline float load1(const int8_t* p) { return (float)*p; }

// out[i] = out[i] + wj * V[j][i] for j = 0, 1, ..., with wj = w[j] (Vd null) or
// w[j] * Vd[j*d_stride]: chunks of 16 columns (four accumulators held across all rows), then
// chunks of 4, then single columns. Per element, the scalar kernel's operations in its order.
template <class T>
inline void axpy(float* out, const float* w, const T* V, const float* Vd, size_t v_stride, size_t d_stride,
                 int n_rows, int head_dim) {
  auto wj = [&](int j) { return Vd ? w[j] * Vd[(size_t)j * d_stride] : w[j]; };
  int i = 0;
  for (; i + 16 <= head_dim; i += 16) {
    __m128 o[4];
    for (int c = 0; c < 4; ++c) o[c] = _mm_loadu_ps(out + i + 4 * c);
    for (int j = 0; j < n_rows; ++j) {
      const __m128 vw = _mm_set1_ps(wj(j));
      __m128 v[4];
      load16(V + (size_t)j * v_stride + i, v);
      for (int c = 0; c < 4; ++c) o[c] = _mm_add_ps(o[c], _mm_mul_ps(vw, v[c]));
    }
    for (int c = 0; c < 4; ++c) _mm_storeu_ps(out + i + 4 * c, o[c]);
  }
  for (; i + 4 <= head_dim; i += 4) {
    __m128 o = _mm_loadu_ps(out + i);
    for (int j = 0; j < n_rows; ++j)
      o = _mm_add_ps(o, _mm_mul_ps(_mm_set1_ps(wj(j)), load4(V + (size_t)j * v_stride + i)));
    _mm_storeu_ps(out + i, o);
  }
  for (; i < head_dim; ++i) {
    float o = out[i];
    for (int j = 0; j < n_rows; ++j) o = o + wj(j) * load1(V + (size_t)j * v_stride + i);
    out[i] = o;
  }
}
}  // namespace

// out[i] = out[i] + sum_j w[j] * V[j*v_stride + i], rows added in order j = 0, 1, ...
extern "C" void ml_k_axpy_f32_sse2(float* out, const float* w, const float* V, size_t v_stride, int n_rows,
                                   int head_dim) {
  axpy(out, w, V, nullptr, v_stride, 0, n_rows, head_dim);
}

// As axpy_f32 with V's halves widened exactly to float.
extern "C" void ml_k_axpy_f16_sse2(float* out, const float* w, const uint16_t* V, size_t v_stride, int n_rows,
                                   int head_dim) {
  axpy(out, w, V, nullptr, v_stride, 0, n_rows, head_dim);
}

// out[i] = out[i] + sum_j (w[j] * Vd[j*d_stride]) * V[j*v_stride + i]
extern "C" void ml_k_axpy_q8_sse2(float* out, const float* w, const int8_t* V, const float* Vd, size_t v_stride,
                                  size_t d_stride, int n_rows, int head_dim) {
  axpy(out, w, V, Vd, v_stride, d_stride, n_rows, head_dim);
}
