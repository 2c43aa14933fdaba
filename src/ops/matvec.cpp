#include "ops/matvec.h"

#include "kernels/bind.h"
#include "ops/parallel.h"

namespace k = ml::k::active;

namespace {

struct matmul_task {
  float* y;
  int ldy;
  const ml_qtensor* W;
  const ml_qbatch* X;
  int rows_per_chunk;  // a multiple of the pack group
};

// Rows [r0, r1) of Y for every token.
void run_rows(const matmul_task& t, int r0, int r1) {
  if (r0 >= r1) return;
  const ml_qtensor* W = t.W;
  const ml_qbatch* X = t.X;
#ifdef ML_K_PACKED
  if (W->pq) {
    if (X->n_tokens == 1) {
      ml_qact x;
      x.q = X->q;
      x.d = X->d;
      x.n = X->n;
      if (t.W->type == ML_DT_Q4) k::matvec_q4_pk(t.y, W, &x, r0, r1);
      else k::matvec_q8_pk(t.y, W, &x, r0, r1);
    } else {
      if (t.W->type == ML_DT_Q4) k::matmul_q4_pk(t.y, t.ldy, W, X, r0, r1);
      else k::matmul_q8_pk(t.y, t.ldy, W, X, r0, r1);
    }
    return;
  }
#endif
  for (int tok = 0; tok < X->n_tokens; ++tok) {
    ml_qact x;
    x.q = X->q + (size_t)tok * X->n;
    x.d = X->d + (size_t)tok * (X->n / ML_QK);
    x.n = X->n;
    float* y = t.y + (size_t)tok * t.ldy;
    if (t.W->type == ML_DT_Q4) k::matvec_q4(y, W, &x, r0, r1);
    else k::matvec_q8(y, W, &x, r0, r1);
  }
}

void matmul_worker(void* ctx, int thread, int n_threads) {
  const matmul_task& t = *static_cast<const matmul_task*>(ctx);
  (void)n_threads;
  const int r0 = thread * t.rows_per_chunk;
  const int r1 = r0 + t.rows_per_chunk < t.W->rows ? r0 + t.rows_per_chunk : t.W->rows;
  run_rows(t, r0, r1);
}

}  // namespace

void ml_op_matmul(ml_pool* pool, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X) {
  const int n_threads = ml_pool_size(pool);
  matmul_task t{Y, ldy, W, X, W->rows};
  const double macs = (double)W->rows * W->cols * X->n_tokens;
  if (n_threads == 1 || macs < ML_PARALLEL_MIN_MACS) {
    run_rows(t, 0, W->rows);
    return;
  }
  const int g = k::pack.g > 4 ? k::pack.g : 4;
  const int groups = (W->rows + g - 1) / g;
  t.rows_per_chunk = (groups + n_threads - 1) / n_threads * g;
  ml_pool_run(pool, matmul_worker, &t);
}

void ml_op_matvec(ml_pool* pool, float* y, const ml_qtensor* W, const ml_qact* x) {
  ml_qbatch b;
  b.q = x->q;
  b.d = x->d;
  b.n = x->n;
  b.n_tokens = 1;
  ml_op_matmul(pool, y, W->rows, W, &b);
}

ml_qact ml_op_quantize(int8_t* q, float* d, const float* x, int n) {
  k::quantize_q8(q, d, x, n);
  ml_qact a;
  a.q = q;
  a.d = d;
  a.n = n;
  return a;
}

ml_pack_params ml_op_pack_params() {
#ifdef ML_K_PACKED
  return k::pack;
#else
  return ml_pack_params{};
#endif
}
