// A session: one sequence's memory -- its per-layer cache (a KV cache for each attention layer;
// a recurrent-state layer kind would keep its state here too), its position and token history,
// the logits of its last token that asked for them, and its sampler with its RNG. Everything
// comes from one arena sized at creation; a session holds no weights, so N sessions cost one
// copy of the model plus N of these (ml_session_bytes).
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "core/status.h"
#include "model/model.h"
#include "model/sampler.h"
#include "ops/attention.h"
#include "ops/delta.h"

struct ml_session_opts {
  int ctx = 0;                // positions it holds, 1..model->ctx; 0: model->ctx
  ml_kv_type kv = ML_KV_F32;
};

struct ml_session {
  const ml_model* model = nullptr;
  ml_session_opts p;
  ml_arena arena;
  ml_kv_layer* layers = nullptr;  // [n_layers] the attention layers' caches (empty for linear layers)
  ml_delta_state* delta = nullptr;  // [n_layers] the linear layers' recurrent states; null without any
  int32_t* tokens = nullptr;      // [ctx] the ids at positions 0 .. n_past - 1
  int n_past = 0;                 // positions filled
  float* logits = nullptr;        // [vocab]
  bool has_logits = false;        // logits hold the last logit-bearing token fed since the last truncate
  ml_sampler sampler;
  void* sampler_scratch = nullptr;
  int pending = 0;  // the engine's count of this session's tokens in the batch it is checking
};

ml_status ml_session_init(ml_session* s, const ml_model* m, const ml_session_opts* p, ml_error* err);
void ml_session_release(ml_session* s);

// Zeroes the linear layers' recurrent states: the session starts over at position 0. Unlike a KV
// cache, such a state cannot be cut back to an earlier position (engine: ml_session_truncate).
void ml_session_clear_state(ml_session* s);

// Bytes one session of these parameters allocates; ML_E_NOMEM on overflow.
ml_status ml_session_plan_bytes(const ml_model* m, const ml_session_opts* p, size_t* bytes, ml_error* err);
