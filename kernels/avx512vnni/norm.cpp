// AVX-512 element-wise kernels: the SwiGLU gate silu_mul (the FFN's gate, once per hidden value of
// every token). The rest of the float ops stay avx2's.
// Same bits as scalar code (kernels/numerics.h): exp is kernels/x86_avx.h's exp256 step for step
// in 16 lanes (floor as roundscale toward -inf, the same value), and silu(v) * u keeps the scalar
// order: v * e / (1 + e) for negative v (e = exp(-|v|)), v / (1 + e) otherwise, then times u.
// Tails through masked loads and stores, which never touch masked-off elements.
#include "kernels/avx512vnni/avx512vnni.h"
#include <cstdint>

#include "kernels/x86_avx.h"

namespace {

// exp256 of kernels/x86_avx.h in 16 lanes.
inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 fx = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(0.5f));
  const __m512 n = _mm512_roundscale_ps(fx, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  x = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f)));
  x = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(-2.12194440e-4f)));
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_add_ps(_mm512_mul_ps(p, x), _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x), _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x), _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x), _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_add_ps(_mm512_mul_ps(p, x), _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, _mm512_mul_ps(x, x)), x), _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvttps_epi32(n);
  const __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
}

}  // namespace

extern "C" void ml_k_silu_mul_avx512vnni(float* g, const float* u, int n) {
  const __m512i sign = _mm512_set1_epi32(INT32_MIN);
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, g + i);
    // exp(-|v|); the sign bit set as an integer OR (or_ps is AVX-512 DQ, which this ISA does not assume)
    const __m512 e = exp512(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign)));
    // v's sign bit (as avx2's blendv reads it) picks v * e.
    const __mmask16 neg = _mm512_cmplt_epi32_mask(_mm512_castps_si512(v), _mm512_setzero_si512());
    const __m512 num = _mm512_mask_blend_ps(neg, v, _mm512_mul_ps(v, e));
    const __m512 s = _mm512_div_ps(num, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
  }
}
