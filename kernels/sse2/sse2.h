// The SSE2 ISA (x86-64 baseline): every op where 128-bit SIMD pays; the rest falls back to
// scalar through `using namespace scalar`. Kernels: kernels/sse2/*.cpp; helpers: x86_common.h.
// The first ISA of the chain with packed kernels (it defines ML_K_PACKED).
#pragma once
#ifndef ML_ENABLE_SSE2
#error "kernels/sse2/sse2.h included but ML_ENABLE_SSE2 is not set (kernels/isa.cmake)"
#endif
#include "kernels/scalar/scalar.h"

namespace ml::k::sse2 {
using namespace scalar;
inline constexpr const char* isa_name = "sse2";
ML_K_BIND(matvec_q8, sse2)
ML_K_BIND(matvec_q4, sse2)
ML_K_BIND(quantize_q8, sse2)
ML_K_BIND(rmsnorm, sse2)
ML_K_BIND(softmax, sse2)
ML_K_BIND(silu_mul, sse2)
ML_K_BIND(gelu_mul, sse2)
ML_K_BIND(add, sse2)
ML_K_BIND(rope, sse2)
ML_K_BIND(dot_f32, sse2)
ML_K_BIND(axpy_f32, sse2)
ML_K_BIND(dot_q8, sse2)
ML_K_BIND(axpy_q8, sse2)
ML_K_BIND(dot_f16, sse2)
ML_K_BIND(axpy_f16, sse2)
// Packed kernels (kernels/sse2/matvec_pk.cpp): G = 4, Q8 stored + 128 (no 8-bit multiply: the
// bytes are split and go through pmaddwd as unsigned), Q4 nibbles raw, f32 scales.
inline constexpr ml_pack_params pack{4, 128, 0, false, true};
// The packed kernels of this ISA and of its children do scalar's float operations in scalar's
// order, so they are bit-exact with the scalar row-major matvec for any scales (test_packed).
inline constexpr bool pk_exact = true;
ML_K_BIND_PK(matvec_q8_pk, sse2)
ML_K_BIND_PK(matvec_q4_pk, sse2)
ML_K_BIND_PK(matmul_q8_pk, sse2)
ML_K_BIND_PK(matmul_q4_pk, sse2)
}  // namespace ml::k::sse2
#undef ML_K_PACKED
#define ML_K_PACKED 1
