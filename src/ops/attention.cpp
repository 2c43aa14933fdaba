#include "ops/attention.h"

#include <cmath>
#include <cstring>

#include "core/quant_ref.h"
#include "kernels/bind.h"
#include "ops/parallel.h"

namespace k = ml::k::active;

void ml_op_kv_store(const ml_kv_layer* L, const ml_attn_shape* s, int pos, const float* kx, const float* vx) {
  const int hd = s->head_dim;
  for (int h = 0; h < s->n_kv_heads; ++h) {
    const size_t row = ml_kv_row(L, h, pos, hd);
    const float* kh = kx + (size_t)h * hd;
    const float* vh = vx + (size_t)h * hd;
    switch (L->type) {
      case ML_KV_F32:
        std::memcpy(static_cast<float*>(L->k) + row, kh, (size_t)hd * sizeof(float));
        std::memcpy(static_cast<float*>(L->v) + row, vh, (size_t)hd * sizeof(float));
        break;
      case ML_KV_F16: {
        k::f32_to_f16(static_cast<uint16_t*>(L->k) + row, kh, hd);
        k::f32_to_f16(static_cast<uint16_t*>(L->v) + row, vh, hd);
        break;
      }
      case ML_KV_Q8: {
        const size_t si = ml_kv_index(L, h, pos);
        ml_quantize_row_q8_ref(static_cast<int8_t*>(L->k) + row, L->k_scale + si, kh, hd);
        ml_quantize_row_q8_ref(static_cast<int8_t*>(L->v) + row, L->v_scale + si, vh, hd);
        break;
      }
    }
  }
}

namespace {

struct attn_task {
  float* out;
  int ldo;
  const float* q;
  int ldq;
  int n_tokens;
  const int* pos;
  const ml_kv_layer* const* caches;
  const ml_attn_shape* s;
  const ml_attn_scratch* scratch;
};

// One token's heads of one KV group over the positions [first, pos] its window allows: scores
// block by block, softmax per head, then the V sum block by block, each block shared by the
// group's heads. Scores are stored from index 0 for position `first`.
void group_attention(const attn_task& t, int tok, int kvh, float* scores, int8_t* qq, float* qd) {
  const ml_attn_shape& s = *t.s;
  const ml_kv_layer* L = t.caches[tok];
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
  const int first = ml_attn_first(t.pos[tok], s.window);
  const int n_pos = t.pos[tok] + 1 - first;
  const int stride = t.scratch->ctx;
  const float* q = t.q + (size_t)tok * t.ldq + (size_t)kvh * group * hd;
  float* out = t.out + (size_t)tok * t.ldo + (size_t)kvh * group * hd;
  const size_t kv0 = ml_kv_row(L, kvh, 0, hd), sc0 = ml_kv_index(L, kvh, 0);  // the head's first row, scale
  if (L->type == ML_KV_Q8)
    for (int g = 0; g < group; ++g) ml_quantize_row_q8_ref(qq + (size_t)g * hd, qd + g, q + (size_t)g * hd, hd);

  for (int b0 = 0; b0 < n_pos; b0 += ML_ATTN_BLOCK) {
    const int len = n_pos - b0 < ML_ATTN_BLOCK ? n_pos - b0 : ML_ATTN_BLOCK;
    const size_t j0 = (size_t)(first + b0);
#ifdef ML_K_F16_HEADS
    if (L->type == ML_KV_F16) {  // each row widened once for the whole group
      const uint16_t* K = static_cast<const uint16_t*>(L->k) + kv0 + j0 * hd;
      k::dot_f16_heads(scores + b0, stride, q, hd, group, K, hd, len, hd);
      continue;
    }
#endif
    for (int g = 0; g < group; ++g) {
      float* sc = scores + (size_t)g * stride + b0;
      switch (L->type) {
        case ML_KV_F32:
          k::dot_f32(sc, q + (size_t)g * hd, static_cast<const float*>(L->k) + kv0 + j0 * hd, hd, len, hd);
          break;
        case ML_KV_F16:
          k::dot_f16(sc, q + (size_t)g * hd, static_cast<const uint16_t*>(L->k) + kv0 + j0 * hd, hd, len, hd);
          break;
        case ML_KV_Q8:
          k::dot_q8(sc, qq + (size_t)g * hd, qd[g], static_cast<const int8_t*>(L->k) + kv0 + j0 * hd,
                    L->k_scale + sc0 + j0, hd, 1, len, hd);
          break;
      }
    }
  }
  for (int g = 0; g < group; ++g) {
    float* sc = scores + (size_t)g * stride;
    for (int j = 0; j < n_pos; ++j) sc[j] *= s.scale;
    k::softmax(sc, n_pos);
    std::memset(out + (size_t)g * hd, 0, (size_t)hd * sizeof(float));
  }
  for (int b0 = 0; b0 < n_pos; b0 += ML_ATTN_BLOCK) {
    const int len = n_pos - b0 < ML_ATTN_BLOCK ? n_pos - b0 : ML_ATTN_BLOCK;
    const size_t j0 = (size_t)(first + b0);
#ifdef ML_K_F16_HEADS
    if (L->type == ML_KV_F16) {
      const uint16_t* V = static_cast<const uint16_t*>(L->v) + kv0 + j0 * hd;
      k::axpy_f16_heads(out, hd, scores + b0, stride, group, V, hd, len, hd);
      continue;
    }
#endif
    for (int g = 0; g < group; ++g) {
      const float* w = scores + (size_t)g * stride + b0;
      float* o = out + (size_t)g * hd;
      switch (L->type) {
        case ML_KV_F32:
          k::axpy_f32(o, w, static_cast<const float*>(L->v) + kv0 + j0 * hd, hd, len, hd);
          break;
        case ML_KV_F16:
          k::axpy_f16(o, w, static_cast<const uint16_t*>(L->v) + kv0 + j0 * hd, hd, len, hd);
          break;
        case ML_KV_Q8:
          k::axpy_q8(o, w, static_cast<const int8_t*>(L->v) + kv0 + j0 * hd, L->v_scale + sc0 + j0, hd, 1, len, hd);
          break;
      }
    }
  }
}

// Work items are (token, KV head) pairs, split into contiguous ranges per thread.
void attention_worker(void* ctx, int thread, int n_threads) {
  const attn_task& t = *static_cast<const attn_task*>(ctx);
  const int n_items = t.n_tokens * t.s->n_kv_heads;
  const int per = (n_items + n_threads - 1) / n_threads;
  const int group = t.s->n_heads / t.s->n_kv_heads;
  float* scores = t.scratch->scores + (size_t)thread * group * t.scratch->ctx;
  int8_t* qq = t.scratch->qq + (size_t)thread * group * t.s->head_dim;
  float* qd = t.scratch->qd + (size_t)thread * group;
  for (int item = thread * per; item < n_items && item < (thread + 1) * per; ++item)
    group_attention(t, item / t.s->n_kv_heads, item % t.s->n_kv_heads, scores, qq, qd);
}

}  // namespace

void ml_op_attention(ml_pool* pool, float* out, int ldo, const float* q, int ldq, int n_tokens, const int* pos,
                     const ml_kv_layer* const* caches, const ml_attn_shape* s, const ml_attn_scratch* scratch) {
  attn_task t{out, ldo, q, ldq, n_tokens, pos, caches, s, scratch};
  double positions = 0;
  for (int i = 0; i < n_tokens; ++i) positions += pos[i] + 1 - ml_attn_first(pos[i], s->window);
  const double macs = 2.0 * s->n_heads * positions * s->head_dim;
  if (ml_pool_size(pool) == 1 || macs < ML_PARALLEL_MIN_MACS)
    attention_worker(&t, 0, 1);
  else
    ml_pool_run(pool, attention_worker, &t);
}
