// The runtime state of one generation: activations, quantized-activation buffers, the KV cache,
// the RoPE tables and the logits, all carved from one 64-byte-aligned arena sized at creation from
// the model's hyperparameters and the context length. Nothing is allocated afterwards.
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "core/status.h"
#include "model/model.h"
#include "ops/attention.h"

struct ml_state {
  ml_arena arena;
  int ctx = 0;            // positions the cache holds (<= max_seq)
  ml_kv_type kv = ML_KV_F32;
  float *x, *xb, *xb2;    // residual stream and scratch [dim] (xb also holds the attention output [q_dim])
  float *q, *k, *v;       // [q_dim], [kv_dim], [kv_dim]
  float *hb, *hb2;        // FFN [hidden_dim]
  float* scores;          // attention scores [ctx]
  int8_t* qq;             // quantized query head [head_dim] (Q8 cache)
  int8_t* act_q;          // quantized activations [max(dim, q_dim, hidden_dim)]
  float* act_d;           // their block scales
  float* logits;          // [vocab]
  float *rope_cos, *rope_sin;  // [ctx][head_dim / 2]
  ml_kv_layer* kv_layers;      // [n_layers]
};

// Sizes and allocates the arena for ctx positions (1 <= ctx <= max_seq) and a KV cache of type kv;
// ML_E_ARG for a bad ctx, ML_E_NOMEM when the sizes overflow or the memory is not there.
ml_status ml_state_init(ml_state* s, const ml_model* m, int ctx, ml_kv_type kv, ml_error* err);
void ml_state_free(ml_state* s);

// Bytes ml_state_init would allocate (the planning pass alone); ML_E_NOMEM on overflow.
ml_status ml_state_bytes(const ml_model* m, int ctx, ml_kv_type kv, size_t* bytes, ml_error* err);

// Fills the RoPE tables for positions [0, ctx): angle(pos, i) = pos * theta^(-2i / head_dim),
// computed in double precision and rounded once to float.
void ml_rope_tables(float* cos_t, float* sin_t, int ctx, int head_dim, double theta);
