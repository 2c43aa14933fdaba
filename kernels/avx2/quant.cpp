// AVX2 activation quantization (Q8_0), bit-identical to ml_quantize_q8_ref and the scalar kernel.
// Contract: any n >= 0; writes n quants and ceil(n / 32) scales, nothing else; a short last block
// is read with vmaskmov (no read past n) and written through a stack buffer.
// Idiom: amax with vmaxps (|x| first, so a NaN input is skipped as std::fmax skips it); then, as
// in scalar code, id = 127 / amax and d = amax / 127 in scalar float; q = x * id with vmulps, then
// a separate vaddps of copysign(0.5, x) (never an FMA: the rounding must match), vcvttps2dq
// truncation, and saturating packs (int32 -> int16 -> int8) followed by max(., -127): the same
// clamp to [-127, 127] as scalar, including INT_MIN from NaN or overflow going to -127.
#include <cstring>

#include "kernels/avx2/avx2.h"
#include "kernels/x86_avx.h"

namespace {
using namespace ml::k::x86;

// Quantizes one block of len <= 32 values.
inline void quant_block(int8_t* q, float* d, const float* x, int len) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  for (int k = 0; k < 4; ++k) {
    const int m = len - 8 * k;
    v[k] = m >= 8 ? _mm256_loadu_ps(x + 8 * k)
                  : (m > 0 ? _mm256_maskload_ps(x + 8 * k, mask8(m)) : _mm256_setzero_ps());
  }
  __m256 amax = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) amax = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), amax);
  const float mx = hmax(amax);
  if (!(mx >= ML_QUANT_TINY)) {
    std::memset(q, 0, (size_t)len);
    *d = 0.0f;
    return;
  }
  const float id = 127.0f / mx;
  *d = mx / 127.0f;
  const __m256 vid = _mm256_set1_ps(id);
  __m256i t[4];
  for (int k = 0; k < 4; ++k) {
    const __m256 half = _mm256_or_ps(_mm256_and_ps(v[k], sign), _mm256_set1_ps(0.5f));
    t[k] = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v[k], vid), half));
  }
  // packs work within 128-bit lanes: the permute restores value order.
  const __m256i p16a = _mm256_packs_epi32(t[0], t[1]), p16b = _mm256_packs_epi32(t[2], t[3]);
  __m256i p8 = _mm256_packs_epi16(p16a, p16b);
  p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  p8 = _mm256_max_epi8(p8, _mm256_set1_epi8(-127));
  if (len == ML_QK) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p8);
  } else {
    alignas(32) int8_t tmp[ML_QK];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), p8);
    std::memcpy(q, tmp, (size_t)len);
  }
}

}  // namespace

extern "C" void ml_k_quantize_q8_avx2(int8_t* q, float* d, const float* x, int n) {
  for (int b = 0; b * ML_QK < n; ++b) {
    const int start = b * ML_QK;
    quant_block(q + start, d + b, x + start, n - start < ML_QK ? n - start : ML_QK);
  }
}
