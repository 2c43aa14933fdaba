// The grouped F16 attention ops (kernels/ops.h: dot_f16_heads, axpy_f16_heads), in builds whose
// ISA binds them: each head's result must equal, bit for bit, the scalar dot_f16 / axpy_f16 of that
// head alone (test_kernels checks those against a double-precision reference). Every buffer has
// padding between heads and rows: NaN in the inputs (a read outside a row or head poisons the
// result) and a sentinel in the outputs (a write outside them is caught).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/isa_check.h"
#include "kernel_check.h"
#include "kernels/bind.h"

#ifdef ML_K_F16_HEADS
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = -12345.678f;

// The ISA an op's name ends in ("ml_k_dot_f16_heads_avx512vnni" -> "avx512vnni").
std::string isa_of(const char* name, const char* op) {
  return std::string(name + std::strlen("ml_k_") + std::strlen(op) + 1);
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Head counts around the kernels' batches of 8 and register slices; head_dim around one
// 16-lane vector, 64, 128 (the one-pass limit) and past it; rows around a 64-row block.
constexpr int kHeads[] = {1, 2, 3, 4, 5, 7, 8, 9, 16};
constexpr int kHeadDims[] = {1, 15, 16, 45, 64, 72, 128, 130, 256};
constexpr int kRowCounts[] = {1, 3, 17, 64};

}  // namespace

TEST_CASE("kernels: dot_f16_heads and axpy_f16_heads equal the per-head ops", "[kernels]") {
  const std::string isa = isa_of(ml::k::active::dot_f16_heads_name, "dot_f16_heads");
  if (const char* miss = ml_isa_missing(isa.c_str())) {
    WARN("SKIP " << isa << ": cpu lacks " << miss << " (dot_f16_heads, axpy_f16_heads not tested)");
    return;
  }
  for (int heads : kHeads)
    for (int hd : kHeadDims)
      for (int rows : kRowCounts) {
        kt::Rng rng((uint32_t)(heads * 1000003 + hd * 1009 + rows));
        const size_t ks = hd + 3, qs = hd + 2, ss = rows + 5, os = hd + 1, ws = rows + 2;
        std::vector<uint16_t> K((size_t)rows * ks, 0x7E00);  // a half NaN between rows
        for (int j = 0; j < rows; ++j)
          for (int i = 0; i < hd; ++i) K[j * ks + i] = ml_float_to_half(rng.normal(1.0f));
        std::vector<float> q((size_t)heads * qs, kNaN), w((size_t)heads * ws, kNaN);
        std::vector<float> out0((size_t)heads * os, kSentinel);
        for (int h = 0; h < heads; ++h) {
          for (int i = 0; i < hd; ++i) q[h * qs + i] = rng.normal(1.0f), out0[h * os + i] = rng.normal(0.5f);
          for (int j = 0; j < rows; ++j) w[h * ws + j] = rng.uni(0.0f, 1.0f / rows);
        }
        // The reference: the scalar ops, one head at a time.
        std::vector<float> s_want((size_t)heads * ss, kSentinel), out_want = out0;
        for (int h = 0; h < heads; ++h) {
          ml::k::scalar::dot_f16(s_want.data() + h * ss, q.data() + h * qs, K.data(), ks, rows, hd);
          ml::k::scalar::axpy_f16(out_want.data() + h * os, w.data() + h * ws, K.data(), ks, rows, hd);
        }
        std::vector<float> s_got((size_t)heads * ss, kSentinel), out_got = out0;
        ml::k::active::dot_f16_heads(s_got.data(), ss, q.data(), qs, heads, K.data(), ks, rows, hd);
        ml::k::active::axpy_f16_heads(out_got.data(), os, w.data(), ws, heads, K.data(), ks, rows, hd);

        const std::string tag = " heads=" + std::to_string(heads) + " head_dim=" + std::to_string(hd) +
                                " rows=" + std::to_string(rows);
        size_t bad_s = 0, bad_o = 0;
        for (size_t i = 0; i < s_got.size(); ++i) bad_s += !same_bits(s_got[i], s_want[i]);
        for (size_t i = 0; i < out_got.size(); ++i) bad_o += !same_bits(out_got[i], out_want[i]);
        INFO(ml::k::active::dot_f16_heads_name << tag);
        CHECK(bad_s == 0);
        INFO(ml::k::active::axpy_f16_heads_name << tag);
        CHECK(bad_o == 0);
      }
}
#endif
