#include "model/session.h"

#include <cstdio>

#include "core/checked.h"
#include "model/limits.h"

namespace {

// One pass over every buffer: with a null arena base it only adds up the sizes.
ml_status carve(ml_session* s, const ml_config& c, ml_error* err) {
  ml_arena* a = &s->arena;
  const size_t ctx = (size_t)s->p.ctx;
  ML_TRY(ml_arena_take(a, (size_t)c.n_layers, &s->layers, err));
  ML_TRY(ml_arena_take2(a, ctx, 1, &s->tokens, err));
  ML_TRY(ml_arena_take2(a, (size_t)c.vocab_size, 1, &s->logits, err));
  void* scratch = nullptr;
  ML_TRY(ml_arena_take(a, ml_sampler_scratch_bytes(c.vocab_size), 1, &scratch, err));
  s->sampler_scratch = scratch;
  // KV cache: [layer][n_kv_heads][ctx][head_dim] elements (ops/attention.h) of 4 (F32), 2 (F16) or
  // 1 byte (Q8, plus scales).
  const size_t elem = s->p.kv == ML_KV_F32 ? 4 : s->p.kv == ML_KV_F16 ? 2 : 1;
  size_t rows;
  if (!ml_mul(ctx, (size_t)c.kv_dim, &rows))
    return ml_fail(err, ML_E_NOMEM, "KV cache of %zu x %d values overflows the address space", ctx, c.kv_dim);
  const size_t delta_floats = c.n_linear > 0 ? ml_delta_state_floats(&c.delta) : 0;
  if (c.n_linear > 0) ML_TRY(ml_arena_take(a, (size_t)c.n_layers, &s->delta, err));
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.n_linear > 0 && s->model->layers[l].kind == ML_LAYER_LINEAR) {  // a recurrent state, no KV cache
      float* mem = nullptr;
      ML_TRY(ml_arena_take(a, delta_floats, &mem, err));
      if (s->delta) ml_delta_state_init(&s->delta[l], mem, &c.delta);
      if (s->layers) s->layers[l] = ml_kv_layer{};
      continue;
    }
    ml_kv_layer L;
    L.type = s->p.kv;
    L.ctx = s->p.ctx;
    ML_TRY(ml_arena_take(a, rows, elem, &L.k, err));
    ML_TRY(ml_arena_take(a, rows, elem, &L.v, err));
    if (s->p.kv == ML_KV_Q8) {
      ML_TRY(ml_arena_take2(a, ctx, (size_t)c.n_kv_heads, &L.k_scale, err));
      ML_TRY(ml_arena_take2(a, ctx, (size_t)c.n_kv_heads, &L.v_scale, err));
    }
    if (s->layers) s->layers[l] = L;
  }
  return ML_OK;
}

ml_status resolve(const ml_model* m, const ml_session_opts* in, ml_session_opts* out, ml_error* err) {
  *out = *in;
  if (out->ctx == 0) out->ctx = m->ctx;
  if (out->ctx < 1 || out->ctx > m->ctx)
    return ml_fail(err, ML_E_ARG, "session context %d is outside 1..%d (the model's context)", in->ctx, m->ctx);
  if (out->kv != ML_KV_F32 && out->kv != ML_KV_Q8 && out->kv != ML_KV_F16)
    return ml_fail(err, ML_E_ARG, "unknown KV cache type %d", (int)out->kv);
  return ML_OK;
}

}  // namespace

ml_status ml_session_plan_bytes(const ml_model* m, const ml_session_opts* p, size_t* bytes, ml_error* err) {
  ml_session s;
  s.model = m;
  ML_TRY(resolve(m, p, &s.p, err));
  ML_TRY(carve(&s, m->cfg, err));
  *bytes = s.arena.used;
  return ML_OK;
}

ml_status ml_session_init(ml_session* s, const ml_model* m, const ml_session_opts* p, ml_error* err) {
  *s = ml_session{};
  s->model = m;
  ML_TRY(resolve(m, p, &s->p, err));
  ML_TRY(carve(s, m->cfg, err));  // planning pass
  // Almost all of it is the KV cache: a request the machine could never hold fails now, naming
  // what sized it, instead of an arena failure (or, with overcommit, zeroing swap) later.
  char what[160];
  std::snprintf(what, sizeof what, "the session (a KV cache of %d positions x %d layers x kv_dim %d, kv type %s)",
                s->p.ctx, m->cfg.n_layers, m->cfg.kv_dim,
                s->p.kv == ML_KV_F32 ? "f32" : s->p.kv == ML_KV_F16 ? "f16" : "q8");
  ML_TRY(ml_check_ram(s->arena.used, what,
                      s->p.kv == ML_KV_F32 ? ": lower the context (--ctx) or use --kv q8"
                                           : ": lower the context (--ctx)", err));
  ML_TRY(ml_arena_alloc(&s->arena, err));
  ml_status st = carve(s, m->cfg, err);
  if (st == ML_OK) {  // greedy until the caller sets its sampling
    const ml_sampler_opts greedy{};
    st = ml_sampler_init(&s->sampler, m->cfg.vocab_size, &greedy, s->sampler_scratch, err);
  }
  if (st != ML_OK) ml_session_release(s);
  return st;
}

void ml_session_clear_state(ml_session* s) {
  const ml_config& c = s->model->cfg;
  for (int l = 0; l < c.n_layers && s->delta; ++l)
    if (s->model->layers[l].kind == ML_LAYER_LINEAR) ml_delta_state_clear(&s->delta[l], &c.delta);
}

void ml_session_release(ml_session* s) {
  ml_arena_free(&s->arena);
  *s = ml_session{};
}
