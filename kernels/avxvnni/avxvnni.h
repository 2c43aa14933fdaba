// The avxvnni ISA (avx2 + the VEX-encoded AVX-VNNI vpdpbusd, kernels/isa.cmake). Parent: avx2.
// Only the integer dots change: vpdpbusd(acc, |x|, sign(w, x)) replaces pmaddubsw + pmaddwd, so
// this ISA implements the matvecs and the Q8 attention dot and inherits everything else.
#pragma once
#ifndef ML_ENABLE_AVXVNNI
#error "kernels/avxvnni/avxvnni.h included but ML_ENABLE_AVXVNNI is not set (kernels/isa.cmake)"
#endif
#include "kernels/avx2/avx2.h"

namespace ml::k::avxvnni {
using namespace avx2;
inline constexpr const char* isa_name = "avxvnni";
ML_K_BIND(matvec_q8, avxvnni)
ML_K_BIND(matvec_q4, avxvnni)
ML_K_BIND(dot_q8, avxvnni)
}  // namespace ml::k::avxvnni
