// Matrix products over quantized weights, split by rows across the pool: the packed kernels when
// the matrix has a packed copy (W->pq), else the row-major ones.
#pragma once
#include "core/pack.h"
#include "core/types.h"
#include "ops/exec.h"

enum ml_wkind : int { ML_W_Q8 = 2, ML_W_Q4 = 3 };  // equals the .mlb dtype codes

// y = W x for all W->rows rows. x->n == W->cols.
void ml_op_matvec(const ml_exec* ex, float* y, const ml_qtensor* W, int wkind, const ml_qact* x);

// Y[t * ldy + r] = (W x_t)[r] for every token of X; each column is bit-identical to ml_op_matvec
// of that token (the packed matmul kernels guarantee it; without them, one matvec per token).
void ml_op_matmul(const ml_exec* ex, float* Y, int ldy, const ml_qtensor* W, int wkind, const ml_qbatch* X);

// Quantizes n activations into q/d (Q8_0) and returns the view a matvec reads.
ml_qact ml_op_quantize(int8_t* q, float* d, const float* x, int n);

// The packing parameters of this build's kernels (g = 0: no packed kernels).
ml_pack_params ml_op_pack_params();
