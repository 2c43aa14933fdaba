// Helpers for test_kernels: the list of ISA ports of each op (from isa_list.h), guarded buffers
// that are misaligned on purpose, a seeded generator and the tolerance comparison.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/isa_check.h"
#include "isa_list.h"
#include "kernels/ops.h"

namespace kt {

// One ISA's own implementation of an op.
template <class Fn>
struct Impl {
  const char* isa;   // "avx2"
  const char* name;  // "ml_k_matvec_q8_avx2"
  Fn* fn;
};

// An ISA implements an op itself when the name its namespace resolves the op to ends in "_<isa>";
// otherwise the name was inherited from a parent through `using namespace`.
inline bool implements(const char* name, const char* isa) {
  const size_t n = std::strlen(name), k = std::strlen(isa);
  return n > k + 1 && name[n - k - 1] == '_' && std::strcmp(name + n - k, isa) == 0;
}

#define ML_KT_IMPL(I, op) \
  if (kt::implements(ml::k::I::op##_name, #I)) v.push_back({#I, ml::k::I::op##_name, &ml::k::I::op});
#define ML_KT_IMPLS(op)                                    \
  inline std::vector<Impl<ml_k_##op##_fn>> impls_##op() { \
    std::vector<Impl<ml_k_##op##_fn>> v;                   \
    ML_TEST_ISAS(ML_KT_IMPL, op)                           \
    return v;                                              \
  }
ML_K_OPS(ML_KT_IMPLS)
#undef ML_KT_IMPLS

// The ports to hold against scalar (check b): every non-scalar ISA of the chain that implements
// op itself and that this CPU runs. An ISA the CPU cannot run is reported as SKIP, loudly.
template <class Fn>
std::vector<Impl<Fn>> ports(const std::vector<Impl<Fn>>& all, const char* op) {
  std::vector<Impl<Fn>> out;
  for (const Impl<Fn>& im : all) {
    if (std::strcmp(im.isa, "scalar") == 0) continue;
    if (const char* miss = ml_isa_missing(im.isa)) {
      WARN("SKIP " << im.isa << ": cpu lacks " << miss << " (" << op << ": " << im.name << " not tested)");
      continue;
    }
    out.push_back(im);
  }
  return out;
}

// n elements at an odd offset from the allocation (so SIMD ports must use unaligned loads),
// with guard bytes before and after. Outputs use guard 0xA5 and are checked untouched; inputs
// use 0xFF (NaN for float and half), so a read past the end poisons the result.
template <class T>
struct Buf {
  static constexpr size_t kPad = 16;
  std::vector<unsigned char> mem;
  size_t n;
  unsigned char guard;
  Buf(size_t count, unsigned char g) : mem((count + kPad) * sizeof(T) + 1 + alignof(T) * 2, g), n(count), guard(g) {}
  T* data() {  // one T past an aligned start, plus one byte for 1-byte types: never 16-aligned
    uintptr_t a = reinterpret_cast<uintptr_t>(mem.data()) + alignof(T) - 1;
    a -= a % alignof(T);
    return reinterpret_cast<T*>(a + (sizeof(T) == 1 ? 1 : sizeof(T)));
  }
  T& operator[](size_t i) { return data()[i]; }
  // True when every byte outside [lo, hi) elements still holds the guard.
  bool untouched_outside(size_t lo, size_t hi) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(data());
    const size_t b0 = (size_t)(p - mem.data()) + lo * sizeof(T), b1 = (size_t)(p - mem.data()) + hi * sizeof(T);
    for (size_t i = 0; i < mem.size(); ++i)
      if ((i < b0 || i >= b1) && mem[i] != guard) return false;
    return true;
  }
};

// Deterministic inputs: one seed per case.
struct Rng {
  std::mt19937 g;
  explicit Rng(uint32_t seed) : g(seed) {}
  float uni(float a, float b) { return std::uniform_real_distribution<float>(a, b)(g); }
  float normal(float s = 1.0f) { return std::normal_distribution<float>(0.0f, s)(g); }
  int irange(int a, int b) { return std::uniform_int_distribution<int>(a, b)(g); }
};

// got[i] against want[i]: equal values when tol == 0 (bit-exact up to the sign of zero), else
// |got - want| <= tol * mag[i] + 1e-35 (the floor only absorbs float underflow). Returns "" or
// the first mismatch and the count.
inline std::string compare(const float* got, const double* want, const double* mag, size_t n, double tol) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i];
    const bool ok = tol == 0 ? g == want[i] : std::fabs(g - want[i]) <= tol * mag[i] + 1e-35;
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf, "[%zu] got %.9g want %.9g (allowed %.3g); %zu of %zu differ", first,
                (double)got[first], want[first], tol * mag[first], bad, n);
  return buf;
}

// One check: passes, or fails naming the op, the implementation, the case and the mismatch.
inline void expect(const std::string& what, const std::string& diff) {
  if (diff.empty())
    SUCCEED();
  else
    FAIL_CHECK(what << ": " << diff);
}

// A kernel's output: the values it wrote (as floats) and "" or what it wrote out of range.
struct Out {
  std::vector<float> v;
  std::string guard;
};

// Values [lo, hi) of b, checking that nothing outside them changed.
template <class T>
Out take(Buf<T>& b, size_t lo, size_t hi) {
  Out o;
  for (size_t i = lo; i < hi; ++i) o.v.push_back((float)b[i]);
  if (!b.untouched_outside(lo, hi)) o.guard = "wrote outside its output range";
  return o;
}

// A guarded, misaligned copy of a read-only input (guard 0xFF: NaN, so reading past the end
// poisons the result) or of an in/out array (guard 0xA5, an ordinary float that any arithmetic
// on it changes, where NaN + NaN could rewrite the same NaN bits unnoticed).
template <class T>
Buf<T> in_buf(const std::vector<T>& v, unsigned char guard = 0xFF) {
  Buf<T> b(v.size(), guard);
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * sizeof(T));
  return b;
}
template <class T>
Buf<T> io_buf(const std::vector<T>& v) {
  return in_buf(v, 0xA5);
}

// The two checks of one case: the scalar kernel against the double reference (want, with
// tolerance tol * mag), then every port against the scalar output bit for bit: every ISA does
// scalar's float operations in kernels/numerics.h's canonical order, so a build's logits do not
// depend on its vector width.
// run(fn) calls one implementation on fresh copies of the case's inputs.
template <class Fn, class Run>
void check_case(const std::string& what, Fn* scalar, const std::vector<Impl<Fn>>& ports, const Run& run,
                const std::vector<double>& want, const std::vector<double>& mag, double tol) {
  const Out s = run(scalar);
  REQUIRE(s.v.size() == want.size());
  expect(what + " scalar", compare(s.v.data(), want.data(), mag.data(), want.size(), tol));
  expect(what + " scalar", s.guard);
  const std::vector<double> ref(s.v.begin(), s.v.end());
  for (const Impl<Fn>& im : ports) {
    const Out p = run(im.fn);
    const std::string w = what + " " + im.name + " vs scalar";
    expect(w, compare(p.v.data(), ref.data(), mag.data(), ref.size(), 0.0));
    expect(w, p.guard);
  }
}

}  // namespace kt
