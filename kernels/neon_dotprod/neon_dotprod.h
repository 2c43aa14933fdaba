// The NEON dot-product ISA (AArch64, ARMv8.2-A +dotprod): the integer dots on vdotq_s32 (sdot).
// Everything else comes from neon through `using namespace neon`.
#pragma once
#ifndef ML_ENABLE_NEON_DOTPROD
#error "kernels/neon_dotprod/neon_dotprod.h included but ML_ENABLE_NEON_DOTPROD is not set (kernels/isa.cmake)"
#endif
#include "kernels/neon/neon.h"

namespace ml::k::neon_dotprod {
using namespace neon;
inline constexpr const char* isa_name = "neon_dotprod";
}  // namespace ml::k::neon_dotprod
