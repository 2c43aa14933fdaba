// SSE2 activation quantization (Q8_0). Contract (kernels/ops.h, src/core/quant_ref.h): any
// n >= 0; writes n quants and ceil(n / 32) scales; bit-identical to ml_quantize_q8_ref.
// How it stays bit-identical: amax is a max (exact in any order; maxps drops a NaN |x| just as
// fmax does); id = 127 / amax and d = amax / 127 are computed in scalar float; each value is a
// float multiply, then a separate add of copysign(0.5, x) (no FMA), then cvttps (truncation;
// NaN and out-of-range give INT_MIN, as the scalar cast does on x86), then the clamp to
// +-127 done by the saturating packs plus pminsw/pmaxsw. A short last block is padded with
// zeros (which cannot raise amax) in a stack buffer and only its len quants are copied out.
#include <emmintrin.h>

#include <cstring>

#include "kernels/sse2/sse2.h"
#include "kernels/x86_common.h"

namespace {

// One full block of 32 values.
inline void quant_block(int8_t* q, float* d, const float* x) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
  __m128 v[8];
  __m128 amax = _mm_setzero_ps();
  for (int i = 0; i < 8; ++i) {
    v[i] = _mm_loadu_ps(x + 4 * i);
    amax = _mm_max_ps(_mm_and_ps(v[i], abs_mask), amax);  // NaN |x| -> keeps amax
  }
  const float a = ml_hmax_ps(amax);
  if (!(a >= ML_QUANT_TINY)) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm_setzero_si128());
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm_setzero_si128());
    *d = 0.0f;
    return;
  }
  const float id = 127.0f / a;
  *d = a / 127.0f;
  const __m128 vid = _mm_set1_ps(id);
  const __m128 sign_mask = _mm_castsi128_ps(_mm_set1_epi32((int)0x80000000u));
  const __m128 half = _mm_set1_ps(0.5f);
  __m128i t[8];
  for (int i = 0; i < 8; ++i) {
    const __m128 s = _mm_mul_ps(v[i], vid);
    const __m128 r = _mm_add_ps(s, _mm_or_ps(_mm_and_ps(v[i], sign_mask), half));
    t[i] = _mm_cvttps_epi32(r);
  }
  const __m128i hi = _mm_set1_epi16(127), lo = _mm_set1_epi16(-127);
  for (int i = 0; i < 2; ++i) {
    __m128i a01 = _mm_packs_epi32(t[4 * i], t[4 * i + 1]);
    __m128i a23 = _mm_packs_epi32(t[4 * i + 2], t[4 * i + 3]);
    a01 = _mm_max_epi16(_mm_min_epi16(a01, hi), lo);
    a23 = _mm_max_epi16(_mm_min_epi16(a23, hi), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * i), _mm_packs_epi16(a01, a23));
  }
}

}  // namespace

extern "C" void ml_k_quantize_q8_sse2(int8_t* q, float* d, const float* x, int n) {
  int b = 0;
  for (; (b + 1) * ML_QK <= n; ++b) quant_block(q + b * ML_QK, d + b, x + b * ML_QK);
  const int len = n - b * ML_QK;
  if (len > 0) {
    float xb[ML_QK] = {};
    int8_t qb[ML_QK];
    std::memcpy(xb, x + b * ML_QK, (size_t)len * sizeof(float));
    quant_block(qb, d + b, xb);
    std::memcpy(q + b * ML_QK, qb, (size_t)len);
  }
}
