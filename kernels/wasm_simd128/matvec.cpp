// WebAssembly SIMD128 row-major matrix-vector kernels (Q8 and Q4 weights times Q8_0 activations).
// Contract (kernels/ops.h): y[r] for r in [r0, r1) only; W->cols == x->n, a multiple of 32;
// unaligned loads; no allocation, no global state.
// Idiom (kernels/sse2/matvec.cpp, in wasm instructions): the activation block is sign-extended to
// int16 once per block (i16x8.extend_*_i8x16_s) and used by four rows; each row's weights are
// extended too and multiplied with i32x4.dot_i16x8_s. Q4 blocks are unpacked to int8 nibble - 8.
// Rounding: per block, the four rows' int32 lanes are transposed and summed exactly
// (ml_w_hsum4_i32) into [isum_r .. isum_r+3], converted once, multiplied by [d_w * d_x] and added
// to a float accumulator whose lane k is row r + k: the scalar kernel's float arithmetic in its
// order, so every row matches it bit for bit. A partial pass pads with zero rows.
#include "kernels/wasm_simd128/wasm_common.h"
#include "kernels/wasm_simd128/wasm_simd128.h"

namespace {

inline v128_t block_dot(v128_t w0, v128_t w1, const v128_t xs[4]) {
  const v128_t a = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(w0), xs[0]),
                                  wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(w0), xs[1]));
  const v128_t b = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(w1), xs[2]),
                                  wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(w1), xs[3]));
  return wasm_i32x4_add(a, b);
}

template <int R, bool Q4>
inline void rows_pass(float* y, const ml_qtensor* W, const ml_qact* x, int r) {
  const int cols = W->cols, nb = cols / ML_QK;
  const size_t row_bytes = Q4 ? (size_t)cols / 2 : (size_t)cols;
  const size_t block_bytes = Q4 ? ML_QK / 2 : ML_QK;
  const uint8_t* w[R];
  for (int k = 0; k < R; ++k) w[k] = static_cast<const uint8_t*>(W->q) + (size_t)(r + k) * row_bytes;
  v128_t acc = wasm_f32x4_splat(0.0f);  // lane k: row r + k
  for (int b = 0; b < nb; ++b) {
    const v128_t x0 = wasm_v128_load(x->q + b * ML_QK), x1 = wasm_v128_load(x->q + b * ML_QK + 16);
    const v128_t xs[4] = {wasm_i16x8_extend_low_i8x16(x0), wasm_i16x8_extend_high_i8x16(x0),
                          wasm_i16x8_extend_low_i8x16(x1), wasm_i16x8_extend_high_i8x16(x1)};
    v128_t dot[4] = {wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0)};
#pragma clang loop unroll(full)
    for (int k = 0; k < R; ++k) {
      const uint8_t* wb = w[k] + (size_t)b * block_bytes;
      v128_t w0, w1;
      if constexpr (Q4) {
        ml_w_q4_unpack(wasm_v128_load(wb), &w0, &w1);
      } else {
        w0 = wasm_v128_load(wb);
        w1 = wasm_v128_load(wb + 16);
      }
      dot[k] = block_dot(w0, w1, xs);
    }
    auto dw = [&](int k) { return k < R ? ml_qtensor_scale(W, (size_t)(r + k) * (size_t)nb + (size_t)b) : 0.0f; };
    const v128_t d = wasm_f32x4_mul(wasm_f32x4_make(dw(0), dw(1), dw(2), dw(3)), wasm_f32x4_splat(x->d[b]));
    const v128_t isum = ml_w_hsum4_i32(dot[0], dot[1], dot[2], dot[3]);
    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum), d));
  }
  if constexpr (R == 4) {
    wasm_v128_store(y + r, acc);
  } else {
    float out[4];
    wasm_v128_store(out, acc);
    for (int k = 0; k < R; ++k) y[r + k] = out[k];
  }
}

template <bool Q4>
inline void matvec(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  int r = r0;
  for (; r + 4 <= r1; r += 4) rows_pass<4, Q4>(y, W, x, r);
  switch (r1 - r) {
    case 3: rows_pass<3, Q4>(y, W, x, r); break;
    case 2: rows_pass<2, Q4>(y, W, x, r); break;
    case 1: rows_pass<1, Q4>(y, W, x, r); break;
    default: break;
  }
}

}  // namespace

extern "C" void ml_k_matvec_q8_wasm_simd128(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  matvec<false>(y, W, x, r0, r1);
}

extern "C" void ml_k_matvec_q4_wasm_simd128(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  matvec<true>(y, W, x, r0, r1);
}
