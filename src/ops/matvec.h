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

// Quantizes n activations into q/d (Q8_0) and returns the view a matvec reads.
ml_qact ml_op_quantize(int8_t* q, float* d, const float* x, int n);

// The packing parameters of this build's kernels (g = 0: no packed kernels).
ml_pack_params ml_op_pack_params();
