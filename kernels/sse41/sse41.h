// The SSE4.1 ISA (with SSSE3, which -msse4.1 implies): only the integer dots that
// pmaddubsw/psignb make cheaper; every other op comes from sse2 through `using namespace sse2`.
#pragma once
#ifndef ML_ENABLE_SSE41
#error "kernels/sse41/sse41.h included but ML_ENABLE_SSE41 is not set (kernels/isa.cmake)"
#endif
#include "kernels/sse2/sse2.h"

namespace ml::k::sse41 {
using namespace sse2;
inline constexpr const char* isa_name = "sse41";
ML_K_BIND(matvec_q8, sse41)
ML_K_BIND(matvec_q4, sse41)
ML_K_BIND(dot_q8, sse41)
// Packed kernels (kernels/sse41/matvec_pk.cpp): G = 4 like sse2, but Q8 stays signed (psignb +
// pmaddubsw), so the layout differs from sse2's and all four packed ops are bound here.
inline constexpr ml_pack_params pack{4, 0, 0, false, true};
ML_K_BIND_PK(matvec_q8_pk, sse41)
ML_K_BIND_PK(matvec_q4_pk, sse41)
ML_K_BIND_PK(matmul_q8_pk, sse41)
ML_K_BIND_PK(matmul_q4_pk, sse41)
}  // namespace ml::k::sse41
#undef ML_K_PACKED
#define ML_K_PACKED 1
