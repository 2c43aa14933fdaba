# Shared part of the ARM cross toolchain files (aarch64.cmake, armhf.cmake). The includer sets
# ML_CROSS_TRIPLE (the GNU triple), ML_CROSS_QEMU (qemu-user binary) and the processor name.
# Executables run under qemu-user with the cross sysroot as its library prefix (-L): ctest,
# catch_discover_tests and the e2e wrapper scripts (e2e/CMakeLists.txt) all go through
# CMAKE_CROSSCOMPILING_EMULATOR. The qemu CPU model comes from ML_QEMU_CPU (each preset sets the
# model that has its ISA: cortex-a76 for dotprod, max for i8mm and SVE).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${ML_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${ML_CROSS_TRIPLE}-g++)
set(ML_CROSS_SYSROOT /usr/${ML_CROSS_TRIPLE} CACHE PATH "the cross libc prefix qemu-user loads libraries from")
set(CMAKE_FIND_ROOT_PATH ${ML_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# The header-only host packages (Catch2, CLI11) come from cmake/cross_deps.cmake instead.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
if(NOT ML_QEMU_CPU)
  set(ML_QEMU_CPU max)
endif()
find_program(ML_CROSS_QEMU_PATH ${ML_CROSS_QEMU})
if(NOT ML_CROSS_QEMU_PATH)
  set(ML_CROSS_QEMU_PATH ${ML_CROSS_QEMU})
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR ${ML_CROSS_QEMU_PATH} -L ${ML_CROSS_SYSROOT} -cpu ${ML_QEMU_CPU})
