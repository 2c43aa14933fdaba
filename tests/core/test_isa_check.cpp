// The CPUID decoding of the ISA guard, on registers recorded from real CPUs (this development
// machine, a Sapphire-Rapids-class server) and from qemu-x86_64's CPU models.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/isa_check.h"
#include "kernels/isa_table.h"  // generated from kernels/isa.cmake

namespace {

// {max_leaf, leaf1 ecx, leaf1 edx, leaf7 ebx, leaf7 ecx, leaf7.1 eax, xcr0}
const ml_cpuid_regs host_spr{28, 0xfffa3203, 0x178bfbff, 0xf1bf07ab, 0x00405fc6, 0x00000030, 0xe7};
const ml_cpuid_regs qemu_core2duo{10, 0x80002209, 0x0fcbfbfd, 0, 0, 0, 0x0};
const ml_cpuid_regs qemu_nehalem{11, 0x80982201, 0x078bfbfd, 0, 0, 0, 0x0};
const ml_cpuid_regs qemu_sandybridge{13, 0x9e982203, 0x078bfbfd, 0, 0, 0, 0x7};
const ml_cpuid_regs qemu_haswell{13, 0xfed83203, 0x078bfbfd, 0x000003a9, 0, 0, 0x7};
const ml_cpuid_regs qemu_icelake{13, 0xfed83203, 0x078bfbfd, 0x019803a9, 0x0001020c, 0, 0x207};

// host_spr was recorded before the check read leaf 7 EDX (and in a VM whose XCR0, 0xe7, has no
// tile state). spr_amx is it with the AMX bits a Sapphire Rapids reports under Linux 5.16+, set
// from the SDM: leaf 7 EDX bits 22, 24, 25 (AMX-BF16, AMX-TILE, AMX-INT8), XCR0 0x602e7 (x87, SSE,
// AVX, AVX-512, PKRU, XTILECFG, XTILEDATA), tile data permitted. Not a recording: no session has
// had an AMX CPU yet.
ml_cpuid_regs with_amx(ml_cpuid_regs r) {
  r.l7_edx |= (1u << 22) | (1u << 24) | (1u << 25);
  r.xcr0 = 0x602e7;
  r.tiles_permitted = true;
  return r;
}
const ml_cpuid_regs spr_amx = with_amx(host_spr);

std::string missing(const char* isa, const ml_cpuid_regs& r) {
  const char* m = ml_isa_missing_x86(isa, &r);
  return m ? m : "";
}

}  // namespace

TEST_CASE("isa_check: a CPU with AVX-512 VNNI and AVX-VNNI runs every x86 build", "[isa]") {
  for (const char* isa : {"scalar", "sse2", "sse41", "avx2", "avxvnni", "avx512vnni"}) CHECK(missing(isa, host_spr) == "");
}

TEST_CASE("isa_check: qemu CPU models", "[isa]") {
  CHECK(missing("sse2", qemu_core2duo) == "");
  CHECK(missing("sse41", qemu_core2duo) == "sse4.1");  // core2duo: SSSE3 only
  CHECK(missing("sse41", qemu_nehalem) == "");
  CHECK(missing("avx2", qemu_nehalem) == "avx");
  CHECK(missing("avx2", qemu_sandybridge) == "fma");  // AVX but no FMA/AVX2
  CHECK(missing("avx2", qemu_haswell) == "");
  CHECK(missing("avxvnni", qemu_haswell) == "avxvnni");
  CHECK(missing("avx512vnni", qemu_haswell) == "avx512f");
  // Ice Lake has AVX-512 VNNI but not the VEX AVX-VNNI: why avx512vnni skips avxvnni in its chain.
  CHECK(missing("avxvnni", qemu_icelake) == "avxvnni");
}

TEST_CASE("isa_check: the OS must save the AVX and AVX-512 register state (XCR0)", "[isa]") {
  ml_cpuid_regs r = host_spr;
  r.xcr0 = 0x7;  // AVX state saved, AVX-512 state not
  CHECK(missing("avx2", r) == "");
  CHECK_THAT(missing("avx512vnni", r), Catch::Contains("AVX-512 state"));
  r.xcr0 = 0x3;  // no AVX state either
  CHECK_THAT(missing("avx2", r), Catch::Contains("AVX state"));
  r.l1_ecx &= ~(1u << 27);  // OSXSAVE off: XGETBV unusable
  r.xcr0 = 0;
  CHECK_THAT(missing("avxvnni", r), Catch::Contains("AVX state"));
}

TEST_CASE("isa_check: leaf 7 is ignored when the CPU does not report it", "[isa]") {
  ml_cpuid_regs r = qemu_haswell;
  r.max_leaf = 6;
  CHECK(missing("avx2", r) == "avx2");
}

TEST_CASE("isa_check: AMX needs the tile bits, the OS's tile state and Linux's permission", "[isa]") {
  CHECK(missing("amx", host_spr) == "amx-tile");  // no leaf 7 EDX recorded
  for (const char* isa : {"scalar", "sse2", "sse41", "avx2", "avxvnni", "avx512vnni", "amx"}) CHECK(missing(isa, spr_amx) == "");
  CHECK(missing("amx", qemu_haswell) == "avx512f");  // amx builds on avx512vnni
  ml_cpuid_regs r = spr_amx;
  r.l7_edx &= ~(1u << 25);
  CHECK(missing("amx", r) == "amx-int8");
  r = spr_amx;
  r.xcr0 = 0x202e7;  // tile configuration saved, tile data not
  CHECK_THAT(missing("amx", r), Catch::Contains("AMX tile state (XCR0 bits 17-18)"));
  r = spr_amx;
  r.tiles_permitted = false;  // arch_prctl(ARCH_REQ_XCOMP_PERM) refused (Linux before 5.16)
  CHECK_THAT(missing("amx", r), Catch::Contains("ARCH_REQ_XCOMP_PERM"));
  CHECK(missing("avx512vnni", r) == "");  // the other builds need no permission
}

TEST_CASE("isa_check: this process's tile permission, as asked and as read back", "[isa]") {
  // ml_isa_missing("amx") asks (once); ARCH_GET_XCOMP_PERM then reports what was granted. On a
  // CPU without AMX (this Zen 4) both say no and the guard names the first missing feature.
  const char* m = ml_isa_missing("amx");
  const bool granted = ml_tiles_request();
  const ml_cpuid_regs r = ml_cpuid_read();
#if defined(__x86_64__)
  CHECK(std::string(m ? m : "") == missing("amx", r));
#else
  CHECK(std::string(m ? m : "") == "amx");  // an x86 ISA elsewhere is missing itself
#endif
#if defined(__x86_64__) && defined(__linux__)
  CHECK(granted == r.tiles_permitted);
  if (!((r.l7_edx >> 24) & 1u)) CHECK_FALSE(granted);  // Linux refuses tiles the CPU lacks
#else
  (void)granted;
#endif
}

TEST_CASE("isa_check: the CPU vendor (AMD and Hygon, nothing else)", "[isa]") {
  auto with_vendor = [](const char* name) {  // leaf 0 holds the 12 bytes in EBX, EDX, ECX
    ml_cpuid_regs r = host_spr;
    std::memcpy(&r.vendor_ebx, name, 4);
    std::memcpy(&r.vendor_edx, name + 4, 4);
    std::memcpy(&r.vendor_ecx, name + 8, 4);
    return r;
  };
  for (const char* v : {"AuthenticAMD", "HygonGenuine"}) {
    const ml_cpuid_regs r = with_vendor(v);
    CHECK(ml_cpuid_amd(&r));
  }
  for (const char* v : {"GenuineIntel", "AuthenticAMX", "CentaurHauls", "\0\0\0\0\0\0\0\0\0\0\0\0"}) {
    const ml_cpuid_regs r = with_vendor(v);
    CHECK_FALSE(ml_cpuid_amd(&r));
  }
#if defined(__x86_64__) && defined(__linux__)
  // This CPU, against the kernel's own reading of leaf 0 (/proc/cpuinfo's vendor_id).
  std::string vendor;
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (vendor.empty() && std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "vendor_id", 9) == 0) vendor = std::strchr(line, ':') + 2;
    std::fclose(f);
  }
  if (!vendor.empty()) {
    const ml_cpuid_regs r = ml_cpuid_read();
    CHECK(ml_cpuid_amd(&r) == (vendor.rfind("AuthenticAMD", 0) == 0 || vendor.rfind("HygonGenuine", 0) == 0));
  }
#endif
}

TEST_CASE("isa_check: the CPU family from leaf 1 (base, plus extended when the base is 15)", "[isa]") {
  auto family = [](uint32_t eax) {
    ml_cpuid_regs r;
    r.l1_eax = eax;
    return ml_cpuid_family(&r);
  };
  CHECK(family(0x00A10F11) == 25);  // AMD EPYC 9004 (Zen 4)
  CHECK(family(0x00B00F21) == 26);  // AMD EPYC 9005 (Zen 5)
  CHECK(family(0x00800F12) == 23);  // AMD EPYC 7001 (Zen 1)
  CHECK(family(0x000806F8) == 6);   // Intel Sapphire Rapids: base 6, extended family ignored
  CHECK(family(0x0FF00600) == 6);   // extended bits set, base not 15: still ignored
  CHECK(family(0) == 0);            // leaf 1 not read
#if defined(__x86_64__) && defined(__linux__)
  // This CPU, against the kernel's own decoding (/proc/cpuinfo's "cpu family").
  int proc_family = -1;
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (proc_family < 0 && std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "cpu family", 10) == 0) proc_family = std::atoi(std::strchr(line, ':') + 1);
    std::fclose(f);
  }
  if (proc_family >= 0) {
    const ml_cpuid_regs r = ml_cpuid_read();
    CHECK(ml_cpuid_family(&r) == (unsigned)proc_family);
  }
#endif
}

TEST_CASE("isa_check: unknown ISA names are reported as missing", "[isa]") {
  CHECK(missing("avx10", host_spr) == "avx10");
  CHECK(ml_isa_missing("scalar") == nullptr);
}

// ARM: getauxval(AT_HWCAP, AT_HWCAP2) recorded under qemu-user 7.2 CPU models
// (qemu-aarch64 / qemu-arm -cpu MODEL running a program that prints both).
namespace {
const ml_arm_hwcaps a64_cortex_a53{true, 0x8fb, 0x0};          // ASIMD, no dot product
const ml_arm_hwcaps a64_cortex_a76{true, 0x119ffb, 0x0};       // + ASIMDDP
const ml_arm_hwcaps a64_a64fx{true, 0x415ffb, 0x0};            // SVE without ASIMDDP
const ml_arm_hwcaps a64_max{true, 0xecfffffb, 0x7f877fff};     // + I8MM (hwcap2) and SVE
const ml_arm_hwcaps a64_max_sve_off{true, 0xecbffffb, 0x76181};
const ml_arm_hwcaps a32_cortex_a15{false, 0x1fb8d7, 0x0};      // NEON
const ml_arm_hwcaps a32_cortex_r5f{false, 0x6e0d7, 0x0};       // VFP, no NEON

std::string missing_arm(const char* isa, const ml_arm_hwcaps& h) {
  const char* m = ml_isa_missing_arm(isa, &h);
  return m ? m : "";
}
}  // namespace

TEST_CASE("isa_check: ARM hwcaps of qemu CPU models", "[isa]") {
  CHECK(missing_arm("scalar", a64_cortex_a53) == "");
  CHECK(missing_arm("neon_dotprod", a64_cortex_a53) == "asimddp");
  CHECK(missing_arm("neon_i8mm", a64_cortex_a53) == "asimddp");
  CHECK(missing_arm("sve", a64_cortex_a53) == "asimddp");
  CHECK(missing_arm("neon_dotprod", a64_cortex_a76) == "");
  CHECK(missing_arm("neon_i8mm", a64_cortex_a76) == "i8mm");
  CHECK(missing_arm("sve", a64_cortex_a76) == "sve");
  CHECK(missing_arm("sve", a64_a64fx) == "asimddp");  // SVE alone is not enough: sve's chain has dotprod
  for (const char* isa : {"neon_dotprod", "neon_i8mm", "sve"}) CHECK(missing_arm(isa, a64_max) == "");
  CHECK(missing_arm("neon_i8mm", a64_max_sve_off) == "");
  CHECK(missing_arm("sve", a64_max_sve_off) == "sve");
  CHECK(missing_arm("neon", a32_cortex_a15) == "");
  CHECK(missing_arm("neon", a32_cortex_r5f) == "neon");
}

TEST_CASE("isa_check: ARM ISAs on the other ARM architecture, and unknown names", "[isa]") {
  CHECK(missing_arm("neon_dotprod", a32_cortex_a15) == "aarch64");  // 32-bit hwcap bits mean other things
  CHECK(missing_arm("neon", a64_cortex_a53) == "");  // the neon folder is the AArch64 baseline (ASIMD)
  CHECK(missing_arm("neon", ml_arm_hwcaps{true, 0x0, 0x0}) == "asimd");
  CHECK(missing_arm("avx2", a64_max) == "avx2");
  CHECK(missing_arm("sve2", a64_max) == "sve2");
#if !defined(__aarch64__) && !defined(__arm__)
  CHECK(std::string(ml_isa_missing("neon_dotprod")) == "neon_dotprod");  // not on this x86 host
#endif
}

// isa_check.cpp's CPU checks against the table of kernels/isa.cmake (ML_ISA_TABLE, generated):
// every x86 or ARM row has a check that passes on a CPU with every bit set (an ISA without one is
// reported as missing itself), and every check is a row of that architecture. Neither list can be
// generated from the other (the bits are hand-written), so this test is what keeps them together.
TEST_CASE("isa_check: one CPU check per x86 and ARM row of kernels/isa.cmake and no other", "[isa]") {
  struct Row {
    const char* isa;
    const char* arch;
  };
  const Row rows[] = {
#define ML_ISA_ROW(isa, arch) {#isa, #arch},
      ML_ISA_TABLE(ML_ISA_ROW)
#undef ML_ISA_ROW
  };
  ml_cpuid_regs all_x86;
  all_x86.max_leaf = 0xffffffffu;
  all_x86.l1_ecx = all_x86.l1_edx = all_x86.l7_ebx = all_x86.l7_ecx = all_x86.l7_1_eax = 0xffffffffu;
  all_x86.xcr0 = ~0ull;
  all_x86.l7_edx = 0xffffffffu;
  all_x86.tiles_permitted = true;
  const ml_arm_hwcaps all_a32{false, ~0ull, ~0ull}, all_a64{true, ~0ull, ~0ull};
  auto checked = [](const char* isa) {
    for (int i = 0; ml_isa_checked(i); ++i)
      if (std::strcmp(ml_isa_checked(i), isa) == 0) return true;
    return false;
  };
  for (const Row& r : rows) {
    INFO("kernels/isa.cmake row " << r.isa << " (" << r.arch << ")");
    const std::string arch = r.arch;
    if (arch == "x86") {
      CHECK(missing(r.isa, all_x86) == "");
    } else if (arch == "arm32" || arch == "aarch64") {
      const char* m = ml_isa_missing_arm(r.isa, arch == "arm32" ? &all_a32 : &all_a64);
      CHECK(std::string(m ? m : "") == "");
    }
    // scalar and wasm rows have no CPU check (the browser's JavaScript checks wasm features).
    CHECK(checked(r.isa) == (arch == "x86" || arch == "arm32" || arch == "aarch64"));
  }
  for (int i = 0; ml_isa_checked(i); ++i) {
    INFO("isa_check.cpp checks " << ml_isa_checked(i));
    bool row = false;
    for (const Row& r : rows) row = row || std::strcmp(r.isa, ml_isa_checked(i)) == 0;
    CHECK(row);
  }
}
