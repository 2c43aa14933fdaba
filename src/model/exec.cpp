#include "model/exec.h"

#include <algorithm>

#include "core/checked.h"

namespace {

// A [rows][cols] buffer of T from the arena, overflow-checked.

// One pass over every buffer: with a null arena base it only adds up the sizes.
ml_status carve(ml_exec* e, const ml_model* m, ml_error* err) {
  const ml_config& c = m->cfg;
  ml_arena* a = &e->arena;
  const size_t B = (size_t)e->p.max_batch, T = (size_t)e->p.n_threads, ctx = (size_t)m->ctx;
  const int lin_v = c.delta.n_v_heads * c.delta.v_dim;
  const size_t act_n = (size_t)std::max({c.dim, c.q_dim, c.hidden_dim, c.n_linear > 0 ? lin_v : 0});
  ML_TRY(ml_arena_take2(a, B, c.dim, &e->x, err));
  ML_TRY(ml_arena_take2(a, B, std::max(c.dim, c.q_dim), &e->xb, err));
  ML_TRY(ml_arena_take2(a, B, c.dim, &e->xb2, err));
  ML_TRY(ml_arena_take2(a, B, c.q_dim, &e->q, err));
  ML_TRY(ml_arena_take2(a, B, c.kv_dim, &e->k, err));
  ML_TRY(ml_arena_take2(a, B, c.kv_dim, &e->v, err));
  if (c.attn_gate) ML_TRY(ml_arena_take2(a, B, c.q_dim, &e->gate, err));
  if (c.n_linear > 0) {
    ML_TRY(ml_arena_take2(a, B, (size_t)ml_delta_channels(&c.delta), &e->lin_qkv, err));
    ML_TRY(ml_arena_take2(a, B, (size_t)lin_v, &e->lin_z, err));
    ML_TRY(ml_arena_take2(a, B, (size_t)c.delta.n_v_heads, &e->lin_b, err));
    ML_TRY(ml_arena_take2(a, B, (size_t)c.delta.n_v_heads, &e->lin_a, err));
    ML_TRY(ml_arena_take2(a, B, 1, &e->lin_states, err));
  }
  ML_TRY(ml_arena_take2(a, B, c.hidden_dim, &e->hb, err));
  ML_TRY(ml_arena_take2(a, B, c.hidden_dim, &e->hb2, err));
  ML_TRY(ml_arena_take2(a, B, act_n, &e->act_q, err));
  ML_TRY(ml_arena_take2(a, B, act_n / ML_QK, &e->act_d, err));
  const size_t by_bytes = ML_LOGIT_BYTES / ((size_t)c.vocab_size * sizeof(float));
  e->logit_rows = (int)std::min(B, std::clamp(by_bytes, (size_t)ML_MIN_LOGIT_ROWS, (size_t)ML_MAX_LOGIT_ROWS));
  ML_TRY(ml_arena_take2(a, (size_t)e->logit_rows, c.vocab_size, &e->logits, err));
  ML_TRY(ml_arena_take2(a, B, 1, &e->caches, err));
  ML_TRY(ml_arena_take2(a, B, 1, &e->step_tokens, err));
  ML_TRY(ml_arena_take2(a, B, 1, &e->step_sessions, err));
  ML_TRY(ml_arena_take2(a, B, 1, &e->step_pos, err));
  ML_TRY(ml_arena_take2(a, B, 1, &e->step_logits, err));
  const size_t group = (size_t)(c.n_heads / c.n_kv_heads);
  size_t per_thread;
  if (!ml_mul(group, ctx, &per_thread)) return ml_fail(err, ML_E_NOMEM, "executor: attention scratch overflows");
  ML_TRY(ml_arena_take2(a, T, per_thread, &e->attn.scores, err));
  ML_TRY(ml_arena_take2(a, T, group * (size_t)c.head_dim, &e->attn.qq, err));
  ML_TRY(ml_arena_take2(a, T, group, &e->attn.qd, err));
  e->attn.ctx = m->ctx;
  return ML_OK;
}

ml_status check_args(const ml_exec_opts* p, ml_error* err) {
  if (p->max_batch < 1 || p->max_batch > ML_MAX_BATCH)
    return ml_fail(err, ML_E_ARG, "batch %d is outside 1..%d", p->max_batch, ML_MAX_BATCH);
  if (p->n_threads < 1 || p->n_threads > 1024)
    return ml_fail(err, ML_E_ARG, "thread count %d is outside 1..1024", p->n_threads);
  return ML_OK;
}

}  // namespace

ml_status ml_exec_plan_bytes(const ml_model* m, const ml_exec_opts* p, size_t* bytes, ml_error* err) {
  ML_TRY(check_args(p, err));
  ml_exec e;
  e.p = *p;
  ML_TRY(carve(&e, m, err));
  *bytes = e.arena.used;
  return ML_OK;
}

ml_status ml_exec_init(ml_exec* e, const ml_model* m, const ml_exec_opts* p, ml_error* err) {
  *e = ml_exec{};
  ML_TRY(check_args(p, err));
  e->model = m;
  e->p = *p;
  ML_TRY(carve(e, m, err));  // planning pass
  ML_TRY(ml_arena_alloc(&e->arena, err));
  ml_status st = carve(e, m, err);
  if (st == ML_OK) st = ml_pool_create(&e->pool, p->n_threads, err);
  if (st != ML_OK) ml_exec_release(e);
  return st;
}

void ml_exec_release(ml_exec* e) {
  ml_pool_destroy(e->pool);
  ml_arena_free(&e->arena);
  *e = ml_exec{};
}
