// The Catch2 main, alone in its translation unit because it takes about 20 s to compile. Compiled
// without ISA flags, like native/main_guard.cpp: on a CPU that lacks the build's instruction set
// nothing of the build can run (even its scalar kernels are compiled with the ISA's flags, and
// the compiler vectorises them), so every test case reports "SKIP (CPU)" — which CTest counts as
// skipped (tests/CMakeLists.txt), never as passed — instead of dying of SIGILL. Listing the tests
// (catch_discover_tests does at build time) works on any CPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "core/isa_check.h"
#ifdef _WIN32
#include <fcntl.h>
#include <stdlib.h>
#endif

int main(int argc, char** argv) {
#ifdef _WIN32
  _fmode = _O_BINARY;  // files binary by default, as the programs have them (native/main_guard.cpp)
#endif
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::strncmp(argv[i], "--list", 6) == 0;
  if (const char* missing = ml_isa_missing(ML_BUILD_ISA); missing && !listing) {
    std::printf("SKIP (CPU): this build needs the %s instruction set, but the CPU lacks %s\n", ML_BUILD_ISA, missing);
    return 0;
  }
  return Catch::Session().run(argc, argv);
}
