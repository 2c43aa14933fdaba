#include "ops/matvec.h"

#include "kernels/bind.h"
#include "ops/parallel.h"

namespace k = ml::k::active;

namespace {

// Rows [r0, r1) of Y = W X for every token (Y's row stride ldy).
void run_rows(float* y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  if (r0 >= r1) return;
#ifdef ML_K_PACKED
  if (W->pq) {
    if (X->n_tokens == 1) {
      ml_qact x;
      x.q = X->q;
      x.d = X->d;
      x.n = X->n;
      if (W->type == ML_DT_Q4) k::matvec_q4_pk(y, W, &x, r0, r1);
      else k::matvec_q8_pk(y, W, &x, r0, r1);
    } else {
      if (W->type == ML_DT_Q4) k::matmul_q4_pk(y, ldy, W, X, r0, r1);
      else k::matmul_q8_pk(y, ldy, W, X, r0, r1);
    }
    return;
  }
#endif
  for (int tok = 0; tok < X->n_tokens; ++tok) {
    ml_qact x;
    x.q = X->q + (size_t)tok * X->n;
    x.d = X->d + (size_t)tok * (X->n / ML_QK);
    x.n = X->n;
    float* yt = y + (size_t)tok * ldy;
    if (W->type == ML_DT_Q4) k::matvec_q4(yt, W, &x, r0, r1);
    else k::matvec_q8(yt, W, &x, r0, r1);
  }
}

struct matmul_task {
  const ml_matmul_out* outs;
  int n_outs;
  const ml_qbatch* X;
  int g;                  // rows per group: a multiple of the pack group
  int groups_per_thread;  // of the matrices' groups taken one after another
};

// The matrices' row groups are numbered one after another; thread i takes the groups
// [i * per, (i + 1) * per) and runs the rows they cover in each matrix.
void matmul_worker(void* ctx, int thread, int n_threads) {
  const matmul_task& t = *static_cast<const matmul_task*>(ctx);
  (void)n_threads;
  const long a = (long)thread * t.groups_per_thread, b = a + t.groups_per_thread;
  long base = 0;  // the first group of matrix i
  for (int i = 0; i < t.n_outs && base < b; ++i) {
    const ml_matmul_out& o = t.outs[i];
    const long groups = (o.W->rows + t.g - 1) / t.g;
    const long lo = a > base ? a : base, hi = b < base + groups ? b : base + groups;
    if (lo < hi) {
      const long r1 = (hi - base) * t.g;
      run_rows(o.y, o.ldy, o.W, t.X, (int)((lo - base) * t.g), r1 < o.W->rows ? (int)r1 : o.W->rows);
    }
    base += groups;
  }
}

}  // namespace

void ml_op_matmul_n(ml_pool* pool, const ml_matmul_out* outs, int n_outs, const ml_qbatch* X) {
  const int n_threads = ml_pool_size(pool);
  double macs = 0;
  long groups = 0;
  const int g = k::pack.g > 4 ? k::pack.g : 4;
  for (int i = 0; i < n_outs; ++i) {
    macs += (double)outs[i].W->rows * outs[i].W->cols * X->n_tokens;
    groups += (outs[i].W->rows + g - 1) / g;
  }
  if (n_threads == 1 || macs < ML_PARALLEL_MIN_MACS) {
    for (int i = 0; i < n_outs; ++i) run_rows(outs[i].y, outs[i].ldy, outs[i].W, X, 0, outs[i].W->rows);
    return;
  }
  matmul_task t{outs, n_outs, X, g, (int)((groups + n_threads - 1) / n_threads)};
  ml_pool_run(pool, matmul_worker, &t);
}

void ml_op_matmul(ml_pool* pool, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X) {
  const ml_matmul_out o{Y, ldy, W};
  ml_op_matmul_n(pool, &o, 1, X);
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
