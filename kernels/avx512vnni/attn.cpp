// AVX-512 attention kernels: the Q8-cache score dot, the F32/F16 score dots and the three
// weighted sums of values (axpy).
// Contract (kernels/ops.h): row j of a cache starts at j * stride elements; only head_dim values
// of each row are read (tails through masked loads, which never touch masked-off elements);
// s[j] for j < n_rows and out[i] for i < head_dim are the only writes; no allocation, no global
// state.
// Idioms. Q8 dot: 4 cache rows per pass share each 64-quant chunk of q, its |q| and its sign
// mask; vpdpbusd(acc, |q|, k negated where q < 0) accumulates the exact int32 dot (bit-identical
// to scalar code). Float dots: one row at a time, front to back (on Zen 4, avx2's 4 interleaved
// rows read a cache from memory at half the speed), one 16-lane register holding
// kernels/numerics.h's 16 partial sums (plain mul/add, no FMA), reduced by its fixed tree:
// bit-identical to scalar. axpy: up to 128 values of out (8 registers) stay in registers while
// every row is added in order, so a row of head_dim <= 128 is read once, front to back; out + w * v
// as two roundings like scalar code.
#include "kernels/avx512vnni/avx512vnni.h"
#include "kernels/x86_avx.h"

namespace {
using namespace ml::k::x86;

template <int R>
inline void dot_q8_rows(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd, size_t ks,
                        size_t ds, int hd) {
  __m512i acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm512_setzero_si512();
  for (int i = 0; i < hd; i += 64) {
    const __mmask64 m = mask64(hd - i);
    const __m512i qv = _mm512_maskz_loadu_epi8(m, q + i);
    const __m512i aq = _mm512_abs_epi8(qv);
    const __mmask64 neg = _mm512_movepi8_mask(qv);
#pragma GCC unroll 4
    for (int k = 0; k < R; ++k)
      acc[k] = dot64_vnni(acc[k], aq, neg, _mm512_maskz_loadu_epi8(m, K + (size_t)k * ks + i));
  }
  for (int k = 0; k < R; ++k) s[k] = (float)hsum_i32(fold512(acc[k])) * (qd * Kd[(size_t)k * ds]);
}

// A row's 16 values at p as floats, the lanes outside m zero.
inline __m512 ld16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 ld16(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
inline __m512 ld16(const int8_t* p, __mmask16 m) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)));
}

template <class T>
inline void dot(float* s, const float* q, const T* K, size_t ks, int n_rows, int hd) {
  for (int j = 0; j < n_rows; ++j) {
    const T* k = K + (size_t)j * ks;
    __m512 acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= hd; i += 16) acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(q + i), ld16(k + i, 0xFFFF)));
    if (i < hd) {  // lanes past head_dim add +0, which changes no partial
      const __mmask16 m = mask16(hd - i);
      acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, q + i), ld16(k + i, m)));
    }
    s[j] = sum16(lo256(acc), hi256(acc));  // numerics.h's tree: the halves added, then hsum's steps
  }
}

// out[i] += sum_j wt(j) * V[j * vs + i] for NV * 16 values at out, the last vector m (1..16) of
// them, kept in registers while every row is added in order.
template <int NV, class T, class Wt>
inline void axpy_slice(float* out, const T* V, size_t vs, int n_rows, int m, const Wt& wt) {
  __m512 acc[NV];
#pragma GCC unroll 8
  for (int k = 0; k < NV; ++k) acc[k] = _mm512_maskz_loadu_ps(mask16(k == NV - 1 ? m : 16), out + 16 * k);
  for (int j = 0; j < n_rows; ++j) {
    const __m512 w = _mm512_set1_ps(wt(j));
    const T* v = V + (size_t)j * vs;
#pragma GCC unroll 8
    for (int k = 0; k < NV; ++k)
      acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(w, ld16(v + 16 * k, mask16(k == NV - 1 ? m : 16))));
  }
#pragma GCC unroll 8
  for (int k = 0; k < NV; ++k) _mm512_mask_storeu_ps(out + 16 * k, mask16(k == NV - 1 ? m : 16), acc[k]);
}

template <class T, class Wt>
inline void axpy(float* out, const T* V, size_t vs, int n_rows, int hd, const Wt& wt) {
  int i = 0;
  for (; i + 128 <= hd; i += 128) axpy_slice<8>(out + i, V + i, vs, n_rows, 16, wt);
  const int rest = hd - i, nv = (rest + 15) / 16, m = rest - 16 * (nv - 1);
  out += i, V += i;
  switch (nv) {
    case 1: axpy_slice<1>(out, V, vs, n_rows, m, wt); break;
    case 2: axpy_slice<2>(out, V, vs, n_rows, m, wt); break;
    case 3: axpy_slice<3>(out, V, vs, n_rows, m, wt); break;
    case 4: axpy_slice<4>(out, V, vs, n_rows, m, wt); break;
    case 5: axpy_slice<5>(out, V, vs, n_rows, m, wt); break;
    case 6: axpy_slice<6>(out, V, vs, n_rows, m, wt); break;
    case 7: axpy_slice<7>(out, V, vs, n_rows, m, wt); break;
    default: break;  // 0: head_dim was a multiple of 128
  }
}

constexpr __mmask16 kAll16 = 0xFFFF;

// The F16 dots of ng <= 8 heads of one KV group, hd <= 16 * NV: each row is widened once and
// serves every head; each head's lanes see exactly dot()'s operations (full vectors unmasked, the
// last one masked), so s equals dot() per head bit for bit.
template <int NV>
inline void dot_f16_heads_nv(float* s, size_t ss, const float* q, size_t qs, int ng, const uint16_t* K, size_t ks,
                             int n_rows, int hd) {
  const int last = hd - 16 * (NV - 1);  // lanes of the last vector, 1..16
  const __mmask16 ml = mask16(last);
  for (int j = 0; j < n_rows; ++j) {
    const uint16_t* k = K + (size_t)j * ks;
    __m512 kv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) kv[v] = ld16(k + 16 * v, v == NV - 1 ? ml : kAll16);
    for (int g = 0; g < ng; ++g) {
      const float* qg = q + (size_t)g * qs;
      __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        const __m512 qv =
            v == NV - 1 && last < 16 ? _mm512_maskz_loadu_ps(ml, qg + 16 * v) : _mm512_loadu_ps(qg + 16 * v);
        acc = _mm512_add_ps(acc, _mm512_mul_ps(qv, kv[v]));
      }
      s[(size_t)g * ss + j] = sum16(lo256(acc), hi256(acc));
    }
  }
}

// The F16 weighted sums of NG heads of one KV group over the same rows: a slice of R vectors of
// each head's out stays in registers (NG * R <= 16) while every row's slice is widened once and
// added to each head in row order: per value, axpy()'s operations.
template <int NG, int R>
inline void axpy_f16_heads_ng(float* out, size_t os, const float* w, size_t ws, const uint16_t* V, size_t vs,
                              int n_rows, int hd) {
  for (int i = 0; i < hd; i += 16 * R) {
    const int nv = (hd - i + 15) / 16 < R ? (hd - i + 15) / 16 : R;
    const __mmask16 ml = mask16(hd - i - 16 * (nv - 1));
    const auto vmask = [nv, ml](int v) { return v == nv - 1 ? ml : kAll16; };  // the slice's v-th vector
    __m512 acc[NG][R];
#pragma GCC unroll 8
    for (int g = 0; g < NG; ++g)
#pragma GCC unroll 8
      for (int v = 0; v < R; ++v)
        acc[g][v] = v < nv ? _mm512_maskz_loadu_ps(vmask(v), out + (size_t)g * os + i + 16 * v) : _mm512_setzero_ps();
    for (int j = 0; j < n_rows; ++j) {
      const uint16_t* row = V + (size_t)j * vs + i;
      __m512 vv[R];
#pragma GCC unroll 8
      for (int v = 0; v < R; ++v) vv[v] = v < nv ? ld16(row + 16 * v, vmask(v)) : _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int g = 0; g < NG; ++g) {
        const __m512 wg = _mm512_set1_ps(w[(size_t)g * ws + j]);
#pragma GCC unroll 8
        for (int v = 0; v < R; ++v)
          if (v < nv) acc[g][v] = _mm512_add_ps(acc[g][v], _mm512_mul_ps(wg, vv[v]));
      }
    }
#pragma GCC unroll 8
    for (int g = 0; g < NG; ++g)
#pragma GCC unroll 8
      for (int v = 0; v < R; ++v)
        if (v < nv) _mm512_mask_storeu_ps(out + (size_t)g * os + i + 16 * v, vmask(v), acc[g][v]);
  }
}

// Calls f(first head, count) for the batches of at most 8 heads the grouped kernels hold at once.
template <class F>
inline void head_batches(int n_heads, const F& f) {
  for (int g0 = 0; g0 < n_heads; g0 += 8) f(g0, n_heads - g0 < 8 ? n_heads - g0 : 8);
}

}  // namespace

extern "C" void ml_k_dot_f16_heads_avx512vnni(float* s, size_t s_stride, const float* q, size_t q_stride,
                                              int n_heads, const uint16_t* K, size_t k_stride, int n_rows,
                                              int head_dim) {
  head_batches(n_heads, [&](int g0, int ng) {
    float* sg = s + (size_t)g0 * s_stride;
    const float* qg = q + (size_t)g0 * q_stride;
    switch ((head_dim + 15) / 16) {
      case 1: dot_f16_heads_nv<1>(sg, s_stride, qg, q_stride, ng, K, k_stride, n_rows, head_dim); break;
      case 2: dot_f16_heads_nv<2>(sg, s_stride, qg, q_stride, ng, K, k_stride, n_rows, head_dim); break;
      case 3: dot_f16_heads_nv<3>(sg, s_stride, qg, q_stride, ng, K, k_stride, n_rows, head_dim); break;
      case 4: dot_f16_heads_nv<4>(sg, s_stride, qg, q_stride, ng, K, k_stride, n_rows, head_dim); break;
      case 5: dot_f16_heads_nv<5>(sg, s_stride, qg, q_stride, ng, K, k_stride, n_rows, head_dim); break;
      case 6: dot_f16_heads_nv<6>(sg, s_stride, qg, q_stride, ng, K, k_stride, n_rows, head_dim); break;
      case 7: dot_f16_heads_nv<7>(sg, s_stride, qg, q_stride, ng, K, k_stride, n_rows, head_dim); break;
      case 8: dot_f16_heads_nv<8>(sg, s_stride, qg, q_stride, ng, K, k_stride, n_rows, head_dim); break;
      default:  // head_dim > 128: one head at a time
        for (int g = 0; g < ng; ++g)
          dot(sg + (size_t)g * s_stride, qg + (size_t)g * q_stride, K, k_stride, n_rows, head_dim);
    }
  });
}

extern "C" void ml_k_axpy_f16_heads_avx512vnni(float* out, size_t o_stride, const float* w, size_t w_stride,
                                               int n_heads, const uint16_t* V, size_t v_stride, int n_rows,
                                               int head_dim) {
  head_batches(n_heads, [&](int g0, int ng) {
    float* o = out + (size_t)g0 * o_stride;
    const float* wg = w + (size_t)g0 * w_stride;
    switch (ng) {
      case 1: axpy_f16_heads_ng<1, 8>(o, o_stride, wg, w_stride, V, v_stride, n_rows, head_dim); break;
      case 2: axpy_f16_heads_ng<2, 8>(o, o_stride, wg, w_stride, V, v_stride, n_rows, head_dim); break;
      case 3: axpy_f16_heads_ng<3, 4>(o, o_stride, wg, w_stride, V, v_stride, n_rows, head_dim); break;
      case 4: axpy_f16_heads_ng<4, 4>(o, o_stride, wg, w_stride, V, v_stride, n_rows, head_dim); break;
      case 5: axpy_f16_heads_ng<5, 2>(o, o_stride, wg, w_stride, V, v_stride, n_rows, head_dim); break;
      case 6: axpy_f16_heads_ng<6, 2>(o, o_stride, wg, w_stride, V, v_stride, n_rows, head_dim); break;
      case 7: axpy_f16_heads_ng<7, 2>(o, o_stride, wg, w_stride, V, v_stride, n_rows, head_dim); break;
      default: axpy_f16_heads_ng<8, 2>(o, o_stride, wg, w_stride, V, v_stride, n_rows, head_dim); break;
    }
  });
}

extern "C" void ml_k_dot_f32_avx512vnni(float* s, const float* q, const float* K, size_t k_stride, int n_rows,
                                        int head_dim) {
  dot(s, q, K, k_stride, n_rows, head_dim);
}

extern "C" void ml_k_dot_f16_avx512vnni(float* s, const float* q, const uint16_t* K, size_t k_stride, int n_rows,
                                        int head_dim) {
  dot(s, q, K, k_stride, n_rows, head_dim);
}

extern "C" void ml_k_axpy_f32_avx512vnni(float* out, const float* w, const float* V, size_t v_stride, int n_rows,
                                         int head_dim) {
  axpy(out, V, v_stride, n_rows, head_dim, [w](int j) { return w[j]; });
}

extern "C" void ml_k_axpy_f16_avx512vnni(float* out, const float* w, const uint16_t* V, size_t v_stride,
                                         int n_rows, int head_dim) {
  axpy(out, V, v_stride, n_rows, head_dim, [w](int j) { return w[j]; });
}

// The row weight is w[j] * Vd[j * d_stride], the same float product as scalar code.
extern "C" void ml_k_axpy_q8_avx512vnni(float* out, const float* w, const int8_t* V, const float* Vd,
                                        size_t v_stride, size_t d_stride, int n_rows, int head_dim) {
  axpy(out, V, v_stride, n_rows, head_dim, [w, Vd, d_stride](int j) { return w[j] * Vd[(size_t)j * d_stride]; });
}

extern "C" void ml_k_dot_q8_avx512vnni(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd,
                                       size_t k_stride, size_t d_stride, int n_rows, int head_dim) {
  int j = 0;
  for (; j + 4 <= n_rows; j += 4)
    dot_q8_rows<4>(s + j, q, qd, K + (size_t)j * k_stride, Kd + (size_t)j * d_stride, k_stride, d_stride, head_dim);
  for (; j < n_rows; ++j)
    dot_q8_rows<1>(s + j, q, qd, K + (size_t)j * k_stride, Kd + (size_t)j * d_stride, k_stride, d_stride, head_dim);
}
