// The avx512vnni ISA (avx2 + AVX-512 F/BW/VL/VNNI, kernels/isa.cmake). Parent: avx2; it skips
// avxvnni on purpose (Ice Lake and Cascade Lake lack the VEX-encoded AVX-VNNI). 512-bit vpdpbusd
// takes two 32-blocks per instruction, and byte-masked loads remove the scalar tails, so this ISA
// implements the matvecs, the attention kernels, quantize_q8 and silu_mul; the other float ops stay
// avx2's.
#pragma once
#ifndef ML_ENABLE_AVX512VNNI
#error "kernels/avx512vnni/avx512vnni.h included but ML_ENABLE_AVX512VNNI is not set (kernels/isa.cmake)"
#endif
#include "kernels/avx2/avx2.h"

namespace ml::k::avx512vnni {
using namespace avx2;
inline constexpr const char* isa_name = "avx512vnni";
ML_K_BIND(matvec_q8, avx512vnni)
ML_K_BIND(matvec_q4, avx512vnni)
ML_K_BIND(quantize_q8, avx512vnni)
ML_K_BIND(silu_mul, avx512vnni)
ML_K_BIND(dot_q8, avx512vnni)
ML_K_BIND(dot_f32, avx512vnni)
ML_K_BIND(dot_f16, avx512vnni)
ML_K_BIND(axpy_f32, avx512vnni)
ML_K_BIND(axpy_f16, avx512vnni)
ML_K_BIND(axpy_q8, avx512vnni)
ML_K_BIND(dot_f16_heads, avx512vnni)
ML_K_BIND(axpy_f16_heads, avx512vnni)
#undef ML_K_F16_HEADS
#define ML_K_F16_HEADS 1
// Packed kernels (kernels/avx512vnni/matvec_pk.cpp): G = 16, Q8 stored + 128 (vpdpbusd's unsigned
// operand), Q4 raw, f16 scales kept f16.
inline constexpr ml_pack_params pack{16, 128, 0, true, true};
ML_K_BIND_PK(matvec_q8_pk, avx512vnni)
ML_K_BIND_PK(matvec_q4_pk, avx512vnni)
ML_K_BIND_PK(matmul_q8_pk, avx512vnni)
ML_K_BIND_PK(matmul_q4_pk, avx512vnni)
}  // namespace ml::k::avx512vnni
#undef ML_K_PACKED
#define ML_K_PACKED 1
