# AArch64 Linux cross build (presets neon_dotprod, neon_i8mm, sve), run under qemu-aarch64.
# apt-get install g++-aarch64-linux-gnu qemu-user (scripts/install-deps).
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(ML_CROSS_TRIPLE aarch64-linux-gnu)
set(ML_CROSS_QEMU qemu-aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/arm_common.cmake)
