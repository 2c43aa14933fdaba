// The ISA namespaces test_kernels checks: every ISA of the build's fallback chain (its
// ML_ENABLE_<ISA> defines come from kernels/isa.cmake). ML_TEST_ISAS(X, arg) expands X(isa, arg)
// once per enabled ISA, lowest first. Each header declares namespace ml::k::<isa> with
// `inline constexpr const char* isa_name` and the ML_K_BIND lines of the ops it implements.
// Adding an ISA to the tests is one block here; the test file does not change.
#pragma once

#ifdef ML_ENABLE_SCALAR
#include "kernels/scalar/scalar.h"
#define ML_TEST_ISA_SCALAR(X, a) X(scalar, a)
#else
#define ML_TEST_ISA_SCALAR(X, a)
#endif

#ifdef ML_ENABLE_SSE2
#include "kernels/sse2/sse2.h"
#define ML_TEST_ISA_SSE2(X, a) X(sse2, a)
#else
#define ML_TEST_ISA_SSE2(X, a)
#endif

#ifdef ML_ENABLE_SSE41
#include "kernels/sse41/sse41.h"
#define ML_TEST_ISA_SSE41(X, a) X(sse41, a)
#else
#define ML_TEST_ISA_SSE41(X, a)
#endif

#ifdef ML_ENABLE_AVX2
#include "kernels/avx2/avx2.h"
#define ML_TEST_ISA_AVX2(X, a) X(avx2, a)
#else
#define ML_TEST_ISA_AVX2(X, a)
#endif

#ifdef ML_ENABLE_AVXVNNI
#include "kernels/avxvnni/avxvnni.h"
#define ML_TEST_ISA_AVXVNNI(X, a) X(avxvnni, a)
#else
#define ML_TEST_ISA_AVXVNNI(X, a)
#endif

#ifdef ML_ENABLE_AVX512VNNI
#include "kernels/avx512vnni/avx512vnni.h"
#define ML_TEST_ISA_AVX512VNNI(X, a) X(avx512vnni, a)
#else
#define ML_TEST_ISA_AVX512VNNI(X, a)
#endif

#ifdef ML_ENABLE_WASM_SIMD128
#include "kernels/wasm_simd128/wasm_simd128.h"
#define ML_TEST_ISA_WASM_SIMD128(X, a) X(wasm_simd128, a)
#else
#define ML_TEST_ISA_WASM_SIMD128(X, a)
#endif

#ifdef ML_ENABLE_WASM_RELAXED
#include "kernels/wasm_relaxed/wasm_relaxed.h"
#define ML_TEST_ISA_WASM_RELAXED(X, a) X(wasm_relaxed, a)
#else
#define ML_TEST_ISA_WASM_RELAXED(X, a)
#endif

#define ML_TEST_ISAS(X, a)                                                                          \
  ML_TEST_ISA_SCALAR(X, a) ML_TEST_ISA_SSE2(X, a) ML_TEST_ISA_SSE41(X, a) ML_TEST_ISA_AVX2(X, a) \
      ML_TEST_ISA_AVXVNNI(X, a) ML_TEST_ISA_AVX512VNNI(X, a) ML_TEST_ISA_WASM_SIMD128(X, a) \
      ML_TEST_ISA_WASM_RELAXED(X, a)
