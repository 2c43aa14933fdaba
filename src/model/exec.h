// The executor: a thread pool plus the activation scratch of one forward step, sized once for a
// model, a largest batch and the thread count. Sessions (model/session.h) hold what belongs to a
// sequence; an executor holds what a step needs while it runs, so one executor runs the batches of
// any number of sessions, one batch at a time (not concurrently: one caller at a time).
// Every buffer comes from one 64-byte-aligned arena; nothing is allocated while it runs.
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "core/status.h"
#include "core/threads.h"
#include "model/model.h"
#include "ops/attention.h"

struct ml_session;

inline constexpr int ML_MAX_BATCH = 128;  // tokens per forward step
// Tokens of one forward step that may ask for logits: the logits buffer is [rows][vocab], which
// for a 150,000-token vocabulary and a whole batch would be 78 MB of scratch. A prompt asks for
// its last token's, a batch of sessions one each; the engine cuts a step at the executor's
// logit_rows: ML_MAX_LOGIT_ROWS, fewer where the vocabulary is large (ML_LOGIT_BYTES of rows, at
// least ML_MIN_LOGIT_ROWS), never more than the batch.
inline constexpr int ML_MAX_LOGIT_ROWS = 32;
inline constexpr int ML_MIN_LOGIT_ROWS = 4;
inline constexpr size_t ML_LOGIT_BYTES = (size_t)8 << 20;

// Stages timed by --profile.
enum ml_stage : int { ML_STAGE_QKV, ML_STAGE_ATTENTION, ML_STAGE_WO, ML_STAGE_FFN, ML_STAGE_CLASSIFIER, ML_STAGE_OTHER, ML_STAGE_COUNT };

struct ml_exec_opts {
  int n_threads = 1;           // the pool's size, the caller included
  int max_batch = ML_MAX_BATCH;  // tokens per forward step, 1..ML_MAX_BATCH
  bool profile = false;
};

struct ml_exec {
  const ml_model* model = nullptr;
  ml_exec_opts p;
  ml_pool* pool = nullptr;  // owned; its size is p.n_threads, the count the attention scratch is sized for
  ml_arena arena;
  float *x = nullptr, *xb = nullptr, *xb2 = nullptr;  // [batch][dim] residual; [batch][max(dim, q_dim)]; [batch][dim]
  float *q = nullptr, *k = nullptr, *v = nullptr;     // [batch][q_dim], [batch][kv_dim] x 2
  float* gate = nullptr;                              // [batch][q_dim] the attention output gate (attn_gate models)
  // Linear-attention layers: [batch][channels] qkv, [batch][nv * dv] z (then the op's output),
  // [batch][nv] b and a, and each token's recurrent state.
  float *lin_qkv = nullptr, *lin_z = nullptr, *lin_b = nullptr, *lin_a = nullptr;
  ml_delta_state** lin_states = nullptr;
  float *hb = nullptr, *hb2 = nullptr;                // [batch][hidden_dim]
  int8_t* act_q = nullptr;                            // [batch][act_n] quantized activations
  float* act_d = nullptr;                             // their block scales
  float* logits = nullptr;                            // [logit_rows][vocab]: one row per token that asked
  int logit_rows = 0;                                 // min(max_batch, ML_MAX_LOGIT_ROWS)
  const ml_kv_layer** caches = nullptr;               // [batch] each token's layer cache (forward's)
  // [batch] the step being assembled by the engine: ids, sessions, positions, logits flags.
  int32_t* step_tokens = nullptr;
  ml_session** step_sessions = nullptr;
  int* step_pos = nullptr;
  uint8_t* step_logits = nullptr;
  ml_attn_scratch attn;                               // per thread, for contexts up to model->ctx
  double stage_seconds[ML_STAGE_COUNT] = {0};
};

// Creates the pool and sizes the scratch. ML_E_ARG for a bad thread count or batch.
ml_status ml_exec_init(ml_exec* e, const ml_model* m, const ml_exec_opts* p, ml_error* err);
void ml_exec_release(ml_exec* e);

// Bytes of scratch ml_exec_init allocates; ML_E_NOMEM on overflow.
ml_status ml_exec_plan_bytes(const ml_model* m, const ml_exec_opts* p, size_t* bytes, ml_error* err);
