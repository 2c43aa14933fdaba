#include "ops/matvec.h"

#include "kernels/bind.h"

void ml_op_matvec(float* y, const ml_qtensor* W, int wkind, const ml_qact* x) {
  if (wkind == ML_W_Q4)
    ml::k::active::matvec_q4(y, W, x, 0, W->rows);
  else
    ml::k::active::matvec_q8(y, W, x, 0, W->rows);
}

ml_qact ml_op_quantize(int8_t* q, float* d, const float* x, int n) {
  ml::k::active::quantize_q8(q, d, x, n);
  ml_qact a;
  a.q = q;
  a.d = d;
  a.n = n;
  return a;
}
