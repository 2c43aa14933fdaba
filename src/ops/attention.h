// Attention of one position's query heads over a layer's KV cache (F32, Q8 or F16), and storing a
// position's keys and values into that cache. GQA: query head h reads KV head h / (n_heads / n_kv).
#pragma once
#include <cstddef>
#include <cstdint>

enum ml_kv_type : int { ML_KV_F32 = 0, ML_KV_Q8 = 1, ML_KV_F16 = 2 };

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

// Stores k and v ([n_kv_heads * head_dim] floats) at position pos: copied (F32), rounded to half
// (F16), or quantized per KV head with one scale (Q8, the activation rounding rule).
void ml_op_kv_store(const ml_kv_layer* L, const ml_attn_shape* s, int pos, const float* k, const float* v);

// out[h] = sum_j softmax_j(q_h . k_j / sqrt(head_dim)) v_j over positions j in [0, n_pos).
// scores: scratch of n_pos floats; qq: scratch of head_dim int8 (Q8 cache: the quantized query).
void ml_op_attention(float* out, const float* q, const ml_kv_layer* L, const ml_attn_shape* s, int n_pos,
                     float* scores, int8_t* qq);
