// test_pack_layout: ml_pack_matrix's bytes against core/pack.h's layout formulas, written out here
// one byte at a time (the oracle), for every kind of pack parameters an ISA uses: G 4/8/16, Q8
// offset 0/128, Q4 XOR 0/0x88, step XORs (wasm_simd128's), f16 and f32 scales, rows that leave
// the last group partly padding. The packed kernels' tests (tests/kernels/test_packed.cpp) show
// the kernels read this layout; this one pins the layout itself.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/pack.h"

namespace {

struct Source {
  std::vector<uint8_t> q;  // int8 (Q8) or packed nibbles (Q4), row-major
  std::vector<float> d;
  std::vector<uint16_t> d16;
  ml_qtensor W;
};

Source make_source(int type, int rows, int cols, bool f16, uint32_t seed) {
  Source s;
  const size_t nb = (size_t)rows * cols / ML_QK;
  s.q.resize(type == ML_DT_Q4 ? nb * 16 : nb * 32);
  uint32_t x = seed;
  for (auto& b : s.q) b = (uint8_t)((x = x * 1664525u + 1013904223u) >> 24);
  for (size_t i = 0; i < nb; ++i) {
    const float v = 0.001f * (float)(1 + (i * 37) % 997);
    s.d.push_back(v);
    s.d16.push_back(ml_float_to_half(v));
  }
  s.W.type = type;
  s.W.rows = rows;
  s.W.cols = cols;
  s.W.q = s.q.data();
  s.W.d = f16 ? (const void*)s.d16.data() : (const void*)s.d.data();
  s.W.d_f16 = f16;
  return s;
}

// core/pack.h's formulas, byte by byte.
void expected(const Source& s, const ml_pack_params& p, std::vector<uint8_t>* pq, std::vector<uint8_t>* pd) {
  const ml_qtensor& W = s.W;
  const bool q4 = W.type == ML_DT_Q4;
  const int G = p.g, nb = W.cols / ML_QK, groups = (W.rows + G - 1) / G, steps = q4 ? 4 : 8;
  const bool d16 = p.d16 && W.d_f16;
  pq->assign((size_t)groups * G * nb * (q4 ? 16 : 32), 0);
  pd->assign((size_t)groups * G * nb * (d16 ? 2 : 4), 0);
  for (int g = 0; g < groups; ++g)
    for (int b = 0; b < nb; ++b) {
      for (int st = 0; st < steps; ++st)
        for (int i = 0; i < G; ++i)
          for (int j = 0; j < 4; ++j) {
            const int row = g * G + i;
            uint8_t v;
            if (row >= W.rows) v = q4 ? (uint8_t)(0x88 ^ p.q4_xor) : (uint8_t)p.q8_offset;
            else if (q4) v = s.q[(size_t)row * W.cols / 2 + 16 * b + 4 * st + j] ^ (uint8_t)p.q4_xor;
            else v = (uint8_t)((int8_t)s.q[(size_t)row * W.cols + 32 * b + 4 * st + j] + p.q8_offset);
            v ^= (uint8_t)((q4 ? p.q4_step_xor : p.q8_step_xor) >> (8 * j));
            (*pq)[(((size_t)g * nb + b) * steps + st) * 4 * G + 4 * i + j] = v;
          }
      for (int i = 0; i < G; ++i) {
        const int row = g * G + i;
        const size_t at = ((size_t)g * nb + b) * G + i, from = (size_t)row * nb + b;
        if (d16) {
          const uint16_t h = row < W.rows ? s.d16[from] : 0;
          std::memcpy(pd->data() + 2 * at, &h, 2);
        } else {
          const float f = row < W.rows ? (W.d_f16 ? ml_half_to_float(s.d16[from]) : s.d[from]) : 0.0f;
          std::memcpy(pd->data() + 4 * at, &f, 4);
        }
      }
    }
}

ml_pack_params params(int g, int q8_offset, int q4_xor, bool d16, uint32_t q8_step_xor, uint32_t q4_step_xor) {
  ml_pack_params p;
  p.g = g;
  p.q8_offset = q8_offset;
  p.q4_xor = q4_xor;
  p.d16 = d16;
  p.q8_step_xor = q8_step_xor;
  p.q4_step_xor = q4_step_xor;
  return p;
}

}  // namespace

TEST_CASE("pack layout: ml_pack_matrix writes core/pack.h's formulas byte for byte") {
  const ml_pack_params all[] = {
      params(16, 128, 0, true, 0, 0),                   // avx512vnni
      params(8, 128, 0, true, 0, 0),                    // avx2 / avxvnni
      params(4, 128, 0, false, 0, 0),                   // sse2 / sse41
      params(4, 0, 0x88, false, 0, 0),                  // neon dotprod
      params(4, 0, 0, false, 0x00800080u, 0x80008000u),  // wasm_simd128
  };
  const int shapes[][2] = {{1, 32}, {5, 64}, {16, 96}, {19, 128}, {33, 256}};
  uint32_t seed = 1;
  for (const ml_pack_params& p : all)
    for (int type : {ML_DT_Q8, ML_DT_Q4})
      for (bool f16 : {false, true})
        for (const auto& sh : shapes) {
          CAPTURE(p.g, p.q8_offset, p.q4_xor, p.d16, p.q8_step_xor, p.q4_step_xor, type, f16, sh[0], sh[1]);
          Source s = make_source(type, sh[0], sh[1], f16, seed++);
          std::vector<uint8_t> want_q, want_d;
          expected(s, p, &want_q, &want_d);
          size_t qb = 0, db = 0;
          REQUIRE(ml_pack_sizes(type, sh[0], sh[1], f16, &p, &qb, &db));
          REQUIRE(qb == want_q.size());
          REQUIRE(db == want_d.size());
          std::vector<uint8_t> got_q(qb, 0xA5), got_d(db, 0xA5);
          ml_pack_matrix(&s.W, &p, got_q.data(), got_d.data());
          CHECK(got_q == want_q);
          CHECK(got_d == want_d);
          CHECK(s.W.pq == got_q.data());
          CHECK(s.W.pd == got_d.data());
          CHECK(s.W.pd_f16 == (p.d16 && f16 ? 1 : 0));
        }
}
