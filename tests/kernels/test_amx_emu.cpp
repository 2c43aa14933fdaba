// The amx ISA's tile arithmetic on CPUs without AMX (QEMU does not emulate it, and no session has
// had an AMX CPU yet):
//   1. the emulated tile unit (kernels/amx_tiles.h TilesEmu) against TDPBSUD's definition written
//      out over the source arrays, and the shape errors the hardware refuses with #UD;
//   2. the amx packed matmul (kernels/x86_amx.h) run over TilesEmu (tests/kernels/flagged/
//      amx_emu.cpp) on random and extreme Q8 and Q4 matrices packed with avx512vnni's layout, f32
//      and f16 scales, 1..40 tokens (every remainder of the 16-token tile) and row ranges with
//      partial groups: each token's column must equal, bit for bit, avx512vnni's packed matvec of
//      that token and the scalar row-major matvec, and nothing outside rows [r0, r1) of a column
//      may be written.
// On an AMX CPU, test_packed holds the real ml_k_matmul_q*_pk_amx to the same matvec.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/pack.h"
#include "kernel_check.h"
#include "kernels/amx_tiles.h"
#include "kernels/bind.h"

using ml::k::amx_tiles::Config;
using ml::k::amx_tiles::TilesEmu;

TEST_CASE("amx tiles (emulated): TDPBSUD is signed A times unsigned B (TDPBSSD: signed B), loads honour the stride",
          "[kernels][amx]") {
  kt::Rng rng(18);
  for (int b_signed = 0; b_signed < 2; ++b_signed)
  for (int m : {1, 5, 16})
    for (int kb : {4, 32, 64}) {  // A's bytes per row; B has kb / 4 rows
      Config c;
      c.rows[0] = (uint8_t)m, c.colsb[0] = 64;  // C: m x 16 int32
      c.rows[1] = (uint8_t)m, c.colsb[1] = (uint16_t)kb;
      c.rows[2] = (uint8_t)(kb / 4), c.colsb[2] = 64;
      std::vector<uint8_t> a((size_t)m * 80), b((size_t)kb / 4 * 64);
      std::vector<int32_t> c0((size_t)m * 16), out((size_t)m * 16);
      for (auto& v : a) v = (uint8_t)rng.irange(0, 255);
      for (auto& v : b) v = (uint8_t)rng.irange(0, 255);
      for (auto& v : c0) v = rng.irange(-100000, 100000);
      TilesEmu tl;
      tl.config(c);
      tl.load<0>(c0.data(), 64);
      tl.load<1>(a.data(), 80);  // A's rows 80 bytes apart: the stride is honoured
      tl.load<2>(b.data(), 64);
      if (b_signed) tl.dpbssd<0, 1, 2>();  // tools/amx_variants' signed variants
      else tl.dpbsud<0, 1, 2>();
      tl.store<0>(out.data(), 64);
      REQUIRE_FALSE(tl.fault);
      int bad = 0;
      for (int i = 0; i < m; ++i)
        for (int n = 0; n < 16; ++n) {
          int64_t want = c0[(size_t)i * 16 + n];
          for (int k = 0; k < kb; ++k) {  // A signed (the activations), B unsigned (the weights + 128)
            const uint8_t w = b[(size_t)(k / 4) * 64 + 4 * n + k % 4];
            want += (int64_t)(int8_t)a[(size_t)i * 80 + k] * (b_signed ? (int64_t)(int8_t)w : (int64_t)w);
          }
          bad += out[(size_t)i * 16 + n] != (int32_t)want;
        }
      CHECK(bad == 0);
    }
}

TEST_CASE("amx tiles (emulated): the uses the hardware refuses are faults", "[kernels][amx]") {
  alignas(64) uint8_t buf[16 * 64] = {};
  TilesEmu tl;
  tl.load<0>(buf, 64);  // before any configuration
  CHECK(tl.fault);
  Config c;
  c.rows[0] = 4, c.colsb[0] = 64;
  c.rows[1] = 4, c.colsb[1] = 32;
  c.rows[2] = 4, c.colsb[2] = 64;  // B has 4 rows but A's 32 bytes need 8
  tl = TilesEmu{};
  tl.config(c);
  CHECK_FALSE(tl.fault);
  tl.dpbsud<0, 1, 2>();
  CHECK(tl.fault);
  tl = TilesEmu{};
  tl.config(c);
  tl.load<3>(buf, 64);  // tile 3 not configured
  CHECK(tl.fault);
  c.rows[3] = 17, c.colsb[3] = 64;  // more than 16 rows
  tl = TilesEmu{};
  tl.config(c);
  CHECK(tl.fault);
}

#ifdef ML_TEST_AMX_EMU
extern "C" bool kt_amx_emu_matmul(int q4, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,
                                  int r1);

namespace {

std::string S(int v) { return std::to_string(v); }

enum Kind { kRandomF32, kRandomF16, kExtreme };
const char* const kKindName[] = {"f32-scales", "f16-scales", "extreme"};

// A rows x cols matrix (row-major and packed with avx512vnni's layout) and nt tokens of activations.
struct Case {
  int rows, cols, nt;
  bool q4;
  std::vector<int8_t> q8, xq;
  std::vector<uint8_t> q4b, pq, pd;
  std::vector<float> d, xd;
  std::vector<uint16_t> d16;
  ml_qtensor W;
  Case(int rows_, int cols_, int nt_, bool q4_, Kind kind, kt::Rng& rng) : rows(rows_), cols(cols_), nt(nt_), q4(q4_) {
    const int nb = cols / 32;
    q8.resize((size_t)rows * cols);
    q4b.resize((size_t)rows * cols / 2);
    d.resize((size_t)rows * nb);
    d16.resize(d.size());
    xq.resize((size_t)nt * cols);
    xd.resize((size_t)nt * nb);
    for (size_t i = 0; i < q8.size(); ++i)  // extreme: +-127 blocks against +-127 activations
      q8[i] = kind == kExtreme ? (int8_t)((i / 32) % 2 ? -127 : 127) : (int8_t)rng.irange(-127, 127);
    for (size_t i = 0; i < q4b.size(); ++i) q4b[i] = kind == kExtreme ? (uint8_t)((i / 16) % 2 ? 0x00 : 0xFF) : (uint8_t)rng.irange(0, 255);
    for (size_t i = 0; i < xq.size(); ++i) xq[i] = kind == kExtreme ? (int8_t)((i / 32) % 3 ? 127 : -127) : (int8_t)rng.irange(-127, 127);
    for (size_t i = 0; i < d.size(); ++i) {
      d[i] = kind == kExtreme ? 1.0f : rng.uni(-0.02f, 0.02f);
      d16[i] = ml_float_to_half(d[i]);
    }
    for (auto& v : xd) v = kind == kExtreme ? 1.0f : rng.uni(0.001f, 0.1f);
    W.type = q4 ? ML_DT_Q4 : ML_DT_Q8;
    W.q = q4 ? (const void*)q4b.data() : (const void*)q8.data();
    W.d_f16 = kind != kRandomF32;
    W.d = W.d_f16 ? (const void*)d16.data() : (const void*)d.data();
    W.rows = rows;
    W.cols = cols;
    const ml_pack_params& p = ml::k::avx512vnni::pack;
    size_t qn = 0, dn = 0;
    REQUIRE(ml_pack_sizes(W.type, rows, cols, W.d_f16, &p, &qn, &dn));
    pq.resize(qn);
    pd.resize(dn);
    ml_pack_matrix(&W, &p, pq.data(), pd.data());
  }
};

// Token t over [r0, r1) through a matvec (the packed one of avx512vnni or the scalar row-major one).
template <class Fn>
std::vector<float> matvec(Fn& fn, const Case& c, int t, int r0, int r1) {
  std::vector<float> y(c.rows);
  ml_qact x;
  x.q = &c.xq[(size_t)t * c.cols];
  x.d = &c.xd[(size_t)t * (c.cols / 32)];
  x.n = c.cols;
  fn(y.data(), &c.W, &x, r0, r1);
  return std::vector<float>(y.begin() + r0, y.begin() + r1);
}

// "" or the first difference (bits) of token t's column.
std::string diff(const float* got, const std::vector<float>& want, int t) {
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0)
      return "token " + S(t) + " row +" + S((int)i) + ": got " + std::to_string(got[i]) + " want " + std::to_string(want[i]);
  return "";
}

void check_case(Case& c, int r0, int r1, const std::string& what) {
  const int ldy = c.rows + 3;  // odd: columns at every alignment
  kt::Buf<int8_t> bx(c.xq.size(), 0xFF);
  kt::Buf<float> bxd(c.xd.size(), 0xFF);
  std::memcpy(bx.data(), c.xq.data(), c.xq.size());
  std::memcpy(bxd.data(), c.xd.data(), c.xd.size() * 4);
  ml_qbatch X;
  X.q = bx.data();
  X.d = bxd.data();
  X.n = c.cols;
  X.n_tokens = c.nt;
  kt::Buf<float> Y((size_t)c.nt * ldy, 0xA5);
  kt::expect(what + ": tile use", kt_amx_emu_matmul(c.q4, Y.data(), ldy, &c.W, &X, r0, r1) ? "" : "a tile fault");
  std::string d1, d2;
  for (int t = 0; t < c.nt && d1.empty() && d2.empty(); ++t) {
    const float* col = &Y[(size_t)t * ldy + r0];
    d1 = diff(col, matvec(c.q4 ? ml::k::avx512vnni::matvec_q4_pk : ml::k::avx512vnni::matvec_q8_pk, c, t, r0, r1), t);
    d2 = diff(col, matvec(c.q4 ? ml::k::scalar::matvec_q4 : ml::k::scalar::matvec_q8, c, t, r0, r1), t);
  }
  kt::expect(what + " vs avx512vnni packed matvec (bit-exact)", d1);
  kt::expect(what + " vs scalar row-major matvec (bit-exact)", d2);
  std::string guard;
  const long start = (long)(reinterpret_cast<const unsigned char*>(Y.data()) - Y.mem.data());
  for (long i = 0; i < (long)Y.mem.size() && guard.empty(); ++i) {
    const long e = i >= start ? (i - start) / 4 : -1;
    const bool inside = e >= 0 && e < (long)c.nt * ldy && e % ldy >= r0 && e % ldy < r1;
    if (!inside && Y.mem[i] != 0xA5) guard = "wrote outside rows [r0, r1) of its columns (Y[" + S((int)e) + "])";
  }
  kt::expect(what, guard);
}

}  // namespace

TEST_CASE("amx matmul (emulated tiles) == avx512vnni packed matvec per token", "[kernels][packed][amx]") {
  if (const char* miss = ml_isa_missing("avx512vnni")) {
    WARN("SKIP avx512vnni: cpu lacks " << miss << " (the emulated amx matmul is compiled with its flags)");
    return;
  }
  for (bool q4 : {false, true})
    for (Kind kind : {kRandomF32, kRandomF16, kExtreme})
      for (int rows : {5, 16, 33, 64})
        for (int cols : {32, 160, 2080}) {  // 2080: 65 blocks, past one offsets chunk (64)
          for (int nt : {1, 2, 7, 15, 16, 17, 31, 33, 40}) {
            kt::Rng rng((uint32_t)(rows * 7919 + cols * 31 + nt * 3 + q4 + 1000003 * kind));
            Case c(rows, cols, nt, q4, kind, rng);
            const std::pair<int, int> ranges[] = {{0, rows}, {0, rows - 1}, {16, rows}, {16, 17}, {rows / 16 * 16, rows}};
            for (const auto& [r0, r1] : ranges) {
              if (r0 >= r1 || r1 > rows) continue;
              if (cols == 2080 && !(r0 == 0 && r1 == rows) && nt != 17) continue;  // the long rows: fewer ranges
              check_case(c, r0, r1, std::string(q4 ? "Q4" : "Q8") + " " + kKindName[kind] + " rows=" + S(rows) +
                                        " cols=" + S(cols) + " tokens=" + S(nt) + " r0=" + S(r0) + " r1=" + S(r1));
            }
          }
        }
  // 129 blocks (three offsets chunks) over four groups, 40 tokens (two full tiles and one of 8).
  for (bool q4 : {false, true}) {
    kt::Rng rng(4128 + q4);
    Case c(64, 4128, 40, q4, kRandomF16, rng);
    check_case(c, 0, 64, std::string(q4 ? "Q4" : "Q8") + " rows=64 cols=4128 tokens=40");
  }
}
#endif
