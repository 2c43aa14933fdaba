// Matrix products over quantized weights, split by rows across the pool: the packed kernels when
// the matrix has a packed copy (W->pq), else the row-major ones.
#pragma once
#include "core/pack.h"
#include "core/types.h"
#include "core/threads.h"

// y = W x for all W->rows rows, by W's type (Q8 or Q4). x->n == W->cols.
void ml_op_matvec(ml_pool* pool, float* y, const ml_qtensor* W, const ml_qact* x);

// Y[t * ldy + r] = (W x_t)[r] for every token of X; each column is bit-identical to ml_op_matvec
// of that token (the packed matmul kernels guarantee it; without them, one matvec per token), so
// a token's result never depends on the other tokens of its batch.
void ml_op_matmul(ml_pool* pool, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X);

// One matrix of a group that reads the same activations: Y[t * ldy + r] = (W x_t)[r].
struct ml_matmul_job {
  float* y;
  int ldy;
  const ml_qtensor* W;
};

// g[t * ld + r] = act(g[t * ld + r]) * u[t * ld + r]: SiLU, or GELU's tanh form.
struct ml_gate_job {
  float* g;
  const float* u;
  int ld;
  bool gelu;
};

// Every job of the group in one pass of the pool (one wake-up and one wait instead of one per
// matrix). Each thread owns an equal run of each matrix's rows, cut into chunks; it computes
// half of what is left of its run at a time, front to back, and a thread that finishes its own
// runs early takes single chunks from the back of the others', so a slower core does not hold
// the rest back and each thread's weights stream in long runs. Each row is computed by the same
// kernel whichever thread takes it, so the results equal one ml_op_matmul per job, and any thread
// count's, bit for bit.
void ml_op_matmul_group(ml_pool* pool, const ml_matmul_job* jobs, int n_jobs, const ml_qbatch* X);

// The gated up-projection of a SwiGLU/GeGLU FFN in one pass of the pool: U = W_up X, then
// G = act(W_gate X) * U, chunk by chunk; G and U have row stride ld, W_gate->rows == W_up->rows.
void ml_op_gated_up(ml_pool* pool, float* G, float* U, int ld, const ml_qtensor* W_gate,
                    const ml_qtensor* W_up, const ml_qbatch* X, bool gelu);

// Quantizes n activations into q/d (Q8_0) and returns the view a matvec reads.
ml_qact ml_op_quantize(int8_t* q, float* d, const float* x, int n);

// The packing parameters of this build's kernels (g = 0: no packed kernels).
ml_pack_params ml_op_pack_params();
