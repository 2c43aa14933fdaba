// AVX2 element-wise and normalisation kernels: rmsnorm, softmax, silu_mul, gelu_mul, add, rope.
// Contract (kernels/ops.h): any n (n <= 0 does nothing); only the n values named are read or
// written: tails go through vmaskmov loads and stores, which never touch masked-off lanes.
// No allocation, no global state. Every op performs the scalar kernel's float operations in
// kernels/numerics.h's canonical order (16 partial sums in two registers, plain mul/add, no FMA,
// the Cephes exp of x86_avx.h), so each matches scalar bit for bit.
#include <cmath>

#include "kernels/avx2/avx2.h"
#include "kernels/x86_avx.h"

using namespace ml::k::x86;

// o[i] = w[i] * (x[i] * (1 / sqrt(sum(x^2) / n + eps))); the sum is complete before o is written,
// so o may alias x.
extern "C" void ml_k_rmsnorm_avx2(float* o, const float* x, const float* w, int n, float eps) {
  if (n <= 0) return;
  __m256 r[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int i = 0; i < n; i += 8) {  // values i..i+7 are partials i % 16 ..: register (i / 8) % 2
    const __m256 a = load_f32_n(x + i, n - i);
    r[(i >> 3) & 1] = _mm256_add_ps(r[(i >> 3) & 1], _mm256_mul_ps(a, a));
  }
  const float ss = sum16(r[0], r[1]);
  const __m256 scale = _mm256_set1_ps(1.0f / std::sqrt(ss / (float)n + eps));
  for (int i = 0; i < n; i += 8) {
    const int m = n - i;
    store_f32_n(o + i, _mm256_mul_ps(load_f32_n(w + i, m), _mm256_mul_ps(load_f32_n(x + i, m), scale)), m);
  }
}

// x = exp(x - max) / sum; every input -inf: uniform 1/n (exp(-inf - -inf) would be NaN).
// Masked-off tail lanes load as 0 and would poison the max: they are replaced by -inf first.
extern "C" void ml_k_softmax_avx2(float* x, int n) {
  if (n <= 0) return;
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  __m256 mv = ninf;
  for (int i = 0; i < n; i += 8) {
    const int m = n - i;
    __m256 v = load_f32_n(x + i, m);
    if (m < 8) v = _mm256_blendv_ps(ninf, v, _mm256_castsi256_ps(mask8(m)));
    mv = _mm256_max_ps(mv, v);
  }
  const float mx = hmax(mv);
  if (mx == -INFINITY) {
    const __m256 u = _mm256_set1_ps(1.0f / (float)n);
    for (int i = 0; i < n; i += 8) store_f32_n(x + i, u, n - i);
    return;
  }
  const __m256 vmx = _mm256_set1_ps(mx);
  __m256 r[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int i = 0; i < n; i += 8) {
    const int m = n - i;
    __m256 e = exp256(_mm256_sub_ps(load_f32_n(x + i, m), vmx));
    if (m < 8) e = _mm256_and_ps(e, _mm256_castsi256_ps(mask8(m)));  // keep the sum to n terms
    store_f32_n(x + i, e, m);
    r[(i >> 3) & 1] = _mm256_add_ps(r[(i >> 3) & 1], e);
  }
  const __m256 vsum = _mm256_set1_ps(sum16(r[0], r[1]));
  for (int i = 0; i < n; i += 8) {
    const int m = n - i;
    store_f32_n(x + i, _mm256_div_ps(load_f32_n(x + i, m), vsum), m);
  }
}

// g[i] = silu(g[i]) * u[i]. With e = exp(-|g|) <= 1 (never overflows): sigmoid(g) = 1 / (1 + e)
// for g >= 0 and e / (1 + e) for g < 0, so silu(g) = (g >= 0 ? g : g * e) / (1 + e).
extern "C" void ml_k_silu_mul_avx2(float* g, const float* u, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
  for (int i = 0; i < n; i += 8) {
    const int m = n - i;
    const __m256 v = load_f32_n(g + i, m);
    const __m256 e = exp256(_mm256_or_ps(v, sign));  // exp(-|v|)
    const __m256 num = _mm256_blendv_ps(v, _mm256_mul_ps(v, e), v);  // v's sign bit picks v * e
    const __m256 s = _mm256_div_ps(num, _mm256_add_ps(one, e));
    store_f32_n(g + i, _mm256_mul_ps(s, load_f32_n(u + i, m)), m);
  }
}

// g[i] = gelu(g[i]) * u[i] as ml_k_gelu_mul1 (kernels/x86_common.h's ml_gelu_mul_ps on 8 lanes).
extern "C" void ml_k_gelu_mul_avx2(float* g, const float* u, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
  const __m256 c = _mm256_set1_ps(0.7978845608028654f), k = _mm256_set1_ps(0.044715f);
  const __m256 m2 = _mm256_set1_ps(-2.0f), half = _mm256_set1_ps(0.5f);
  for (int i = 0; i < n; i += 8) {
    const int m = n - i;
    const __m256 v = load_f32_n(g + i, m);
    const __m256 y = _mm256_mul_ps(c, _mm256_add_ps(v, _mm256_mul_ps(k, _mm256_mul_ps(_mm256_mul_ps(v, v), v))));
    const __m256 e = exp256(_mm256_mul_ps(m2, _mm256_andnot_ps(sign, y)));
    const __m256 t = _mm256_xor_ps(_mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e)), _mm256_and_ps(y, sign));
    const __m256 r = _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, t));
    store_f32_n(g + i, _mm256_mul_ps(r, load_f32_n(u + i, m)), m);
  }
}

// y[i] = y[i] + x[i]
extern "C" void ml_k_add_avx2(float* y, const float* x, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    _mm256_storeu_ps(y + i + 8, _mm256_add_ps(_mm256_loadu_ps(y + i + 8), _mm256_loadu_ps(x + i + 8)));
  }
  for (; i < n; i += 8) {
    const int m = n - i;
    store_f32_n(y + i, _mm256_add_ps(load_f32_n(y + i, m), load_f32_n(x + i, m)), m);
  }
}

// Pair i: (a, b) -> (a*cos[i] - b*sin[i], a*sin[i] + b*cos[i]). Style 0 (pairs (2i, 2i+1)) works
// on 4 pairs per vector: vaddsubps(x * cos', swap(x) * sin') with cos/sin duplicated per pair.
// Style 1 (pairs (i, i + half)) works on 8 pairs per vector. Tail pairs as scalar code.
extern "C" void ml_k_rope_avx2(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                               int style) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + (size_t)h * (size_t)head_dim;
    int i = 0;
    if (style == 0) {
      for (; i + 4 <= half; i += 4) {
        const __m128 c = _mm_loadu_ps(cos + i), s = _mm_loadu_ps(sin + i);
        const __m256 cc = _mm256_set_m128(_mm_unpackhi_ps(c, c), _mm_unpacklo_ps(c, c));
        const __m256 ss = _mm256_set_m128(_mm_unpackhi_ps(s, s), _mm_unpacklo_ps(s, s));
        const __m256 ab = _mm256_loadu_ps(v + 2 * i);
        const __m256 ba = _mm256_permute_ps(ab, 0xB1);
        _mm256_storeu_ps(v + 2 * i, _mm256_addsub_ps(_mm256_mul_ps(ab, cc), _mm256_mul_ps(ba, ss)));
      }
    } else {
      for (; i + 8 <= half; i += 8) {
        const __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
        const __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + half);
        _mm256_storeu_ps(v + i, _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)));
        _mm256_storeu_ps(v + i + half, _mm256_add_ps(_mm256_mul_ps(a, s), _mm256_mul_ps(b, c)));
      }
    }
    for (; i < half; ++i) {
      const int ia = style == 0 ? 2 * i : i;
      const int ib = style == 0 ? 2 * i + 1 : i + half;
      const float a = v[ia], b = v[ib];
      v[ia] = a * cos[i] - b * sin[i];
      v[ib] = a * sin[i] + b * cos[i];
    }
  }
}
