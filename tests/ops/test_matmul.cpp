// test_matmul: ml_op_matmul_n (src/ops/matvec.h), the products of several matrices with the same
// activations in one wake of the pool, against the scalar row-major matvec of each matrix and
// token (kernels/scalar; itself held to a double reference by test_kernels). Matrices of Q8 and
// Q4, row counts that are not multiples of the pack group, one token (decode: the packed matvec)
// and five (the packed matmul), null pool and 1 to 3 threads: every output must equal the
// scalar product bit for bit, and nothing past a matrix's rows may be written.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/pack.h"
#include "core/threads.h"
#include "kernels/bind.h"
#include "ops/matvec.h"
#include "ops/parallel.h"

namespace {

constexpr float kGuard = -12345.0f;  // written past each output's rows; must survive

// One random matrix, row-major (quants, float scales) and, where this build packs, packed.
struct TestMatrix {
  std::vector<int8_t> q;      // Q8: rows * cols quants; Q4: rows * cols / 2 bytes of nibbles
  std::vector<float> d;       // rows * cols / 32 scales
  std::vector<uint8_t> pq, pd;
  ml_qtensor W;
  TestMatrix(std::mt19937& rng, int type, int rows, int cols) {
    const size_t n = (size_t)rows * cols;
    q.resize(type == ML_DT_Q4 ? n / 2 : n);
    d.resize(n / 32);
    std::uniform_int_distribution<int> qi(-127, 127);
    std::uniform_real_distribution<float> du(0.001f, 0.05f);
    for (auto& v : q) v = (int8_t)qi(rng);
    for (auto& v : d) v = du(rng);
    W.type = type;
    W.q = q.data();
    W.d = d.data();
    W.rows = rows;
    W.cols = cols;
    const ml_pack_params p = ml_op_pack_params();
    if (p.g > 0 && (type == ML_DT_Q4 || p.pack_q8)) {
      size_t qb = 0, db = 0;
      REQUIRE(ml_pack_sizes(type, rows, cols, false, &p, &qb, &db));
      pq.resize(qb);
      pd.resize(db);
      ml_pack_matrix(&W, &p, pq.data(), pd.data());
    }
  }
};

// The scalar row-major product of every row for token t of x.
std::vector<float> scalar_product(const TestMatrix& m, const ml_qbatch& x, int t) {
  std::vector<float> y((size_t)m.W.rows);
  ml_qact a;
  a.q = x.q + (size_t)t * x.n;
  a.d = x.d + (size_t)t * (x.n / 32);
  a.n = x.n;
  (m.W.type == ML_DT_Q4 ? ml::k::scalar::matvec_q4 : ml::k::scalar::matvec_q8)(y.data(), &m.W, &a, 0, m.W.rows);
  return y;
}

}  // namespace

TEST_CASE("matmul_n: fused products equal each matrix's scalar product, on 0 to 3 threads", "[matmul]") {
  std::vector<ml_pool*> pools = {nullptr};
  for (int n : {1, 2, 3}) {
    if (n > 1 && !ml_pool_threads_built()) continue;  // the single-threaded wasm build
    ml_pool* p = nullptr;
    ml_error err;
    REQUIRE(ml_pool_create(&p, n, &err) == ML_OK);
    pools.push_back(p);
  }
  const int cols = 1024;
  const int rows[] = {37, 16, 301, 5};
  std::mt19937 rng(2026);
  for (int type : {ML_DT_Q8, ML_DT_Q4})
    for (int n_tokens : {1, 5}) {
      std::vector<TestMatrix> mats;
      for (int r : rows) mats.emplace_back(rng, type, r, cols);
      std::vector<int8_t> xq((size_t)n_tokens * cols);
      std::vector<float> xd((size_t)n_tokens * cols / 32);
      std::uniform_int_distribution<int> qi(-127, 127);
      std::uniform_real_distribution<float> du(0.001f, 0.05f);
      for (auto& v : xq) v = (int8_t)qi(rng);
      for (auto& v : xd) v = du(rng);
      ml_qbatch x;
      x.q = xq.data();
      x.d = xd.data();
      x.n = cols;
      x.n_tokens = n_tokens;
      double macs = 0;
      for (int r : rows) macs += (double)r * cols * n_tokens;
      REQUIRE(macs >= ML_PARALLEL_MIN_MACS);  // so the pool is used

      for (ml_pool* pool : pools) {
        INFO((type == ML_DT_Q4 ? "Q4" : "Q8") << ", " << n_tokens << " token(s), " << ml_pool_size(pool)
                                              << " thread(s)" << (pool ? "" : " (null pool)"));
        const int n_outs = (int)mats.size();
        std::vector<std::vector<float>> ys(n_outs);
        std::vector<ml_matmul_out> outs(n_outs);
        for (int i = 0; i < n_outs; ++i) {
          const int ld = mats[i].W.rows + 3;  // 3 guard values after each token's row
          ys[i].assign((size_t)n_tokens * ld, kGuard);
          outs[i] = ml_matmul_out{ys[i].data(), ld, &mats[i].W};
        }
        ml_op_matmul_n(pool, outs.data(), n_outs, &x);
        for (int i = 0; i < n_outs; ++i)
          for (int t = 0; t < n_tokens; ++t) {
            INFO("matrix " << i << " (" << mats[i].W.rows << " rows), token " << t);
            const std::vector<float> want = scalar_product(mats[i], x, t);
            const float* got = ys[i].data() + (size_t)t * outs[i].ldy;
            CHECK(std::memcmp(got, want.data(), want.size() * sizeof(float)) == 0);
            for (int g = 0; g < 3; ++g) CHECK(got[mats[i].W.rows + g] == kGuard);
          }
      }
    }
  for (ml_pool* p : pools) ml_pool_destroy(p);
}
