#include "model/forward.h"

#include <algorithm>
#include <chrono>

#include "kernels/bind.h"
#include "ops/attention.h"
#include "ops/matvec.h"

namespace k = ml::k::active;

namespace {

// Adds the time since the last mark to a stage when profiling.
struct stage_timer {
  ml_state* s;
  std::chrono::steady_clock::time_point t0;
  explicit stage_timer(ml_state* st) : s(st) {
    if (s->profile) t0 = std::chrono::steady_clock::now();
  }
  void mark(ml_stage stage) {
    if (!s->profile) return;
    const auto t1 = std::chrono::steady_clock::now();
    s->stage_seconds[stage] += std::chrono::duration<double>(t1 - t0).count();
    t0 = t1;
  }
};

// Quantizes n tokens' rows of width w (row stride ld) into the activation buffer, token t at t * w.
ml_qbatch quantize_rows(ml_state* s, const float* x, int ld, int w, int n) {
  for (int t = 0; t < n; ++t)
    ml_op_quantize(s->act_q + (size_t)t * w, s->act_d + (size_t)t * (w / ML_QK), x + (size_t)t * ld, w);
  ml_qbatch b;
  b.q = s->act_q;
  b.d = s->act_d;
  b.n = w;
  b.n_tokens = n;
  return b;
}

void attention_block(const ml_model* m, ml_state* s, const ml_layer& L, int l, int n, int pos0, stage_timer& tm) {
  const ml_config& c = m->cfg;
  const int ldxb = std::max(c.dim, c.q_dim);
  for (int t = 0; t < n; ++t)
    k::rmsnorm(s->xb + (size_t)t * ldxb, s->x + (size_t)t * c.dim, L.attn_norm, c.dim, c.norm_eps);
  const ml_qbatch xq = quantize_rows(s, s->xb, ldxb, c.dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(&s->exec, s->q, c.q_dim, &L.wq, c.wtype, &xq);
  ml_op_matmul(&s->exec, s->k, c.kv_dim, &L.wk, c.wtype, &xq);
  ml_op_matmul(&s->exec, s->v, c.kv_dim, &L.wv, c.wtype, &xq);
  tm.mark(ML_STAGE_QKV);

  const ml_attn_shape shape{c.n_heads, c.n_kv_heads, c.head_dim, s->p.kv};
  const ml_kv_layer* kv = &s->kv_layers[l];
  const size_t half = (size_t)c.head_dim / 2;
  for (int t = 0; t < n; ++t) {
    const int pos = pos0 + t;
    const float* cs = s->rope_cos + (size_t)pos * half;
    const float* sn = s->rope_sin + (size_t)pos * half;
    float* q = s->q + (size_t)t * c.q_dim;
    float* kk = s->k + (size_t)t * c.kv_dim;
    k::rope(q, c.n_heads, c.head_dim, cs, sn, c.rope_type);
    k::rope(kk, c.n_kv_heads, c.head_dim, cs, sn, c.rope_type);
    ml_op_kv_store(kv, &shape, pos, kk, s->v + (size_t)t * c.kv_dim);
  }
  tm.mark(ML_STAGE_OTHER);
  ml_op_attention(&s->exec, s->xb, ldxb, s->q, c.q_dim, n, pos0, kv, &shape, s->p.ctx, &s->attn);
  tm.mark(ML_STAGE_ATTENTION);

  const ml_qbatch oq = quantize_rows(s, s->xb, ldxb, c.q_dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(&s->exec, s->xb2, c.dim, &L.wo, c.wtype, &oq);
  tm.mark(ML_STAGE_WO);
  for (int t = 0; t < n; ++t) k::add(s->x + (size_t)t * c.dim, s->xb2 + (size_t)t * c.dim, c.dim);
}

void ffn_block(const ml_model* m, ml_state* s, const ml_layer& L, int n, stage_timer& tm) {
  const ml_config& c = m->cfg;
  const int ldxb = std::max(c.dim, c.q_dim);
  for (int t = 0; t < n; ++t)
    k::rmsnorm(s->xb + (size_t)t * ldxb, s->x + (size_t)t * c.dim, L.ffn_norm, c.dim, c.norm_eps);
  const ml_qbatch xq = quantize_rows(s, s->xb, ldxb, c.dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(&s->exec, s->hb, c.hidden_dim, &L.w1, c.wtype, &xq);
  ml_op_matmul(&s->exec, s->hb2, c.hidden_dim, &L.w3, c.wtype, &xq);
  tm.mark(ML_STAGE_FFN);
  for (int t = 0; t < n; ++t)
    k::silu_mul(s->hb + (size_t)t * c.hidden_dim, s->hb2 + (size_t)t * c.hidden_dim, c.hidden_dim);
  const ml_qbatch hq = quantize_rows(s, s->hb, c.hidden_dim, c.hidden_dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(&s->exec, s->xb2, c.dim, &L.w2, c.wtype, &hq);
  tm.mark(ML_STAGE_FFN);
  for (int t = 0; t < n; ++t) k::add(s->x + (size_t)t * c.dim, s->xb2 + (size_t)t * c.dim, c.dim);
}

}  // namespace

void ml_forward(const ml_model* m, ml_state* s, const int32_t* tokens, int n, int pos0, ml_logits_mode logits) {
  const ml_config& c = m->cfg;
  stage_timer tm(s);
  for (int t = 0; t < n; ++t) ml_model_embed(m, tokens[t], s->x + (size_t)t * c.dim);
  for (int l = 0; l < c.n_layers; ++l) {
    attention_block(m, s, m->layers[l], l, n, pos0, tm);
    ffn_block(m, s, m->layers[l], n, tm);
  }
  if (logits == ML_LOGITS_NONE) {
    tm.mark(ML_STAGE_OTHER);
    return;
  }
  // The classifier: every token's row, or the last token's alone.
  const int first = logits == ML_LOGITS_ALL ? 0 : n - 1;
  const int count = n - first;
  const int ldxb = std::max(c.dim, c.q_dim);
  for (int t = 0; t < count; ++t)
    k::rmsnorm(s->xb + (size_t)t * ldxb, s->x + (size_t)(first + t) * c.dim, m->output_norm, c.dim, c.norm_eps);
  const ml_qbatch xq = quantize_rows(s, s->xb, ldxb, c.dim, count);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(&s->exec, s->logits, c.vocab_size, &m->output, c.wtype, &xq);
  tm.mark(ML_STAGE_CLASSIFIER);
}
