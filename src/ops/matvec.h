// Matrix-vector products over quantized weights, dispatched on the weight type to the build's
// bound kernels (kernels/bind.h). Later issues split the rows across the thread pool here.
#pragma once
#include "core/types.h"

enum ml_wkind : int { ML_W_Q8 = 2, ML_W_Q4 = 3 };  // equals the .mlb dtype codes

// y = W x for all W->rows rows. x->n == W->cols.
void ml_op_matvec(float* y, const ml_qtensor* W, int wkind, const ml_qact* x);

// Quantizes n activations into q/d (Q8_0) and returns the view a matvec reads.
ml_qact ml_op_quantize(int8_t* q, float* d, const float* x, int n);
