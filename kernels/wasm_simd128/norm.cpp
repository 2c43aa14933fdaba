// WebAssembly SIMD128 element-wise and normalisation kernels: rmsnorm, softmax, silu_mul, add,
// rope (kernels/sse2/norm.cpp in wasm instructions). Contract (kernels/ops.h): any n (n <= 0 does
// nothing); only the n values named are read or written (tails go through a small stack buffer or
// scalar code); no allocation, no global state. Sums are taken over 4 float lanes and reduced once
// (a different order from scalar, within the 1e-5 relative tolerance); exponentials use
// ml_w_exp_f32 (Cephes, ~1e-7 relative). add and rope do the scalar kernel's exact float
// operations, so they match it bit for bit.
#include <cmath>
#include <cstring>

#include "kernels/wasm_simd128/wasm_common.h"
#include "kernels/wasm_simd128/wasm_simd128.h"

extern "C" void ml_k_rmsnorm_wasm_simd128(float* o, const float* x, const float* w, int n, float eps) {
  if (n <= 0) return;
  v128_t r[4] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
  for (int i = 0; i < n; i += 4) {  // values i..i+3 are partials i % 16 ..: register (i / 4) % 4
    const v128_t a = ml_w_load_n(x + i, n - i);
    r[(i >> 2) & 3] = wasm_f32x4_add(r[(i >> 2) & 3], wasm_f32x4_mul(a, a));
  }
  const float scale = 1.0f / std::sqrt(ml_w_sum16_f32(r) / (float)n + eps);
  const v128_t vs = wasm_f32x4_splat(scale);
  int i = 0;
  for (; i + 4 <= n; i += 4)
    wasm_v128_store(o + i, wasm_f32x4_mul(wasm_v128_load(w + i), wasm_f32x4_mul(wasm_v128_load(x + i), vs)));
  for (; i < n; ++i) o[i] = w[i] * (x[i] * scale);
}

// x[i] = exp(x[i] - max) / sum_j exp(x[j] - max); every input -inf: x[i] = 1 / n.
extern "C" void ml_k_softmax_wasm_simd128(float* x, int n) {
  if (n <= 0) return;
  int i = 0;
  v128_t vmx = wasm_f32x4_splat(-INFINITY);
  for (; i + 4 <= n; i += 4) vmx = wasm_f32x4_pmax(vmx, wasm_v128_load(x + i));  // drops NaN, as scalar's >
  float mx = ml_w_hmax_f32(vmx);
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  if (mx == -INFINITY) {
    for (i = 0; i < n; ++i) x[i] = 1.0f / (float)n;
    return;
  }
  vmx = wasm_f32x4_splat(mx);
  v128_t r[4] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
  for (i = 0; i + 4 <= n; i += 4) {
    const v128_t e = ml_w_exp_f32(wasm_f32x4_sub(wasm_v128_load(x + i), vmx));
    wasm_v128_store(x + i, e);
    r[(i >> 2) & 3] = wasm_f32x4_add(r[(i >> 2) & 3], e);
  }
  if (i < n) {  // 1..3 left: pad with -inf, whose exp is +0 (adds nothing to the partials)
    float t[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    std::memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
    const v128_t e = ml_w_exp_f32(wasm_f32x4_sub(wasm_v128_load(t), vmx));
    wasm_v128_store(t, e);
    std::memcpy(x + i, t, (size_t)(n - i) * sizeof(float));
    r[(i >> 2) & 3] = wasm_f32x4_add(r[(i >> 2) & 3], e);
  }
  const float s = ml_w_sum16_f32(r);
  const v128_t vsum = wasm_f32x4_splat(s);
  for (i = 0; i + 4 <= n; i += 4) wasm_v128_store(x + i, wasm_f32x4_div(wasm_v128_load(x + i), vsum));
  for (; i < n; ++i) x[i] = x[i] / s;
}

// g[i] = f(g[i], u[i]) 4 lanes at a time (f a lambda, so it is inlined); the tail through a
// zero-padded stack copy.
template <class F>
static void gate4(float* g, const float* u, int n, F f) {
  int i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(g + i, f(wasm_v128_load(g + i), wasm_v128_load(u + i)));
  if (i < n) {
    float tg[4] = {}, tu[4] = {};
    std::memcpy(tg, g + i, (size_t)(n - i) * sizeof(float));
    std::memcpy(tu, u + i, (size_t)(n - i) * sizeof(float));
    wasm_v128_store(tg, f(wasm_v128_load(tg), wasm_v128_load(tu)));
    std::memcpy(g + i, tg, (size_t)(n - i) * sizeof(float));
  }
}

// g[i] = silu(g[i]) * u[i] in kernels/numerics.h's form (SwiGLU gate).
extern "C" void ml_k_silu_mul_wasm_simd128(float* g, const float* u, int n) {
  gate4(g, u, n, [](v128_t a, v128_t b) { return ml_w_silu_mul(a, b); });
}

// g[i] = gelu(g[i]) * u[i] in kernels/numerics.h's form (GeGLU gate).
extern "C" void ml_k_gelu_mul_wasm_simd128(float* g, const float* u, int n) {
  gate4(g, u, n, [](v128_t a, v128_t b) { return ml_w_gelu_mul(a, b); });
}

// y[i] = y[i] + x[i]  (residual connection).
extern "C" void ml_k_add_wasm_simd128(float* y, const float* x, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, wasm_f32x4_add(wasm_v128_load(y + i), wasm_v128_load(x + i)));
  for (; i < n; ++i) y[i] = y[i] + x[i];
}

// Pair i: (a, b) -> (a*cos[i] - b*sin[i], a*sin[i] + b*cos[i]), the scalar operations exactly
// (a*c + b*(-s) equals a*c - b*s; the second sum is commuted). Style 0 (pairs 2i, 2i+1): 4 pairs
// per step as a0 b0 a1 b1 | a2 b2 a3 b3 with cos/sin duplicated per pair and the swapped vector
// b0 a0 b1 a1 times (-s, s, -s, s). Style 1 (pairs i, i + half): two plain vectors.
extern "C" void ml_k_rope_wasm_simd128(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                                       int style) {
  const int half = head_dim / 2;
  const v128_t neg_even = wasm_i32x4_make((int)0x80000000u, 0, (int)0x80000000u, 0);
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + (size_t)h * (size_t)head_dim;
    int i = 0;
    if (style == 0) {
      for (; i + 4 <= half; i += 4) {
        const v128_t c = wasm_v128_load(cos + i), s = wasm_v128_load(sin + i);
        const v128_t cc[2] = {wasm_i32x4_shuffle(c, c, 0, 0, 1, 1), wasm_i32x4_shuffle(c, c, 2, 2, 3, 3)};
        const v128_t ss[2] = {wasm_v128_xor(wasm_i32x4_shuffle(s, s, 0, 0, 1, 1), neg_even),
                              wasm_v128_xor(wasm_i32x4_shuffle(s, s, 2, 2, 3, 3), neg_even)};
        for (int k = 0; k < 2; ++k) {
          const v128_t p = wasm_v128_load(v + 2 * i + 4 * k);
          const v128_t sw = wasm_i32x4_shuffle(p, p, 1, 0, 3, 2);
          wasm_v128_store(v + 2 * i + 4 * k, wasm_f32x4_add(wasm_f32x4_mul(p, cc[k]), wasm_f32x4_mul(sw, ss[k])));
        }
      }
    } else {
      for (; i + 4 <= half; i += 4) {
        const v128_t c = wasm_v128_load(cos + i), s = wasm_v128_load(sin + i);
        const v128_t a = wasm_v128_load(v + i), b = wasm_v128_load(v + half + i);
        wasm_v128_store(v + i, wasm_f32x4_sub(wasm_f32x4_mul(a, c), wasm_f32x4_mul(b, s)));
        wasm_v128_store(v + half + i, wasm_f32x4_add(wasm_f32x4_mul(a, s), wasm_f32x4_mul(b, c)));
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
