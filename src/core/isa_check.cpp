#include "core/isa_check.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define ML_X86 1
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define ML_X86_64_LINUX 1
#endif
#if (defined(__aarch64__) || defined(__arm__)) && defined(__linux__)
#include <sys/auxv.h>
#define ML_ARM_LINUX 1
#endif

namespace {

bool bit(uint32_t reg, int b) { return (reg >> b) & 1u; }

// Linux's arch_prctl codes for dynamically enabled xstate (asm/prctl.h, Linux 5.16) and the tile
// data feature's number (XFEATURE_XTILEDATA, XCR0 bit 18); spelled out for older headers.
[[maybe_unused]] constexpr long kArchGetXcompPerm = 0x1022;
[[maybe_unused]] constexpr long kArchReqXcompPerm = 0x1023;
[[maybe_unused]] constexpr int kXtiledata = 18;

// Each x86 ISA's requirements, checked in order; the first unmet one is reported.
const char* missing_sse2(const ml_cpuid_regs* r) { return bit(r->l1_edx, 26) ? nullptr : "sse2"; }

const char* missing_sse41(const ml_cpuid_regs* r) {
  if (const char* m = missing_sse2(r)) return m;
  if (!bit(r->l1_ecx, 9)) return "ssse3";
  if (!bit(r->l1_ecx, 19)) return "sse4.1";
  return nullptr;
}

const char* missing_avx2(const ml_cpuid_regs* r) {
  if (const char* m = missing_sse41(r)) return m;
  if (!bit(r->l1_ecx, 28)) return "avx";
  if (!bit(r->l1_ecx, 27) || (r->xcr0 & 0x6) != 0x6) return "OS support for AVX state (XCR0 bits 1-2)";
  if (!bit(r->l1_ecx, 12)) return "fma";
  if (!bit(r->l1_ecx, 29)) return "f16c";
  if (r->max_leaf < 7 || !bit(r->l7_ebx, 5)) return "avx2";
  return nullptr;
}

const char* missing_avxvnni(const ml_cpuid_regs* r) {
  if (const char* m = missing_avx2(r)) return m;
  if (!bit(r->l7_1_eax, 4)) return "avxvnni";
  return nullptr;
}

const char* missing_avx512vnni(const ml_cpuid_regs* r) {
  if (const char* m = missing_avx2(r)) return m;
  if (!bit(r->l7_ebx, 16)) return "avx512f";
  if (!bit(r->l7_ebx, 30)) return "avx512bw";
  if (!bit(r->l7_ebx, 31)) return "avx512vl";
  if (!bit(r->l7_ecx, 11)) return "avx512vnni";
  if ((r->xcr0 & 0xE0) != 0xE0) return "OS support for AVX-512 state (XCR0 bits 5-7)";
  return nullptr;
}

// AMX: the tile unit (leaf 7 EDX bit 24) and its int8 dot products (bit 25), the OS saving the
// tile configuration and data (XCR0 bits 17 and 18), and on Linux this process's permission to
// use the tile data (ml_tiles_request).
const char* missing_amx(const ml_cpuid_regs* r) {
  if (const char* m = missing_avx512vnni(r)) return m;
  if (!bit(r->l7_edx, 24)) return "amx-tile";
  if (!bit(r->l7_edx, 25)) return "amx-int8";
  if ((r->xcr0 & 0x60000) != 0x60000) return "OS support for AMX tile state (XCR0 bits 17-18)";
  if (!r->tiles_permitted)
    return "the OS's permission to use AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM refused; Linux 5.16 or later grants it)";
  return nullptr;
}

// Linux hwcap bits (asm/hwcap.h of each architecture; spelled out, since the armhf headers lack
// the AArch64 ones and vice versa).
constexpr int kArm32Neon = 12;       // 32-bit AT_HWCAP: HWCAP_NEON
constexpr int kA64Asimd = 1;         // AArch64 AT_HWCAP: HWCAP_ASIMD
constexpr int kA64Asimddp = 20;      // AArch64 AT_HWCAP: HWCAP_ASIMDDP (sdot/udot)
constexpr int kA64Sve = 22;          // AArch64 AT_HWCAP: HWCAP_SVE
constexpr int kA64I8mm = 13;         // AArch64 AT_HWCAP2: HWCAP2_I8MM (smmla)

bool bit64(uint64_t reg, int b) { return (reg >> b) & 1u; }

const char* missing_neon(const ml_arm_hwcaps* h) {  // the 32-bit build, and the AArch64 chains' baseline
  if (h->aarch64) return bit64(h->hwcap, kA64Asimd) ? nullptr : "asimd";
  return bit64(h->hwcap, kArm32Neon) ? nullptr : "neon";
}

const char* missing_neon_dotprod(const ml_arm_hwcaps* h) {
  if (!h->aarch64) return "aarch64";
  if (!bit64(h->hwcap, kA64Asimd)) return "asimd";
  if (!bit64(h->hwcap, kA64Asimddp)) return "asimddp";
  return nullptr;
}

const char* missing_neon_i8mm(const ml_arm_hwcaps* h) {
  if (const char* m = missing_neon_dotprod(h)) return m;
  return bit64(h->hwcap2, kA64I8mm) ? nullptr : "i8mm";
}

const char* missing_sve(const ml_arm_hwcaps* h) {
  if (const char* m = missing_neon_dotprod(h)) return m;
  return bit64(h->hwcap, kA64Sve) ? nullptr : "sve";
}

// The checks, one per x86 or ARM row of kernels/isa.cmake (tests/core/test_isa_check.cpp holds
// the two lists to the table, both ways).
struct x86_check {
  const char* isa;
  const char* (*missing)(const ml_cpuid_regs*);
  bool tiles = false;  // uses AMX tiles: ml_isa_missing asks the OS for them first
};
constexpr x86_check kX86[] = {{"sse2", missing_sse2},
                              {"sse41", missing_sse41},
                              {"avx2", missing_avx2},
                              {"avxvnni", missing_avxvnni},
                              {"avx512vnni", missing_avx512vnni},
                              {"amx", missing_amx, true}};

struct arm_check {
  const char* isa;
  const char* (*missing)(const ml_arm_hwcaps*);
};
constexpr arm_check kArm[] = {{"neon", missing_neon},
                              {"neon_dotprod", missing_neon_dotprod},
                              {"neon_i8mm", missing_neon_i8mm},
                              {"sve", missing_sve}};

const x86_check* find_x86(const char* isa) {
  for (const x86_check& c : kX86)
    if (std::strcmp(isa, c.isa) == 0) return &c;
  return nullptr;
}

const arm_check* find_arm(const char* isa) {
  for (const arm_check& c : kArm)
    if (std::strcmp(isa, c.isa) == 0) return &c;
  return nullptr;
}

}  // namespace

const char* ml_isa_missing_arm(const char* isa, const ml_arm_hwcaps* h) {
  if (std::strcmp(isa, "scalar") == 0) return nullptr;
  const arm_check* c = find_arm(isa);
  return c ? c->missing(h) : isa;
}

ml_arm_hwcaps ml_arm_hwcaps_read() {
  ml_arm_hwcaps h;
#ifdef ML_ARM_LINUX
  h.aarch64 = sizeof(void*) == 8;
  h.hwcap = getauxval(AT_HWCAP);
  h.hwcap2 = getauxval(AT_HWCAP2);
#endif
  return h;
}

const char* ml_isa_missing_x86(const char* isa, const ml_cpuid_regs* r) {
  if (std::strcmp(isa, "scalar") == 0) return nullptr;
  const x86_check* c = find_x86(isa);
  return c ? c->missing(r) : isa;
}

const char* ml_isa_checked(int i) {
  constexpr int n_x86 = sizeof(kX86) / sizeof(kX86[0]), n_arm = sizeof(kArm) / sizeof(kArm[0]);
  if (i >= 0 && i < n_x86) return kX86[i].isa;
  if (i >= n_x86 && i < n_x86 + n_arm) return kArm[i - n_x86].isa;
  return nullptr;
}

bool ml_cpuid_amd(const ml_cpuid_regs* r) {
  return (r->vendor_ebx == 0x68747541 && r->vendor_edx == 0x69746e65 && r->vendor_ecx == 0x444d4163) ||  // AuthenticAMD
         (r->vendor_ebx == 0x6f677948 && r->vendor_edx == 0x6e65476e && r->vendor_ecx == 0x656e6975);    // HygonGenuine
}

unsigned ml_cpuid_family(const ml_cpuid_regs* r) {
  const unsigned base = (r->l1_eax >> 8) & 0xF, extended = (r->l1_eax >> 20) & 0xFF;
  return base == 0xF ? base + extended : base;
}

ml_cpuid_regs ml_cpuid_read() {
  ml_cpuid_regs r;
#ifdef ML_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return r;
  r.max_leaf = a;
  r.vendor_ebx = b;
  r.vendor_edx = d;
  r.vendor_ecx = c;
  if (r.max_leaf >= 1) {
    __cpuid(1, a, b, c, d);
    r.l1_eax = a;
    r.l1_ecx = c;
    r.l1_edx = d;
  }
  if (r.max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    r.l7_ebx = b;
    r.l7_ecx = c;
    r.l7_edx = d;
    const unsigned max_sub = a;
    if (max_sub >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      r.l7_1_eax = a;
    }
  }
  if ((r.l1_ecx >> 27) & 1u) {  // OSXSAVE: XGETBV is available
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    r.xcr0 = ((uint64_t)hi << 32) | lo;
  }
#endif
#ifdef ML_X86_64_LINUX
  unsigned long permitted = 0;  // ARCH_GET_XCOMP_PERM: the xfeatures this process may use
  r.tiles_permitted = syscall(SYS_arch_prctl, kArchGetXcompPerm, &permitted) == 0 && ((permitted >> kXtiledata) & 1u);
#elif defined(__x86_64__)
  r.tiles_permitted = true;
#endif
  return r;
}

bool ml_tiles_request() {
#ifdef ML_X86_64_LINUX
  // Asked once: a function-local static (this file has no ISA flags, and its guard is thread-safe).
  static const bool granted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXtiledata) == 0;
  return granted;
#elif defined(__x86_64__)
  return true;
#else
  return false;
#endif
}

const char* ml_isa_missing(const char* isa) {
  if (const x86_check* c = find_x86(isa)) {
#ifdef ML_X86
    if (c->tiles) ml_tiles_request();
    const ml_cpuid_regs r = ml_cpuid_read();
    return ml_isa_missing_x86(isa, &r);
#else
    return isa;  // an x86 ISA on another architecture
#endif
  }
  if (find_arm(isa)) {
#ifdef ML_ARM_LINUX
    const ml_arm_hwcaps h = ml_arm_hwcaps_read();
    return ml_isa_missing_arm(isa, &h);
#elif defined(__aarch64__) || defined(__arm__)
    return nullptr;  // ARM without Linux's auxv: the build configuration is trusted
#else
    return isa;  // an ARM ISA on another architecture
#endif
  }
  return nullptr;  // scalar
}

// The public API's CPU check (krafla.h), here because this file is compiled without ISA flags.
extern "C" const char* ml_cpu_missing(const char* isa) { return ml_isa_missing(isa); }
