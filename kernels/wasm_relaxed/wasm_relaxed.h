// The WebAssembly relaxed-SIMD ISA: the packed matvec/matmul kernels on
// i32x4.relaxed_dot_i8x16_i7x16_add_s, with the second operand always in 0..127 so that every
// engine computes the same integers (the relaxed part of that instruction is only the
// behaviour for a second operand with its top bit set, and int16 saturation, which values in
// range never reach). Everything else comes from wasm_simd128 through `using namespace`.
// Built only through the clang-16 route of ../shared/TOOLCHAIN.md (cmake/wasm.cmake): LLVM 14,
// Emscripten 3.1.6's compiler, has neither the instruction nor its standard opcode.
#pragma once
#ifndef ML_ENABLE_WASM_RELAXED
#error "kernels/wasm_relaxed/wasm_relaxed.h included but ML_ENABLE_WASM_RELAXED is not set (kernels/isa.cmake)"
#endif
#include "kernels/wasm_simd128/wasm_simd128.h"

namespace ml::k::wasm_relaxed {
using namespace wasm_simd128;
inline constexpr const char* isa_name = "wasm_relaxed";
// Its own layout (G = 4, signed Q8, raw Q4, f32 scales: wasm_simd128's lane XORs buy nothing
// here); all four packed ops are bound here, as bind.h's layout check requires.
inline constexpr ml_pack_params pack{4, 0, 0, false, true};
ML_K_BIND_PK(matvec_q8_pk, wasm_relaxed)
ML_K_BIND_PK(matvec_q4_pk, wasm_relaxed)
ML_K_BIND_PK(matmul_q8_pk, wasm_relaxed)
ML_K_BIND_PK(matmul_q4_pk, wasm_relaxed)
}  // namespace ml::k::wasm_relaxed
#undef ML_K_PACKED
#define ML_K_PACKED 1
