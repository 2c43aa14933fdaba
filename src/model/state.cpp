#include "model/state.h"

#include <algorithm>
#include <cmath>

#include "core/checked.h"

namespace {

// A [rows][cols] buffer of T from the arena, overflow-checked.
template <class T>
ml_status take2(ml_arena* a, size_t rows, size_t cols, T** out, ml_error* err) {
  size_t n;
  if (!ml_mul(rows, cols, &n)) return ml_fail(err, ML_E_NOMEM, "state: %zu x %zu values overflow", rows, cols);
  return ml_arena_take(a, n, out, err);
}

// One pass over every buffer: with a null arena base it only adds up the sizes.
ml_status carve(ml_state* s, const ml_config& c, ml_error* err) {
  ml_arena* a = &s->arena;
  const size_t ctx = (size_t)s->p.ctx, B = (size_t)s->p.batch, T = (size_t)s->p.n_threads;
  const size_t act_n = (size_t)std::max({c.dim, c.q_dim, c.hidden_dim});
  ML_TRY(take2(a, B, c.dim, &s->x, err));
  ML_TRY(take2(a, B, std::max(c.dim, c.q_dim), &s->xb, err));
  ML_TRY(take2(a, B, c.dim, &s->xb2, err));
  ML_TRY(take2(a, B, c.q_dim, &s->q, err));
  ML_TRY(take2(a, B, c.kv_dim, &s->k, err));
  ML_TRY(take2(a, B, c.kv_dim, &s->v, err));
  ML_TRY(take2(a, B, c.hidden_dim, &s->hb, err));
  ML_TRY(take2(a, B, c.hidden_dim, &s->hb2, err));
  ML_TRY(take2(a, B, act_n, &s->act_q, err));
  ML_TRY(take2(a, B, act_n / ML_QK, &s->act_d, err));
  ML_TRY(take2(a, B, c.vocab_size, &s->logits, err));
  ML_TRY(take2(a, ctx, (size_t)c.head_dim / 2, &s->rope_cos, err));
  ML_TRY(take2(a, ctx, (size_t)c.head_dim / 2, &s->rope_sin, err));
  const size_t group = (size_t)(c.n_heads / c.n_kv_heads);
  size_t per_thread;
  if (!ml_mul(group, ctx, &per_thread)) return ml_fail(err, ML_E_NOMEM, "state: attention scratch overflows");
  ML_TRY(take2(a, T, per_thread, &s->attn.scores, err));
  ML_TRY(take2(a, T, group * (size_t)c.head_dim, &s->attn.qq, err));
  ML_TRY(take2(a, T, group, &s->attn.qd, err));
  ML_TRY(ml_arena_take(a, (size_t)c.n_layers, &s->kv_layers, err));
  // KV cache: [layer][ctx][kv_dim] elements of 4 (F32), 2 (F16) or 1 byte (Q8, plus scales).
  const size_t elem = s->p.kv == ML_KV_F32 ? 4 : s->p.kv == ML_KV_F16 ? 2 : 1;
  size_t rows;
  if (!ml_mul(ctx, (size_t)c.kv_dim, &rows))
    return ml_fail(err, ML_E_NOMEM, "KV cache of %zu x %d values overflows the address space", ctx, c.kv_dim);
  for (int l = 0; l < c.n_layers; ++l) {
    ml_kv_layer L;
    ML_TRY(ml_arena_take(a, rows, elem, &L.k, err));
    ML_TRY(ml_arena_take(a, rows, elem, &L.v, err));
    if (s->p.kv == ML_KV_Q8) {
      ML_TRY(take2(a, ctx, (size_t)c.n_kv_heads, &L.k_scale, err));
      ML_TRY(take2(a, ctx, (size_t)c.n_kv_heads, &L.v_scale, err));
    }
    if (s->kv_layers) s->kv_layers[l] = L;
  }
  return ML_OK;
}

ml_status check_args(const ml_model* m, const ml_state_params* p, ml_error* err) {
  if (p->ctx < 1 || p->ctx > m->cfg.max_seq)
    return ml_fail(err, ML_E_ARG, "context length %d is outside 1..%d (the model's max_seq)", p->ctx, m->cfg.max_seq);
  if (p->kv != ML_KV_F32 && p->kv != ML_KV_Q8 && p->kv != ML_KV_F16)
    return ml_fail(err, ML_E_ARG, "unknown KV cache type %d", (int)p->kv);
  if (p->batch < 1 || p->batch > ML_MAX_BATCH)
    return ml_fail(err, ML_E_ARG, "batch %d is outside 1..%d", p->batch, ML_MAX_BATCH);
  if (p->n_threads < 1 || p->n_threads > 1024)
    return ml_fail(err, ML_E_ARG, "thread count %d is outside 1..1024", p->n_threads);
  return ML_OK;
}

}  // namespace

ml_status ml_state_bytes(const ml_model* m, const ml_state_params* p, size_t* bytes, ml_error* err) {
  ML_TRY(check_args(m, p, err));
  ml_state s;
  s.p = *p;
  s.kv_layers = nullptr;
  ML_TRY(carve(&s, m->cfg, err));
  *bytes = s.arena.used;
  return ML_OK;
}

ml_status ml_state_init(ml_state* s, const ml_model* m, const ml_state_params* p, ml_error* err) {
  *s = ml_state{};
  ML_TRY(check_args(m, p, err));
  s->p = *p;
  s->kv_layers = nullptr;
  ML_TRY(carve(s, m->cfg, err));  // planning pass
  ML_TRY(ml_arena_alloc(&s->arena, err));
  const ml_status st = carve(s, m->cfg, err);
  if (st != ML_OK) {
    ml_state_free(s);
    return st;
  }
  ml_rope_tables(s->rope_cos, s->rope_sin, p->ctx, m->cfg.head_dim, m->cfg.rope_theta);
  return ML_OK;
}

void ml_state_free(ml_state* s) {
  ml_arena_free(&s->arena);
  *s = ml_state{};
}

void ml_rope_tables(float* cos_t, float* sin_t, int ctx, int head_dim, double theta) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(theta, -2.0 * i / head_dim);
    for (int pos = 0; pos < ctx; ++pos) {
      const double angle = pos * freq;
      cos_t[(size_t)pos * half + i] = (float)std::cos(angle);
      sin_t[(size_t)pos * half + i] = (float)std::sin(angle);
    }
  }
}
