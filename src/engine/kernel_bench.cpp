// The kernel benchmark behind ml_bench's table (krafla.h, ml_bench_kernels): single-thread
// throughput of this build's bound kernels -- row-major matvec Q8/Q4 at the shapes of
// spec/testing.txt, the packed matvec and the 128-token packed matmul next to them, quantize_q8,
// and the sampler (sampler_bench.cpp).
// Timings are the best of several repetitions; the machine is shared, so compare two builds by
// running them alternately (docs/benchmarks.md).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/pack.h"
#include "core/quant_ref.h"
#include "core/status.h"
#include "kernels/bind.h"
#include "best_seconds.h"
#include "krafla.h"
#include "sampler_bench.h"

namespace {

namespace k = ml::k::active;

using ml::bench::best_seconds;

// A zeroed malloc'd array (the core has no exceptions: a failed allocation is a status).
template <class T>
struct buf {
  T* p = nullptr;
  size_t n = 0;
  bool alloc(size_t count) {
    n = count;
    p = static_cast<T*>(std::calloc(count ? count : 1, sizeof(T)));
    return p != nullptr;
  }
  ~buf() { std::free(p); }
  T* data() { return p; }
};

uint64_t g_state = 0x243F6A8885A308D3ull;
float frand() {  // xorshift64*, uniform in [-1, 1)
  g_state ^= g_state >> 12;
  g_state ^= g_state << 25;
  g_state ^= g_state >> 27;
  return (float)((double)((g_state * 0x2545F4914F6CDD1Dull) >> 11) / 4503599627370496.0 - 1.0);
}

struct matrix {
  buf<uint8_t> q;
  buf<float> d;
  ml_qtensor t;
};

bool make_matrix(matrix* m, int rows, int cols, bool q4) {
  buf<float> w;
  if (!w.alloc((size_t)cols) || !m->q.alloc((size_t)rows * cols / (q4 ? 2 : 1)) || !m->d.alloc((size_t)rows * cols / 32))
    return false;
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < cols; ++i) w.p[i] = frand();
    if (q4)
      ml_quantize_q4_ref(m->q.p + (size_t)r * cols / 2, m->d.p + (size_t)r * cols / 32, w.p, cols);
    else
      ml_quantize_q8_ref(reinterpret_cast<int8_t*>(m->q.p) + (size_t)r * cols, m->d.p + (size_t)r * cols / 32, w.p,
                         cols);
  }
  m->t.type = q4 ? ML_DT_Q4 : ML_DT_Q8;
  m->t.q = m->q.p;
  m->t.d = m->d.p;
  m->t.rows = rows;
  m->t.cols = cols;
  return true;
}

struct reporter {
  ml_kernel_bench_cb cb;
  void* user;
  void row(const char* op, const char* kernel, int rows, int cols, int tokens, double sec, double bytes,
           double ops) const {
    ml_kernel_bench_row r{op, kernel, rows, cols, tokens, sec * 1e9, bytes / sec / 1e9, ops / sec / 1e9};
    cb(user, &r);
  }
};

// The packed matvec of one token and the packed matmul of kMatmulTokens tokens on m (packed here
// with the build's layout); nothing in builds without packed kernels. GOPS count every token.
constexpr int kMatmulTokens = 128;
ml_status bench_packed(const reporter& out, matrix& m, bool q4, int rows, int cols, const int8_t* xq, const float* xd,
                       int reps, double min_s, ml_error* err) {
#ifdef ML_K_PACKED
  const ml_pack_params p = k::pack;
  if (!q4 && !p.pack_q8) return ML_OK;
  size_t qb = 0, db = 0;
  if (!ml_pack_sizes(q4 ? ML_DT_Q4 : ML_DT_Q8, rows, cols, false, &p, &qb, &db)) return ML_OK;
  buf<uint8_t> pq, pd;
  buf<float> y;
  buf<int8_t> bq;
  buf<float> bd;
  if (!pq.alloc(qb) || !pd.alloc(db) || !y.alloc((size_t)rows * kMatmulTokens) ||
      !bq.alloc((size_t)cols * kMatmulTokens) || !bd.alloc((size_t)cols / 32 * kMatmulTokens))
    return ml_fail(err, ML_E_NOMEM, "kernel benchmark: cannot allocate the packed %d x %d matrix", rows, cols);
  ml_pack_matrix(&m.t, &p, pq.p, pd.p);
  ml_qact a;
  a.q = xq;
  a.d = xd;
  a.n = cols;
  double sec = best_seconds(
      [&] {
        if (q4) k::matvec_q4_pk(y.p, &m.t, &a, 0, rows);
        else k::matvec_q8_pk(y.p, &m.t, &a, 0, rows);
      },
      reps, min_s);
  const double wbytes = (double)qb + (double)db;
  out.row(q4 ? "matvec_q4_pk" : "matvec_q8_pk", q4 ? k::matvec_q4_pk_name : k::matvec_q8_pk_name, rows, cols, 1, sec,
          wbytes + cols, 2.0 * rows * cols);
  // 128 tokens: the activations repeated (the kernel's work does not depend on their values).
  for (int t = 0; t < kMatmulTokens; ++t) {
    std::memcpy(bq.p + (size_t)t * cols, xq, (size_t)cols);
    std::memcpy(bd.p + (size_t)t * (cols / 32), xd, (size_t)cols / 32 * sizeof(float));
  }
  ml_qbatch X;
  X.q = bq.p;
  X.d = bd.p;
  X.n = cols;
  X.n_tokens = kMatmulTokens;
  sec = best_seconds(
      [&] {
        if (q4) k::matmul_q4_pk(y.p, rows, &m.t, &X, 0, rows);
        else k::matmul_q8_pk(y.p, rows, &m.t, &X, 0, rows);
      },
      reps, min_s);
  out.row(q4 ? "matmul_q4_pk" : "matmul_q8_pk", q4 ? k::matmul_q4_pk_name : k::matmul_q8_pk_name, rows, cols,
          kMatmulTokens, sec, wbytes + (double)cols * kMatmulTokens, 2.0 * rows * cols * kMatmulTokens);
  m.t.pq = m.t.pd = nullptr;
#else
  (void)out, (void)m, (void)q4, (void)rows, (void)cols, (void)xq, (void)xd, (void)reps, (void)min_s, (void)err;
#endif
  return ML_OK;
}

}  // namespace

extern "C" {

void ml_build_bindings(ml_binding_cb cb, void* user) {
#define ML_REPORT_BINDING(op) cb(user, #op, k::op##_name);
  ML_K_OPS(ML_REPORT_BINDING)
#ifdef ML_K_F16_HEADS
  ML_K_F16_HEADS_OPS(ML_REPORT_BINDING)
#endif
#ifdef ML_K_PACKED
  ML_K_PK_OPS(ML_REPORT_BINDING)
#endif
#undef ML_REPORT_BINDING
}

ml_status ml_bench_kernels(int reps, double min_seconds, ml_kernel_bench_cb cb, void* user, ml_error* err) {
  if (reps < 1 || !(min_seconds > 0)) return ml_fail(err, ML_E_ARG, "kernel benchmark: reps and time must be positive");
  const reporter out{cb, user};
  struct shape {
    int rows, cols;
  };
  const shape shapes[] = {{768, 768}, {4096, 4096}, {4864, 896}, {896, 4864}};
  for (bool q4 : {false, true}) {
    for (const shape& s : shapes) {
      matrix m;
      buf<float> x, y, xd;
      buf<int8_t> xq;
      if (!make_matrix(&m, s.rows, s.cols, q4) || !x.alloc((size_t)s.cols) || !y.alloc((size_t)s.rows) ||
          !xq.alloc((size_t)s.cols) || !xd.alloc((size_t)s.cols / 32))
        return ml_fail(err, ML_E_NOMEM, "kernel benchmark: cannot allocate the %d x %d matrix", s.rows, s.cols);
      for (int i = 0; i < s.cols; ++i) x.p[i] = frand();
      ml_quantize_q8_ref(xq.p, xd.p, x.p, (size_t)s.cols);
      ml_qact a;
      a.q = xq.p;
      a.d = xd.p;
      a.n = s.cols;
      const double sec = best_seconds(
          [&] {
            if (q4) k::matvec_q4(y.p, &m.t, &a, 0, s.rows);
            else k::matvec_q8(y.p, &m.t, &a, 0, s.rows);
          },
          reps, min_seconds);
      const double bytes = (double)m.q.n + (double)m.d.n * 4 + (double)s.cols;
      out.row(q4 ? "matvec_q4" : "matvec_q8", q4 ? k::matvec_q4_name : k::matvec_q8_name, s.rows, s.cols, 1, sec, bytes,
              2.0 * s.rows * s.cols);
      ML_TRY(bench_packed(out, m, q4, s.rows, s.cols, xq.p, xd.p, reps, min_seconds, err));
    }
  }
  buf<float> x, d;
  buf<int8_t> q;
  if (!x.alloc(4096) || !q.alloc(4096) || !d.alloc(4096 / 32))
    return ml_fail(err, ML_E_NOMEM, "kernel benchmark: cannot allocate the activations");
  for (int i = 0; i < 4096; ++i) x.p[i] = frand();
  const double sec = best_seconds([&] { k::quantize_q8(q.p, d.p, x.p, 4096); }, reps, min_seconds);
  out.row("quantize_q8", k::quantize_q8_name, 1, 4096, 1, sec, 4096.0 * 4, 0);
  return ml_bench_sampler(reps, min_seconds, cb, user, err);
}

}  // extern "C"
