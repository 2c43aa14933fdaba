// Attention of a batch of query positions over a layer's KV cache (F32, Q8 or F16), split across
// the pool by (token, KV head), and storing positions' keys and values into the cache.
// GQA: query head h reads KV head h / (n_heads / n_kv_heads). The heads that share a KV head walk
// the cache together in blocks of 64 positions, so each block of K (then V) is read into L1 once
// for the whole group. Per head the arithmetic does not depend on the block size or the thread
// count: scores are independent dot products, and the V sum adds rows in position order.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/exec.h"

enum ml_kv_type : int { ML_KV_F32 = 0, ML_KV_Q8 = 1, ML_KV_F16 = 2 };

inline constexpr int ML_ATTN_BLOCK = 64;  // cached positions per kernel call

// One layer's cache: rows [ctx][kv_dim]. Q8: int8 rows plus one float scale per (position, KV
// head), scales [ctx][n_kv_heads]; F16: uint16 halves; F32: floats.
struct ml_kv_layer {
  void* k = nullptr;
  void* v = nullptr;
  float* k_scale = nullptr;  // Q8 only
  float* v_scale = nullptr;  // Q8 only
};

struct ml_attn_shape {
  int n_heads, n_kv_heads, head_dim;
  ml_kv_type kv;
};

// Per-thread scratch for ml_op_attention: scores of one GQA group over the context, and the
// quantized query heads (Q8 cache). model/state.cpp sizes them for the thread count.
struct ml_attn_scratch {
  float* scores;  // [n_threads][group * ctx]
  int8_t* qq;     // [n_threads][group * head_dim]
  float* qd;      // [n_threads][group]
};

// Stores k and v ([n_kv_heads * head_dim] floats) at position pos: copied (F32), rounded to half
// (F16), or quantized per KV head with one scale (Q8, the activation rounding rule).
void ml_op_kv_store(const ml_kv_layer* L, const ml_attn_shape* s, int pos, const float* k, const float* v);

// For tokens t < n_tokens at positions pos0 + t (their K/V already stored):
// out[t][h] = sum_j softmax_j(q_t,h . k_j / sqrt(head_dim)) v_j over j in [0, pos0 + t].
// q and out are [n_tokens][n_heads * head_dim] with row strides ldq and ldo. ctx bounds the scratch.
void ml_op_attention(const ml_exec* ex, float* out, int ldo, const float* q, int ldq, int n_tokens, int pos0,
                     const ml_kv_layer* L, const ml_attn_shape* s, int ctx, const ml_attn_scratch* scratch);
