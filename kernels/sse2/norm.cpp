// SSE2 element-wise and normalisation kernels: rmsnorm, softmax, silu_mul, gelu_mul, add, rope.
// Contract (kernels/ops.h): any n (n <= 0 does nothing); only the n values named are read or
// written (tails go through a small stack buffer or scalar code, never a wider load); no
// allocation, no global state. Every op does the scalar kernel's float operations in
// kernels/numerics.h's canonical order (16 partial sums in four registers, ml_exp_ps), so each
// matches it bit for bit.
#include <emmintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/sse2/sse2.h"
#include "kernels/x86_common.h"

// o[i] = w[i] * (x[i] * (1 / sqrt(sum(x^2) / n + eps))); o may alias x (the sum is taken first).
extern "C" void ml_k_rmsnorm_sse2(float* o, const float* x, const float* w, int n, float eps) {
  if (n <= 0) return;
  __m128 r[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
  for (int i = 0; i < n; i += 4) {  // values i..i+3 are partials i % 16 .. : register (i / 4) % 4
    const __m128 a = ml_loadu_ps_n(x + i, n - i);
    r[(i >> 2) & 3] = _mm_add_ps(r[(i >> 2) & 3], _mm_mul_ps(a, a));
  }
  const float scale = 1.0f / std::sqrt(ml_sum16_ps(r) / (float)n + eps);
  const __m128 vs = _mm_set1_ps(scale);
  int i = 0;
  for (; i + 4 <= n; i += 4)
    _mm_storeu_ps(o + i, _mm_mul_ps(_mm_loadu_ps(w + i), _mm_mul_ps(_mm_loadu_ps(x + i), vs)));
  for (; i < n; ++i) o[i] = w[i] * (x[i] * scale);
}

// x[i] = exp(x[i] - max) / sum_j exp(x[j] - max); every input -inf: x[i] = 1 / n.
// Subtracting the max keeps every exponent <= 0, so +-1e4 and -1e30 inputs stay finite.
extern "C" void ml_k_softmax_sse2(float* x, int n) {
  if (n <= 0) return;
  int i = 0;
  __m128 vmx = _mm_set1_ps(-INFINITY);
  for (; i + 4 <= n; i += 4) vmx = _mm_max_ps(vmx, _mm_loadu_ps(x + i));
  float mx = ml_hmax_ps(vmx);
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  if (mx == -INFINITY) {  // exp(-inf - -inf) would be NaN: define the limit as uniform
    for (i = 0; i < n; ++i) x[i] = 1.0f / (float)n;
    return;
  }
  vmx = _mm_set1_ps(mx);
  __m128 r[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
  for (i = 0; i + 4 <= n; i += 4) {
    const __m128 e = ml_exp_ps(_mm_sub_ps(_mm_loadu_ps(x + i), vmx));
    _mm_storeu_ps(x + i, e);
    r[(i >> 2) & 3] = _mm_add_ps(r[(i >> 2) & 3], e);
  }
  if (i < n) {  // 1..3 left: pad with -inf, whose exp is +0 (adds nothing to the partials)
    float t[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    std::memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
    const __m128 e = ml_exp_ps(_mm_sub_ps(_mm_loadu_ps(t), vmx));
    _mm_storeu_ps(t, e);
    std::memcpy(x + i, t, (size_t)(n - i) * sizeof(float));
    r[(i >> 2) & 3] = _mm_add_ps(r[(i >> 2) & 3], e);
  }
  const float s = ml_sum16_ps(r);
  const __m128 vsum = _mm_set1_ps(s);
  for (i = 0; i + 4 <= n; i += 4) _mm_storeu_ps(x + i, _mm_div_ps(_mm_loadu_ps(x + i), vsum));
  for (; i < n; ++i) x[i] = x[i] / s;
}

// g[i] = f(g[i], u[i]) 4 lanes at a time (f a lambda, so it is inlined); the tail through a
// zero-padded stack copy.
template <class F>
static void gate4(float* g, const float* u, int n, F f) {
  int i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(g + i, f(_mm_loadu_ps(g + i), _mm_loadu_ps(u + i)));
  if (i < n) {
    float tg[4] = {}, tu[4] = {};
    std::memcpy(tg, g + i, (size_t)(n - i) * sizeof(float));
    std::memcpy(tu, u + i, (size_t)(n - i) * sizeof(float));
    _mm_storeu_ps(tg, f(_mm_loadu_ps(tg), _mm_loadu_ps(tu)));
    std::memcpy(g + i, tg, (size_t)(n - i) * sizeof(float));
  }
}

// g[i] = silu(g[i]) * u[i]  (SwiGLU gate), as ml_k_silu_mul1.
extern "C" void ml_k_silu_mul_sse2(float* g, const float* u, int n) {
  gate4(g, u, n, [](__m128 a, __m128 b) { return ml_silu_mul_ps(a, b); });
}

// g[i] = gelu(g[i]) * u[i]  (GeGLU gate), as ml_k_gelu_mul1.
extern "C" void ml_k_gelu_mul_sse2(float* g, const float* u, int n) {
  gate4(g, u, n, [](__m128 a, __m128 b) { return ml_gelu_mul_ps(a, b); });
}

// y[i] = y[i] + x[i]  (residual connection).
extern "C" void ml_k_add_sse2(float* y, const float* x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_ps(y + i, _mm_add_ps(_mm_loadu_ps(y + i), _mm_loadu_ps(x + i)));
    _mm_storeu_ps(y + i + 4, _mm_add_ps(_mm_loadu_ps(y + i + 4), _mm_loadu_ps(x + i + 4)));
  }
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_add_ps(_mm_loadu_ps(y + i), _mm_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = y[i] + x[i];
}

// Pair i: (a, b) -> (a*cos[i] - b*sin[i], a*sin[i] + b*cos[i]), the scalar kernel's operations
// (a*c + b*(-s) is a*c - b*s exactly; the second sum is commuted, which IEEE addition allows).
// Style 0 (pairs 2i, 2i+1): 4 pairs per step as two vectors a0 b0 a1 b1 | a2 b2 a3 b3, with
// cos/sin duplicated per pair and the swapped vector b0 a0 b1 a1 times (-s, s, -s, s).
// Style 1 (pairs i, i + half): a and b are two plain vectors.
extern "C" void ml_k_rope_sse2(float* x, int n_heads, int head_dim, const float* cos, const float* sin, int style) {
  const int half = head_dim / 2;
  const __m128 neg_even = _mm_castsi128_ps(_mm_set_epi32(0, (int)0x80000000u, 0, (int)0x80000000u));
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + (size_t)h * (size_t)head_dim;
    int i = 0;
    if (style == 0) {
      for (; i + 4 <= half; i += 4) {
        const __m128 c = _mm_loadu_ps(cos + i), s = _mm_loadu_ps(sin + i);
        for (int k = 0; k < 2; ++k) {
          const __m128 p = _mm_loadu_ps(v + 2 * i + 4 * k);
          const __m128 cc = k == 0 ? _mm_unpacklo_ps(c, c) : _mm_unpackhi_ps(c, c);
          const __m128 ss = _mm_xor_ps(k == 0 ? _mm_unpacklo_ps(s, s) : _mm_unpackhi_ps(s, s), neg_even);
          const __m128 sw = _mm_shuffle_ps(p, p, _MM_SHUFFLE(2, 3, 0, 1));
          _mm_storeu_ps(v + 2 * i + 4 * k, _mm_add_ps(_mm_mul_ps(p, cc), _mm_mul_ps(sw, ss)));
        }
      }
    } else {
      for (; i + 4 <= half; i += 4) {
        const __m128 c = _mm_loadu_ps(cos + i), s = _mm_loadu_ps(sin + i);
        const __m128 a = _mm_loadu_ps(v + i), b = _mm_loadu_ps(v + half + i);
        _mm_storeu_ps(v + i, _mm_sub_ps(_mm_mul_ps(a, c), _mm_mul_ps(b, s)));
        _mm_storeu_ps(v + half + i, _mm_add_ps(_mm_mul_ps(a, s), _mm_mul_ps(b, c)));
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
