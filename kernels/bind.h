// Compile-time kernel binding: the only file that knows which preset this build is.
// ml::k::active::<op> is a direct reference to the highest ISA in the build's chain that
// implements <op>: each ISA namespace pulls in its parent with `using namespace`, and qualified
// lookup only searches a using-directive when the namespace itself lacks the name. No function
// pointers, no runtime dispatch.
#pragma once
#include <type_traits>

#include "kernels/ops.h"

// kernels/isa.cmake defines ML_ISA_NAMESPACE (the preset's ISA, e.g. avx2) and ML_ISA_HEADER
// ("kernels/avx2/avx2.h"), so a new ISA needs no edit here.
#if !defined(ML_ISA_NAMESPACE) || !defined(ML_ISA_HEADER)
#error "ML_ISA_NAMESPACE/ML_ISA_HEADER not defined: configure through a CMake preset (kernels/isa.cmake)"
#endif
#include ML_ISA_HEADER
namespace ml::k {
namespace active = ML_ISA_NAMESPACE;
}  // namespace ml::k

#define ML_K_CHECK(op) \
  static_assert(std::is_same_v<decltype(ml::k::active::op), ml_k_##op##_fn&>, "kernel " #op " has the wrong signature");
ML_K_OPS(ML_K_CHECK)
#undef ML_K_CHECK

#ifdef ML_K_PACKED
#define ML_K_CHECK_PK(op)                                                                                        \
  static_assert(std::is_same_v<decltype(ml::k::active::op), ml_k_##op##_fn&>, "kernel " #op " has the wrong signature"); \
  static_assert(ml_pack_same_layout(ml::k::active::op##_pack, ml::k::active::pack),                              \
                "packed kernel " #op " reads another ISA's layout: bind every packed op in the ISA that sets pack");
ML_K_PK_OPS(ML_K_CHECK_PK)
#undef ML_K_CHECK_PK
#endif

#ifdef ML_K_F16_HEADS
#define ML_K_CHECK_HEADS(op) \
  static_assert(std::is_same_v<decltype(ml::k::active::op), ml_k_##op##_fn&>, "kernel " #op " has the wrong signature");
ML_K_F16_HEADS_OPS(ML_K_CHECK_HEADS)
#undef ML_K_CHECK_HEADS
#endif

namespace ml::k {
// The ISA of this build (its preset name).
inline constexpr const char* build_isa = active::isa_name;
}  // namespace ml::k
