// Scalar element-wise and normalisation kernels: rmsnorm, softmax, silu_mul, gelu_mul, add,
// rope.
// Contract (kernels/ops.h): any n (n <= 0 does nothing); only the n values named are read or
// written; no allocation, no global state. Float32 throughout, in kernels/numerics.h's canonical
// order (16 partial sums, the Cephes exp), which every ISA reproduces bit for bit.
#include <cmath>

#include "kernels/numerics.h"
#include "kernels/scalar/scalar.h"

// o[i] = w[i] * (x[i] * (1 / sqrt(sum(x^2) / n + eps))); o may alias x (the sum is taken first).
extern "C" void ml_k_rmsnorm_scalar(float* o, const float* x, const float* w, int n, float eps) {
  if (n <= 0) return;
  const float ss = ml_k_dot_canonical(x, x, n);
  const float scale = 1.0f / std::sqrt(ss / (float)n + eps);
  for (int i = 0; i < n; ++i) o[i] = w[i] * (x[i] * scale);
}

// x[i] = exp(x[i] - max) / sum_j exp(x[j] - max); every input -inf: x[i] = 1 / n.
// Subtracting the max keeps every exponent <= 0, so +-1e4 and -1e30 inputs stay finite.
extern "C" void ml_k_softmax_scalar(float* x, int n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  if (mx == -INFINITY) {  // exp(-inf - -inf) would be NaN: define the limit as uniform
    for (int i = 0; i < n; ++i) x[i] = 1.0f / (float)n;
    return;
  }
  float P[ML_K_SUM_LANES] = {};
  for (int i = 0; i < n; ++i) {
    x[i] = ml_k_exp(x[i] - mx);
    P[i % ML_K_SUM_LANES] = P[i % ML_K_SUM_LANES] + x[i];
  }
  const float sum = ml_k_sum16_reduce(P);
  for (int i = 0; i < n; ++i) x[i] = x[i] / sum;
}

// g[i] = silu(g[i]) * u[i]  (SwiGLU gate), silu(v) = v / (1 + exp(-v)) in ml_k_silu_mul1's form.
extern "C" void ml_k_silu_mul_scalar(float* g, const float* u, int n) {
  for (int i = 0; i < n; ++i) g[i] = ml_k_silu_mul1(g[i], u[i]);
}

// g[i] = gelu(g[i]) * u[i]  (GeGLU gate) in ml_k_gelu_mul1's form.
extern "C" void ml_k_gelu_mul_scalar(float* g, const float* u, int n) {
  for (int i = 0; i < n; ++i) g[i] = ml_k_gelu_mul1(g[i], u[i]);
}

// y[i] = y[i] + x[i]  (residual connection).
extern "C" void ml_k_add_scalar(float* y, const float* x, int n) {
  for (int i = 0; i < n; ++i) y[i] = y[i] + x[i];
}

// Each head h, pair i < head_dim / 2 with indices (a, b) = (2i, 2i+1) for style 0 or
// (i, i + head_dim/2) for style 1: (a, b) -> (a*cos[i] - b*sin[i], a*sin[i] + b*cos[i]).
extern "C" void ml_k_rope_scalar(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                                 int style) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + (size_t)h * (size_t)head_dim;
    for (int i = 0; i < half; ++i) {
      const int ia = style == 0 ? 2 * i : i;
      const int ib = style == 0 ? 2 * i + 1 : i + half;
      const float a = v[ia], b = v[ib];
      v[ia] = a * cos[i] - b * sin[i];
      v[ib] = a * sin[i] + b * cos[i];
    }
  }
}
