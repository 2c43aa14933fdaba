// Every executable's main(). Compiled WITHOUT the build's ISA flags, together with
// src/core/isa_check.cpp (ml_cpu_missing in krafla.h): it checks that the CPU runs the build's ISA before any code compiled
// with those flags executes (ml_main and everything it calls). ISA-compiled files must hold no
// namespace-scope objects with dynamic initialisers, which would run before this check.
// WebAssembly builds have no CPUID: ml_cpu_missing trusts non-x86 ISAs, so the check passes
// there and the browser's JavaScript does the feature detection before it loads a build.
#include <cstdio>
#include <cstring>

#ifdef _WIN32
#include <fcntl.h>
#include <io.h>
#include <stdlib.h>
#endif

#include "krafla.h"

int ml_main(int argc, char** argv);

int main(int argc, char** argv) {
#ifdef _WIN32
  // Bytes in and out as they are: no "\n" -> "\r\n" in generated text, token ids or .mlb files
  // written to stdout, no "\r\n" -> "\n" (or ^Z as end of file) in what is read from stdin.
  _fmode = _O_BINARY;  // open() and fopen() without "b" or O_BINARY: binary too, as on POSIX
  _setmode(_fileno(stdin), _O_BINARY);
  _setmode(_fileno(stdout), _O_BINARY);
  _setmode(_fileno(stderr), _O_BINARY);
#endif
  if (const char* missing = ml_cpu_missing(ML_BUILD_ISA)) {
    const char* prog = std::strrchr(argv[0], '/');
    std::fprintf(stderr, "%s: this build needs the %s instruction set, but the CPU lacks %s\n",
                 prog ? prog + 1 : argv[0], ML_BUILD_ISA, missing);
    return 3;
  }
  return ml_main(argc, argv);
}
