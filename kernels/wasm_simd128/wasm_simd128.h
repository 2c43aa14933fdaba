// The WebAssembly SIMD128 ISA: every op where 128-bit SIMD pays; the rest falls back to scalar
// through `using namespace scalar`. Kernels: kernels/wasm_simd128/*.cpp; helpers: wasm_common.h.
#pragma once
#ifndef ML_ENABLE_WASM_SIMD128
#error "kernels/wasm_simd128/wasm_simd128.h included but ML_ENABLE_WASM_SIMD128 is not set (kernels/isa.cmake)"
#endif
#include "kernels/scalar/scalar.h"

namespace ml::k::wasm_simd128 {
using namespace scalar;
inline constexpr const char* isa_name = "wasm_simd128";
}  // namespace ml::k::wasm_simd128
