// The NEON i8mm ISA (AArch64, +i8mm): prefill matmuls on vmmlaq_s32 (smmla, 2 rows x 2 tokens per
// instruction) over neon_dotprod's packed layout; decode uses neon_dotprod's kernels.
#pragma once
#ifndef ML_ENABLE_NEON_I8MM
#error "kernels/neon_i8mm/neon_i8mm.h included but ML_ENABLE_NEON_I8MM is not set (kernels/isa.cmake)"
#endif
#include "kernels/neon_dotprod/neon_dotprod.h"

namespace ml::k::neon_i8mm {
using namespace neon_dotprod;
inline constexpr const char* isa_name = "neon_i8mm";
// Matmuls only, on neon_dotprod's layout: spec/kernels.txt.
using neon_dotprod::pack;
ML_K_BIND_PK(matmul_q8_pk, neon_i8mm)
ML_K_BIND_PK(matmul_q4_pk, neon_i8mm)
}  // namespace ml::k::neon_i8mm
