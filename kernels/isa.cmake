# The one table of instruction sets. A row names the ISA, its fallback parent, the architecture it
# exists on and the compiler flags that enable it. Rows run from lowest to highest within an
# architecture: "native" takes the last x86 row this CPU runs. Adding an ISA is one row here, one
# folder kernels/<isa>/ with <isa>.h (ML_K_BIND lines, `using namespace <parent>`) and its .cpp
# files, its CPU bits in src/core/isa_check.cpp (x86, ARM), and its presets in CMakePresets.json
# and scripts/test.
#
# Generated from the table (kernels/isa_table.h in the build folder, included as
# "kernels/isa_table.h"): ML_ISA_TABLE(X), X(name, arch) per row, and ML_ISA_CHAIN(X, a), X(isa, a)
# per ISA of the build's chain, lowest first; the tests iterate them. Checked against the table
# because they cannot be generated: CMakePresets.json and scripts/test (cmake/isa_consistency.cmake,
# at configure time) and isa_check.cpp's CPU checks (tests/core/test_isa_check.cpp).
#
# A preset sets ML_ISA. This file walks the chain from ML_ISA to scalar and exposes:
#   ML_ISA_CHAIN      the ISAs of the chain, highest first
#   ML_ISA_FLAGS      the compiler flags of ML_ISA (applied to every ISA-compiled target)
#   ML_ISA_DEFINES    -DML_ISA_<ISA>, ML_ISA_NAMESPACE/ML_ISA_HEADER (kernels/bind.h) and
#                     -DML_ENABLE_<I> for every ISA of the chain

set(ML_ISA_NAMES "")
macro(ml_isa name)
  cmake_parse_arguments(_ISA "" "PARENT;ARCH" "FLAGS" ${ARGN})
  list(APPEND ML_ISA_NAMES ${name})
  set(ML_ISA_PARENT_${name} "${_ISA_PARENT}")
  set(ML_ISA_ARCH_${name} "${_ISA_ARCH}")
  set(ML_ISA_FLAGS_${name} "${_ISA_FLAGS}")
endmacro()

#      name        parent        arch  flags
ml_isa(scalar                    ARCH any)
ml_isa(sse2        PARENT scalar ARCH x86  FLAGS -msse2)
ml_isa(sse41       PARENT sse2   ARCH x86  FLAGS -msse4.1)
ml_isa(avx2        PARENT sse41  ARCH x86  FLAGS -mavx2 -mfma -mf16c)
ml_isa(avxvnni     PARENT avx2   ARCH x86  FLAGS -mavx2 -mfma -mf16c -mavxvnni)
# avx512vnni skips avxvnni on purpose: Ice Lake and Cascade Lake lack the VEX-encoded AVX-VNNI.
ml_isa(avx512vnni  PARENT avx2   ARCH x86  FLAGS -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni)
# amx: avx512vnni + the AMX tile unit for the batched (prefill) packed matmul (Sapphire Rapids on).
ml_isa(amx         PARENT avx512vnni ARCH x86 FLAGS -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mamx-tile -mamx-int8)
# ARM (cross-compiled with cmake/toolchains/*.cmake, tested under qemu-user). neon is the ARMv7
# build (arm32: NEON is optional there); on AArch64 plain NEON (ASIMD) is the baseline, so the
# AArch64 ISAs start at neon_dotprod and inherit the neon folder, whose kernels build for both.
ml_isa(neon         PARENT scalar       ARCH arm32   FLAGS -mfpu=neon -mfloat-abi=hard)
ml_isa(neon_dotprod PARENT neon         ARCH aarch64 FLAGS -march=armv8.2-a+dotprod)
ml_isa(neon_i8mm    PARENT neon_dotprod ARCH aarch64 FLAGS -march=armv8.2-a+dotprod+i8mm)
ml_isa(sve          PARENT neon_dotprod ARCH aarch64 FLAGS -march=armv8.2-a+dotprod+sve)
# WebAssembly (Emscripten presets wasm_*): no CPU check at run time; the browser JS feature-detects.
ml_isa(wasm_simd128 PARENT scalar ARCH wasm FLAGS -msimd128)
# Relaxed SIMD: kernels/wasm_relaxed/*.cpp alone are compiled by clang-16 with -mrelaxed-simd
# (kernels/CMakeLists.txt, cmake/wasm.cmake); the rest of the build is plain simd128.
ml_isa(wasm_relaxed PARENT wasm_simd128 ARCH wasm FLAGS -msimd128)

# CMakePresets.json and scripts/test name every row (cmake/isa_consistency.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/../cmake/isa_consistency.cmake)
ml_isa_check_consistency(${CMAKE_CURRENT_LIST_DIR}/..)

# "native" picks the highest x86 ISA whose folder exists and that this CPU runs (probe below).
function(ml_isa_detect_native out)
  set(best scalar)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND NOT CMAKE_CROSSCOMPILING)
    set(_src ${CMAKE_CURRENT_LIST_DIR}/../src)
    set(_exe ${CMAKE_BINARY_DIR}/isa_probe)
    set(_x86 "")  # the x86 rows, highest first
    foreach(isa ${ML_ISA_NAMES})
      if(ML_ISA_ARCH_${isa} STREQUAL "x86")
        list(PREPEND _x86 ${isa})
      endif()
    endforeach()
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -O1 -I${_src} ${_src}/core/isa_check.cpp
                            ${_src}/core/isa_probe_main.cpp -o ${_exe} RESULT_VARIABLE _compile_rc)
    set(_run 1)
    if(_compile_rc EQUAL 0)
      execute_process(COMMAND ${_exe} ${_x86} RESULT_VARIABLE _run OUTPUT_VARIABLE _cpu
                      OUTPUT_STRIP_TRAILING_WHITESPACE)
    endif()
    set(_compile FALSE)
    if(_compile_rc EQUAL 0)
      set(_compile TRUE)
    endif()
    if(_compile AND _run EQUAL 0)
      foreach(isa ${_x86})
        if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/${isa}/${isa}.h AND _cpu MATCHES "(^| )${isa}( |$)")
          set(best ${isa})
          break()
        endif()
      endforeach()
    endif()
  endif()
  set(${out} ${best} PARENT_SCOPE)
endfunction()

if(NOT ML_ISA)
  set(ML_ISA scalar)
endif()
if(ML_ISA STREQUAL "native")
  ml_isa_detect_native(ML_ISA_RESOLVED)
  message(STATUS "krafla: native resolved to ${ML_ISA_RESOLVED}")
else()
  set(ML_ISA_RESOLVED ${ML_ISA})
endif()
if(NOT ML_ISA_RESOLVED IN_LIST ML_ISA_NAMES)
  message(FATAL_ERROR "ML_ISA=${ML_ISA_RESOLVED} is not in kernels/isa.cmake (${ML_ISA_NAMES})")
endif()

# An ISA whose instructions do not exist on the target architecture is a configure error.
set(_arch ${ML_ISA_ARCH_${ML_ISA_RESOLVED}})
if(EMSCRIPTEN)
  set(_target_arch wasm)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|i.86")
  set(_target_arch x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(_target_arch aarch64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^arm")
  set(_target_arch arm32)
else()
  set(_target_arch other)
endif()
if(NOT _arch STREQUAL "any" AND NOT _arch STREQUAL _target_arch)
  message(FATAL_ERROR "ML_ISA=${ML_ISA_RESOLVED} needs a ${_arch} target, but this build targets "
                      "${CMAKE_SYSTEM_PROCESSOR}: use its preset (cross builds set a toolchain file)")
endif()

set(ML_ISA_CHAIN "")
set(ML_ISA_DEFINES "")
set(_isa ${ML_ISA_RESOLVED})
while(_isa)
  list(APPEND ML_ISA_CHAIN ${_isa})
  string(TOUPPER ${_isa} _up)
  list(APPEND ML_ISA_DEFINES ML_ENABLE_${_up})
  set(_isa ${ML_ISA_PARENT_${_isa}})
endwhile()
string(TOUPPER ${ML_ISA_RESOLVED} _up)
list(APPEND ML_ISA_DEFINES ML_ISA_${_up} ML_ISA_NAMESPACE=${ML_ISA_RESOLVED}
     "ML_ISA_HEADER=\"kernels/${ML_ISA_RESOLVED}/${ML_ISA_RESOLVED}.h\"")
set(ML_ISA_FLAGS ${ML_ISA_FLAGS_${ML_ISA_RESOLVED}})
message(STATUS "krafla: ISA ${ML_ISA_RESOLVED}, chain ${ML_ISA_CHAIN}, flags '${ML_ISA_FLAGS}'")

# kernels/isa_table.h, generated: the table's rows and this build's chain as X-macros (rewritten
# only when its text changes, so a reconfigure does not rebuild the tests).
set(_table "")
foreach(isa ${ML_ISA_NAMES})
  string(APPEND _table " X(${isa}, ${ML_ISA_ARCH_${isa}})")
endforeach()
set(_chain "")
foreach(isa ${ML_ISA_CHAIN})
  string(PREPEND _chain " X(${isa}, a)")
endforeach()
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/kernels/isa_table.h @ONLY CONTENT
"// Generated by kernels/isa.cmake from its table: do not edit.
#pragma once
// Every row of kernels/isa.cmake, in table order: X(name, arch), arch one of any, x86, arm32,
// aarch64, wasm.
#define ML_ISA_TABLE(X)${_table}
// The ISAs of this build's chain (ML_ISA=${ML_ISA_RESOLVED}), lowest first: X(isa, a).
#define ML_ISA_CHAIN(X, a)${_chain}
")

# ml_isa_defines: the ML_ISA_/ML_ENABLE_ defines only, for code that names kernels but must not
# contain ISA instructions (the apps: CLI11's static initialisers run before main_guard).
add_library(ml_isa_defines INTERFACE)
target_compile_definitions(ml_isa_defines INTERFACE ${ML_ISA_DEFINES})
target_include_directories(ml_isa_defines INTERFACE ${CMAKE_BINARY_DIR}/generated)
# ml_isa_flags: the ISA's compiler flags too. Linked PRIVATE by each library compiled for the ISA,
# so the flags never leak into the apps.
add_library(ml_isa_flags INTERFACE)
target_compile_options(ml_isa_flags INTERFACE ${ML_ISA_FLAGS})
target_link_libraries(ml_isa_flags INTERFACE ml_isa_defines)
