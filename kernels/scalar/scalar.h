// The scalar ISA: every op, in plain C++. It is the reference every other ISA is tested against,
// and the root of every fallback chain.
#pragma once
#ifndef ML_ENABLE_SCALAR
#error "kernels/scalar/scalar.h included but ML_ENABLE_SCALAR is not set (kernels/isa.cmake)"
#endif
#include "kernels/ops.h"

namespace ml::k::scalar {
inline constexpr const char* isa_name = "scalar";
// No packed kernels: g = 0 keeps every matrix row-major. An ISA with packed kernels defines its own
// `pack`, binds the four ML_K_PK_OPS with ML_K_BIND_PK and defines ML_K_PACKED.
inline constexpr ml_pack_params pack{};
ML_K_BIND(matvec_q8, scalar)
ML_K_BIND(matvec_q4, scalar)
ML_K_BIND(quantize_q8, scalar)
ML_K_BIND(rmsnorm, scalar)
ML_K_BIND(softmax, scalar)
ML_K_BIND(silu_mul, scalar)
ML_K_BIND(gelu_mul, scalar)
ML_K_BIND(add, scalar)
ML_K_BIND(rope, scalar)
ML_K_BIND(dot_f32, scalar)
ML_K_BIND(axpy_f32, scalar)
ML_K_BIND(dot_q8, scalar)
ML_K_BIND(axpy_q8, scalar)
ML_K_BIND(dot_f16, scalar)
ML_K_BIND(axpy_f16, scalar)
ML_K_BIND(f32_to_f16, scalar)
}  // namespace ml::k::scalar
