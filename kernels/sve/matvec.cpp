// SVE row-major Q8/Q4 matvecs and the Q8 cache scores, vector-length agnostic: a 32-value block is
// covered by svcntb()-byte predicated loads (svwhilelt: one pass at 256 bits and up, two at 128),
// each svdot_s32 into int32 lanes, then one svaddv per block: the block sum is exact at any vector
// length. Per row, acc += (float)isum * (d_w * d_x) block by block, the scalar kernel's float
// operations, so y[r] equals ml_k_matvec_q*_scalar bit for bit. The packed kernels are
// neon_dotprod's (spec/architecture.txt).
#include <arm_sve.h>

#include "kernels/sve/sve.h"

namespace {

// Sum of a[i] * b[i], i < len (any len), exact.
inline int32_t dot_i8(const int8_t* a, const int8_t* b, int len) {
  svint32_t acc = svdup_n_s32(0);
  const int vl = (int)svcntb();
  for (int i = 0; i < len; i += vl) {
    const svbool_t pg = svwhilelt_b8_s32(i, len);
    acc = svdot_s32(acc, svld1_s8(pg, a + i), svld1_s8(pg, b + i));
  }
  return (int32_t)svaddv_s32(svptrue_b32(), acc);
}

// A Q4 block (16 bytes) times 32 activations: the bytes are loaded twice, as values 0..15 (low
// nibbles) and 16..31 (high nibbles), each minus 8.
inline int32_t dot_q4_block(const uint8_t* w, const int8_t* x) {
  svint32_t acc = svdup_n_s32(0);
  const int vl = (int)svcntb();
  for (int i = 0; i < 16; i += vl) {
    const svbool_t pg = svwhilelt_b8_s32(i, 16);
    const svuint8_t b = svld1_u8(pg, w + i);
    const svint8_t lo = svsub_n_s8_x(pg, svreinterpret_s8_u8(svand_n_u8_x(pg, b, 0x0F)), 8);
    const svint8_t hi = svsub_n_s8_x(pg, svreinterpret_s8_u8(svlsr_n_u8_x(pg, b, 4)), 8);
    acc = svdot_s32(acc, svsel_s8(pg, lo, svdup_n_s8(0)), svld1_s8(pg, x + i));
    acc = svdot_s32(acc, svsel_s8(pg, hi, svdup_n_s8(0)), svld1_s8(pg, x + 16 + i));
  }
  return (int32_t)svaddv_s32(svptrue_b32(), acc);
}

}  // namespace

extern "C" void ml_k_matvec_q8_sve(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  const int cols = W->cols, nb = cols / ML_QK;
  const int8_t* wq = static_cast<const int8_t*>(W->q);
  for (int r = r0; r < r1; ++r) {
    const int8_t* wr = wq + (size_t)r * (size_t)cols;
    float acc = 0.0f;
    for (int b = 0; b < nb; ++b) {
      const int32_t isum = dot_i8(wr + b * ML_QK, x->q + b * ML_QK, ML_QK);
      acc += (float)isum * (ml_qtensor_scale(W, (size_t)r * nb + b) * x->d[b]);
    }
    y[r] = acc;
  }
}

extern "C" void ml_k_matvec_q4_sve(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1) {
  const int cols = W->cols, nb = cols / ML_QK;
  const uint8_t* wq = static_cast<const uint8_t*>(W->q);
  for (int r = r0; r < r1; ++r) {
    const uint8_t* wr = wq + (size_t)r * (size_t)(cols / 2);
    float acc = 0.0f;
    for (int b = 0; b < nb; ++b) {
      const int32_t isum = dot_q4_block(wr + b * (ML_QK / 2), x->q + b * ML_QK);
      acc += (float)isum * (ml_qtensor_scale(W, (size_t)r * nb + b) * x->d[b]);
    }
    y[r] = acc;
  }
}

extern "C" void ml_k_dot_q8_sve(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd, size_t k_stride,
                                size_t d_stride, int n_rows, int head_dim) {
  for (int j = 0; j < n_rows; ++j)
    s[j] = (float)dot_i8(K + (size_t)j * k_stride, q, head_dim) * (qd * Kd[(size_t)j * d_stride]);
}
