// AVX-512 element-wise kernels: the SwiGLU gate silu_mul (the FFN's gate, once per hidden value of
// every token). The rest of the float ops stay avx2's.
// Same bits as scalar code (kernels/numerics.h): exp512 (kernels/x86_avx.h) is exp256 step for
// step in 16 lanes, and silu(v) * u keeps the scalar order: v * e / (1 + e) for negative v
// (e = exp(-|v|)), v / (1 + e) otherwise, then times u.
// Tails through masked loads and stores, which never touch masked-off elements.
#include <cstdint>

#include "kernels/avx512vnni/avx512vnni.h"
#include "kernels/x86_avx.h"

using namespace ml::k::x86;

extern "C" void ml_k_silu_mul_avx512vnni(float* g, const float* u, int n) {
  const __m512i sign = _mm512_set1_epi32(INT32_MIN);
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
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
