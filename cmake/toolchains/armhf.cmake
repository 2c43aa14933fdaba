# 32-bit ARMv7 Linux cross build, hard-float ABI (preset neon), run under qemu-arm.
# apt-get install g++-arm-linux-gnueabihf qemu-user (scripts/install-deps).
set(CMAKE_SYSTEM_PROCESSOR armv7l)
set(ML_CROSS_TRIPLE arm-linux-gnueabihf)
set(ML_CROSS_QEMU qemu-arm)
include(${CMAKE_CURRENT_LIST_DIR}/arm_common.cmake)
