# WebAssembly (Emscripten) settings, included by the top-level CMakeLists.txt when EMSCRIPTEN.
# The presets wasm_* set the toolchain, ML_ISA, ML_THREADS and the node emulator
# (CMakePresets.json); ../shared/TOOLCHAIN.md section 1 records why each flag is here.
#
#   ML_THREADS ON   Emscripten pthreads: every object is compiled and linked with -pthread, and a
#                   pool of ML_WASM_PTHREAD_POOL web workers is started with the program (a
#                   pthread_create beyond the pool fails instead of deadlocking: the main thread
#                   never returns to the event loop while the thread pool waits).
#   ml_wasm_cli(T)  an executable run under node: the host file system (NODERAWFS), a heap that
#                   grows to 4 GB, and EXIT_RUNTIME (without it a threaded program never exits).
#
# Apps and tests keep C++ exceptions (CLI11, Catch2): 3.1.6 defaults to -fignore-exceptions, so
# -fexceptions is passed everywhere; the core libraries take it back with ml_strict's -fno-exceptions.

set(ML_WASM_PTHREAD_POOL 8 CACHE STRING "web workers started with a threaded wasm program (max -t is this + 1)")

# Header-only host packages (CLI11, Catch2 v2, nlohmann-json): the Emscripten toolchain hides /usr/include and
# /usr/lib/cmake, so expose each through a folder holding one symlink (never /usr/include itself,
# whose glibc headers would shadow the wasm sysroot's).
set(_inc ${CMAKE_BINARY_DIR}/wasm-host-include)
file(MAKE_DIRECTORY ${_inc})
foreach(_d CLI catch2 nlohmann)
  if(NOT EXISTS ${_inc}/${_d})
    file(CREATE_LINK /usr/include/${_d} ${_inc}/${_d} SYMBOLIC)
  endif()
endforeach()
add_library(CLI11::CLI11 INTERFACE IMPORTED GLOBAL)
target_include_directories(CLI11::CLI11 SYSTEM INTERFACE ${_inc})
add_library(Catch2::Catch2 INTERFACE IMPORTED GLOBAL)
target_include_directories(Catch2::Catch2 SYSTEM INTERFACE ${_inc})
list(APPEND CMAKE_MODULE_PATH /usr/lib/cmake/Catch2)  # include(Catch): catch_discover_tests

# Links at -O2 and up run Emscripten's acorn optimizer under node, which needs Debian's node
# modules (NodeSource node does not search /usr/share/nodejs): set NODE_PATH for every link, so
# a plain `cmake --build build/wasm_*` works without the preset's environment too.
set(CMAKE_CXX_LINKER_LAUNCHER ${CMAKE_COMMAND} -E env NODE_PATH=/usr/share/nodejs)

add_compile_options(-fexceptions)
add_link_options(-fexceptions)
if(ML_THREADS)
  add_compile_options(-pthread)
  add_link_options(-pthread -sPTHREAD_POOL_SIZE=${ML_WASM_PTHREAD_POOL} -sPTHREAD_POOL_SIZE_STRICT=2
                   -Wno-pthreads-mem-growth)  # growth only slows JS heap access, not wasm code
  # FindThreads (src/core) then finds -pthread already in effect.
  set(THREADS_PREFER_PTHREAD_FLAG ON)
endif()

function(ml_wasm_cli target)
  target_link_options(${target} PRIVATE -sNODERAWFS=1 -sEXIT_RUNTIME=1 -sALLOW_MEMORY_GROWTH=1
                      -sMAXIMUM_MEMORY=4GB)
endfunction()

# wasm_relaxed (../shared/TOOLCHAIN.md, "relaxed SIMD"): kernels/wasm_relaxed/*.cpp are compiled by
# emcc driving clang-16 (ML_WASM_CLANG16_LAUNCHER: a folder of symlinks clang/clang++ -> clang-16,
# wasm-ld -> wasm-ld-16, the binutils -> LLVM 14's). Every link then runs at -O1 with
# ERROR_ON_WASM_CHANGES_AFTER_LINK, so binaryen 108 never rewrites the module: its wasm-opt fails
# on relaxed opcodes at -O2+, and its finalize pass corrupts them at -O0. The code itself is
# still optimised at -O3 by the compilers. The result needs a standard relaxed-SIMD engine:
# node 22 or Chromium; node 20 rejects it, or with its flag computes WRONG dots.
if(ML_ISA STREQUAL "wasm_relaxed")
  find_program(ML_CLANG16 clang-16)
  find_program(ML_WASM_LD16 wasm-ld-16)
  if(NOT ML_CLANG16 OR NOT ML_WASM_LD16)
    message(FATAL_ERROR "wasm_relaxed needs clang-16 and lld-16 (scripts/install-deps installs them)")
  endif()
  set(_llvm ${CMAKE_BINARY_DIR}/llvm16)
  file(MAKE_DIRECTORY ${_llvm})
  foreach(_pair "clang=${ML_CLANG16}" "clang++=${ML_CLANG16}" "wasm-ld=${ML_WASM_LD16}" "llvm-nm=/usr/bin/llvm-nm-14"
          "llvm-ar=/usr/bin/llvm-ar-14" "llvm-ranlib=/usr/bin/llvm-ranlib-14" "llvm-objcopy=/usr/bin/llvm-objcopy-14"
          "llvm-strip=/usr/bin/llvm-strip-14" "llvm-dwarfdump=/usr/bin/llvm-dwarfdump-14")
    string(REPLACE "=" ";" _kv ${_pair})
    list(GET _kv 0 _name)
    list(GET _kv 1 _target)
    file(CREATE_LINK ${_target} ${_llvm}/${_name} SYMBOLIC)
  endforeach()
  set(ML_WASM_CLANG16_LAUNCHER ${CMAKE_COMMAND} -E env EM_LLVM_ROOT=${_llvm} EM_LLVM_ADD_VERSION= EM_CLANG_ADD_VERSION=)
  add_link_options(-O1 -sWASM_BIGINT=1 -sERROR_ON_WASM_CHANGES_AFTER_LINK=1)
endif()
