// test_kernels: every kernel op over one case table (spec/testing.txt), checked twice:
//   (a) the scalar kernel against a naive double-precision reference written here;
//   (b) every other ISA of the build's chain that implements the op itself (isa_list.h) against
//       the scalar kernel, bit for bit (kernels/numerics.h: one float order for every ISA; this is
//       stricter than spec/testing.txt's 1e-5); ISAs this CPU cannot run are reported SKIP.
// Tolerances of (a) (spec/testing.txt): integer matvec with unit scales bit-exact; scaled matvec,
// rope, dot and axpy within 1e-5 of the sum of their terms' magnitudes; quantize_q8 bit-exact
// against ml_quantize_q8_ref; the other float kernels within 1e-5 relative. Every buffer sits at a
// misaligned address between guard bytes: inputs are followed by NaNs (a read past the end
// poisons the result), and outputs outside the written range must keep their guard bytes.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/quant_ref.h"
#include "kernel_check.h"
#include "kernels/bind.h"

using kt::Buf;
using kt::in_buf;
using kt::Out;
using kt::Rng;

namespace {

// ---- The case table --------------------------------------------------------------------------
constexpr int kN[] = {1, 7, 15, 32, 45, 288, 4097};  // vector lengths, head_dim (n % 16 = 1, 7, 15, 0, 13)
constexpr int kRows[] = {1, 3, 4, 7, 64};    // matrix rows, cache rows, heads
constexpr int kCols[] = {32, 96, 256};       // matrix columns: 1, 3 and 8 blocks
constexpr int kR0[] = {0, 1};                // first row of the range
constexpr double kTol = 1e-5;
constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t seed_of(std::initializer_list<int> parts) {
  uint32_t h = 2166136261u;
  for (int p : parts) h = (h ^ (uint32_t)p) * 16777619u;
  return h;
}
std::string S(int v) { return std::to_string(v); }

// ---- matvec_q8 / matvec_q4 -------------------------------------------------------------------
// Unit scales make the result an exact integer, so it must match bit for bit; "extreme" fills
// every block with the largest products (127 * 127, or -8 * -127 for Q4) under half scales of 1:
// block sums that must not saturate. Then random f32 and f16 scales.
enum MatKind { kUnit, kExtreme, kScaledF32, kScaledF16 };
const char* const kMatKindName[] = {"unit", "extreme", "f32-scales", "f16-scales"};

template <class Fn>
void check_matvec(const char* op, bool q4, Fn* scalar, const std::vector<kt::Impl<Fn>>& all) {
  const auto ports = kt::ports(all, op);
  for (int rows : kRows)
    for (int cols : kCols)
      for (int r0 : kR0)
        for (int r1 : {rows, rows - 1})  // also a range that stops before the last row
          for (MatKind kind : {kUnit, kExtreme, kScaledF32, kScaledF16}) {
            if (r1 < r0 || (r1 == rows - 1 && r1 <= r0)) continue;
            Rng rng(seed_of({rows, cols, r0, r1, kind, q4}));
            const int nb = cols / 32;
            std::vector<int8_t> wq8((size_t)rows * cols), xq(cols);
            std::vector<uint8_t> wq4((size_t)rows * cols / 2);
            std::vector<float> wd((size_t)rows * nb), xd(nb);
            std::vector<uint16_t> wd16((size_t)rows * nb);
            for (auto& v : wq8) v = (int8_t)rng.irange(-127, 127);
            for (auto& v : wq4) v = (uint8_t)rng.irange(0, 255);
            for (auto& v : xq) v = (int8_t)rng.irange(-127, 127);
            if (kind == kExtreme) {  // row r: every product +16129 (r even) or -16129 (r odd)
              for (int i = 0; i < cols; ++i) xq[i] = (int8_t)(q4 ? -127 : ((i / 5) % 2 ? -127 : 127));
              for (int r = 0; r < rows; ++r)
                for (int i = 0; i < cols; ++i) wq8[(size_t)r * cols + i] = (int8_t)(r % 2 ? -xq[i] : xq[i]);
              for (auto& v : wq4) v = 0x00;  // every value -8: products +1016
            }
            const bool unit = kind == kUnit || kind == kExtreme;
            for (size_t i = 0; i < wd.size(); ++i) {
              wd[i] = unit ? 1.0f : rng.uni(-0.02f, 0.02f);
              wd16[i] = ml_float_to_half(wd[i]);
            }
            for (auto& v : xd) v = unit ? 1.0f : rng.uni(0.001f, 0.1f);
            const bool f16 = kind == kExtreme || kind == kScaledF16;

            // (a) reference: y[r] = sum_b isum_b * dw * dx in double; mag: sum of |block terms|.
            std::vector<double> want, mag;
            for (int r = r0; r < r1; ++r) {
              double y = 0, m = 0;
              for (int b = 0; b < nb; ++b) {
                long long isum = 0;
                for (int i = b * 32; i < b * 32 + 32; ++i) {
                  const int w = q4 ? ml_q4_value(&wq4[(size_t)r * cols / 2], (size_t)i) : wq8[(size_t)r * cols + i];
                  isum += (long long)w * xq[i];
                }
                const size_t di = (size_t)r * nb + b;
                const double dw = f16 ? (double)ml_half_to_float(wd16[di]) : (double)wd[di];
                const double term = (double)isum * dw * (double)xd[b];
                y += term;
                m += std::fabs(term);
              }
              want.push_back(y);
              mag.push_back(m);
            }
            auto run = [&](Fn* fn) {
              Buf<int8_t> bq8 = in_buf(wq8), bx = in_buf(xq);
              Buf<uint8_t> bq4 = in_buf(wq4);
              Buf<float> bd = in_buf(wd), bxd = in_buf(xd);
              Buf<uint16_t> bd16 = in_buf(wd16);
              ml_qtensor W;
              W.q = q4 ? (const void*)bq4.data() : (const void*)bq8.data();
              W.d = f16 ? (const void*)bd16.data() : (const void*)bd.data();
              W.d_f16 = f16;
              W.rows = rows;
              W.cols = cols;
              ml_qact x;
              x.q = bx.data();
              x.d = bxd.data();
              x.n = cols;
              Buf<float> y(rows, 0xA5);
              fn(y.data(), &W, &x, r0, r1);
              return kt::take(y, r0, r1);
            };
            const std::string what = std::string(op) + " rows=" + S(rows) + " cols=" + S(cols) + " r0=" + S(r0) +
                                     " r1=" + S(r1) + " " + kMatKindName[kind];
            kt::check_case(what, scalar, ports, run, want, mag, unit ? 0.0 : kTol);
          }
}

// ---- quantize_q8 -----------------------------------------------------------------------------
// Block kinds: random magnitudes, zeros (+0 and -0), tiny (amax < ML_QUANT_TINY: all zero),
// exactly ML_QUANT_TINY (quantized normally), exact .5 ties (id = 1 or 0.5 exactly), huge
// (near FLT_MAX), and mixed (a different kind per block, so blocks are independent).
enum QKind { kQRandom, kQZero, kQTiny, kQThreshold, kQTies, kQHuge, kQMixed };
const char* const kQKindName[] = {"random", "zero", "tiny", "threshold", "ties", "huge", "mixed"};

void fill_block(float* x, int len, QKind kind, Rng& rng) {
  const float scale = std::pow(10.0f, rng.uni(-4, 4));
  for (int i = 0; i < len; ++i) {
    switch (kind) {
      case kQRandom: x[i] = rng.normal(scale); break;
      case kQZero: x[i] = i % 2 ? -0.0f : 0.0f; break;
      case kQTiny: x[i] = rng.uni(-0.99e-30f, 0.99e-30f); break;
      case kQThreshold: x[i] = i == len / 2 ? -ML_QUANT_TINY : rng.uni(-1e-30f, 1e-30f) * 0.9f; break;
      case kQTies:  // amax 127 -> id 1: x = k + 0.5; amax 254 -> id 0.5: x = odd integers
        if (len % 2) x[i] = (float)rng.irange(-126, 125) + 0.5f;
        else x[i] = (float)(2 * rng.irange(-126, 126) + 1);
        if (i == 2) x[i] = 0.49999997f;  // x * id + 0.5 rounds up to 1.0 in float: q = 1
        break;
      case kQHuge: x[i] = rng.uni(-1.0f, 1.0f) * 3.4e38f; break;
      case kQMixed: break;
    }
  }
  if (kind == kQTies) x[len - 1] = len % 2 ? -127.0f : 254.0f;
}

TEST_CASE("kernels: quantize_q8", "[kernels]") {
  const auto ports = kt::ports(kt::impls_quantize_q8(), "quantize_q8");
  for (int n : kN)
    for (QKind kind : {kQRandom, kQZero, kQTiny, kQThreshold, kQTies, kQHuge, kQMixed}) {
      Rng rng(seed_of({n, kind}));
      std::vector<float> x(n);
      for (int b = 0; b * 32 < n; ++b) {
        const int len = n - b * 32 < 32 ? n - b * 32 : 32;
        fill_block(&x[b * 32], len, kind == kQMixed ? (QKind)(b % kQMixed) : kind, rng);
      }
      const int nb = (n + 31) / 32;
      std::vector<int8_t> want_q(n);
      std::vector<float> want_d(nb);
      ml_quantize_q8_ref(want_q.data(), want_d.data(), x.data(), (size_t)n);
      auto check = [&](const std::string& what, ml_k_quantize_q8_fn* fn, const std::vector<int8_t>& eq,
                       const std::vector<float>& ed) {
        Buf<float> bx = in_buf(x);
        Buf<int8_t> q(n, 0xA5);
        Buf<float> d(nb, 0xA5);
        fn(q.data(), d.data(), bx.data(), n);
        std::string diff;
        for (int i = 0; i < n && diff.empty(); ++i)
          if (q[i] != eq[i]) diff = "q[" + S(i) + "] = " + S(q[i]) + ", want " + S(eq[i]);
        for (int b = 0; b < nb && diff.empty(); ++b)
          if (std::memcmp(&d[b], &ed[b], 4) != 0)
            diff = "d[" + S(b) + "] = " + std::to_string(d[b]) + ", want " + std::to_string(ed[b]) + " (bits)";
        if (diff.empty() && !(q.untouched_outside(0, n) && d.untouched_outside(0, nb))) diff = "wrote past n or nb";
        kt::expect(what + " n=" + S(n) + " " + kQKindName[kind], diff);
        return std::make_pair(std::vector<int8_t>(q.data(), q.data() + n), std::vector<float>(d.data(), d.data() + nb));
      };
      const auto s = check("quantize_q8 scalar vs ml_quantize_q8_ref", &ml::k::scalar::quantize_q8, want_q, want_d);
      for (const auto& im : ports) check(std::string("quantize_q8 ") + im.name + " vs scalar", im.fn, s.first, s.second);
    }
}

// ---- rmsnorm, softmax, silu_mul, add ---------------------------------------------------------
TEST_CASE("kernels: rmsnorm", "[kernels]") {
  const auto ports = kt::ports(kt::impls_rmsnorm(), "rmsnorm");
  for (int n : kN)
    for (int variant = 0; variant < 3; ++variant) {  // 0 out of place, 1 in place (o == x), 2 zeros
      Rng rng(seed_of({n, variant}));
      std::vector<float> x(n), w(n);
      for (auto& v : x) v = variant == 2 ? 0.0f : rng.normal(3.0f);
      for (auto& v : w) v = rng.uni(0.5f, 1.5f);
      const float eps = 1e-5f;
      double ss = 0;
      for (float v : x) ss += (double)v * v;
      const double scale = 1.0 / std::sqrt(ss / n + (double)eps);
      std::vector<double> want(n), mag(n);
      for (int i = 0; i < n; ++i) mag[i] = std::fabs(want[i] = (double)w[i] * x[i] * scale);
      auto run = [&](ml_k_rmsnorm_fn* fn) {
        Buf<float> bx = variant == 1 ? kt::io_buf(x) : in_buf(x), bw = in_buf(w), o(n, 0xA5);
        if (variant == 1) {
          fn(bx.data(), bx.data(), bw.data(), n, eps);
          return kt::take(bx, 0, n);
        }
        fn(o.data(), bx.data(), bw.data(), n, eps);
        return kt::take(o, 0, n);
      };
      kt::check_case("rmsnorm n=" + S(n) + (variant == 1 ? " in-place" : variant == 2 ? " zeros" : ""),
                     &ml::k::scalar::rmsnorm, ports, run, want, mag, kTol);
    }
}

// Inputs: random in [-10, 10]; +-1e4; -1e30 next to ordinary values; all -1e30; some -inf;
// all -inf (uniform 1/n by definition).
TEST_CASE("kernels: softmax", "[kernels]") {
  const auto ports = kt::ports(kt::impls_softmax(), "softmax");
  const char* const names[] = {"random", "+-1e4", "-1e30 mixed", "all -1e30", "some -inf", "all -inf"};
  for (int n : kN)
    for (int kind = 0; kind < 6; ++kind) {
      Rng rng(seed_of({n, kind}));
      std::vector<float> x(n);
      for (int i = 0; i < n; ++i) {
        const float r = rng.uni(-10.0f, 10.0f);
        switch (kind) {
          case 0: x[i] = r; break;
          case 1: x[i] = (i % 3 ? 1e4f : -1e4f) + r; break;
          case 2: x[i] = i % 2 ? -1e30f : r; break;
          case 3: x[i] = -1e30f; break;
          case 4: x[i] = i % 3 == 1 ? -kInf : r; break;
          case 5: x[i] = -kInf; break;
        }
      }
      double mx = -INFINITY;
      for (float v : x) mx = std::fmax(mx, (double)v);
      std::vector<double> want(n), mag(n);
      double sum = 0;
      for (int i = 0; i < n; ++i) sum += (want[i] = mx == -INFINITY ? 1.0 : std::exp((double)x[i] - mx));
      for (int i = 0; i < n; ++i) mag[i] = want[i] /= sum;
      auto run = [&](ml_k_softmax_fn* fn) {
        Buf<float> bx = kt::io_buf(x);
        fn(bx.data(), n);
        Out r = kt::take(bx, 0, n);
        for (float v : r.v)
          if (!std::isfinite(v)) r.guard = "non-finite output";
        return r;
      };
      kt::check_case("softmax n=" + S(n) + " " + names[kind], &ml::k::scalar::softmax, ports, run, want, mag, kTol);
    }
}

TEST_CASE("kernels: silu_mul", "[kernels]") {
  const auto ports = kt::ports(kt::impls_silu_mul(), "silu_mul");
  for (int n : kN) {
    Rng rng(seed_of({n}));
    std::vector<float> g(n), u(n);
    const float extremes[] = {-100.0f, -88.0f, -20.0f, 20.0f, 88.0f, 100.0f, 0.0f};
    for (int i = 0; i < n; ++i) {
      g[i] = i % 11 == 5 ? extremes[(i / 11) % 7] : rng.normal(4.0f);
      u[i] = rng.normal(1.0f);
    }
    std::vector<double> want(n), mag(n);
    for (int i = 0; i < n; ++i) mag[i] = std::fabs(want[i] = (double)g[i] / (1.0 + std::exp(-(double)g[i])) * u[i]);
    auto run = [&](ml_k_silu_mul_fn* fn) {
      Buf<float> bg = kt::io_buf(g), bu = in_buf(u);
      fn(bg.data(), bu.data(), n);
      return kt::take(bg, 0, n);
    };
    kt::check_case("silu_mul n=" + S(n), &ml::k::scalar::silu_mul, ports, run, want, mag, kTol);
  }
}

TEST_CASE("kernels: gelu_mul", "[kernels]") {
  const auto ports = kt::ports(kt::impls_gelu_mul(), "gelu_mul");
  for (int n : kN) {
    Rng rng(seed_of({n, 7}));
    std::vector<float> g(n), u(n);
    const float extremes[] = {-100.0f, -10.0f, -3.0f, 3.0f, 10.0f, 100.0f, 0.0f};
    for (int i = 0; i < n; ++i) {
      g[i] = i % 11 == 5 ? extremes[(i / 11) % 7] : rng.normal(3.0f);
      u[i] = rng.normal(1.0f);
    }
    std::vector<double> want(n), mag(n);
    for (int i = 0; i < n; ++i) {
      const double x = g[i];
      const double gelu = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
      want[i] = gelu * u[i];
      // The tanh form's own rounding near its zero: relative error is measured against |x u|.
      mag[i] = std::fabs(x * u[i]);
    }
    auto run = [&](ml_k_gelu_mul_fn* fn) {
      Buf<float> bg = kt::io_buf(g), bu = in_buf(u);
      fn(bg.data(), bu.data(), n);
      return kt::take(bg, 0, n);
    };
    kt::check_case("gelu_mul n=" + S(n), &ml::k::scalar::gelu_mul, ports, run, want, mag, kTol);
  }
}

TEST_CASE("kernels: add", "[kernels]") {
  const auto ports = kt::ports(kt::impls_add(), "add");
  for (int n : kN) {
    Rng rng(seed_of({n}));
    std::vector<float> y(n), x(n);
    for (int i = 0; i < n; ++i) {
      y[i] = rng.normal(2.0f);
      x[i] = i % 5 == 3 ? -y[i] : rng.normal(1.0f);  // some exact cancellations
    }
    std::vector<double> want(n), mag(n);
    for (int i = 0; i < n; ++i) mag[i] = std::fabs(want[i] = (double)y[i] + x[i]);
    auto run = [&](ml_k_add_fn* fn) {
      Buf<float> by = kt::io_buf(y), bx = in_buf(x);
      fn(by.data(), bx.data(), n);
      return kt::take(by, 0, n);
    };
    kt::check_case("add n=" + S(n), &ml::k::scalar::add, ports, run, want, mag, kTol);
  }
}

// ---- rope: heads from the rows column, head_dim = n rounded up to even -----------------------
TEST_CASE("kernels: rope", "[kernels]") {
  const auto ports = kt::ports(kt::impls_rope(), "rope");
  for (int heads : kRows)
    for (int n : kN)
      for (int style : {0, 1}) {
        const int hd = n + (n & 1), half = hd / 2, total = heads * hd;
        Rng rng(seed_of({heads, n, style}));
        std::vector<float> x(total), c(half), s(half);
        for (auto& v : x) v = rng.normal(2.0f);
        for (int i = 0; i < half; ++i) {
          const float th = rng.uni(-100.0f, 100.0f);
          c[i] = std::cos(th);
          s[i] = std::sin(th);
        }
        std::vector<double> want(x.begin(), x.end()), mag(total);
        for (int h = 0; h < heads; ++h)
          for (int i = 0; i < half; ++i) {
            const int ia = h * hd + (style == 0 ? 2 * i : i), ib = h * hd + (style == 0 ? 2 * i + 1 : i + half);
            const double a = x[ia], b = x[ib];
            want[ia] = a * c[i] - b * s[i];
            want[ib] = a * s[i] + b * c[i];
            mag[ia] = std::fabs(a * c[i]) + std::fabs(b * s[i]);
            mag[ib] = std::fabs(a * s[i]) + std::fabs(b * c[i]);
          }
        auto run = [&](ml_k_rope_fn* fn) {
          Buf<float> bx = kt::io_buf(x), bc = in_buf(c), bs = in_buf(s);
          fn(bx.data(), heads, hd, bc.data(), bs.data(), style);
          return kt::take(bx, 0, total);
        };
        kt::check_case("rope heads=" + S(heads) + " head_dim=" + S(hd) + " style=" + S(style),
                       &ml::k::scalar::rope, ports, run, want, mag, kTol);
      }
}

// ---- attention: n_rows from the rows column, head_dim from n; padded strides -----------------
// Cache rows sit k_stride = head_dim + 3 apart with NaN (or 127) in the padding, and Q8 scales
// d_stride = 2 apart with NaN between them: a kernel that reads outside its rows returns NaN.
constexpr size_t kPadCols = 3, kDStride = 2;

template <class T, class Gen>
std::vector<T> cache(int rows, int hd, T pad, Gen gen) {
  std::vector<T> v((size_t)rows * (hd + kPadCols), pad);
  for (int j = 0; j < rows; ++j)
    for (int i = 0; i < hd; ++i) v[(size_t)j * (hd + kPadCols) + i] = gen();
  return v;
}

TEST_CASE("kernels: dot_f32, dot_f16, dot_q8", "[kernels]") {
  const auto p32 = kt::ports(kt::impls_dot_f32(), "dot_f32");
  const auto p16 = kt::ports(kt::impls_dot_f16(), "dot_f16");
  const auto p8 = kt::ports(kt::impls_dot_q8(), "dot_q8");
  for (int rows : kRows)
    for (int hd : kN) {
      Rng rng(seed_of({rows, hd}));
      const size_t ks = hd + kPadCols;
      const std::string tag = " rows=" + S(rows) + " head_dim=" + S(hd);
      std::vector<float> q(hd);
      for (auto& v : q) v = rng.normal(1.0f);
      const std::vector<float> K = cache<float>(rows, hd, kNaN, [&] { return rng.normal(1.0f); });
      const std::vector<uint16_t> K16 =
          cache<uint16_t>(rows, hd, 0xFFFF, [&] { return ml_float_to_half(rng.normal(1.0f)); });
      std::vector<int8_t> q8(hd);
      for (auto& v : q8) v = (int8_t)rng.irange(-127, 127);
      const std::vector<int8_t> K8 = cache<int8_t>(rows, hd, 127, [&] { return (int8_t)rng.irange(-127, 127); });
      std::vector<float> Kd((size_t)rows * kDStride, kNaN);
      for (int j = 0; j < rows; ++j) Kd[j * kDStride] = rng.uni(0.001f, 0.05f);
      const float qd = rng.uni(0.001f, 0.05f);

      std::vector<double> w32(rows), m32(rows), w16(rows), m16(rows), w8(rows), m8(rows);
      for (int j = 0; j < rows; ++j) {
        long long isum = 0;
        for (int i = 0; i < hd; ++i) {
          const double t = (double)q[i] * K[j * ks + i], t16 = (double)q[i] * ml_half_to_float(K16[j * ks + i]);
          w32[j] += t, m32[j] += std::fabs(t), w16[j] += t16, m16[j] += std::fabs(t16);
          isum += (long long)q8[i] * K8[j * ks + i];
        }
        m8[j] = std::fabs(w8[j] = (double)isum * qd * Kd[j * kDStride]);  // an exact dot: relative 1e-5
      }
      auto run32 = [&](ml_k_dot_f32_fn* fn) {
        Buf<float> bq = in_buf(q), bk = in_buf(K), s(rows, 0xA5);
        fn(s.data(), bq.data(), bk.data(), ks, rows, hd);
        return kt::take(s, 0, rows);
      };
      auto run16 = [&](ml_k_dot_f16_fn* fn) {
        Buf<float> bq = in_buf(q), s(rows, 0xA5);
        Buf<uint16_t> bk = in_buf(K16);
        fn(s.data(), bq.data(), bk.data(), ks, rows, hd);
        return kt::take(s, 0, rows);
      };
      auto run8 = [&](ml_k_dot_q8_fn* fn) {
        Buf<int8_t> bq = in_buf(q8), bk = in_buf(K8);
        Buf<float> bd = in_buf(Kd), s(rows, 0xA5);
        fn(s.data(), bq.data(), qd, bk.data(), bd.data(), ks, kDStride, rows, hd);
        return kt::take(s, 0, rows);
      };
      kt::check_case("dot_f32" + tag, &ml::k::scalar::dot_f32, p32, run32, w32, m32, kTol);
      kt::check_case("dot_f16" + tag, &ml::k::scalar::dot_f16, p16, run16, w16, m16, kTol);
      kt::check_case("dot_q8" + tag, &ml::k::scalar::dot_q8, p8, run8, w8, m8, kTol);
    }
}

// The F16 cache's stores: every bit pattern as ml_float_to_half gives it (tested itself against
// the IEEE definition in test_quant), so scalar is compared exactly and the ports bit for bit:
// midpoints between halves (ties to even), subnormal halves, the overflow edge, infinities, and
// NaNs with payloads a hardware conversion would keep.
TEST_CASE("kernels: f32_to_f16", "[kernels]") {
  const auto ports = kt::ports(kt::impls_f32_to_f16(), "f32_to_f16");
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  const float edges[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, kInf, -kInf, kNaN,
                         bits(0x7F800001u), bits(0xFFFFFFFFu), bits(0x7FBFFFFFu), 1e-8f, -3e-8f, 5.96e-8f, 6.1e-5f};
  for (int n : kN) {
    Rng rng(seed_of({n, 16}));
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) {
      const uint16_t h = (uint16_t)rng.irange(0, 0x7BFE);  // a finite half and the next one up
      const float mid = (ml_half_to_float(h) + ml_half_to_float((uint16_t)(h + 1))) * 0.5f;  // exact
      switch (i % 4) {
        case 0: x[i] = edges[(i / 4) % (sizeof edges / sizeof edges[0])]; break;
        case 1: x[i] = rng.irange(0, 1) ? mid : -mid; break;
        case 2: x[i] = std::ldexp(rng.uni(-1.0f, 1.0f), rng.irange(-30, 17)); break;
        default: x[i] = rng.normal(1.0f);
      }
    }
    std::vector<double> want(n), mag(n, 1.0);
    for (int i = 0; i < n; ++i) want[i] = ml_float_to_half(x[i]);
    auto run = [&](ml_k_f32_to_f16_fn* fn) {
      Buf<float> bx = in_buf(x);
      Buf<uint16_t> out(n, 0xA5);
      fn(out.data(), bx.data(), n);
      return kt::take(out, 0, n);
    };
    kt::check_case("f32_to_f16 n=" + S(n), &ml::k::scalar::f32_to_f16, ports, run, want, mag, 0.0);
  }
}

TEST_CASE("kernels: axpy_f32, axpy_f16, axpy_q8", "[kernels]") {
  const auto p32 = kt::ports(kt::impls_axpy_f32(), "axpy_f32");
  const auto p16 = kt::ports(kt::impls_axpy_f16(), "axpy_f16");
  const auto p8 = kt::ports(kt::impls_axpy_q8(), "axpy_q8");
  for (int rows : kRows)
    for (int hd : kN) {
      Rng rng(seed_of({rows, hd, 1}));
      const size_t vs = hd + kPadCols;
      const std::string tag = " rows=" + S(rows) + " head_dim=" + S(hd);
      std::vector<float> out0(hd), w(rows);
      for (auto& v : out0) v = rng.normal(1.0f);
      for (auto& v : w) v = rng.uni(0.0f, 1.0f);
      const std::vector<float> V = cache<float>(rows, hd, kNaN, [&] { return rng.normal(1.0f); });
      const std::vector<uint16_t> V16 =
          cache<uint16_t>(rows, hd, 0xFFFF, [&] { return ml_float_to_half(rng.normal(1.0f)); });
      const std::vector<int8_t> V8 = cache<int8_t>(rows, hd, 127, [&] { return (int8_t)rng.irange(-127, 127); });
      std::vector<float> Vd((size_t)rows * kDStride, kNaN);
      for (int j = 0; j < rows; ++j) Vd[j * kDStride] = rng.uni(0.001f, 0.05f);

      std::vector<double> w32(out0.begin(), out0.end()), w16 = w32, w8 = w32, m32(hd), m16, m8;
      for (int i = 0; i < hd; ++i) m32[i] = std::fabs(out0[i]);
      m16 = m8 = m32;
      for (int j = 0; j < rows; ++j)
        for (int i = 0; i < hd; ++i) {
          const double t = (double)w[j] * V[j * vs + i], t16 = (double)w[j] * ml_half_to_float(V16[j * vs + i]);
          const double t8 = (double)w[j] * Vd[j * kDStride] * V8[j * vs + i];
          w32[i] += t, m32[i] += std::fabs(t), w16[i] += t16, m16[i] += std::fabs(t16), w8[i] += t8;
          m8[i] += std::fabs(t8);
        }
      auto run32 = [&](ml_k_axpy_f32_fn* fn) {
        Buf<float> o = kt::io_buf(out0), bw = in_buf(w), bv = in_buf(V);
        fn(o.data(), bw.data(), bv.data(), vs, rows, hd);
        return kt::take(o, 0, hd);
      };
      auto run16 = [&](ml_k_axpy_f16_fn* fn) {
        Buf<float> o = kt::io_buf(out0), bw = in_buf(w);
        Buf<uint16_t> bv = in_buf(V16);
        fn(o.data(), bw.data(), bv.data(), vs, rows, hd);
        return kt::take(o, 0, hd);
      };
      auto run8 = [&](ml_k_axpy_q8_fn* fn) {
        Buf<float> o = kt::io_buf(out0), bw = in_buf(w), bd = in_buf(Vd);
        Buf<int8_t> bv = in_buf(V8);
        fn(o.data(), bw.data(), bv.data(), bd.data(), vs, kDStride, rows, hd);
        return kt::take(o, 0, hd);
      };
      kt::check_case("axpy_f32" + tag, &ml::k::scalar::axpy_f32, p32, run32, w32, m32, kTol);
      kt::check_case("axpy_f16" + tag, &ml::k::scalar::axpy_f16, p16, run16, w16, m16, kTol);
      kt::check_case("axpy_q8" + tag, &ml::k::scalar::axpy_q8, p8, run8, w8, m8, kTol);
    }
}

// ---- The "resolved to" lines -----------------------------------------------------------------
// Printed first in every run: the kernel each op of this build is bound to, the build's chain,
// and a SKIP line for each ISA of the chain this CPU cannot run.
struct KernelListing : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(Catch::TestRunInfo const& info) override {
#define ML_KT_LINE(op) stream << #op " -> " << ml::k::active::op##_name << "\n";
    ML_K_OPS(ML_KT_LINE)
#ifdef ML_K_F16_HEADS
    ML_K_F16_HEADS_OPS(ML_KT_LINE)
#endif
#undef ML_KT_LINE
    stream << "kernel isa " << ml::k::build_isa << ", chain tested:";
#define ML_KT_CHAIN(I, unused) stream << " " #I;
    ML_TEST_ISAS(ML_KT_CHAIN, 0)
#undef ML_KT_CHAIN
    stream << "\n";
#define ML_KT_SKIP(I, unused) \
  if (const char* miss = ml_isa_missing(#I)) stream << "SKIP " #I ": cpu lacks " << miss << "\n";
    ML_TEST_ISAS(ML_KT_SKIP, 0)
#undef ML_KT_SKIP
    stream.flush();
    TestEventListenerBase::testRunStarting(info);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(KernelListing)

TEST_CASE("kernels: matvec_q8", "[kernels]") {
  check_matvec("matvec_q8", false, &ml::k::scalar::matvec_q8, kt::impls_matvec_q8());
}

TEST_CASE("kernels: matvec_q4", "[kernels]") {
  check_matvec("matvec_q4", true, &ml::k::scalar::matvec_q4, kt::impls_matvec_q4());
}
