// AVX-VNNI attention kernel: the Q8-cache score dot (the other attention ops are avx2's).
// Contract (kernels/ops.h): s[j] = (float)(int32 dot(q, K_j)) * (qd * Kd[j * d_stride]) for
// j < n_rows; only head_dim quants of each row are read (a tail goes through a zero-padded stack
// copy); no allocation, no global state. Idiom: 4 cache rows per pass share each query chunk and
// its |q|; vpdpbusd(acc, |q|, sign(k, q)) accumulates the exact int32 dot, so the result is
// bit-identical to scalar code.
#include "kernels/avxvnni/avxvnni.h"
#include "kernels/x86_avx.h"

namespace {
using namespace ml::k::x86;

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
      acc[k] = _mm256_dpbusd_avx_epi32(acc[k], aq, _mm256_sign_epi8(load_i8x32_n(K + (size_t)k * ks + i, m), qv));
  }
  for (int k = 0; k < R; ++k) s[k] = (float)hsum_i32(acc[k]) * (qd * Kd[(size_t)k * ds]);
}

}  // namespace

extern "C" void ml_k_dot_q8_avxvnni(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd,
                                    size_t k_stride, size_t d_stride, int n_rows, int head_dim) {
  int j = 0;
  for (; j + 4 <= n_rows; j += 4)
    dot_q8_rows<4>(s + j, q, qd, K + (size_t)j * k_stride, Kd + (size_t)j * d_stride, k_stride, d_stride, head_dim);
  for (; j < n_rows; ++j)
    dot_q8_rows<1>(s + j, q, qd, K + (size_t)j * k_stride, Kd + (size_t)j * d_stride, k_stride, d_stride, head_dim);
}
