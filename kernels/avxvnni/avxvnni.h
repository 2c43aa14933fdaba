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
// Packed kernels (kernels/avxvnni/matvec_pk.cpp): G = 8, Q8 stored + 128 (vpdpbusd's unsigned
// operand), Q4 raw, f16 scales kept f16.
inline constexpr ml_pack_params pack{8, 128, 0, true, true};
ML_K_BIND_PK(matvec_q8_pk, avxvnni)
ML_K_BIND_PK(matvec_q4_pk, avxvnni)
ML_K_BIND_PK(matmul_q8_pk, avxvnni)
ML_K_BIND_PK(matmul_q4_pk, avxvnni)
}  // namespace ml::k::avxvnni
#undef ML_K_PACKED
#define ML_K_PACKED 1
