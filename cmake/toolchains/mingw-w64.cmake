# Windows x86-64 cross build (presets win_scalar, win_avx2) with Debian's MinGW-w64 GCC, posix
# thread model (std::thread and the pool's pthreads through winpthread). Run under wine64.
# apt-get install g++-mingw-w64-x86-64-posix wine64 (scripts/install-deps).
# The executables are linked fully static (libgcc, libstdc++, winpthread), so they need no DLL
# outside Windows itself: x86_64-w64-mingw32-objdump -p bin/ml_run.exe | grep DLL.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)
set(ML_CROSS_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${ML_CROSS_TRIPLE}-gcc-posix)
set(CMAKE_CXX_COMPILER ${ML_CROSS_TRIPLE}-g++-posix)
set(CMAKE_RC_COMPILER ${ML_CROSS_TRIPLE}-windres)
set(CMAKE_FIND_ROOT_PATH /usr/${ML_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# The header-only host packages (Catch2, CLI11) come from cmake/cross_deps.cmake instead.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Files are opened in binary mode by default through _fmode = _O_BINARY in main (native/main_guard.cpp,
# tests/catch_main.cpp): Debian's binmode.o is empty.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static -static-libgcc -static-libstdc++")
# Each build tree has its own wine prefix (build/<preset>/wine-prefix), created on first use.
set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_CURRENT_LIST_DIR}/wine-run.sh ${CMAKE_BINARY_DIR}/wine-prefix)
