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
ML_K_BIND(matvec_q8, neon_dotprod)
ML_K_BIND(matvec_q4, neon_dotprod)
ML_K_BIND(dot_q8, neon_dotprod)
// Packed kernels (kernels/neon_dotprod/matvec_pk.cpp): neon's layout (G = 4, Q8 signed, Q4 ^ 0x88,
// f32 scales) read with sdot; all four bound here, so the whole build reads one layout.
inline constexpr ml_pack_params pack{4, 0, 0x88, false, true};
ML_K_BIND_PK(matvec_q8_pk, neon_dotprod)
ML_K_BIND_PK(matvec_q4_pk, neon_dotprod)
ML_K_BIND_PK(matmul_q8_pk, neon_dotprod)
ML_K_BIND_PK(matmul_q4_pk, neon_dotprod)
}  // namespace ml::k::neon_dotprod
