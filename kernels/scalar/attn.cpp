// Scalar attention kernels over the three KV-cache layouts (F32, Q8 with one scale per cached
// row, F16): scores (dot_*) and the weighted sum of values (axpy_*). Contract (kernels/ops.h):
// rows j < n_rows of a cache start at j * stride elements; only head_dim values of each row
// are read; s[j] for j < n_rows and out[i] for i < head_dim are the only writes; no
// allocation, no global state. Float dots in kernels/numerics.h's canonical order (16 partial
// sums); axpys add rows in order j = 0, 1, ...; Q8 dots are exact int32.
#include "core/half.h"
#include "kernels/numerics.h"
#include "kernels/scalar/scalar.h"

// s[j] = sum_i q[i] * K[j*k_stride + i]
extern "C" void ml_k_dot_f32_scalar(float* s, const float* q, const float* K, size_t k_stride, int n_rows,
                                    int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    s[j] = ml_k_dot_canonical(q, K + (size_t)j * k_stride, head_dim);
  }
}

// out[i] = out[i] + sum_j w[j] * V[j*v_stride + i], rows added in order j = 0, 1, ...
extern "C" void ml_k_axpy_f32_scalar(float* out, const float* w, const float* V, size_t v_stride, int n_rows,
                                     int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const float* v = V + (size_t)j * v_stride;
    const float wj = w[j];
    for (int i = 0; i < head_dim; ++i) out[i] = out[i] + wj * v[i];
  }
}

// s[j] = (float)(int32 sum_i q[i] * K[j*k_stride + i]) * (qd * Kd[j*d_stride])
extern "C" void ml_k_dot_q8_scalar(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd,
                                   size_t k_stride, size_t d_stride, int n_rows, int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const int8_t* k = K + (size_t)j * k_stride;
    int32_t isum = 0;  // head_dim * 127 * 127 stays below 2^31 for head_dim < 133000
    for (int i = 0; i < head_dim; ++i) isum += (int32_t)q[i] * (int32_t)k[i];
    s[j] = (float)isum * (qd * Kd[(size_t)j * d_stride]);
  }
}

// out[i] = out[i] + sum_j (w[j] * Vd[j*d_stride]) * V[j*v_stride + i]
extern "C" void ml_k_axpy_q8_scalar(float* out, const float* w, const int8_t* V, const float* Vd, size_t v_stride,
                                    size_t d_stride, int n_rows, int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const int8_t* v = V + (size_t)j * v_stride;
    const float wj = w[j] * Vd[(size_t)j * d_stride];
    for (int i = 0; i < head_dim; ++i) out[i] = out[i] + wj * (float)v[i];
  }
}

// As dot_f32 with K's halves widened exactly to float.
extern "C" void ml_k_dot_f16_scalar(float* s, const float* q, const uint16_t* K, size_t k_stride, int n_rows,
                                    int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const uint16_t* k = K + (size_t)j * k_stride;
    float P[ML_K_SUM_LANES] = {};
    for (int i = 0; i < head_dim; ++i) P[i % ML_K_SUM_LANES] = P[i % ML_K_SUM_LANES] + q[i] * ml_half_to_float(k[i]);
    s[j] = ml_k_sum16_reduce(P);
  }
}

// As axpy_f32 with V's halves widened exactly to float.
extern "C" void ml_k_axpy_f16_scalar(float* out, const float* w, const uint16_t* V, size_t v_stride, int n_rows,
                                     int head_dim) {
  for (int j = 0; j < n_rows; ++j) {
    const uint16_t* v = V + (size_t)j * v_stride;
    const float wj = w[j];
    for (int i = 0; i < head_dim; ++i) out[i] = out[i] + wj * ml_half_to_float(v[i]);
  }
}

extern "C" void ml_k_f32_to_f16_scalar(uint16_t* dst, const float* src, int n) {
  for (int i = 0; i < n; ++i) dst[i] = ml_float_to_half(src[i]);
}
