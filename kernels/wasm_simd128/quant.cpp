// WebAssembly SIMD128 activation quantization (Q8_0). Contract (kernels/ops.h,
// src/core/quant_ref.h): any n >= 0; writes n quants and ceil(n / 32) scales; bit-identical to
// ml_quantize_q8_ref and the scalar kernel as compiled for wasm.
// How: amax by pmax (exact in any order; a NaN |x| is dropped, as fmax drops it); id = 127 / amax
// and d = amax / 127 in scalar float; per value a float multiply, then a separate add of
// copysign(0.5, x), then truncation (trunc_sat), then the clamp to +-127 by the saturating
// narrows plus i16x8 min/max. A NaN value: the scalar cast in wasm gives INT_MIN (LLVM's guarded
// fptosi), clamped to -127; trunc_sat would give 0, so NaN lanes are forced to -127. A short last
// block is padded with zeros in a stack buffer and only its len quants are copied out.
#include <cstring>

#include "kernels/wasm_simd128/wasm_common.h"
#include "kernels/wasm_simd128/wasm_simd128.h"

namespace {

inline void quant_block(int8_t* q, float* d, const float* x) {
  const v128_t abs_mask = wasm_i32x4_splat(0x7FFFFFFF);
  v128_t v[8];
  v128_t amax = wasm_f32x4_splat(0.0f);
  for (int i = 0; i < 8; ++i) {
    v[i] = wasm_v128_load(x + 4 * i);
    amax = wasm_f32x4_pmax(amax, wasm_v128_and(v[i], abs_mask));  // amax < NaN is false: keeps amax
  }
  const float a = ml_w_hmax_f32(amax);
  if (!(a >= ML_QUANT_TINY)) {
    std::memset(q, 0, ML_QK);
    *d = 0.0f;
    return;
  }
  const float id = 127.0f / a;
  *d = a / 127.0f;
  const v128_t vid = wasm_f32x4_splat(id);
  const v128_t sign_mask = wasm_i32x4_splat((int)0x80000000u);
  const v128_t half = wasm_f32x4_splat(0.5f);
  const v128_t neg127 = wasm_i32x4_splat(-127);
  v128_t t[8];
  for (int i = 0; i < 8; ++i) {
    const v128_t s = wasm_f32x4_mul(v[i], vid);
    const v128_t r = wasm_f32x4_add(s, wasm_v128_or(wasm_v128_and(v[i], sign_mask), half));
    t[i] = wasm_v128_bitselect(wasm_i32x4_trunc_sat_f32x4(r), neg127, wasm_f32x4_eq(r, r));
  }
  const v128_t hi = wasm_i16x8_splat(127), lo = wasm_i16x8_splat(-127);
  for (int i = 0; i < 2; ++i) {
    v128_t a01 = wasm_i16x8_narrow_i32x4(t[4 * i], t[4 * i + 1]);
    v128_t a23 = wasm_i16x8_narrow_i32x4(t[4 * i + 2], t[4 * i + 3]);
    a01 = wasm_i16x8_max(wasm_i16x8_min(a01, hi), lo);
    a23 = wasm_i16x8_max(wasm_i16x8_min(a23, hi), lo);
    wasm_v128_store(q + 16 * i, wasm_i8x16_narrow_i16x8(a01, a23));
  }
}

}  // namespace

extern "C" void ml_k_quantize_q8_wasm_simd128(int8_t* q, float* d, const float* x, int n) {
  int b = 0;
  for (; (b + 1) * ML_QK <= n; ++b) quant_block(q + b * ML_QK, d + b, x + b * ML_QK);
  const int len = n - b * ML_QK;
  if (len > 0) {
    float xb[ML_QK] = {};
    int8_t qb[ML_QK];
    std::memcpy(xb, x + b * ML_QK, (size_t)len * sizeof(float));
    quant_block(qb, d + b, xb);
    std::memcpy(q + b * ML_QK, qb, (size_t)len);
  }
}
