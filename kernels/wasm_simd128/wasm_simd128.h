// The WebAssembly SIMD128 ISA: every op of kernels/ops.h in 128-bit SIMD (the structure of the
// SSE2 kernels: i16x8 widening plus i32x4.dot_i16x8_s), row-major and packed. Kernels:
// kernels/wasm_simd128/*.cpp; helpers: wasm_common.h. No run-time CPU check: the browser's
// JavaScript feature-detects SIMD before it loads this build.
#pragma once
#ifndef ML_ENABLE_WASM_SIMD128
#error "kernels/wasm_simd128/wasm_simd128.h included but ML_ENABLE_WASM_SIMD128 is not set (kernels/isa.cmake)"
#endif
#include "kernels/scalar/scalar.h"

namespace ml::k::wasm_simd128 {
using namespace scalar;
inline constexpr const char* isa_name = "wasm_simd128";
ML_K_BIND(matvec_q8, wasm_simd128)
ML_K_BIND(matvec_q4, wasm_simd128)
ML_K_BIND(quantize_q8, wasm_simd128)
ML_K_BIND(rmsnorm, wasm_simd128)
ML_K_BIND(softmax, wasm_simd128)
ML_K_BIND(silu_mul, wasm_simd128)
ML_K_BIND(gelu_mul, wasm_simd128)
ML_K_BIND(add, wasm_simd128)
ML_K_BIND(rope, wasm_simd128)
ML_K_BIND(dot_f32, wasm_simd128)
ML_K_BIND(axpy_f32, wasm_simd128)
ML_K_BIND(dot_q8, wasm_simd128)
ML_K_BIND(axpy_q8, wasm_simd128)
ML_K_BIND(dot_f16, wasm_simd128)
ML_K_BIND(axpy_f16, wasm_simd128)
// Packed kernels (matvec_pk.cpp): G = 4, f32 scales, each 16-bit lane read whole: Q8 with the
// low byte stored unsigned (q + 128), Q4 with the lane's top nibble stored as nibble ^ 8.
inline constexpr ml_pack_params pack{4, 0, 0, false, true, 0x00800080u, 0x80008000u};
ML_K_BIND_PK(matvec_q8_pk, wasm_simd128)
ML_K_BIND_PK(matvec_q4_pk, wasm_simd128)
ML_K_BIND_PK(matmul_q8_pk, wasm_simd128)
ML_K_BIND_PK(matmul_q4_pk, wasm_simd128)
}  // namespace ml::k::wasm_simd128
#undef ML_K_PACKED
#define ML_K_PACKED 1
