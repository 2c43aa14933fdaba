// The avx2 ISA (AVX2 + FMA + F16C, kernels/isa.cmake): every op of kernels/ops.h, 256 bits wide.
// Parent: sse41. Its kernels are the bases of the avxvnni and avx512vnni chains, which replace
// only what VNNI or 512-bit vectors improve.
#pragma once
#ifndef ML_ENABLE_AVX2
#error "kernels/avx2/avx2.h included but ML_ENABLE_AVX2 is not set (kernels/isa.cmake)"
#endif
#include "kernels/sse41/sse41.h"

namespace ml::k::avx2 {
using namespace sse41;
inline constexpr const char* isa_name = "avx2";
ML_K_BIND(matvec_q8, avx2)
ML_K_BIND(matvec_q4, avx2)
ML_K_BIND(quantize_q8, avx2)
ML_K_BIND(rmsnorm, avx2)
ML_K_BIND(softmax, avx2)
ML_K_BIND(silu_mul, avx2)
ML_K_BIND(gelu_mul, avx2)
ML_K_BIND(add, avx2)
ML_K_BIND(rope, avx2)
ML_K_BIND(dot_f32, avx2)
ML_K_BIND(axpy_f32, avx2)
ML_K_BIND(dot_q8, avx2)
ML_K_BIND(axpy_q8, avx2)
ML_K_BIND(dot_f16, avx2)
ML_K_BIND(axpy_f16, avx2)
ML_K_BIND(f32_to_f16, avx2)
// Packed kernels (kernels/avx2/matvec_pk.cpp): G = 8, Q8 signed (psignb + pmaddubsw), Q4 raw,
// f16 scales kept f16.
inline constexpr ml_pack_params pack{8, 0, 0, true, true};
ML_K_BIND_PK(matvec_q8_pk, avx2)
ML_K_BIND_PK(matvec_q4_pk, avx2)
ML_K_BIND_PK(matmul_q8_pk, avx2)
ML_K_BIND_PK(matmul_q4_pk, avx2)
}  // namespace ml::k::avx2
#undef ML_K_PACKED
#define ML_K_PACKED 1
