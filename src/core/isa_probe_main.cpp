// Configure-time probe (kernels/isa.cmake, preset "native"): prints the x86 ISAs this CPU runs.
#include <cstdio>
#include <initializer_list>

#include "core/isa_check.h"

int main() {
  for (const char* isa : {"sse2", "sse41", "avx2", "avxvnni", "avx512vnni"})
    if (ml_cpu_runs_isa(isa)) std::printf("%s ", isa);
  std::printf("\n");
  return 0;
}
