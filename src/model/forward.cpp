#include "model/forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "kernels/bind.h"
#include "ops/attention.h"
#include "ops/delta.h"
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

// x[n] += b[n] (a projection's bias).
void add_bias(float* x, const float* b, int n) {
  if (b) k::add(x, b, n);
}

// RMSNorm of each of n_heads heads of x in place with one weight of head_dim values.
void norm_heads(float* x, const float* w, int n_heads, int head_dim, float eps) {
  for (int h = 0; h < n_heads; ++h) k::rmsnorm(x + (size_t)h * head_dim, x + (size_t)h * head_dim, w, head_dim, eps);
}

// RoPE on the first R.n_rot dimensions of each head (all of them unless the model rotates part).
void rope_heads(float* x, int n_heads, int head_dim, const ml_rope_table& R, int pos) {
  const size_t half = (size_t)R.n_rot / 2;
  const float* cs = R.cos + (size_t)pos * half;
  const float* sn = R.sin + (size_t)pos * half;
  if (R.n_rot == head_dim) {
    k::rope(x, n_heads, head_dim, cs, sn, R.type);
    return;
  }
  for (int h = 0; h < n_heads; ++h) k::rope(x + (size_t)h * head_dim, 1, R.n_rot, cs, sn, R.type);
}

// x += y, or x += rmsnorm(y) * w when the model has post-norms (Gemma 3). y may be overwritten.
void residual(float* x, float* y, const float* post_norm, int dim, float eps) {
  if (post_norm) k::rmsnorm(y, y, post_norm, dim, eps);
  k::add(x, y, dim);
}

// o[i] *= sigmoid(g[i]) (Qwen3.5's gated attention output).
void gate_sigmoid(float* o, const float* g, int n) {
  for (int i = 0; i < n; ++i) o[i] = o[i] * (1.0f / (1.0f + std::exp(-g[i])));
}

void attention_block(const ml_model* m, ml_exec* e, const ml_batch* b, const ml_layer& L, int l, stage_timer& tm) {
  const ml_config& c = m->cfg;
  const int n = b->n;
  const int ldxb = std::max(c.dim, c.q_dim);
  for (int t = 0; t < n; ++t)
    k::rmsnorm(e->xb + (size_t)t * ldxb, e->x + (size_t)t * c.dim, L.attn_norm, c.dim, c.norm_eps);
  const ml_qbatch xq = ml_quantize_rows(e, e->xb, ldxb, c.dim, n);
  tm.mark(ML_STAGE_OTHER);
  const ml_matmul_job qkv[4] = {
      {e->q, c.q_dim, &L.wq}, {e->k, c.kv_dim, &L.wk}, {e->v, c.kv_dim, &L.wv}, {e->gate, c.q_dim, &L.wg}};
  ml_op_matmul_group(e->pool, qkv, c.attn_gate ? 4 : 3, &xq);
  tm.mark(ML_STAGE_QKV);

  for (int t = 0; t < n; ++t) {
    const int pos = b->pos[t];
    float* q = e->q + (size_t)t * c.q_dim;
    float* kk = e->k + (size_t)t * c.kv_dim;
    float* v = e->v + (size_t)t * c.kv_dim;
    add_bias(q, L.bq, c.q_dim);
    add_bias(kk, L.bk, c.kv_dim);
    add_bias(v, L.bv, c.kv_dim);
    if (c.qk_norm) {
      norm_heads(q, L.q_norm, c.n_heads, c.head_dim, c.norm_eps);
      norm_heads(kk, L.k_norm, c.n_kv_heads, c.head_dim, c.norm_eps);
    }
    rope_heads(q, c.n_heads, c.head_dim, *L.rope, pos);
    rope_heads(kk, c.n_kv_heads, c.head_dim, *L.rope, pos);
    const ml_kv_layer* cache = &b->sessions[t]->layers[l];
    ml_op_kv_store(cache, &L.attn, pos, kk, v);
    e->caches[t] = cache;
  }
  tm.mark(ML_STAGE_OTHER);
  ml_op_attention(e->pool, e->xb, ldxb, e->q, c.q_dim, n, b->pos, e->caches, &L.attn, &e->attn);
  tm.mark(ML_STAGE_ATTENTION);
  if (c.attn_gate)
    for (int t = 0; t < n; ++t) gate_sigmoid(e->xb + (size_t)t * ldxb, e->gate + (size_t)t * c.q_dim, c.q_dim);

  const ml_qbatch oq = ml_quantize_rows(e, e->xb, ldxb, c.q_dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(e->pool, e->xb2, c.dim, &L.wo, &oq);
  tm.mark(ML_STAGE_WO);
  for (int t = 0; t < n; ++t)
    residual(e->x + (size_t)t * c.dim, e->xb2 + (size_t)t * c.dim, L.attn_post_norm, c.dim, c.norm_eps);
}

// A gated-delta (linear attention) layer: the four projections of the normed input, the op
// (ops/delta.h: convolution, recurrent update, gated norm), and ssm_out back into the residual.
void linear_block(const ml_model* m, ml_exec* e, const ml_batch* b, const ml_layer& L, int l, stage_timer& tm) {
  const ml_config& c = m->cfg;
  const int n = b->n;
  const int ldxb = std::max(c.dim, c.q_dim);
  const int nv = c.delta.n_v_heads, lin_v = nv * c.delta.v_dim, ch = ml_delta_channels(&c.delta);
  for (int t = 0; t < n; ++t)
    k::rmsnorm(e->xb + (size_t)t * ldxb, e->x + (size_t)t * c.dim, L.attn_norm, c.dim, c.norm_eps);
  const ml_qbatch xq = ml_quantize_rows(e, e->xb, ldxb, c.dim, n);
  tm.mark(ML_STAGE_OTHER);
  const ml_matmul_job proj[4] = {
      {e->lin_qkv, ch, &L.wqkv}, {e->lin_z, lin_v, &L.wz}, {e->lin_b, nv, &L.wbeta}, {e->lin_a, nv, &L.walpha}};
  ml_op_matmul_group(e->pool, proj, 4, &xq);
  tm.mark(ML_STAGE_QKV);
  for (int t = 0; t < n; ++t) e->lin_states[t] = &b->sessions[t]->delta[l];
  ml_delta_batch db;
  db.n = n;
  db.qkv = e->lin_qkv;
  db.ld_qkv = ch;
  db.z = e->lin_z;
  db.ld_z = lin_v;
  db.b = e->lin_b;
  db.a = e->lin_a;
  db.out = e->lin_z;  // in place
  db.ld_out = lin_v;
  db.states = e->lin_states;
  ml_op_delta(e->pool, &db, &c.delta, &L.delta);
  tm.mark(ML_STAGE_ATTENTION);
  const ml_qbatch oq = ml_quantize_rows(e, e->lin_z, lin_v, lin_v, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(e->pool, e->xb2, c.dim, &L.wssm_out, &oq);
  tm.mark(ML_STAGE_WO);
  for (int t = 0; t < n; ++t)
    residual(e->x + (size_t)t * c.dim, e->xb2 + (size_t)t * c.dim, L.attn_post_norm, c.dim, c.norm_eps);
}

void ffn_block(const ml_model* m, ml_exec* e, int n, const ml_layer& L, stage_timer& tm) {
  const ml_config& c = m->cfg;
  const int ldxb = std::max(c.dim, c.q_dim);
  for (int t = 0; t < n; ++t)
    k::rmsnorm(e->xb + (size_t)t * ldxb, e->x + (size_t)t * c.dim, L.ffn_norm, c.dim, c.norm_eps);
  const ml_qbatch xq = ml_quantize_rows(e, e->xb, ldxb, c.dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_gated_up(e->pool, e->hb, e->hb2, c.hidden_dim, &L.w1, &L.w3, &xq, c.gelu);
  tm.mark(ML_STAGE_FFN);
  const ml_qbatch hq = ml_quantize_rows(e, e->hb, c.hidden_dim, c.hidden_dim, n);
  tm.mark(ML_STAGE_OTHER);
  ml_op_matmul(e->pool, e->xb2, c.dim, &L.w2, &hq);
  tm.mark(ML_STAGE_FFN);
  for (int t = 0; t < n; ++t)
    residual(e->x + (size_t)t * c.dim, e->xb2 + (size_t)t * c.dim, L.ffn_post_norm, c.dim, c.norm_eps);
}

// logits = c * tanh(logits / c) (Gemma's final soft-capping).
void softcap(float* logits, int n, float cap) {
  for (int i = 0; i < n; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
}

}  // namespace

ml_qbatch ml_quantize_rows(ml_exec* e, const float* x, int ld, int w, int n) {
  for (int t = 0; t < n; ++t)
    ml_op_quantize(e->act_q + (size_t)t * w, e->act_d + (size_t)t * (w / ML_QK), x + (size_t)t * ld, w);
  ml_qbatch b;
  b.q = e->act_q;
  b.d = e->act_d;
  b.n = w;
  b.n_tokens = n;
  return b;
}

int ml_forward(const ml_model* m, ml_exec* e, const ml_batch* b) {
  const ml_config& c = m->cfg;
  const int n = b->n;
  stage_timer tm(e);
  for (int t = 0; t < n; ++t) ml_model_embed(m, b->tokens[t], e->x + (size_t)t * c.dim);
  for (int l = 0; l < c.n_layers; ++l) {
    const ml_layer& L = m->layers[l];
    if (L.kind == ML_LAYER_LINEAR)
      linear_block(m, e, b, L, l, tm);
    else
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
  const ml_qbatch xq = ml_quantize_rows(e, e->xb, ldxb, c.dim, rows);
  tm.mark(ML_STAGE_OTHER);
  float* logits = rows == 1 && b->logits_out ? b->logits_out : e->logits;
  ml_op_matmul(e->pool, logits, c.vocab_size, &m->output, &xq);
  if (c.logit_softcap > 0) softcap(logits, rows * c.vocab_size, c.logit_softcap);
  tm.mark(ML_STAGE_CLASSIFIER);
  return rows;
}
