// Configure-time probe (kernels/isa.cmake, preset "native"): prints those of the x86 ISAs named
// on the command line (the table's x86 rows) that this CPU runs. A name isa_check.cpp has no
// check for is reported as missing, so it is never picked. It asks for the AMX tiles first (an
// amx build asks again when it starts: the permission is per process).
#include <cstdio>

#include "core/isa_check.h"

int main(int argc, char** argv) {
  ml_tiles_request();
  const ml_cpuid_regs r = ml_cpuid_read();
  for (int i = 1; i < argc; ++i)
    if (ml_isa_missing_x86(argv[i], &r) == nullptr) std::printf("%s ", argv[i]);
  std::printf("\n");
  return 0;
}
