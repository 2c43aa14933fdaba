#include "core/isa_check.h"

#include <cstring>
#include <initializer_list>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define ML_X86 1
#endif
#if (defined(__aarch64__) || defined(__arm__)) && defined(__linux__)
#include <sys/auxv.h>
#define ML_ARM_LINUX 1
#endif

namespace {

bool bit(uint32_t reg, int b) { return (reg >> b) & 1u; }

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

// Linux hwcap bits (asm/hwcap.h of each architecture; spelled out, since the armhf headers lack
// the AArch64 ones and vice versa).
constexpr int kArm32Neon = 12;       // 32-bit AT_HWCAP: HWCAP_NEON
constexpr int kA64Asimd = 1;         // AArch64 AT_HWCAP: HWCAP_ASIMD
constexpr int kA64Asimddp = 20;      // AArch64 AT_HWCAP: HWCAP_ASIMDDP (sdot/udot)
constexpr int kA64Sve = 22;          // AArch64 AT_HWCAP: HWCAP_SVE
constexpr int kA64I8mm = 13;         // AArch64 AT_HWCAP2: HWCAP2_I8MM (smmla)

bool bit64(uint64_t reg, int b) { return (reg >> b) & 1u; }

const char* missing_neon_dotprod(const ml_arm_hwcaps* h) {
  if (!h->aarch64) return "aarch64";
  if (!bit64(h->hwcap, kA64Asimd)) return "asimd";
  if (!bit64(h->hwcap, kA64Asimddp)) return "asimddp";
  return nullptr;
}

bool is_arm_isa(const char* isa) {
  for (const char* a : {"neon", "neon_dotprod", "neon_i8mm", "sve"})
    if (std::strcmp(isa, a) == 0) return true;
  return false;
}

bool is_x86_isa(const char* isa) {
  for (const char* x : {"sse2", "sse41", "avx2", "avxvnni", "avx512vnni"})
    if (std::strcmp(isa, x) == 0) return true;
  return false;
}

}  // namespace

const char* ml_isa_missing_arm(const char* isa, const ml_arm_hwcaps* h) {
  if (std::strcmp(isa, "scalar") == 0) return nullptr;
  if (std::strcmp(isa, "neon") == 0) {  // the 32-bit build, and the AArch64 chains' baseline
    if (h->aarch64) return bit64(h->hwcap, kA64Asimd) ? nullptr : "asimd";
    return bit64(h->hwcap, kArm32Neon) ? nullptr : "neon";
  }
  if (std::strcmp(isa, "neon_dotprod") == 0) return missing_neon_dotprod(h);
  if (std::strcmp(isa, "neon_i8mm") == 0) {
    if (const char* m = missing_neon_dotprod(h)) return m;
    return bit64(h->hwcap2, kA64I8mm) ? nullptr : "i8mm";
  }
  if (std::strcmp(isa, "sve") == 0) {
    if (const char* m = missing_neon_dotprod(h)) return m;
    return bit64(h->hwcap, kA64Sve) ? nullptr : "sve";
  }
  return isa;
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
  if (std::strcmp(isa, "sse2") == 0) return missing_sse2(r);
  if (std::strcmp(isa, "sse41") == 0) return missing_sse41(r);
  if (std::strcmp(isa, "avx2") == 0) return missing_avx2(r);
  if (std::strcmp(isa, "avxvnni") == 0) return missing_avxvnni(r);
  if (std::strcmp(isa, "avx512vnni") == 0) return missing_avx512vnni(r);
  return isa;
}

ml_cpuid_regs ml_cpuid_read() {
  ml_cpuid_regs r;
#ifdef ML_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return r;
  r.max_leaf = a;
  if (r.max_leaf >= 1) {
    __cpuid(1, a, b, c, d);
    r.l1_ecx = c;
    r.l1_edx = d;
  }
  if (r.max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    r.l7_ebx = b;
    r.l7_ecx = c;
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
  return r;
}

const char* ml_isa_missing(const char* isa) {
  if (is_x86_isa(isa)) {
#ifdef ML_X86
    const ml_cpuid_regs r = ml_cpuid_read();
    return ml_isa_missing_x86(isa, &r);
#else
    return isa;  // an x86 ISA on another architecture
#endif
  }
  if (is_arm_isa(isa)) {
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
