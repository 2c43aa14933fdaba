// test_packed: the packed kernels (core/pack.h layout, kernels/ops.h packed ops) of every ISA of the
// build's chain that binds them itself (op name ends in "_<isa>"), each over matrices packed with
// THAT ISA's ml_pack_params by ml_pack_matrix, held to spec/kernels.txt "Packed kernels":
//   - matvec == the scalar row-major matvec: bit-exact with unit scales; with random scales
//     bit-exact for the ISAs that declare pk_exact (no FMA: the scalar float order), else within 1e-5
//     of the sum of the terms' magnitudes; rows outside [r0, r1) keep their guard bytes;
//   - y[r] does not depend on which range [r0, r1) computed it (threads split rows);
//   - matmul: each token's column == that ISA's packed matvec of the token, bit for bit, and
//     nothing written outside rows [r0, r1) of each column.
// Also: every row-major matvec_q8/q4 of the chain (scalar included) gives bit-identical y[r]
// whatever range [r0, r1) contains r. Buffers are misaligned between guard bytes (kernel_check.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/pack.h"
#include "core/quant_ref.h"
#include "kernel_check.h"
#include "kernels/bind.h"

using kt::Buf;
using kt::in_buf;
using kt::Rng;

// Fallbacks for the packed names, so that the ISA list below compiles for chains where no ISA binds
// a packed op (the scalar build). Qualified lookup (ml::k::avx2::matvec_q8_pk) searches a
// namespace's using-directives only when the namespace itself lacks the name, so nominating these
// from the chain's root, scalar, makes them visible exactly where no ISA of the chain binds the op.
// Their names are "", which kt::implements never accepts; they are never called.
namespace kt_pk_none {
#define ML_PK_NONE(op)                                                                      \
  inline void op##_none(float*, int, const ml_qtensor*, const ml_qbatch*, int, int) {}     \
  inline void op##_none(float*, const ml_qtensor*, const ml_qact*, int, int) {}            \
  inline constexpr auto& op = static_cast<ml_k_##op##_fn&>(op##_none);                     \
  inline constexpr const char* op##_name = "";                                              \
  inline constexpr ml_pack_params op##_pack{};
ML_K_PK_OPS(ML_PK_NONE)
#undef ML_PK_NONE
// An ISA whose packed kernels keep the scalar kernel's float operations and order declares
// `inline constexpr bool pk_exact = true` (its children inherit it); the others are held to 1e-5.
inline constexpr bool pk_exact = false;
}  // namespace kt_pk_none
namespace ml::k::scalar {
using namespace ::kt_pk_none;
}  // namespace ml::k::scalar

namespace {

constexpr int kRows[] = {1, 3, 4, 7, 17, 64};
constexpr int kCols[] = {32, 96, 256, 4096, 4128};  // 4128: 129 blocks, past one stack chunk of every tile
// The matvec also runs 16416 columns (513 blocks): past the x86 one-token chunk (x86_pack.h).
constexpr int kMatvecCols[] = {32, 96, 256, 4096, 4128, 16416};
// Token counts: every remainder of the 4-token (SSE, AVX2) and 8-token (AVX-512) tiles, odd ones.
constexpr int kTokens[] = {1, 2, 3, 4, 5, 6, 7, 9, 15, 128};
constexpr double kTol = 1e-5;

uint32_t seed_of(std::initializer_list<int> parts) {
  uint32_t h = 2166136261u;
  for (int p : parts) h = (h ^ (uint32_t)p) * 16777619u;
  return h;
}
std::string S(int v) { return std::to_string(v); }

// One ISA's packed ops as its namespace resolves them, and the layout it packs with.
struct PkImpl {
  const char* isa;
  bool exact;  // pk_exact: bit-exact with the scalar row-major matvec for any scales
  ml_pack_params pack;
  ml_k_matvec_q8_pk_fn* mv8;
  ml_k_matvec_q4_pk_fn* mv4;
  ml_k_matmul_q8_pk_fn* mm8;
  ml_k_matmul_q4_pk_fn* mm4;
  std::string layout_error;  // an op the ISA inherits from another layout
};

// The ISAs of the chain that bind at least one packed op themselves.
std::vector<PkImpl> pk_impls() {
  std::vector<PkImpl> v;
#define ML_PK_IMPL(I, unused)                                                                                    \
  if (kt::implements(ml::k::I::matvec_q8_pk_name, #I) || kt::implements(ml::k::I::matvec_q4_pk_name, #I) ||  \
      kt::implements(ml::k::I::matmul_q8_pk_name, #I) || kt::implements(ml::k::I::matmul_q4_pk_name, #I)) {  \
    const ml_pack_params& p = ml::k::I::pack;                                                                    \
    PkImpl im{#I, ml::k::I::pk_exact, p, &ml::k::I::matvec_q8_pk, &ml::k::I::matvec_q4_pk,                      \
              &ml::k::I::matmul_q8_pk, &ml::k::I::matmul_q4_pk, ""};                                             \
    for (const ml_pack_params* q : {&ml::k::I::matvec_q8_pk_pack, &ml::k::I::matvec_q4_pk_pack,                  \
                                    &ml::k::I::matmul_q8_pk_pack, &ml::k::I::matmul_q4_pk_pack})                 \
      if (!ml_pack_same_layout(*q, p))                                                                           \
        im.layout_error = "an op of " #I " reads another ISA's layout (bind all four packed ops with its pack)"; \
    v.push_back(im);                                                                                             \
  }
  ML_TEST_ISAS(ML_PK_IMPL, 0)
#undef ML_PK_IMPL
  return v;
}

// The packed ISAs this CPU runs; the rest are reported SKIP, loudly. Empty in the scalar build,
// which says so.
std::vector<PkImpl> runnable_pk_impls() {
  std::vector<PkImpl> out;
  const std::vector<PkImpl> all = pk_impls();
  if (all.empty()) WARN("no ISA of this build's chain has packed kernels: the packed-kernel tests have nothing to run");
  for (const PkImpl& im : all) {
    if (const char* miss = ml_isa_missing(im.isa)) {
      WARN("SKIP " << im.isa << ": cpu lacks " << miss << " (packed kernels not tested)");
      continue;
    }
    if (!im.layout_error.empty()) FAIL_CHECK(im.isa << ": " << im.layout_error);
    out.push_back(im);
  }
  return out;
}

// Weight kinds. unit: random quants, scales 1 (results are exact integers); extreme: the largest
// block sums (Q8 +-127 * +-127; Q4 raw nibbles 15 or 0 against +-127: the int16 bound of the
// pmaddubsw paths) under f16 scales of 1; then random f32 and f16 scales.
enum Kind { kUnit, kExtreme, kScaledF32, kScaledF16 };
const char* const kKindName[] = {"unit", "extreme", "f32-scales", "f16-scales"};

// A weight matrix, row-major (the scalar kernel's input and the packer's).
struct Matrix {
  int rows, cols;
  bool q4, f16;
  std::vector<int8_t> q8;
  std::vector<uint8_t> q4b;
  std::vector<float> d;
  std::vector<uint16_t> d16;
};

Matrix make_matrix(int rows, int cols, bool q4, Kind kind, Rng& rng) {
  Matrix m{rows, cols, q4, kind == kExtreme || kind == kScaledF16, {}, {}, {}, {}};
  const int nb = cols / 32;
  m.q8.resize((size_t)rows * cols);
  m.q4b.resize((size_t)rows * cols / 2);
  for (auto& v : m.q8) v = (int8_t)rng.irange(-127, 127);
  for (auto& v : m.q4b) v = (uint8_t)rng.irange(0, 255);
  if (kind == kExtreme)
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < cols; ++i) m.q8[(size_t)r * cols + i] = (int8_t)((((i / 32) + r) % 2) ? -127 : 127);
      for (int i = 0; i < cols / 2; ++i) m.q4b[(size_t)r * cols / 2 + i] = r % 2 ? 0x00 : 0xFF;
    }
  const bool unit = kind == kUnit || kind == kExtreme;
  m.d.resize((size_t)rows * nb);
  m.d16.resize(m.d.size());
  for (size_t i = 0; i < m.d.size(); ++i) {
    m.d[i] = unit ? 1.0f : rng.uni(-0.02f, 0.02f);
    m.d16[i] = ml_float_to_half(m.d[i]);
  }
  return m;
}

// n_tokens tokens of activations: quants in [-127, 127] (extreme: +-127 per block), scales.
void make_acts(int cols, int n_tokens, Kind kind, Rng& rng, std::vector<int8_t>* q, std::vector<float>* d) {
  q->resize((size_t)cols * n_tokens);
  d->resize((size_t)cols / 32 * n_tokens);
  for (size_t i = 0; i < q->size(); ++i)
    (*q)[i] = kind == kExtreme ? (int8_t)((i / 32) % 3 ? 127 : -127) : (int8_t)rng.irange(-127, 127);
  for (auto& v : *d) v = kind == kUnit || kind == kExtreme ? 1.0f : rng.uni(0.001f, 0.1f);
}

// The matrix in guarded buffers, row-major and packed with params p (ml_pack_matrix).
struct Packed {
  Buf<int8_t> q8;
  Buf<uint8_t> q4b;
  Buf<float> d;
  Buf<uint16_t> d16;
  Buf<uint8_t> pq;
  Buf<uint8_t> pd;  // float or half
  ml_qtensor W;
  static size_t qbytes(const Matrix& m, const ml_pack_params& p, bool want_q) {
    size_t q = 0, d = 0;
    REQUIRE(ml_pack_sizes(m.q4 ? ML_DT_Q4 : ML_DT_Q8, m.rows, m.cols, m.f16, &p, &q, &d));
    return want_q ? q : d;
  }
  Packed(const Matrix& m, const ml_pack_params& p)
      : q8(in_buf(m.q8)), q4b(in_buf(m.q4b)), d(in_buf(m.d)), d16(in_buf(m.d16)), pq(qbytes(m, p, true), 0xFF),
        pd(qbytes(m, p, false), 0xFF) {
    W.q = m.q4 ? (const void*)q4b.data() : (const void*)q8.data();
    W.d = m.f16 ? (const void*)d16.data() : (const void*)d.data();
    W.d_f16 = m.f16;
    W.type = m.q4 ? ML_DT_Q4 : ML_DT_Q8;
    W.rows = m.rows;
    W.cols = m.cols;
    ml_pack_matrix(&W, &p, pq.data(), pd.data());
  }
  Packed(const Packed&) = delete;
  Packed& operator=(const Packed&) = delete;
};

// The scalar row-major matvec of one token over every row.
std::vector<float> scalar_matvec(Packed& P, bool q4, const int8_t* xq, const float* xd, int n) {
  std::vector<float> y(P.W.rows);
  ml_qact x;
  x.q = xq;
  x.d = xd;
  x.n = n;
  (q4 ? ml::k::scalar::matvec_q4 : ml::k::scalar::matvec_q8)(y.data(), &P.W, &x, 0, P.W.rows);
  return y;
}
// Per row, the sum of |isum_b * d_w * d_x| over blocks, in double: the tolerance's scale.
std::vector<double> magnitudes(const Matrix& m, const int8_t* xq, const float* xd) {
  std::vector<double> mag(m.rows);
  const int nb = m.cols / 32;
  for (int r = 0; r < m.rows; ++r)
    for (int b = 0; b < nb; ++b) {
      long long isum = 0;
      for (int i = b * 32; i < b * 32 + 32; ++i)
        isum += (long long)(m.q4 ? ml_q4_value(&m.q4b[(size_t)r * m.cols / 2], (size_t)i) : m.q8[(size_t)r * m.cols + i]) *
                xq[i];
      const size_t di = (size_t)r * nb + b;
      const double dw = m.f16 ? (double)ml_half_to_float(m.d16[di]) : (double)m.d[di];
      mag[r] += std::fabs((double)isum * dw * (double)xd[b]);
    }
  return mag;
}

// got[i] == want[i] bit for bit (memcmp): "" or the first difference and the count.
std::string bits_diff(const float* got, const float* want, size_t n) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ == 0) first = i;
  if (!bad) return "";
  char buf[200];
  std::snprintf(buf, sizeof buf, "[%zu] got %.9g want %.9g (bits); %zu of %zu differ", first, (double)got[first],
                (double)want[first], bad, n);
  return buf;
}

// Row ranges: r0 a multiple of g, r0 <= r1 <= rows (empty ones too), deduplicated.
std::vector<std::pair<int, int>> ranges(int rows, int g) {
  std::vector<std::pair<int, int>> out;
  auto add = [&](int r0, int r1) {
    if (r0 < 0 || r1 > rows || r0 > r1 || r0 % g) return;
    for (const auto& e : out)
      if (e.first == r0 && e.second == r1) return;
    out.push_back({r0, r1});
  };
  add(0, rows);
  add(0, rows - 1);
  add(g, rows);
  add(g, rows - 2);
  add(2 * g, std::min(rows, 3 * g + 1));
  add(0, std::min(rows, 1));
  add(rows / g * g, rows);  // the partial last group alone (or empty when rows % g == 0)
  return out;
}

// One packed matvec call on a guarded y: the values [r0, r1) and "" or a guard violation.
kt::Out run_matvec(bool q4, const PkImpl& im, Packed& P, const int8_t* xq, const float* xd, int n, int r0, int r1) {
  Buf<int8_t> bx(n, 0xFF);
  Buf<float> bxd(n / 32, 0xFF);
  std::memcpy(bx.data(), xq, n);
  std::memcpy(bxd.data(), xd, n / 32 * sizeof(float));
  ml_qact x;
  x.q = bx.data();
  x.d = bxd.data();
  x.n = n;
  Buf<float> y(P.W.rows, 0xA5);
  (q4 ? im.mv4 : im.mv8)(y.data(), &P.W, &x, r0, r1);
  return kt::take(y, r0, r1);
}

void check_matvec_pk(const PkImpl& im, bool q4) {
  const char* op = q4 ? "matvec_q4_pk" : "matvec_q8_pk";
  const bool exact = im.exact;
  std::vector<ml_pack_params> packs{im.pack};
  if (im.pack.d16) {
    ml_pack_params f32_scales = im.pack;
    f32_scales.d16 = false;
    packs.push_back(f32_scales);
  }
  for (const ml_pack_params& p : packs)
    for (int rows : kRows)
      for (int cols : kMatvecCols)
        for (Kind kind : {kUnit, kExtreme, kScaledF32, kScaledF16}) {
          Rng rng(seed_of({rows, cols, kind, q4, p.d16, 1}));
          const Matrix m = make_matrix(rows, cols, q4, kind, rng);
          std::vector<int8_t> xq;
          std::vector<float> xd;
          make_acts(cols, 1, kind, rng, &xq, &xd);
          Packed P(m, p);
          const std::vector<float> want = scalar_matvec(P, q4, xq.data(), xd.data(), cols);
          const std::vector<double> mag = magnitudes(m, xq.data(), xd.data());
          const bool unit = kind == kUnit || kind == kExtreme;
          const std::string tag = std::string(op) + "_" + im.isa + " rows=" + S(rows) + " cols=" + S(cols) + " " +
                                  kKindName[kind] + (p.d16 ? " d16" : "");
          std::vector<float> full;  // y over [0, rows): every range must reproduce its bits
          for (const auto& [r0, r1] : ranges(rows, p.g)) {
            const kt::Out o = run_matvec(q4, im, P, xq.data(), xd.data(), cols, r0, r1);
            const std::string what = tag + " r0=" + S(r0) + " r1=" + S(r1);
            kt::expect(what, o.guard);
            if (unit || exact) {
              kt::expect(what + " vs scalar (bit-exact)", bits_diff(o.v.data(), want.data() + r0, o.v.size()));
            } else {
              const std::vector<double> w(want.begin() + r0, want.begin() + r1);
              kt::expect(what + " vs scalar", kt::compare(o.v.data(), w.data(), mag.data() + r0, w.size(), kTol));
            }
            if (r0 == 0 && r1 == rows) full = o.v;
            else if (!full.empty())
              kt::expect(what + " vs range [0, rows)", bits_diff(o.v.data(), full.data() + r0, o.v.size()));
          }
        }
}

void check_matmul_pk(const PkImpl& im, bool q4) {
  const char* op = q4 ? "matmul_q4_pk" : "matmul_q8_pk";
  for (int rows : kRows)
    for (int cols : kCols)
      for (Kind kind : {kUnit, kExtreme, kScaledF32, kScaledF16}) {
        Rng rng(seed_of({rows, cols, kind, q4, 2}));
        const Matrix m = make_matrix(rows, cols, q4, kind, rng);
        std::vector<int8_t> xq;
        std::vector<float> xd;
        make_acts(cols, 128, kind, rng, &xq, &xd);
        Packed P(m, im.pack);
        const int nb = cols / 32;
        for (const auto& [r0, r1] : ranges(rows, im.pack.g)) {
          if (r0 == r1) continue;
          // The packed matvec of every token over [r0, r1): the oracle of each column.
          std::vector<kt::Out> ref;
          for (int t = 0; t < 128; ++t)
            ref.push_back(run_matvec(q4, im, P, &xq[(size_t)t * cols], &xd[(size_t)t * nb], cols, r0, r1));
          for (int nt : kTokens) {
            if (nt == 128 && cols >= 4096 && rows > 17) continue;  // the largest case once per kind and op
            const std::string what = std::string(op) + "_" + im.isa + " rows=" + S(rows) + " cols=" + S(cols) +
                                     " " + kKindName[kind] + " r0=" + S(r0) + " r1=" + S(r1) + " tokens=" + S(nt);
            const int ldy = rows + 5;  // odd: columns at every alignment
            Buf<int8_t> bx(xq.size(), 0xFF);
            Buf<float> bxd(xd.size(), 0xFF);
            std::memcpy(bx.data(), xq.data(), (size_t)nt * cols);
            std::memcpy(bxd.data(), xd.data(), (size_t)nt * nb * sizeof(float));
            ml_qbatch X;
            X.q = bx.data();
            X.d = bxd.data();
            X.n = cols;
            X.n_tokens = nt;
            Buf<float> Y((size_t)nt * ldy, 0xA5);
            (q4 ? im.mm4 : im.mm8)(Y.data(), ldy, &P.W, &X, r0, r1);
            std::string diff, guard;
            for (int t = 0; t < nt && diff.empty(); ++t) {
              diff = bits_diff(&Y[(size_t)t * ldy + r0], ref[t].v.data(), (size_t)(r1 - r0));
              if (!diff.empty()) diff = "token " + S(t) + ": " + diff;
            }
            // Every byte of Y's allocation outside rows [r0, r1) of each column keeps its guard.
            const long start = (long)(reinterpret_cast<const unsigned char*>(Y.data()) - Y.mem.data());
            for (long i = 0; i < (long)Y.mem.size() && guard.empty(); ++i) {
              const long e = i >= start ? (i - start) / (long)sizeof(float) : -1;  // float index in Y
              const bool inside = e >= 0 && e < (long)nt * ldy && e % ldy >= r0 && e % ldy < r1;
              if (!inside && Y.mem[i] != 0xA5) guard = "wrote outside rows [r0, r1) of its columns (Y[" + S((int)e) + "])";
            }
            kt::expect(what + " vs packed matvec per token (bit-exact)", diff);
            kt::expect(what, guard);
          }
        }
      }
}

}  // namespace

TEST_CASE("kernels: packed matvec_q8_pk / matvec_q4_pk vs scalar row-major", "[kernels][packed]") {
  for (const PkImpl& im : runnable_pk_impls()) {
    if (im.pack.pack_q8) check_matvec_pk(im, false);
    else WARN(im.isa << " leaves Q8 row-major (pack.pack_q8 false): its Q8 packed ops are not tested");
    check_matvec_pk(im, true);
  }
}

TEST_CASE("kernels: packed matmul_q8_pk / matmul_q4_pk vs packed matvec", "[kernels][packed]") {
  for (const PkImpl& im : runnable_pk_impls()) {
    if (im.pack.pack_q8) check_matmul_pk(im, false);
    check_matmul_pk(im, true);
  }
}

// Thread splits hand each thread a row range; every row-major matvec must give y[r] the same bits
// whichever range computed it (scalar included: it is the reference of everything else).
template <class Fn>
void check_range_independent(const char* op, bool q4, const std::vector<kt::Impl<Fn>>& all) {
  std::vector<kt::Impl<Fn>> impls;
  for (const auto& im : all)
    if (std::strcmp(im.isa, "scalar") == 0) impls.push_back(im);
  for (const auto& im : kt::ports(all, op)) impls.push_back(im);
  for (const auto& im : impls)
    for (int rows : {17, 64})
      for (int cols : {96, 256})
        for (Kind kind : {kScaledF32, kScaledF16}) {
          Rng rng(seed_of({rows, cols, kind, q4, 3}));
          const Matrix m = make_matrix(rows, cols, q4, kind, rng);
          std::vector<int8_t> xq;
          std::vector<float> xd;
          make_acts(cols, 1, kind, rng, &xq, &xd);
          Packed P(m, ml_pack_params{4, 0, 0, false, true});  // only the row-major buffers are used
          ml_qact x;
          x.q = xq.data();
          x.d = xd.data();
          x.n = cols;
          std::vector<float> full(rows);
          im.fn(full.data(), &P.W, &x, 0, rows);
          const int sub[][2] = {{1, 5}, {3, 4}, {4, 16}, {5, rows}, {rows - 1, rows}, {0, 7}, {8, rows - 3}, {2, 3}};
          for (const auto& s : sub) {
            Buf<float> y(rows, 0xA5);
            im.fn(y.data(), &P.W, &x, s[0], s[1]);
            const kt::Out o = kt::take(y, s[0], s[1]);
            const std::string what = std::string(im.name) + " rows=" + S(rows) + " cols=" + S(cols) + " " +
                                     kKindName[kind] + " range [" + S(s[0]) + ", " + S(s[1]) + ") vs [0, rows)";
            kt::expect(what, o.guard);
            kt::expect(what, bits_diff(o.v.data(), full.data() + s[0], o.v.size()));
          }
        }
}

TEST_CASE("kernels: row-major matvec bits do not depend on the row range", "[kernels]") {
  check_range_independent("matvec_q8", false, kt::impls_matvec_q8());
  check_range_independent("matvec_q4", true, kt::impls_matvec_q4());
}
