// Attention of a batch of query tokens, each over its own sequence's KV cache (F32, Q8 or F16),
// split across the pool by (token, KV head), and storing a position's keys and values.
// The tokens of one batch may belong to different sequences: token t reads the layer cache
// caches[t] at positions up to pos[t], so a batch of many sessions gives each token exactly what
// it gets alone.
// GQA: query head h reads KV head h / (n_heads / n_kv_heads). The heads that share a KV head walk
// the cache together in blocks of 64 positions, so each block of K (then V) is read into L1 once
// for the whole group (and, with an F16 cache where the ISA has the grouped kernels, widened to
// float once: kernels/ops.h, dot_f16_heads). Per head the arithmetic does not depend on the block size, the batch or
// the thread count: scores are independent dot products, and the V sum adds rows in position
// order.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"  // ml_kv_type (krafla_types.h)
#include "core/threads.h"

inline constexpr int ML_ATTN_BLOCK = 64;  // cached positions per kernel call

// One layer's cache of one sequence, head-major: rows [n_kv_heads][ctx][head_dim] of `type`, so the
// positions of one KV head are one contiguous stream (decode reads a group's K, then V, front to
// back; with [ctx][kv_dim] every row of a head sat in its own 4 KB page, where the hardware
// prefetchers stop). Q8: int8 rows plus one float scale per (KV head, position), scales
// [n_kv_heads][ctx]; F16: uint16 halves; F32: floats.
struct ml_kv_layer {
  void* k = nullptr;
  void* v = nullptr;
  float* k_scale = nullptr;  // Q8 only
  float* v_scale = nullptr;  // Q8 only
  ml_kv_type type = ML_KV_F32;
  int ctx = 0;               // positions it holds
};

// The index of (KV head h, position pos) among a cache's rows: its Q8 scale's index, and times
// head_dim its first element in K or V.
inline size_t ml_kv_index(const ml_kv_layer* L, int h, int pos) { return (size_t)h * L->ctx + (size_t)pos; }
inline size_t ml_kv_row(const ml_kv_layer* L, int h, int pos, int head_dim) {
  return ml_kv_index(L, h, pos) * (size_t)head_dim;
}

// A layer's attention: head counts and size, the score scale (1/sqrt(head_dim) for Llama; a
// per-layer value so that architectures with another query scaling set it at load) and the
// window: 0 attends to every earlier position, w > 0 to the last w positions (pos - w, pos].
struct ml_attn_shape {
  int n_heads, n_kv_heads, head_dim;
  float scale;
  int window = 0;
};

// Per-thread scratch for ml_op_attention: scores of one GQA group over up to ctx positions, and
// the quantized query heads (Q8 caches). Sized by the executor for its thread count and the
// largest context of the sessions it runs.
struct ml_attn_scratch {
  float* scores = nullptr;  // [n_threads][group * ctx]
  int8_t* qq = nullptr;     // [n_threads][group * head_dim]
  float* qd = nullptr;      // [n_threads][group]
  int ctx = 0;
};

// Stores k and v ([n_kv_heads * head_dim] floats) at position pos (< L->ctx): copied (F32),
// rounded to half (F16), or quantized per KV head with one scale (Q8, the activation rounding rule).
void ml_op_kv_store(const ml_kv_layer* L, const ml_attn_shape* s, int pos, const float* k, const float* v);

// For tokens t < n_tokens (their K/V already stored at pos[t] in caches[t]):
//   out[t][h] = sum_j softmax_j(scale * q_t,h . k_j) v_j   over the positions j the window allows
//   in [0, pos[t]] of caches[t].
// q and out are [n_tokens][n_heads * head_dim] with row strides ldq and ldo. Every pos[t] is below
// scratch->ctx and its cache's ctx.
void ml_op_attention(ml_pool* pool, float* out, int ldo, const float* q, int ldq, int n_tokens, const int* pos,
                     const ml_kv_layer* const* caches, const ml_attn_shape* s, const ml_attn_scratch* scratch);

// The first position token `pos` attends to under window (0: the whole cache).
inline int ml_attn_first(int pos, int window) { return window > 0 && pos >= window ? pos - window + 1 : 0; }
