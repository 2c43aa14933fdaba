// Does this CPU run a build's instruction set? Compiled without ISA flags (it runs before the
// build's ISA is known to be safe). The decoding of CPUID/XGETBV values is a pure function of
// recorded registers, so it is tested on dumps of real CPUs.
#pragma once
#include <cstdint>

// The registers the x86 check reads: CPUID leaf 1 (ECX, EDX), leaf 7 sub-leaf 0 (EBX, ECX),
// leaf 7 sub-leaf 1 (EAX), and XCR0 (XGETBV 0; 0 when the OS does not enable XSAVE).
struct ml_cpuid_regs {
  uint32_t max_leaf = 0;
  uint32_t l1_ecx = 0, l1_edx = 0;
  uint32_t l7_ebx = 0, l7_ecx = 0, l7_1_eax = 0;
  uint64_t xcr0 = 0;
};

// The first feature that isa needs and the registers lack ("avx2", "OS support for AVX state",
// ...), or null when the CPU runs it. Unknown ISA names are reported as missing themselves.
const char* ml_isa_missing_x86(const char* isa, const ml_cpuid_regs* r);

// Reads this CPU's registers (all zero off x86).
ml_cpuid_regs ml_cpuid_read();

// The missing feature for isa on this CPU, or null. Non-x86 ISAs: the build is trusted (ARM's
// HWCAP check joins with the ARM builds); "scalar" always runs.
const char* ml_isa_missing(const char* isa);

// True when this CPU runs isa (tests use it to SKIP kernels the CPU cannot run).
inline bool ml_cpu_runs_isa(const char* isa) { return ml_isa_missing(isa) == nullptr; }
