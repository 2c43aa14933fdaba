// ml_aligned_alloc_huge (src/core/aligned.h): the packed weights' and the large arenas' buffer. On
// Linux it is 2 MiB aligned and its whole 2 MiB pages carry the MADV_HUGEPAGE advice ("hg" in
// /proc/self/smaps' VmFlags), so transparent huge pages may back them; the tail past the last
// whole page is not advised (its resident size stays its own); small sizes and other systems get
// 64-byte alignment.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/aligned.h"

namespace {

// The VmFlags line of the mapping that contains address p (empty when none does).
[[maybe_unused]] std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo, hi;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return {};
}

}  // namespace

TEST_CASE("ml_aligned_alloc_huge: 2 MiB aligned and advised for huge pages on Linux", "[core][aligned]") {
  const size_t size = 3 * ML_HUGE_PAGE + 12345;  // not a multiple: the tail is left out of the advice
  auto* p = static_cast<uint8_t*>(ml_aligned_alloc_huge(size));
  REQUIRE(p != nullptr);
  std::memset(p, 0x5a, size);  // the whole size is writable
  CHECK(p[size - 1] == 0x5a);
#ifdef ML_HUGE_PAGES
  CHECK(reinterpret_cast<uintptr_t>(p) % ML_HUGE_PAGE == 0);
  const std::string last_whole = vm_flags_of(p + 3 * ML_HUGE_PAGE - 1), tail = vm_flags_of(p + size - 1);
  INFO("last whole page: " << last_whole << "; tail: " << tail);
  CHECK(vm_flags_of(p).find(" hg") != std::string::npos);
  CHECK(last_whole.find(" hg") != std::string::npos);
  CHECK(tail.find(" hg") == std::string::npos);
#else
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
#endif
  ml_aligned_free(p);
}

TEST_CASE("ml_aligned_alloc_huge: a small buffer is an ordinary 64-byte-aligned block", "[core][aligned]") {
  auto* p = static_cast<uint8_t*>(ml_aligned_alloc_huge(1000));
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  std::memset(p, 1, 1000);
  ml_aligned_free(p);
}
