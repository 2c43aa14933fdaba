// WebAssembly SIMD128 attention kernels over the three KV-cache layouts (F32, Q8 with one scale
// per cached row, F16): scores (dot_*) and the weighted sum of values (axpy_*); the structure of
// kernels/sse2/attn.cpp in wasm instructions.
// Contract (kernels/ops.h): rows j < n_rows start at j * stride elements; only head_dim values of
// each row are read (tails use narrower loads or scalar code); s[j] for j < n_rows and out[i] for
// i < head_dim are the only writes; no allocation.
// Numerics: float dots in the canonical 16-partial order of kernels/numerics.h, bit-exact with
// scalar. Q8 dots are exact int32 (sign-extend + dot_i16x8), so dot_q8
// matches scalar bit for bit. The axpys add rows in order j = 0, 1, ... per element, exactly the
// scalar operations, with out kept in registers across rows for each chunk of columns. Halves are
// widened by ml_w_half4_to_f32, bit-exact with ml_half_to_float.
#include <cstring>

#include "core/half.h"
#include "kernels/wasm_simd128/wasm_common.h"
#include "kernels/wasm_simd128/wasm_simd128.h"

namespace {
inline v128_t load4(const float* p) { return wasm_v128_load(p); }
inline v128_t load4(const uint16_t* p) { return ml_w_load_half4(p); }
inline v128_t load4(const int8_t* p) {
  int32_t bits;
  std::memcpy(&bits, p, 4);
  return wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(wasm_i16x8_extend_low_i8x16(wasm_i32x4_splat(bits))));
}
inline void load16(const float* p, v128_t v[4]) {
  for (int c = 0; c < 4; ++c) v[c] = wasm_v128_load(p + 4 * c);
}
inline void load16(const uint16_t* p, v128_t v[4]) {
  const v128_t a = wasm_v128_load(p), b = wasm_v128_load(p + 8);
  v[0] = ml_w_half4_to_f32(wasm_u32x4_extend_low_u16x8(a));
  v[1] = ml_w_half4_to_f32(wasm_u32x4_extend_high_u16x8(a));
  v[2] = ml_w_half4_to_f32(wasm_u32x4_extend_low_u16x8(b));
  v[3] = ml_w_half4_to_f32(wasm_u32x4_extend_high_u16x8(b));
}
inline void load16(const int8_t* p, v128_t v[4]) {
  const v128_t b = wasm_v128_load(p);
  const v128_t lo = wasm_i16x8_extend_low_i8x16(b), hi = wasm_i16x8_extend_high_i8x16(b);
  v[0] = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(lo));
  v[1] = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(lo));
  v[2] = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(hi));
  v[3] = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(hi));
}
inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) { return ml_half_to_float(*p); }
inline float load1(const int8_t* p) { return (float)*p; }

// s[j] = sum_i q[i] * K[j][i] for a float or half cache, in the canonical 16-partial order
// (kernels/numerics.h); the tail pads both operands with zeros (+0 added to a partial).
inline v128_t load4n(const float* p, int m) { return ml_w_load_n(p, m); }
inline v128_t load4n(const uint16_t* p, int m) {
  if (m >= 4) return ml_w_load_half4(p);
  uint16_t t[4] = {0, 0, 0, 0};
  for (int i = 0; i < m; ++i) t[i] = p[i];
  return ml_w_load_half4(t);
}

// Whole 16-element chunks first, then the tail's (at most four) 4-element steps into r[0], r[1],
// ...: the same partial for every element as one loop over 4-element steps would use, but with
// constant accumulator indices, so the four stay in registers (a dynamic index puts a wasm
// array in linear memory).
template <class T>
inline void dot(float* s, const float* q, const T* K, size_t k_stride, int n_rows, int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const T* k = K + (size_t)j * k_stride;
    v128_t r[4] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    int i = 0;
    for (; i + 16 <= head_dim; i += 16)
      for (int c = 0; c < 4; ++c)
        r[c] = wasm_f32x4_add(r[c], wasm_f32x4_mul(wasm_v128_load(q + i + 4 * c), load4n(k + i + 4 * c, 4)));
    auto step = [&](v128_t& acc) {
      acc = wasm_f32x4_add(acc, wasm_f32x4_mul(ml_w_load_n(q + i, head_dim - i), load4n(k + i, head_dim - i)));
      i += 4;
    };
    if (i < head_dim) step(r[0]);
    if (i < head_dim) step(r[1]);
    if (i < head_dim) step(r[2]);
    if (i < head_dim) step(r[3]);
    s[j] = ml_w_sum16_f32(r);
  }
}

// out[i] = out[i] + wj * V[j][i] for j = 0, 1, ..., wj = w[j] (Vd null) or w[j] * Vd[j*d_stride]:
// chunks of 16 columns (four accumulators held across all rows), then of 4, then single columns.
template <class T>
inline void axpy(float* out, const float* w, const T* V, const float* Vd, size_t v_stride, size_t d_stride,
                 int n_rows, int head_dim) {
  auto wj = [&](int j) { return Vd ? w[j] * Vd[(size_t)j * d_stride] : w[j]; };
  int i = 0;
  for (; i + 16 <= head_dim; i += 16) {
    v128_t o[4];
    for (int c = 0; c < 4; ++c) o[c] = wasm_v128_load(out + i + 4 * c);
    for (int j = 0; j < n_rows; ++j) {
      const v128_t vw = wasm_f32x4_splat(wj(j));
      v128_t v[4];
      load16(V + (size_t)j * v_stride + i, v);
      for (int c = 0; c < 4; ++c) o[c] = wasm_f32x4_add(o[c], wasm_f32x4_mul(vw, v[c]));
    }
    for (int c = 0; c < 4; ++c) wasm_v128_store(out + i + 4 * c, o[c]);
  }
  for (; i + 4 <= head_dim; i += 4) {
    v128_t o = wasm_v128_load(out + i);
    for (int j = 0; j < n_rows; ++j)
      o = wasm_f32x4_add(o, wasm_f32x4_mul(wasm_f32x4_splat(wj(j)), load4(V + (size_t)j * v_stride + i)));
    wasm_v128_store(out + i, o);
  }
  for (; i < head_dim; ++i) {
    float o = out[i];
    for (int j = 0; j < n_rows; ++j) o = o + wj(j) * load1(V + (size_t)j * v_stride + i);
    out[i] = o;
  }
}
}  // namespace

extern "C" void ml_k_dot_f32_wasm_simd128(float* s, const float* q, const float* K, size_t k_stride, int n_rows,
                                          int head_dim) {
  dot(s, q, K, k_stride, n_rows, head_dim);
}

extern "C" void ml_k_dot_f16_wasm_simd128(float* s, const float* q, const uint16_t* K, size_t k_stride, int n_rows,
                                          int head_dim) {
  dot(s, q, K, k_stride, n_rows, head_dim);
}

// s[j] = (float)(int32 sum_i q[i] * K[j][i]) * (qd * Kd[j*d_stride])
extern "C" void ml_k_dot_q8_wasm_simd128(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd,
                                         size_t k_stride, size_t d_stride, int n_rows, int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const int8_t* k = K + (size_t)j * k_stride;
    v128_t acc = wasm_i32x4_splat(0);
    int i = 0;
    for (; i + 16 <= head_dim; i += 16) acc = wasm_i32x4_add(acc, ml_w_dot_i8x16(wasm_v128_load(q + i), wasm_v128_load(k + i)));
    if (i + 8 <= head_dim) {
      acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_i16x8_load8x8(q + i), wasm_i16x8_load8x8(k + i)));
      i += 8;
    }
    int32_t isum = ml_w_hsum_i32(acc);
    for (; i < head_dim; ++i) isum += (int32_t)q[i] * (int32_t)k[i];
    s[j] = (float)isum * (qd * Kd[(size_t)j * d_stride]);
  }
}

extern "C" void ml_k_axpy_f32_wasm_simd128(float* out, const float* w, const float* V, size_t v_stride, int n_rows,
                                           int head_dim) {
  axpy(out, w, V, nullptr, v_stride, 0, n_rows, head_dim);
}

extern "C" void ml_k_axpy_f16_wasm_simd128(float* out, const float* w, const uint16_t* V, size_t v_stride, int n_rows,
                                           int head_dim) {
  axpy(out, w, V, nullptr, v_stride, 0, n_rows, head_dim);
}

extern "C" void ml_k_axpy_q8_wasm_simd128(float* out, const float* w, const int8_t* V, const float* Vd,
                                          size_t v_stride, size_t d_stride, int n_rows, int head_dim) {
  axpy(out, w, V, Vd, v_stride, d_stride, n_rows, head_dim);
}
