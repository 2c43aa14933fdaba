// AVX-512 VNNI attention kernel: the Q8-cache score dot (the other attention ops are avx2's).
// Contract (kernels/ops.h): s[j] = (float)(int32 dot(q, K_j)) * (qd * Kd[j * d_stride]) for
// j < n_rows; only head_dim quants of each row are read (the tail through byte-masked loads,
// which never touch masked-off bytes); no allocation, no global state.
// Idiom: 4 cache rows per pass share each 64-quant chunk of q, its |q| and its sign mask;
// vpdpbusd(acc, |q|, k negated where q < 0) accumulates the exact int32 dot, so the result is
// bit-identical to scalar code.
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

}  // namespace

extern "C" void ml_k_dot_q8_avx512vnni(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd,
                                       size_t k_stride, size_t d_stride, int n_rows, int head_dim) {
  int j = 0;
  for (; j + 4 <= n_rows; j += 4)
    dot_q8_rows<4>(s + j, q, qd, K + (size_t)j * k_stride, Kd + (size_t)j * d_stride, k_stride, d_stride, head_dim);
  for (; j < n_rows; ++j)
    dot_q8_rows<1>(s + j, q, qd, K + (size_t)j * k_stride, Kd + (size_t)j * d_stride, k_stride, d_stride, head_dim);
}
