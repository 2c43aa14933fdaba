// The canonical float arithmetic of the non-integer kernels: every ISA reproduces these bit for
// bit, so a build's logits do not depend on its vector width (docs/kernels.md, "Same bits on every
// ISA"). Why it matters: an activation that lands within an ulp of a Q8 rounding tie quantizes
// differently after the smallest float difference, and the KV cache carries that step to every
// later position; seeded sampling then parts from the scalar build's text within tens of tokens.
//
// Sums (rmsnorm's sum of squares, softmax's sum, the attention dots): 16 partial sums, term i
// added to partial i % 16 in increasing i (each product rounded, then added: no FMA); then the
// fixed tree P[l] += P[l + 8] (l < 8), P[l] += P[l + 4] (l < 4), P[l] += P[l + 2] (l < 2),
// P[0] += P[1]. Four 4-lane, two 8-lane or one 16-lane register hold the partials, and the tree
// is each ISA's natural horizontal sum; a short tail adds +0 in lanes past n, which changes no
// partial (a partial that starts at +0 is never -0).
//
// exp: the Cephes expf scheme as ml_exp_ps in kernels/x86_common.h, operation for operation.
//
// Everything here is constexpr-free plain float code for the scalar kernels; the SIMD kernels
// implement the same steps with their own intrinsics.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

inline constexpr int ML_K_SUM_LANES = 16;

// The 16 partials' fixed reduction tree (P is consumed).
static inline float ml_k_sum16_reduce(float* P) {
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) P[l] = P[l] + P[l + w];
  return P[0];
}

// sum_i a[i] * b[i], i < n, in the canonical order.
static inline float ml_k_dot_canonical(const float* a, const float* b, int n) {
  float P[ML_K_SUM_LANES] = {};
  for (int i = 0; i < n; ++i) P[i % ML_K_SUM_LANES] = P[i % ML_K_SUM_LANES] + a[i] * b[i];
  return ml_k_sum16_reduce(P);
}

// e^x: clamp to [-104, 89] (as maxps(-104, x), then minps(89, .): NaN passes through);
// n = floor(x * log2(e) + 0.5); r = x - n * C1 - n * C2 (Cody-Waite); the degree-5 Cephes
// polynomial p; ((p * r^2) + r) + 1; times 2^(n >> 1), then times 2^(n - (n >> 1)).
static inline float ml_k_exp(float x) {
  if (x != x) return x;
  x = -104.0f > x ? -104.0f : x;
  x = 89.0f < x ? 89.0f : x;
  const float fx = x * 1.44269504088896341f + 0.5f;
  float n = (float)(int32_t)fx;  // truncate toward zero, then floor
  if (n > fx) n = n - 1.0f;
  x = x - n * 0.693359375f;
  x = x - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * x + 1.3981999507e-3f;
  p = p * x + 8.3334519073e-3f;
  p = p * x + 4.1665795894e-2f;
  p = p * x + 1.6666665459e-1f;
  p = p * x + 5.0000001201e-1f;
  p = (p * (x * x) + x) + 1.0f;
  const int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;
  const uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  return (p * s1) * s2;
}

// gelu(g) * u, GELU's tanh form (Gemma's gelu_pytorch_tanh): 0.5 g (1 + tanh(c (g + 0.044715 g^3))),
// c = sqrt(2/pi), with tanh(y) = sign(y) (1 - e) / (1 + e), e = exp(-2|y|) <= 1 (no overflow).
static inline float ml_k_gelu_mul1(float g, float u) {
  const float y = 0.7978845608028654f * (g + 0.044715f * (g * g * g));
  const float e = ml_k_exp(-2.0f * std::fabs(y));
  const float t = (1.0f - e) / (1.0f + e);
  return (0.5f * g * (1.0f + (std::signbit(y) ? -t : t))) * u;
}

// silu(g) * u with e = exp(-|g|) <= 1 (no overflow): silu(g) = (g if g's sign bit is clear, else
// g * e) / (1 + e).
static inline float ml_k_silu_mul1(float g, float u) {
  const float e = ml_k_exp(-std::fabs(g));
  const float num = std::signbit(g) ? g * e : g;
  return (num / (1.0f + e)) * u;
}
