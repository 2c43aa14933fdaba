// NEON rmsnorm (AArch64 only; neon.h binds it there), bit-exact with ml_k_rmsnorm_scalar: the sum
// of squares in kernels/numerics.h's canonical order (kernels/neon/canonical.h), the scale in
// scalar code, then o[i] = w[i] * (x[i] * scale) lane-wise. softmax and silu_mul stay scalar's
// (they need the Cephes exp step for step; open work).
#ifdef __aarch64__
#include <arm_neon.h>

#include <cmath>

#include "kernels/neon/canonical.h"
#include "kernels/neon/neon.h"

extern "C" void ml_k_rmsnorm_neon(float* o, const float* x, const float* w, int n, float eps) {
  if (n <= 0) return;
  const float ss = ml_arm::dot_canonical(x, x, n);
  const float scale = 1.0f / std::sqrt(ss / (float)n + eps);
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(o + i, vmulq_f32(vld1q_f32(w + i), vmulq_n_f32(vld1q_f32(x + i), scale)));
  for (; i < n; ++i) o[i] = w[i] * (x[i] * scale);
}
#endif
