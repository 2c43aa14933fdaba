// The NEON ISA: ARMv7 NEON (the neon preset, -mfpu=neon) and the AArch64 baseline (ASIMD), so
// every kernel here compiles for both: intrinsics common to both, AArch64-only ones under
// __aarch64__ (kernels/arm_common.h). Integer dots: vmull_s8 + vpadalq_s16. Ops not bound here
// fall back to scalar through `using namespace scalar`.
#pragma once
#ifndef ML_ENABLE_NEON
#error "kernels/neon/neon.h included but ML_ENABLE_NEON is not set (kernels/isa.cmake)"
#endif
#include "kernels/scalar/scalar.h"

namespace ml::k::neon {
using namespace scalar;
inline constexpr const char* isa_name = "neon";
}  // namespace ml::k::neon
