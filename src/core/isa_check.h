// Does this CPU run a build's instruction set? Compiled without ISA flags (it runs before the
// build's ISA is known to be safe). The decoding of CPUID/XGETBV values is a pure function of
// recorded registers, so it is tested on dumps of real CPUs.
#pragma once
#include <cstdint>

// The registers the x86 check reads: CPUID leaf 1 (ECX, EDX), leaf 7 sub-leaf 0 (EBX, ECX, and
// EDX: AMX-TILE bit 24, AMX-INT8 bit 25), leaf 7 sub-leaf 1 (EAX), XCR0 (XGETBV 0; 0 when the OS
// does not enable XSAVE), and whether the OS lets this process use the AMX tile data state.
struct ml_cpuid_regs {
  uint32_t max_leaf = 0;
  uint32_t l1_ecx = 0, l1_edx = 0;
  uint32_t l7_ebx = 0, l7_ecx = 0, l7_1_eax = 0;
  uint64_t xcr0 = 0;
  uint32_t l7_edx = 0;
  // Linux enables the tile data state (XCR0 bit 18) per process, on request: true once
  // arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) has been granted (ARCH_GET_XCOMP_PERM
  // reads it back; ml_tiles_request asks). Other x86-64 OSes: true (XCR0 alone decides).
  bool tiles_permitted = false;
  // CPUID leaf 0's vendor string, in EBX, EDX, ECX order ("Auth" "enti" "cAMD").
  uint32_t vendor_ebx = 0, vendor_edx = 0, vendor_ecx = 0;
  // Leaf 1's EAX: family, model, stepping (last, so the recorded dumps' initialisers stay as they are).
  uint32_t l1_eax = 0;
};

// Whether the registers are an AMD (or Hygon) CPU's: the packed kernels' prefetch choice
// (kernels/x86_pack.h).
bool ml_cpuid_amd(const ml_cpuid_regs* r);

// The CPU family from leaf 1's EAX, as /proc/cpuinfo's "cpu family": the base family, plus the
// extended family when the base is 15 (AMD Zen 4 is 25, Zen 5 26; Intel's cores are 6). 0 when
// leaf 1 was not read. The packed kernels' prefetch choice (kernels/x86_pack.h).
unsigned ml_cpuid_family(const ml_cpuid_regs* r);

// The first feature that isa needs and the registers lack ("avx2", "OS support for AVX state",
// ...), or null when the CPU runs it. Unknown ISA names are reported as missing themselves.
const char* ml_isa_missing_x86(const char* isa, const ml_cpuid_regs* r);

// Reads this CPU's registers (all zero off x86). Asks the OS for nothing: tiles_permitted reports
// an earlier ml_tiles_request.
ml_cpuid_regs ml_cpuid_read();

// Asks Linux, once per process, for the AMX tile data state (arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA): the permission covers every thread of the process, so it must be granted
// before any thread executes a tile instruction, or that instruction faults). Returns whether it
// was granted; true on other x86-64 OSes, false off x86-64. ml_isa_missing calls it for the ISAs
// that use tiles (amx), so the guard of every executable (native/main_guard.cpp) and the tests'
// main ask before any kernel runs.
bool ml_tiles_request();

// What the ARM check reads on Linux: getauxval(AT_HWCAP) and getauxval(AT_HWCAP2). The bits mean
// different things on 32-bit ARM and on AArch64, so the values carry their architecture.
struct ml_arm_hwcaps {
  bool aarch64 = false;
  uint64_t hwcap = 0, hwcap2 = 0;
};

// The first feature that the ARM isa needs and the hwcaps lack ("asimddp", "i8mm", "sve",
// "neon", ...), or null. neon is ARMv7 NEON on 32-bit and ASIMD on AArch64 (the AArch64 chains
// include the neon kernels); the AArch64 ISAs on 32-bit name "aarch64"; unknown names are
// reported as missing themselves.
const char* ml_isa_missing_arm(const char* isa, const ml_arm_hwcaps* h);

// Reads this CPU's hwcaps (all zero off ARM Linux).
ml_arm_hwcaps ml_arm_hwcaps_read();

// The missing feature for isa on this CPU, or null: CPUID on x86, HWCAP on ARM Linux; an ISA of
// another architecture is missing itself. "scalar" always runs. For an ISA that uses AMX tiles it
// first asks the OS for them (ml_tiles_request).
const char* ml_isa_missing(const char* isa);

// The names of the ISAs that have a CPU check here (x86, then ARM), i = 0, 1, ...; null past the
// last. tests/core/test_isa_check.cpp holds them to the x86 and ARM rows of kernels/isa.cmake.
const char* ml_isa_checked(int i);

// True when this CPU runs isa (tests use it to SKIP kernels the CPU cannot run).
inline bool ml_cpu_runs_isa(const char* isa) { return ml_isa_missing(isa) == nullptr; }
