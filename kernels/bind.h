// Compile-time kernel binding: the only file that knows which preset this build is.
// ml::k::active::<op> is a direct reference to the highest ISA in the build's chain that
// implements <op>: each ISA namespace pulls in its parent with `using namespace`, and qualified
// lookup only searches a using-directive when the namespace itself lacks the name. No function
// pointers, no runtime dispatch.
#pragma once
#include <type_traits>

#include "kernels/ops.h"

#if defined(ML_ISA_AVX512VNNI)
#include "kernels/avx512vnni/avx512vnni.h"
namespace ml::k { namespace active = avx512vnni; }
#elif defined(ML_ISA_AVXVNNI)
#include "kernels/avxvnni/avxvnni.h"
namespace ml::k { namespace active = avxvnni; }
#elif defined(ML_ISA_AVX2)
#include "kernels/avx2/avx2.h"
namespace ml::k { namespace active = avx2; }
#elif defined(ML_ISA_SSE41)
#include "kernels/sse41/sse41.h"
namespace ml::k { namespace active = sse41; }
#elif defined(ML_ISA_SSE2)
#include "kernels/sse2/sse2.h"
namespace ml::k { namespace active = sse2; }
#elif defined(ML_ISA_SCALAR)
#include "kernels/scalar/scalar.h"
namespace ml::k { namespace active = scalar; }
#else
#error "no ML_ISA_<name> defined: configure through a CMake preset (kernels/isa.cmake)"
#endif

#define ML_K_CHECK(op) \
  static_assert(std::is_same_v<decltype(ml::k::active::op), ml_k_##op##_fn&>, "kernel " #op " has the wrong signature");
ML_K_OPS(ML_K_CHECK)
#undef ML_K_CHECK

namespace ml::k {
// The ISA of this build (its preset name).
inline constexpr const char* build_isa = active::isa_name;
}  // namespace ml::k
