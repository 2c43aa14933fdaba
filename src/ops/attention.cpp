#include "ops/attention.h"

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_ref.h"
#include "kernels/bind.h"

namespace k = ml::k::active;

void ml_op_kv_store(const ml_kv_layer* L, const ml_attn_shape* s, int pos, const float* kx, const float* vx) {
  const size_t kv_dim = (size_t)s->n_kv_heads * s->head_dim;
  const size_t row = (size_t)pos * kv_dim;
  switch (s->kv) {
    case ML_KV_F32:
      std::memcpy(static_cast<float*>(L->k) + row, kx, kv_dim * sizeof(float));
      std::memcpy(static_cast<float*>(L->v) + row, vx, kv_dim * sizeof(float));
      break;
    case ML_KV_F16: {
      uint16_t* kd = static_cast<uint16_t*>(L->k) + row;
      uint16_t* vd = static_cast<uint16_t*>(L->v) + row;
      for (size_t i = 0; i < kv_dim; ++i) {
        kd[i] = ml_float_to_half(kx[i]);
        vd[i] = ml_float_to_half(vx[i]);
      }
      break;
    }
    case ML_KV_Q8:
      for (int h = 0; h < s->n_kv_heads; ++h) {
        const size_t off = row + (size_t)h * s->head_dim;
        const size_t si = (size_t)pos * s->n_kv_heads + h;
        ml_quantize_row_q8_ref(static_cast<int8_t*>(L->k) + off, L->k_scale + si, kx + (size_t)h * s->head_dim,
                               s->head_dim);
        ml_quantize_row_q8_ref(static_cast<int8_t*>(L->v) + off, L->v_scale + si, vx + (size_t)h * s->head_dim,
                               s->head_dim);
      }
      break;
  }
}

void ml_op_attention(float* out, const float* q, const ml_kv_layer* L, const ml_attn_shape* s, int n_pos,
                     float* scores, int8_t* qq) {
  const int hd = s->head_dim;
  const int group = s->n_heads / s->n_kv_heads;
  const size_t kv_dim = (size_t)s->n_kv_heads * hd;
  const float inv_sqrt = 1.0f / std::sqrt((float)hd);
  for (int h = 0; h < s->n_heads; ++h) {
    const float* qh = q + (size_t)h * hd;
    float* oh = out + (size_t)h * hd;
    const size_t kvh = (size_t)(h / group);
    switch (s->kv) {
      case ML_KV_F32:
        k::dot_f32(scores, qh, static_cast<const float*>(L->k) + kvh * hd, kv_dim, n_pos, hd);
        break;
      case ML_KV_F16:
        k::dot_f16(scores, qh, static_cast<const uint16_t*>(L->k) + kvh * hd, kv_dim, n_pos, hd);
        break;
      case ML_KV_Q8: {
        float qd;
        ml_quantize_row_q8_ref(qq, &qd, qh, hd);
        k::dot_q8(scores, qq, qd, static_cast<const int8_t*>(L->k) + kvh * hd, L->k_scale + kvh, kv_dim,
                  s->n_kv_heads, n_pos, hd);
        break;
      }
    }
    for (int j = 0; j < n_pos; ++j) scores[j] *= inv_sqrt;
    k::softmax(scores, n_pos);
    std::memset(oh, 0, (size_t)hd * sizeof(float));
    switch (s->kv) {
      case ML_KV_F32:
        k::axpy_f32(oh, scores, static_cast<const float*>(L->v) + kvh * hd, kv_dim, n_pos, hd);
        break;
      case ML_KV_F16:
        k::axpy_f16(oh, scores, static_cast<const uint16_t*>(L->v) + kvh * hd, kv_dim, n_pos, hd);
        break;
      case ML_KV_Q8:
        k::axpy_q8(oh, scores, static_cast<const int8_t*>(L->v) + kvh * hd, L->v_scale + kvh, kv_dim, s->n_kv_heads,
                   n_pos, hd);
        break;
    }
  }
}
