// The arena (src/core/arena.h): a planning pass that only adds up sizes, one allocation, then a
// real pass handing out 64-byte-aligned, disjoint, zeroed buffers; overflow of count * elem or
// of the running total, and a too-small arena, fail with ML_E_NOMEM and a message.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/arena.h"

namespace {

struct Req {
  size_t count, elem;
};
const std::vector<Req> kReqs = {{3, 4}, {100, 1}, {1, 8}, {0, 4}, {1000, 2}, {64, 1}, {17, 12}};

// The planned size computed here: each buffer starts at the next multiple of 64.
size_t expected_plan() {
  size_t used = 0;
  for (const Req& r : kReqs) used = (used + 63) / 64 * 64 + r.count * r.elem;
  return used;
}

bool has(const ml_error& e, const char* s) { return std::string(e.msg).find(s) != std::string::npos; }

}  // namespace

TEST_CASE("arena: planning pass, then the real pass gives aligned disjoint zeroed buffers", "[arena]") {
  ml_arena a;
  ml_error err;
  for (const Req& r : kReqs) {
    void* p = reinterpret_cast<void*>(1);
    REQUIRE(ml_arena_take(&a, r.count, r.elem, &p, &err) == ML_OK);
    CHECK(p == nullptr);  // planning hands out nothing
  }
  const size_t planned = a.used;
  CHECK(planned == expected_plan());

  REQUIRE(ml_arena_alloc(&a, &err) == ML_OK);
  REQUIRE(a.base != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(a.base) % ML_ALIGN == 0);
  CHECK(a.cap >= planned);
  CHECK(a.cap % ML_ALIGN == 0);
  CHECK(a.used == 0);

  std::vector<uint8_t*> ptrs;
  for (const Req& r : kReqs) {
    void* p = nullptr;
    REQUIRE(ml_arena_take(&a, r.count, r.elem, &p, &err) == ML_OK);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % ML_ALIGN == 0);
    ptrs.push_back(static_cast<uint8_t*>(p));
  }
  CHECK(a.used == planned);
  for (size_t i = 0; i < kReqs.size(); ++i) {
    const size_t bytes = kReqs[i].count * kReqs[i].elem;
    CHECK(ptrs[i] >= a.base);
    CHECK(ptrs[i] + bytes <= a.base + a.cap);
    if (i + 1 < kReqs.size()) CHECK(ptrs[i] + bytes <= ptrs[i + 1]);  // disjoint, in order
    for (size_t b = 0; b < bytes; ++b) REQUIRE(ptrs[i][b] == 0);
    std::memset(ptrs[i], 0x5A, bytes);
  }
  ml_arena_free(&a);
  CHECK(a.base == nullptr);
  CHECK(a.cap == 0);
  CHECK(a.used == 0);
}

TEST_CASE("arena: the typed take sizes by the element type", "[arena]") {
  ml_arena a;
  ml_error err;
  double* d = nullptr;
  float* f = nullptr;
  REQUIRE(ml_arena_take(&a, 5, &d, &err) == ML_OK);
  REQUIRE(ml_arena_take(&a, 3, &f, &err) == ML_OK);
  CHECK(a.used == 64 + 3 * sizeof(float));
  REQUIRE(ml_arena_alloc(&a, &err) == ML_OK);
  REQUIRE(ml_arena_take(&a, 5, &d, &err) == ML_OK);
  REQUIRE(ml_arena_take(&a, 3, &f, &err) == ML_OK);
  CHECK(reinterpret_cast<uint8_t*>(f) - reinterpret_cast<uint8_t*>(d) == 64);
  ml_arena_free(&a);
}

TEST_CASE("arena: count * elem overflow fails with ML_E_NOMEM and stays failed", "[arena]") {
  ml_arena a;
  ml_error err;
  void* p = nullptr;
  const size_t huge = SIZE_MAX / 2 + 1;
  CHECK(ml_arena_take(&a, huge, 2, &p, &err) == ML_E_NOMEM);
  CHECK(err.status == ML_E_NOMEM);
  CHECK(has(err, "overflow"));
  CHECK(has(err, std::to_string(huge).c_str()));  // the message names the sizes
  CHECK(p == nullptr);
  // Sticky: later takes and the allocation fail too, so a bad plan can never be allocated.
  CHECK(ml_arena_take(&a, 1, 1, &p, &err) == ML_E_NOMEM);
  ml_error err2;
  CHECK(ml_arena_alloc(&a, &err2) == ML_E_NOMEM);
  CHECK(has(err2, "overflow"));
  CHECK(a.base == nullptr);
  // A null ml_error is allowed.
  ml_arena b;
  CHECK(ml_arena_take(&b, SIZE_MAX, SIZE_MAX, &p, nullptr) == ML_E_NOMEM);
}

TEST_CASE("arena: overflow of the running total (alignment padding included)", "[arena]") {
  ml_arena a;
  ml_error err;
  void* p = nullptr;
  REQUIRE(ml_arena_take(&a, SIZE_MAX - 10, 1, &p, &err) == ML_OK);  // fits on its own
  CHECK(ml_arena_take(&a, 1, 1, &p, &err) == ML_E_NOMEM);          // rounding up to 64 overflows
  CHECK(has(err, "overflow"));
  CHECK(ml_arena_alloc(&a, &err) == ML_E_NOMEM);
}

TEST_CASE("arena: a real pass that outgrows its plan fails with ML_E_NOMEM", "[arena]") {
  ml_arena a;
  ml_error err;
  void* p = nullptr;
  REQUIRE(ml_arena_take(&a, 10, 4, &p, &err) == ML_OK);
  REQUIRE(ml_arena_alloc(&a, &err) == ML_OK);
  const size_t cap = a.cap;
  CHECK(ml_arena_take(&a, cap + 1, 1, &p, &err) == ML_E_NOMEM);
  CHECK(p == nullptr);
  CHECK(err.status == ML_E_NOMEM);
  CHECK(has(err, std::to_string(cap + 1).c_str()));  // names the request
  // The arena is still usable for what fits.
  REQUIRE(ml_arena_take(&a, 10, 4, &p, &err) == ML_OK);
  CHECK(p == a.base);
  CHECK(ml_arena_take(&a, cap, 1, &p, &err) == ML_E_NOMEM);  // the next 64-byte start is the end
  ml_arena_free(&a);
}

// AddressSanitizer aborts on a 4 EiB request instead of returning null, so skip it there.
#if defined(__SANITIZE_ADDRESS__)
#define ML_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ML_TEST_ASAN 1
#endif
#endif
#ifndef ML_TEST_ASAN
TEST_CASE("arena: an allocation the system refuses fails with ML_E_NOMEM", "[arena]") {
  ml_arena a;
  ml_error err;
  void* p = nullptr;
  REQUIRE(ml_arena_take(&a, SIZE_MAX / 4, 1, &p, &err) == ML_OK);  // 4 EiB: planned, not allocatable
  CHECK(ml_arena_alloc(&a, &err) == ML_E_NOMEM);
  CHECK(has(err, "allocate"));
  CHECK(a.base == nullptr);
}
#endif
