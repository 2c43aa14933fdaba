// The runtime state of one sequence: activations for a batch of up to `batch` tokens, the
// quantized-activation buffers, the KV cache, the RoPE tables, per-thread attention scratch and
// the logits, all carved from one 64-byte-aligned arena sized at creation from the model's
// hyperparameters, the context length, the batch size and the thread count. Nothing is allocated
// afterwards.
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "core/status.h"
#include "model/model.h"
#include "ops/attention.h"
#include "ops/exec.h"

// Stages timed by --profile.
enum ml_stage : int { ML_STAGE_QKV, ML_STAGE_ATTENTION, ML_STAGE_WO, ML_STAGE_FFN, ML_STAGE_CLASSIFIER, ML_STAGE_OTHER, ML_STAGE_COUNT };

struct ml_state_params {
  int ctx = 0;               // positions the cache holds, 1..max_seq
  ml_kv_type kv = ML_KV_F32;
  int batch = 1;             // prompt tokens per forward step, 1..ML_MAX_BATCH
  int n_threads = 1;         // sizes the per-thread scratch
};

inline constexpr int ML_MAX_BATCH = 128;

struct ml_state {
  ml_arena arena;
  ml_state_params p;
  ml_exec exec;           // the pool ops may use (owned by the caller)
  float *x, *xb, *xb2;    // [batch][dim] residual; [batch][max(dim, q_dim)] norm/attention out; [batch][dim]
  float *q, *k, *v;       // [batch][q_dim], [batch][kv_dim] x 2
  float *hb, *hb2;        // [batch][hidden_dim]
  int8_t* act_q;          // [batch][act_n] quantized activations (token t at t * width)
  float* act_d;           // their block scales
  float* logits;          // [batch][vocab]: the last token's row first (or every token's)
  float *rope_cos, *rope_sin;  // [ctx][head_dim / 2]
  ml_kv_layer* kv_layers;      // [n_layers]
  ml_attn_scratch attn;        // per thread
  bool profile = false;
  double stage_seconds[ML_STAGE_COUNT] = {0};
};

// Sizes and allocates the arena; ML_E_ARG for a bad ctx, batch or thread count, ML_E_NOMEM when
// the sizes overflow or the memory is not there.
ml_status ml_state_init(ml_state* s, const ml_model* m, const ml_state_params* p, ml_error* err);
void ml_state_free(ml_state* s);

// Bytes ml_state_init would allocate (the planning pass alone); ML_E_NOMEM on overflow.
ml_status ml_state_bytes(const ml_model* m, const ml_state_params* p, size_t* bytes, ml_error* err);

// Fills the RoPE tables for positions [0, ctx): angle(pos, i) = pos * theta^(-2i / head_dim),
// computed in double precision and rounded once to float.
void ml_rope_tables(float* cos_t, float* sin_t, int ctx, int head_dim, double theta);
