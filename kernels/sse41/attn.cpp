// SSE4.1 attention kernel: the Q8-cache score dot_q8 (the other attention ops come from sse2).
// Contract (kernels/ops.h): rows j < n_rows start at j * k_stride; only head_dim quants of a
// row are read (tails use an 8-byte load or scalar code); s[j], j < n_rows, the only writes.
// Idiom (spec/kernels.txt, sse41): pmaddubsw(abs(q), sign(k, q)), then pmaddwd(., 1); quants in
// [-127, 127] keep pair sums <= 32258. The dot is an exact int32, converted and scaled as in
// scalar, so the result matches the scalar kernel bit for bit.
#include <smmintrin.h>

#include "kernels/sse41/sse41.h"
#include "kernels/x86_common.h"

// s[j] = (float)(int32 sum_i q[i] * K[j*k_stride + i]) * (qd * Kd[j*d_stride])
extern "C" void ml_k_dot_q8_sse41(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd,
                                  size_t k_stride, size_t d_stride, int n_rows, int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const int8_t* k = K + (size_t)j * k_stride;
    __m128i acc = _mm_setzero_si128();  // head_dim * 127 * 127 < 2^31 for head_dim < 133000
    int i = 0;
    for (; i + 16 <= head_dim; i += 16)
      acc = _mm_add_epi32(acc, ml_dot_i8x16_ssse3(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i)),
                                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i))));
    if (i + 8 <= head_dim) {  // the upper 8 bytes are zero: they add 0
      acc = _mm_add_epi32(acc, ml_dot_i8x16_ssse3(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(k + i)),
                                                  _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i))));
      i += 8;
    }
    int32_t isum = ml_hsum_epi32(acc);
    for (; i < head_dim; ++i) isum += (int32_t)q[i] * (int32_t)k[i];
    s[j] = (float)isum * (qd * Kd[(size_t)j * d_stride]);
  }
}
