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
  ml_exec* e;
  std::chrono::steady_clock::time_point t0;
  explicit stage_timer(ml_exec* ex) : e(ex) {
    if (e->p.profile) t0 = std::chrono::steady_clock::now();
  }
  void mark(ml_stage stage) {
    if (!e->p.profile) return;
    const auto t1 = std::chrono::steady_clock::now();
    e->stage_seconds[stage] += std::chrono::duration<double>(t1 - t0).count();
    t0 = t1;
  }
};

// Quantizes n tokens' rows of width w (row stride ld) into the activation buffer, token t at t * w.
ml_qbatch quantize_rows(ml_exec* e, const float* x, int ld, int w, int n) {
  for (int t = 0; t < n; ++t)
    ml_op_quantize(e->act_q + (size_t)t * w, e->act_d + (size_t)t * (w / ML_QK), x + (size_t)t * ld, w);
  ml_qbatch b;
  b.q = e->act_q;
  b.d = e->act_d;
  b.n = w;
  b.n_tokens = n;
  return b;
}

void attention_block(const ml_model* m, ml_exec* e, const ml_batch* b, const ml_layer& L, int l, stage_timer& tm) {
  const ml_config& c = m->cfg;
  const int n = b->n;
  const int ldxb = std::max(c.dim, c.q_dim);
  for (int t = 0; t < n; ++t)
    k::rmsnorm(e->xb + (size_t)t * ldxb, e->x + (size_t)t * c.dim, L.attn_norm, c.dim, c.norm_eps);
  const ml_qbatch xq = quantize_rows(e, e->xb, ldxb, c.dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(e->pool, e->q, c.q_dim, &L.wq, &xq);
  ml_op_matmul(e->pool, e->k, c.kv_dim, &L.wk, &xq);
  ml_op_matmul(e->pool, e->v, c.kv_dim, &L.wv, &xq);
  tm.mark(ML_STAGE_QKV);

  const ml_rope_table& R = *L.rope;
  const size_t half = (size_t)R.n_rot / 2;
  for (int t = 0; t < n; ++t) {
    const int pos = b->pos[t];
    const float* cs = R.cos + (size_t)pos * half;
    const float* sn = R.sin + (size_t)pos * half;
    float* q = e->q + (size_t)t * c.q_dim;
    float* kk = e->k + (size_t)t * c.kv_dim;
    k::rope(q, c.n_heads, c.head_dim, cs, sn, R.type);
    k::rope(kk, c.n_kv_heads, c.head_dim, cs, sn, R.type);
    const ml_kv_layer* cache = &b->sessions[t]->layers[l];
    ml_op_kv_store(cache, &L.attn, pos, kk, e->v + (size_t)t * c.kv_dim);
    e->caches[t] = cache;
  }
  tm.mark(ML_STAGE_OTHER);
  ml_op_attention(e->pool, e->xb, ldxb, e->q, c.q_dim, n, b->pos, e->caches, &L.attn, &e->attn);
  tm.mark(ML_STAGE_ATTENTION);

  const ml_qbatch oq = quantize_rows(e, e->xb, ldxb, c.q_dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(e->pool, e->xb2, c.dim, &L.wo, &oq);
  tm.mark(ML_STAGE_WO);
  for (int t = 0; t < n; ++t) k::add(e->x + (size_t)t * c.dim, e->xb2 + (size_t)t * c.dim, c.dim);
}

void ffn_block(const ml_model* m, ml_exec* e, int n, const ml_layer& L, stage_timer& tm) {
  const ml_config& c = m->cfg;
  const int ldxb = std::max(c.dim, c.q_dim);
  for (int t = 0; t < n; ++t)
    k::rmsnorm(e->xb + (size_t)t * ldxb, e->x + (size_t)t * c.dim, L.ffn_norm, c.dim, c.norm_eps);
  const ml_qbatch xq = quantize_rows(e, e->xb, ldxb, c.dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(e->pool, e->hb, c.hidden_dim, &L.w1, &xq);
  ml_op_matmul(e->pool, e->hb2, c.hidden_dim, &L.w3, &xq);
  tm.mark(ML_STAGE_FFN);
  for (int t = 0; t < n; ++t)
    k::silu_mul(e->hb + (size_t)t * c.hidden_dim, e->hb2 + (size_t)t * c.hidden_dim, c.hidden_dim);
  const ml_qbatch hq = quantize_rows(e, e->hb, c.hidden_dim, c.hidden_dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(e->pool, e->xb2, c.dim, &L.w2, &hq);
  tm.mark(ML_STAGE_FFN);
  for (int t = 0; t < n; ++t) k::add(e->x + (size_t)t * c.dim, e->xb2 + (size_t)t * c.dim, c.dim);
}

}  // namespace

int ml_forward(const ml_model* m, ml_exec* e, const ml_batch* b) {
  const ml_config& c = m->cfg;
  const int n = b->n;
  stage_timer tm(e);
  for (int t = 0; t < n; ++t) ml_model_embed(m, b->tokens[t], e->x + (size_t)t * c.dim);
  for (int l = 0; l < c.n_layers; ++l) {
    const ml_layer& L = m->layers[l];
    attention_block(m, e, b, L, l, tm);
    ffn_block(m, e, n, L, tm);
  }
  // The classifier, over the tokens that asked for logits (in batch order).
  const int ldxb = std::max(c.dim, c.q_dim);
  int rows = 0;
  for (int t = 0; t < n; ++t)
    if (b->logits[t])
      k::rmsnorm(e->xb + (size_t)rows++ * ldxb, e->x + (size_t)t * c.dim, m->output_norm, c.dim, c.norm_eps);
  if (rows == 0) {
    tm.mark(ML_STAGE_OTHER);
    return 0;
  }
  const ml_qbatch xq = quantize_rows(e, e->xb, ldxb, c.dim, rows);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(e->pool, e->logits, c.vocab_size, &m->output, &xq);
  tm.mark(ML_STAGE_CLASSIFIER);
  return rows;
}
