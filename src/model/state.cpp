#include "model/state.h"

#include <algorithm>
#include <cmath>

namespace {

// One pass over every buffer: with a null arena base it only adds up the sizes.
ml_status carve(ml_state* s, const ml_config& c, ml_error* err) {
  ml_arena* a = &s->arena;
  const size_t ctx = (size_t)s->ctx;
  const int act_n = std::max({c.dim, c.q_dim, c.hidden_dim});
  ML_TRY(ml_arena_take(a, c.dim, &s->x, err));
  ML_TRY(ml_arena_take(a, std::max(c.dim, c.q_dim), &s->xb, err));
  ML_TRY(ml_arena_take(a, c.dim, &s->xb2, err));
  ML_TRY(ml_arena_take(a, c.q_dim, &s->q, err));
  ML_TRY(ml_arena_take(a, c.kv_dim, &s->k, err));
  ML_TRY(ml_arena_take(a, c.kv_dim, &s->v, err));
  ML_TRY(ml_arena_take(a, c.hidden_dim, &s->hb, err));
  ML_TRY(ml_arena_take(a, c.hidden_dim, &s->hb2, err));
  ML_TRY(ml_arena_take(a, ctx, &s->scores, err));
  ML_TRY(ml_arena_take(a, c.head_dim, &s->qq, err));
  ML_TRY(ml_arena_take(a, act_n, &s->act_q, err));
  ML_TRY(ml_arena_take(a, act_n / ML_QK, &s->act_d, err));
  ML_TRY(ml_arena_take(a, c.vocab_size, &s->logits, err));
  size_t half_rows;
  if (__builtin_mul_overflow(ctx, (size_t)c.head_dim / 2, &half_rows))
    return ml_fail(err, ML_E_NOMEM, "RoPE tables of %zu x %d overflow", ctx, c.head_dim / 2);
  ML_TRY(ml_arena_take(a, half_rows, &s->rope_cos, err));
  ML_TRY(ml_arena_take(a, half_rows, &s->rope_sin, err));
  ML_TRY(ml_arena_take(a, c.n_layers, &s->kv_layers, err));
  // KV cache: [layer][ctx][kv_dim] elements of 4 (F32), 2 (F16) or 1 byte (Q8, plus scales).
  const size_t elem = s->kv == ML_KV_F32 ? 4 : s->kv == ML_KV_F16 ? 2 : 1;
  size_t rows;
  if (__builtin_mul_overflow(ctx, (size_t)c.kv_dim, &rows))
    return ml_fail(err, ML_E_NOMEM, "KV cache of %zu x %d values overflows the address space", ctx, c.kv_dim);
  for (int l = 0; l < c.n_layers; ++l) {
    ml_kv_layer L;
    ML_TRY(ml_arena_take(a, rows, elem, &L.k, err));
    ML_TRY(ml_arena_take(a, rows, elem, &L.v, err));
    if (s->kv == ML_KV_Q8) {
      ML_TRY(ml_arena_take(a, ctx * (size_t)c.n_kv_heads, &L.k_scale, err));
      ML_TRY(ml_arena_take(a, ctx * (size_t)c.n_kv_heads, &L.v_scale, err));
    }
    if (s->kv_layers) s->kv_layers[l] = L;
  }
  return ML_OK;
}

ml_status check_args(const ml_model* m, int ctx, ml_kv_type kv, ml_error* err) {
  if (ctx < 1 || ctx > m->cfg.max_seq)
    return ml_fail(err, ML_E_ARG, "context length %d is outside 1..%d (the model's max_seq)", ctx, m->cfg.max_seq);
  if (kv != ML_KV_F32 && kv != ML_KV_Q8 && kv != ML_KV_F16) return ml_fail(err, ML_E_ARG, "unknown KV cache type %d", (int)kv);
  return ML_OK;
}

}  // namespace

ml_status ml_state_bytes(const ml_model* m, int ctx, ml_kv_type kv, size_t* bytes, ml_error* err) {
  ML_TRY(check_args(m, ctx, kv, err));
  ml_state s;
  s.ctx = ctx;
  s.kv = kv;
  s.kv_layers = nullptr;
  ML_TRY(carve(&s, m->cfg, err));
  *bytes = s.arena.used;
  return ML_OK;
}

ml_status ml_state_init(ml_state* s, const ml_model* m, int ctx, ml_kv_type kv, ml_error* err) {
  *s = ml_state{};
  ML_TRY(check_args(m, ctx, kv, err));
  s->ctx = ctx;
  s->kv = kv;
  s->kv_layers = nullptr;
  ML_TRY(carve(s, m->cfg, err));  // planning pass
  ML_TRY(ml_arena_alloc(&s->arena, err));
  const ml_status st = carve(s, m->cfg, err);
  if (st != ML_OK) {
    ml_state_free(s);
    return st;
  }
  ml_rope_tables(s->rope_cos, s->rope_sin, ctx, m->cfg.head_dim, m->cfg.rope_theta);
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
