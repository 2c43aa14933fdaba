// The SVE ISA (AArch64, +sve): vector-length-agnostic kernels (svcntb() bytes per vector, any
// length from 128 to 2048 bits); the packed kernels are neon_dotprod's (spec/architecture.txt).
#pragma once
#ifndef ML_ENABLE_SVE
#error "kernels/sve/sve.h included but ML_ENABLE_SVE is not set (kernels/isa.cmake)"
#endif
#include "kernels/neon_dotprod/neon_dotprod.h"

namespace ml::k::sve {
using namespace neon_dotprod;
inline constexpr const char* isa_name = "sve";
ML_K_BIND(matvec_q8, sve)
ML_K_BIND(matvec_q4, sve)
ML_K_BIND(dot_q8, sve)
}  // namespace ml::k::sve
