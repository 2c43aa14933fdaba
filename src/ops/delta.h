// The gated delta rule (Qwen3.5's linear-attention layers): a depthwise causal convolution over
// the in_proj_qkv channels, then per value head a dk x dv state updated token by token, read by
// the query and passed through a gated RMSNorm. The projections before (attn_qkv, attn_gate,
// ssm_beta, ssm_alpha) and after (ssm_out) are the caller's quantized matmuls; this op does all
// the float work between them.
//
// Math, for one token of one sequence (nk key heads, nv value heads of dims dk and dv, K taps,
// ch = 2*nk*dk + nv*dv channels ordered q [nk][dk], k [nk][dk], v [nv][dv]):
//   x'_c   = silu(sum_{j<K} conv[c][j] * x_c(t - K + 1 + j))   tap K-1 on this token's input,
//                                                              inputs before position 0 are 0
//   value head h reads key head kh = h / (nv / nk)             (grouped, as transformers)
//   q = l2norm(q_kh) / sqrt(dk),  k = l2norm(k_kh)             l2norm(x) = x / sqrt(|x|^2 + 1e-6)
//   beta = sigmoid(b_h),  decay = exp(A_h * softplus(a_h + dt_bias_h))   (A = -exp(A_log) < 0)
//   S_h   = decay * S_h                                        S_h is [dk][dv]
//   delta = beta * (v_h - S_h^T k)
//   S_h  += k (x) delta                                        S_h[i][j] += k[i] * delta[j]
//   o     = S_h^T q
//   out_h = norm * o / sqrt(mean(o^2) + eps) * silu(z_h)       norm [dv] shared by the heads
//
// Order and threads: the convolution is split across the pool by channel, the update by value
// head, and each takes every token of a batch in turn with the arithmetic of a single token (no
// sum is reordered), so outputs and states are bit-identical for any thread count and any way of
// cutting a sequence into batches. The state cannot be rewound: a sequence that starts over at
// position 0 is cleared with ml_delta_state_clear.
#pragma once
#include <cstddef>

#include "core/status.h"
#include "core/threads.h"

inline constexpr int ML_DELTA_MAX_HEAD_DIM = 512;  // dk and dv (per-thread stack rows)
inline constexpr int ML_DELTA_MAX_HEADS = 1024;    // nk and nv
inline constexpr int ML_DELTA_MAX_CONV = 16;       // K
inline constexpr float ML_DELTA_L2_EPS = 1e-6f;    // transformers' l2norm epsilon (fixed, not norm_eps)

// A layer's shape: the header's linear_* fields, and eps = norm_eps for the gated RMSNorm.
struct ml_delta_shape {
  int n_k_heads = 0, n_v_heads = 0;
  int k_dim = 0, v_dim = 0;
  int conv = 0;
  float eps = 1e-6f;
};

// A layer's F32 weights (docs/format.md, "Linear-attention layers").
struct ml_delta_weights {
  const float* conv1d = nullptr;   // ssm_conv1d [ch][K]
  const float* a = nullptr;        // ssm_a [nv]: A = -exp(A_log)
  const float* dt_bias = nullptr;  // ssm_dt [nv]
  const float* norm = nullptr;     // ssm_norm [dv]
};

// One sequence's state for one layer: the last K-1 raw inputs of each channel (oldest first) and
// one dk x dv matrix per value head. Both views point into memory the caller owns.
struct ml_delta_state {
  float* conv = nullptr;  // [K-1][ch]
  float* S = nullptr;     // [nv][dk][dv]
};

// ML_E_SHAPE unless 1 <= nk <= nv <= ML_DELTA_MAX_HEADS with nv % nk == 0, dk and dv in
// 1..ML_DELTA_MAX_HEAD_DIM, K in 1..ML_DELTA_MAX_CONV and eps finite and > 0; ML_E_NOMEM when a
// state's bytes overflow size_t. The functions below assume a shape that passed.
ml_status ml_delta_check(const ml_delta_shape* s, ml_error* err);

inline int ml_delta_channels(const ml_delta_shape* s) { return 2 * s->n_k_heads * s->k_dim + s->n_v_heads * s->v_dim; }

// Floats one sequence's state takes for one layer: (K-1)*ch + nv*dk*dv.
size_t ml_delta_state_floats(const ml_delta_shape* s);

// Points st at mem (ml_delta_state_floats floats: conv first, then S) and zeroes it.
void ml_delta_state_init(ml_delta_state* st, float* mem, const ml_delta_shape* s);

// Zeroes both parts: the state of a sequence that has seen no token.
void ml_delta_state_clear(const ml_delta_state* st, const ml_delta_shape* s);

// A batch of n tokens; token t continues the sequence whose state is states[t]. Tokens of one
// sequence appear in their order; tokens of different sequences may interleave.
struct ml_delta_batch {
  int n = 0;
  float* qkv = nullptr;  // [n][ch] in_proj_qkv outputs; overwritten with the convolved x'
  int ld_qkv = 0;
  const float* z = nullptr;  // [n][nv*dv] in_proj_z outputs
  int ld_z = 0;
  const float* b = nullptr;  // [n][nv] in_proj_b outputs (row stride nv)
  const float* a = nullptr;  // [n][nv] in_proj_a outputs (row stride nv)
  float* out = nullptr;      // [n][nv*dv] the gated-normed o; may be z itself (same stride)
  int ld_out = 0;
  ml_delta_state* const* states = nullptr;  // [n]
};

// Runs the layer on the batch: advances every state by its tokens and writes out.
void ml_op_delta(ml_pool* pool, const ml_delta_batch* b, const ml_delta_shape* s, const ml_delta_weights* w);
