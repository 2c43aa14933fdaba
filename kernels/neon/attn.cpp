// NEON attention scores over the F32 and F16 KV caches, and the F16 weighted sum (AArch64 only;
// neon.h binds them there). Halves are widened with vcvt_f32_f16 (fcvtl), exactly.
//
// Bit-exact with scalar: the scores run 4 cache rows per pass, one row per lane. Each row's 4
// values at a time are loaded and transposed (4x4, trn1/trn2), so lane j adds q[i] * K_j[i] for
// i = 0, 1, 2, ... in order: the scalar kernel's sequence of multiplies and adds. Summing along a
// row in lanes instead (as x86 does) was tried: it moves scores by an ulp, which was enough to
// flip a near-tie argmax over 150 positions and to change seeded stories260K text.
// axpy_f16 is lane-wise in row order, as scalar. (scalar's axpy_f32 and axpy_q8 are the same kind
// of loop, which GCC vectorises by itself.)
#ifdef __aarch64__
#include <arm_neon.h>

#include "core/half.h"
#include "kernels/neon/neon.h"

namespace {

inline float32x4_t load4(const float* p) { return vld1q_f32(p); }
inline float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
inline float widen(float v) { return v; }
inline float widen(uint16_t h) { return ml_half_to_float(h); }

// s[j] = sum_i q[i] * K[j * k_stride + i], accumulated in i order per row.
template <class T>
void dot_rows(float* s, const float* q, const T* K, size_t k_stride, int n_rows, int head_dim) {
  int j = 0;
  for (; j + 4 <= n_rows; j += 4) {
    const T* k0 = K + (size_t)j * k_stride;
    const T* k1 = k0 + k_stride;
    const T* k2 = k1 + k_stride;
    const T* k3 = k2 + k_stride;
    float32x4_t acc = vdupq_n_f32(0.0f);
    int i = 0;
    for (; i + 4 <= head_dim; i += 4) {
      const float32x4_t r0 = load4(k0 + i), r1 = load4(k1 + i), r2 = load4(k2 + i), r3 = load4(k3 + i);
      const float64x2_t a = vreinterpretq_f64_f32(vtrn1q_f32(r0, r1)), b = vreinterpretq_f64_f32(vtrn2q_f32(r0, r1));
      const float64x2_t c = vreinterpretq_f64_f32(vtrn1q_f32(r2, r3)), d = vreinterpretq_f64_f32(vtrn2q_f32(r2, r3));
      acc = vaddq_f32(acc, vmulq_n_f32(vreinterpretq_f32_f64(vtrn1q_f64(a, c)), q[i]));
      acc = vaddq_f32(acc, vmulq_n_f32(vreinterpretq_f32_f64(vtrn1q_f64(b, d)), q[i + 1]));
      acc = vaddq_f32(acc, vmulq_n_f32(vreinterpretq_f32_f64(vtrn2q_f64(a, c)), q[i + 2]));
      acc = vaddq_f32(acc, vmulq_n_f32(vreinterpretq_f32_f64(vtrn2q_f64(b, d)), q[i + 3]));
    }
    for (; i < head_dim; ++i) {
      const float col[4] = {widen(k0[i]), widen(k1[i]), widen(k2[i]), widen(k3[i])};
      acc = vaddq_f32(acc, vmulq_n_f32(vld1q_f32(col), q[i]));
    }
    vst1q_f32(s + j, acc);
  }
  for (; j < n_rows; ++j) {
    const T* k = K + (size_t)j * k_stride;
    float acc = 0.0f;
    for (int i = 0; i < head_dim; ++i) acc += q[i] * widen(k[i]);
    s[j] = acc;
  }
}

}  // namespace

extern "C" void ml_k_dot_f32_neon(float* s, const float* q, const float* K, size_t k_stride, int n_rows,
                                  int head_dim) {
  dot_rows(s, q, K, k_stride, n_rows, head_dim);
}

extern "C" void ml_k_dot_f16_neon(float* s, const float* q, const uint16_t* K, size_t k_stride, int n_rows,
                                  int head_dim) {
  dot_rows(s, q, K, k_stride, n_rows, head_dim);
}

extern "C" void ml_k_axpy_f16_neon(float* out, const float* w, const uint16_t* V, size_t v_stride, int n_rows,
                                   int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const uint16_t* v = V + (size_t)j * v_stride;
    const float32x4_t wj = vdupq_n_f32(w[j]);
    int i = 0;
    for (; i + 4 <= head_dim; i += 4)
      vst1q_f32(out + i, vaddq_f32(vld1q_f32(out + i), vmulq_f32(wj, load4(v + i))));
    for (; i < head_dim; ++i) out[i] = out[i] + w[j] * ml_half_to_float(v[i]);
  }
}
#endif
