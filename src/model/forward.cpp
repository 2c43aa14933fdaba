#include "model/forward.h"

#include "kernels/bind.h"
#include "ops/attention.h"
#include "ops/matvec.h"

namespace k = ml::k::active;

namespace {

void attention_block(const ml_model* m, ml_state* s, const ml_layer& L, int l, int pos) {
  const ml_config& c = m->cfg;
  k::rmsnorm(s->xb, s->x, L.attn_norm, c.dim, c.norm_eps);
  const ml_qact xq = ml_op_quantize(s->act_q, s->act_d, s->xb, c.dim);
  ml_op_matvec(s->q, &L.wq, c.wtype, &xq);
  ml_op_matvec(s->k, &L.wk, c.wtype, &xq);
  ml_op_matvec(s->v, &L.wv, c.wtype, &xq);
  const size_t half = (size_t)c.head_dim / 2;
  const float* cs = s->rope_cos + (size_t)pos * half;
  const float* sn = s->rope_sin + (size_t)pos * half;
  k::rope(s->q, c.n_heads, c.head_dim, cs, sn, c.rope_type);
  k::rope(s->k, c.n_kv_heads, c.head_dim, cs, sn, c.rope_type);

  const ml_attn_shape shape{c.n_heads, c.n_kv_heads, c.head_dim, s->kv};
  const ml_kv_layer* kv = &s->kv_layers[l];
  ml_op_kv_store(kv, &shape, pos, s->k, s->v);
  ml_op_attention(s->xb, s->q, kv, &shape, pos + 1, s->scores, s->qq);

  const ml_qact oq = ml_op_quantize(s->act_q, s->act_d, s->xb, c.q_dim);
  ml_op_matvec(s->xb2, &L.wo, c.wtype, &oq);
  k::add(s->x, s->xb2, c.dim);
}

void ffn_block(const ml_model* m, ml_state* s, const ml_layer& L) {
  const ml_config& c = m->cfg;
  k::rmsnorm(s->xb, s->x, L.ffn_norm, c.dim, c.norm_eps);
  const ml_qact xq = ml_op_quantize(s->act_q, s->act_d, s->xb, c.dim);
  ml_op_matvec(s->hb, &L.w1, c.wtype, &xq);
  ml_op_matvec(s->hb2, &L.w3, c.wtype, &xq);
  k::silu_mul(s->hb, s->hb2, c.hidden_dim);
  const ml_qact hq = ml_op_quantize(s->act_q, s->act_d, s->hb, c.hidden_dim);
  ml_op_matvec(s->xb2, &L.w2, c.wtype, &hq);
  k::add(s->x, s->xb2, c.dim);
}

}  // namespace

void ml_forward(const ml_model* m, ml_state* s, int token, int pos, bool want_logits) {
  const ml_config& c = m->cfg;
  ml_model_embed(m, token, s->x);
  for (int l = 0; l < c.n_layers; ++l) {
    attention_block(m, s, m->layers[l], l, pos);
    ffn_block(m, s, m->layers[l]);
  }
  if (!want_logits) return;
  k::rmsnorm(s->xb, s->x, m->output_norm, c.dim, c.norm_eps);
  const ml_qact xq = ml_op_quantize(s->act_q, s->act_d, s->xb, c.dim);
  ml_op_matvec(s->logits, &m->output, c.wtype, &xq);
}
