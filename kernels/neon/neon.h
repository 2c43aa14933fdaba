// The NEON ISA: ARMv7 NEON (the neon preset, -mfpu=neon) and the AArch64 baseline (ASIMD), so
// every kernel here compiles for both: intrinsics common to both, AArch64-only ones under
// __aarch64__ (kernels/arm_common.h). Integer dots: vmull_s8 + vpadalq_s16. Ops not bound here
// fall back to scalar through `using namespace scalar`. The float kernels (quantize, F16 cache)
// are AArch64-only: ARMv7 NEON flushes subnormals to zero and has no half conversion with
// -mfpu=neon, so the 32-bit build keeps scalar's.
#pragma once
#ifndef ML_ENABLE_NEON
#error "kernels/neon/neon.h included but ML_ENABLE_NEON is not set (kernels/isa.cmake)"
#endif
#include "kernels/scalar/scalar.h"

namespace ml::k::neon {
using namespace scalar;
inline constexpr const char* isa_name = "neon";
ML_K_BIND(matvec_q8, neon)
ML_K_BIND(matvec_q4, neon)
ML_K_BIND(dot_q8, neon)
#ifdef __aarch64__
ML_K_BIND(quantize_q8, neon)
ML_K_BIND(rmsnorm, neon)
ML_K_BIND(softmax, neon)
ML_K_BIND(silu_mul, neon)
ML_K_BIND(gelu_mul, neon)
ML_K_BIND(dot_f32, neon)
ML_K_BIND(dot_f16, neon)
ML_K_BIND(axpy_f16, neon)
#endif
// Packed kernels (kernels/neon/matvec_pk.cpp): G = 4, Q8 signed, Q4 bytes ^ 0x88 (nibbles read as
// signed q - 8), f32 scales. neon_dotprod uses the same layout with sdot.
inline constexpr ml_pack_params pack{4, 0, 0x88, false, true};
// The packed kernels of this ISA and of its children do scalar's float operations in scalar's
// order, so they are bit-exact with the scalar row-major matvec for any scales (test_packed).
inline constexpr bool pk_exact = true;
ML_K_BIND_PK(matvec_q8_pk, neon)
ML_K_BIND_PK(matvec_q4_pk, neon)
ML_K_BIND_PK(matmul_q8_pk, neon)
ML_K_BIND_PK(matmul_q4_pk, neon)
}  // namespace ml::k::neon
#undef ML_K_PACKED
#define ML_K_PACKED 1
