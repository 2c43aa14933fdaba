// The reference quantization rules and half <-> float conversion (src/core/quant_ref.h,
// src/core/half.h) against hand-checked values and oracles written independently here:
//   Q8: the rule restated with double arithmetic (a float product or sum rounded once to float
//       is exact in double first), plus hand-checked blocks: ties, zero, tiny, short last block.
//   Q4: the GGUF quantize_row_q4_0_ref rule transcribed as ggml writes it.
//   half: every one of the 65536 halves decoded from the IEEE definition, and float -> half
//       rounding computed in double (nearest, ties to even) on random and constructed floats.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/quant_ref.h"
#include "core/types.h"

namespace {

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Q8 oracle for one block of len values: the rule of quant_ref.h evaluated in double, each
// float operation rounded to float once (x * id and v + 0.5 are exact in double).
void q8_oracle(int8_t* q, float* d, const float* x, int len) {
  double amax = 0;
  for (int i = 0; i < len; ++i) amax = std::fabs((double)x[i]) > amax ? std::fabs((double)x[i]) : amax;
  if (amax < (double)ML_QUANT_TINY) {
    for (int i = 0; i < len; ++i) q[i] = 0;
    *d = 0.0f;
    return;
  }
  const float id = (float)(127.0 / amax);  // one correctly rounded division
  *d = (float)(amax / 127.0);
  for (int i = 0; i < len; ++i) {
    const float v = (float)((double)x[i] * (double)id);
    const float w = (float)((double)v + (x[i] < 0 || std::signbit(x[i]) ? -0.5 : 0.5));
    long t = (long)std::trunc((double)w);
    t = t > 127 ? 127 : (t < -127 ? -127 : t);
    q[i] = (int8_t)t;
  }
}

// GGUF's quantize_row_q4_0_ref for one block (ggml-quants.c), with ggml's own names.
void q4_gguf(uint8_t* qs, float* dout, const float* x) {
  const int qk = 32;
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < qk; j++) {
    const float v = x[j];
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  const float d = max / -8;
  const float id = d ? 1.0f / d : 0.0f;
  *dout = d;
  for (int j = 0; j < qk / 2; ++j) {
    const float x0 = x[0 + j] * id;
    const float x1 = x[qk / 2 + j] * id;
    const uint8_t xi0 = std::min<int8_t>(15, (int8_t)(x0 + 8.5f));
    const uint8_t xi1 = std::min<int8_t>(15, (int8_t)(x1 + 8.5f));
    qs[j] = xi0 | (uint8_t)(xi1 << 4);
  }
}

// The value of half h from the IEEE 754 definition.
double half_value(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) v = m ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else if (e == 0) v = std::ldexp((double)m, -24);
  else v = std::ldexp((double)(1024 + m), e - 25);
  return s ? -v : v;
}

// The half nearest to f, ties to even, as a double (+-inf past the largest half): halves with
// exponent e >= -14 are multiples of 2^(e - 10), subnormals multiples of 2^-24.
double half_round(float f) {
  const double v = std::fabs((double)f);
  if (v == 0) return f;
  int ex;
  std::frexp(v, &ex);  // v in [2^(ex-1), 2^ex)
  const double spacing = std::ldexp(1.0, std::max(ex - 1, -14) - 10);
  double r = std::nearbyint(v / spacing) * spacing;  // default mode: nearest, ties to even
  if (r >= 65536.0) r = INFINITY;                    // 65520 and up round past 65504
  return std::copysign(r, (double)f);
}

// One float through ml_float_to_half, checked against half_round (NaN stays NaN, same sign).
bool f2h_ok(float f) {
  const uint16_t h = ml_float_to_half(f);
  if (std::isnan(f)) return ((h & 0x7C00) == 0x7C00) && (h & 0x3FF) && ((h >> 15) == (float_bits(f) >> 31));
  const double want = half_round(f), got = half_value(h);
  return got == want && std::signbit(got) == std::signbit(want);
}

}  // namespace

TEST_CASE("ml_quantize_q8_ref: hand-checked block, amax 127 (id = d = 1)", "[quant]") {
  // x * 1 + copysign(0.5, x), truncated: ties go away from zero; 0.49999997 + 0.5 rounds up to 1.
  const float x[14] = {127, -127, 63.5f, -63.5f, 0.4f, -0.4f, 0.5f, -0.5f, 1.49f, 0.49999997f, 126.5f, -126.5f, 0.0f, -0.0f};
  const int8_t want[14] = {127, -127, 64, -64, 0, 0, 1, -1, 1, 1, 127, -127, 0, 0};
  int8_t q[14];
  float d = -1;
  ml_quantize_q8_ref(q, &d, x, 14);
  CHECK(d == 1.0f);
  for (int i = 0; i < 14; ++i) CHECK((int)q[i] == (int)want[i]);
}

TEST_CASE("ml_quantize_q8_ref: ties at amax 254 (id = 0.5, d = 2)", "[quant]") {
  const float x[8] = {254, 3, -5, 1, -1, 2, -3, 7};  // odd values land on exact .5
  const int8_t want[8] = {127, 2, -3, 1, -1, 1, -2, 4};
  int8_t q[8];
  float d = 0;
  ml_quantize_q8_ref(q, &d, x, 8);
  CHECK(d == 2.0f);
  for (int i = 0; i < 8; ++i) CHECK((int)q[i] == (int)want[i]);
}

TEST_CASE("ml_quantize_q8_ref: zero, tiny and threshold blocks and a short last block", "[quant]") {
  // Blocks: zeros (with -0), tiny (amax < ML_QUANT_TINY), exactly ML_QUANT_TINY, then a short
  // block of 5 values quantized with its own amax.
  std::vector<float> x(3 * 32 + 5);
  for (int i = 0; i < 32; ++i) x[i] = i % 2 ? -0.0f : 0.0f;
  for (int i = 0; i < 32; ++i) x[32 + i] = (i % 2 ? -1 : 1) * 0.99e-30f;
  for (int i = 0; i < 32; ++i) x[64 + i] = i == 7 ? ML_QUANT_TINY : 0.0f;
  const float tail[5] = {10.0f, -2.5f, 0.03f, -10.0f, 5.0f};
  std::memcpy(&x[96], tail, sizeof tail);
  std::vector<int8_t> q(x.size() + 8, 99);
  std::vector<float> d(4 + 2, 99.0f);
  ml_quantize_q8_ref(q.data(), d.data(), x.data(), x.size());
  CHECK(float_bits(d[0]) == 0u);
  CHECK(float_bits(d[1]) == 0u);
  for (int i = 0; i < 64; ++i) CHECK(q[i] == 0);
  CHECK(d[2] == ML_QUANT_TINY / 127.0f);  // the threshold itself is quantized
  CHECK(q[64 + 7] == 127);
  CHECK(d[3] == 10.0f / 127.0f);
  const int8_t want_tail[5] = {127, -32, 0, -127, 64};  // 2.5 * 12.7 = 31.75; 5 * 12.7 = 63.5 -> 64
  for (int i = 0; i < 5; ++i) CHECK((int)q[96 + i] == (int)want_tail[i]);
  CHECK(q[101] == 99);  // nothing written past n quants and ceil(n / 32) scales
  CHECK(d[4] == 99.0f);
}

TEST_CASE("ml_quantize_q8_ref: random blocks against the double-precision oracle and the clamp", "[quant]") {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f), ex(-30.0f, 30.0f);
  int checked = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const int n = 1 + (int)(rng() % 100);
    const float scale = std::pow(2.0f, ex(rng));
    std::vector<float> x(n);
    for (auto& v : x) v = uni(rng) * scale;
    if (trial % 4 == 1)  // ties: amax 127 or 254 and values on .5 after scaling
      for (int i = 0; i < n; ++i) x[i] = i == 0 ? 127.0f : (float)(int)(uni(rng) * 126) + 0.5f;
    if (trial % 4 == 2)
      for (int i = 0; i < n; ++i) x[i] = i == 0 ? -254.0f : (float)(2 * (int)(uni(rng) * 126) + 1);
    const int nb = (n + 31) / 32;
    std::vector<int8_t> q(n), wq(n);
    std::vector<float> d(nb), wd(nb);
    ml_quantize_q8_ref(q.data(), d.data(), x.data(), n);
    for (int b = 0; b < nb; ++b) q8_oracle(&wq[b * 32], &wd[b], &x[b * 32], std::min(32, n - b * 32));
    for (int i = 0; i < n; ++i) {
      if (q[i] != wq[i]) FAIL("trial " << trial << " q[" << i << "] = " << (int)q[i] << ", oracle " << (int)wq[i]);
      if (q[i] < -127) FAIL("q[" << i << "] = -128");  // clamp: never -128
    }
    for (int b = 0; b < nb; ++b) {
      if (float_bits(d[b]) != float_bits(wd[b])) FAIL("trial " << trial << " d[" << b << "]");
      // The element of largest magnitude maps to +-127 exactly (the clamp bound is reached).
      int big = b * 32;
      for (int i = b * 32; i < std::min(n, b * 32 + 32); ++i) big = std::fabs(x[i]) > std::fabs(x[big]) ? i : big;
      if (std::abs((int)q[big]) != 127) FAIL("trial " << trial << " block " << b << " max maps to " << (int)q[big]);
    }
    checked += n;
  }
  CHECK(checked > 100000);
}

TEST_CASE("ml_quantize_row_q8_ref: one scale for the whole row", "[quant]") {
  std::vector<float> x(100);
  for (int i = 0; i < 100; ++i) x[i] = (float)(i - 50) * 0.25f;  // amax 12.5 at i = 0
  std::vector<int8_t> q(100), wq(100);
  float d = 0, wd = 0;
  ml_quantize_row_q8_ref(q.data(), &d, x.data(), x.size());
  q8_oracle(wq.data(), &wd, x.data(), 100);
  CHECK(d == 12.5f / 127.0f);
  CHECK(q[0] == -127);
  CHECK(std::memcmp(q.data(), wq.data(), 100) == 0);
}

TEST_CASE("ml_quantize_q4_ref: hand-checked blocks", "[quant]") {
  // m = -8: d = 1, id = 1, nibble = x + 8 for integers; byte j holds values j and j + 16.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = (float)((j * 7) % 16 - 8);
  x[5] = -8.0f;
  uint8_t q[16];
  float d = 0;
  ml_quantize_q4_ref(q, &d, x, 32);
  CHECK(d == 1.0f);
  for (int j = 0; j < 16; ++j) CHECK((int)q[j] == ((int)x[j] + 8) + (((int)x[j + 16] + 8) << 4));
  for (int i = 0; i < 32; ++i) CHECK(ml_q4_value(q, i) * d == x[i]);

  // m = +8: d = -1, id = -1; x = -8 would need nibble 16 and is clamped to 15 (value -7 * -1).
  for (int j = 0; j < 32; ++j) x[j] = 0.0f;
  x[0] = 8.0f;
  x[1] = -8.0f;
  x[17] = 3.0f;
  ml_quantize_q4_ref(q, &d, x, 32);
  CHECK(d == -1.0f);
  CHECK(ml_q4_value(q, 0) == -8);
  CHECK(ml_q4_value(q, 1) == 7);
  CHECK(ml_q4_value(q, 17) == -3);
  CHECK(ml_q4_value(q, 2) == 0);
  CHECK((int)q[1] == (15 | ((8 - 3) << 4)));

  // An all-zero block: d = 0, every nibble 8 (value 0).
  for (int j = 0; j < 32; ++j) x[j] = 0.0f;
  ml_quantize_q4_ref(q, &d, x, 32);
  CHECK(d == 0.0f);
  for (int j = 0; j < 16; ++j) CHECK((int)q[j] == 0x88);
}

TEST_CASE("ml_quantize_q4_ref: random rows equal GGUF's quantize_row_q4_0_ref", "[quant]") {
  std::mt19937 rng(777);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int trial = 0; trial < 500; ++trial) {
    const int nb = 1 + trial % 5;
    std::vector<float> x(nb * 32);
    const float scale = std::pow(10.0f, (float)(trial % 9) - 4.0f);
    for (auto& v : x) v = nd(rng) * scale;
    if (trial % 7 == 3) x[trial % (nb * 32)] = -x[(trial + 1) % (nb * 32)];  // equal magnitudes
    std::vector<uint8_t> q(nb * 16), wq(nb * 16);
    std::vector<float> d(nb), wd(nb);
    ml_quantize_q4_ref(q.data(), d.data(), x.data(), x.size());
    for (int b = 0; b < nb; ++b) q4_gguf(&wq[b * 16], &wd[b], &x[b * 32]);
    REQUIRE(std::memcmp(q.data(), wq.data(), q.size()) == 0);
    REQUIRE(std::memcmp(d.data(), wd.data(), d.size() * 4) == 0);
  }
}

TEST_CASE("half: all 65536 halves decode by the IEEE definition and round-trip", "[half]") {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = ml_half_to_float((uint16_t)h);
    const double want = half_value((uint16_t)h);
    const uint16_t back = ml_float_to_half(f);
    bool ok;
    if (std::isnan(want)) {  // NaN stays NaN with its sign (the payload may change)
      ok = std::isnan(f) && (back & 0x7C00) == 0x7C00 && (back & 0x3FF) && (back >> 15) == (h >> 15);
    } else {
      ok = (double)f == want && std::signbit(f) == std::signbit(want) && back == h;
    }
    if (!ok && bad++ < 5) FAIL_CHECK("half 0x" << std::hex << h << " -> " << f << " -> 0x" << back);
  }
  CHECK(bad == 0);
}

TEST_CASE("half: float -> half rounds to nearest even, subnormals, overflow, NaN", "[half]") {
  // Named values.
  CHECK(ml_float_to_half(1.0f) == 0x3C00);
  CHECK(ml_float_to_half(-2.0f) == 0xC000);
  CHECK(ml_float_to_half(65504.0f) == 0x7BFF);
  CHECK(ml_float_to_half(65519.996f) == 0x7BFF);
  CHECK(ml_float_to_half(65520.0f) == 0x7C00);  // the tie past the largest half goes to inf
  CHECK(ml_float_to_half(FLT_MAX) == 0x7C00);
  CHECK(ml_float_to_half(-INFINITY) == 0xFC00);
  CHECK(ml_float_to_half(std::ldexp(1.0f, -24)) == 0x0001);      // smallest subnormal
  CHECK(ml_float_to_half(std::ldexp(1.0f, -25)) == 0x0000);      // tie between 0 and it: even
  CHECK(ml_float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  CHECK(ml_float_to_half(std::ldexp(3.0f, -25)) == 0x0002);      // 1.5 * 2^-24: tie to even 2
  CHECK(ml_float_to_half(-0.0f) == 0x8000);
  CHECK(ml_float_to_half(1e-30f) == 0x0000);
  CHECK(f2h_ok(std::numeric_limits<float>::quiet_NaN()));
  CHECK(f2h_ok(-std::numeric_limits<float>::quiet_NaN()));
  CHECK(f2h_ok(bits_to_float(0x7F800001u)));  // a signalling NaN with the smallest payload

  // Every midpoint between adjacent finite halves (exact in float), and one float either side.
  int bad = 0;
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    const float mid = (float)((half_value((uint16_t)h) + half_value((uint16_t)(h + 1))) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), -mid})
      if (!f2h_ok(f) && bad++ < 5) FAIL_CHECK("float " << f << " (bits 0x" << std::hex << float_bits(f) << ")");
  }
  // Random bit patterns (every exponent, NaN, inf, float subnormals), then floats in the half range.
  std::mt19937 rng(4242);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = rng();
    if (i % 2) u = (u & 0x807FFFFFu) | ((uint32_t)(100 + rng() % 45) << 23);  // exponents 2^-27 .. 2^17
    const float f = bits_to_float(u);
    if (!f2h_ok(f) && bad++ < 5) FAIL_CHECK("float bits 0x" << std::hex << u);
  }
  CHECK(bad == 0);
}
