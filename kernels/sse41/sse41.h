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
}  // namespace ml::k::sse41
