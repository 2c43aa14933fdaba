// AVX-512 activation quantization (Q8_0), bit-identical to ml_quantize_q8_ref and the scalar
// kernel. Contract: any n >= 0; writes n quants and ceil(n / 32) scales, nothing else: a short
// last block is read and written with lane masks (masked-off lanes are never touched).
// Idiom: a block is two 16-float vectors. amax with vmaxps (|x| first, so a NaN input is skipped
// as std::fmax skips it); id = 127 / amax and d = amax / 127 in scalar float, as scalar code;
// q = x * id with vmulps, then a separate vaddps of copysign(0.5, x) (never an FMA), vcvttps2dq
// truncation, vpmovsdb (saturating int32 -> int8) and max(., -127): scalar's clamp to
// [-127, 127], including INT_MIN from NaN or overflow going to -127.
#include <cstring>

#include "kernels/avx512vnni/avx512vnni.h"
#include "kernels/x86_avx.h"

namespace {
using namespace ml::k::x86;

inline __m512 and_ps(__m512 a, __m512i m) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), m)); }

// Quantizes one block of len <= 32 values.
inline void quant_block(int8_t* q, float* d, const float* x, int len) {
  const __mmask16 m0 = len >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << len) - 1);
  const __mmask16 m1 = len >= 32 ? (__mmask16)0xFFFF : (len > 16 ? (__mmask16)((1u << (len - 16)) - 1) : 0);
  const __m512 v0 = _mm512_maskz_loadu_ps(m0, x), v1 = _mm512_maskz_loadu_ps(m1, x + 16);
  const __m512i abs_bits = _mm512_set1_epi32(0x7FFFFFFF), sign_bits = _mm512_set1_epi32((int)0x80000000u);
  __m512 amax = _mm512_max_ps(and_ps(v0, abs_bits), _mm512_setzero_ps());
  amax = _mm512_max_ps(and_ps(v1, abs_bits), amax);
  const float mx = hmax(_mm256_max_ps(lo256(amax), hi256(amax)));
  if (!(mx >= ML_QUANT_TINY)) {
    std::memset(q, 0, (size_t)len);
    *d = 0.0f;
    return;
  }
  const float id = 127.0f / mx;
  *d = mx / 127.0f;
  const __m512 vid = _mm512_set1_ps(id);
  const __m512i half = _mm512_castps_si512(_mm512_set1_ps(0.5f));
  const __m512 h0 = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v0), sign_bits), half));
  const __m512 h1 = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v1), sign_bits), half));
  const __m512i t0 = _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(v0, vid), h0));
  const __m512i t1 = _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(v1, vid), h1));
  const __m128i lo = _mm_max_epi8(_mm512_cvtsepi32_epi8(t0), _mm_set1_epi8(-127));
  const __m128i hi = _mm_max_epi8(_mm512_cvtsepi32_epi8(t1), _mm_set1_epi8(-127));
  _mm_mask_storeu_epi8(q, m0, lo);
  _mm_mask_storeu_epi8(q + 16, m1, hi);
}

}  // namespace

extern "C" void ml_k_quantize_q8_avx512vnni(int8_t* q, float* d, const float* x, int n) {
  for (int b = 0; b * ML_QK < n; ++b) {
    const int start = b * ML_QK;
    quant_block(q + start, d + b, x + start, n - start < ML_QK ? n - start : ML_QK);
  }
}
