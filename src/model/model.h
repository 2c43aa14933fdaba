// A loaded model: the mapped .mlb file, its validated hyperparameters, one description per layer
// (its kind, its tensors, its attention shape and RoPE table), the packed weights, the RoPE
// tables and the tokenizer. Read-only once ml_model_prepare has returned: any number of sessions
// and threads may read one model at once (docs/architecture.md).
// Contract: ml_model_load validates everything a forward pass relies on (header fields, every
// tensor's presence, type and shape, Q8 quants in [-127, 127]) and fails with a status and a
// message naming the field or tensor; after it succeeds, the forward pass needs no checks.
// Weights are read in place from the mapping; nothing is copied (packing makes its own copy).
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "core/file.h"
#include "core/status.h"
#include "core/types.h"
#include "model/format.h"
#include "ops/attention.h"
#include "ops/delta.h"

struct ml_tokenizer;

// Model-wide hyperparameters, derived from the header.
struct ml_config {
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, max_seq;
  int q_dim, kv_dim;  // n_heads * head_dim, n_kv_heads * head_dim
  float norm_eps, embed_scale;
  int bos_id, eos_id;
  bool tied;  // the classifier is the embedding
  // Architectural choices, one field each, read from the header at load (docs/architecture.md,
  // "Architectures"): the forward pass branches on these, never on the architecture's name.
  bool qkv_bias, qk_norm, post_norms, attn_gate;
  bool gelu;            // the FFN gate's activation: GELU (tanh) instead of SiLU
  float logit_softcap;  // 0: none
  int n_linear;         // linear-attention layers (their state cannot rewind: session.h)
  ml_delta_shape delta; // their shape (n_linear > 0)
};

// What a layer computes: attention over a KV cache, or Qwen3.5's gated delta rule (linear
// attention) over a recurrent state in the session (ops/delta.h, docs/architecture.md).
enum ml_layer_kind : int { ML_LAYER_ATTENTION = 0, ML_LAYER_LINEAR = 1 };

// A RoPE table: cos/sin of pos * freq_i for positions [0, ctx) and i < n_rot / 2, and how the
// rotated pairs are laid out (ML_ROPE_INTERLEAVED or ML_ROPE_HALF). Layers point at one; a model
// with two RoPE bases (Gemma 3's local and global layers) holds two.
struct ml_rope_table {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int n_rot = 0, ctx = 0, type = 0;
  double theta = 0;
};

// One layer: its kind, its tensors (optional ones null when the model has none) and its
// attention. src/model/tensor_table.h lists every tensor with its name, shape and condition.
struct ml_layer {
  ml_layer_kind kind = ML_LAYER_ATTENTION;
  const float* attn_norm = nullptr;
  ml_qtensor wq, wk, wv, wo;
  ml_qtensor wg;                                            // output gate (ML_FLAG_ATTN_GATE)
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // q/k/v biases (ML_FLAG_QKV_BIAS)
  const float *q_norm = nullptr, *k_norm = nullptr;         // per-head RMSNorm of q, k (ML_FLAG_QK_NORM)
  const float* attn_post_norm = nullptr;                    // norm of the attention output (ML_FLAG_POST_NORMS)
  const float* ffn_norm = nullptr;
  ml_qtensor w1, w2, w3;                                    // gate, down, up
  const float* ffn_post_norm = nullptr;                     // norm of the FFN output (ML_FLAG_POST_NORMS)
  ml_attn_shape attn{};                                     // heads, score scale, window
  const ml_rope_table* rope = nullptr;
  // Linear-attention layers (ML_LAYER_LINEAR): the projections around ml_op_delta and its weights.
  ml_qtensor wqkv, wz, wbeta, walpha, wssm_out;
  const float *ssm_conv1d = nullptr, *ssm_a = nullptr, *ssm_dt = nullptr, *ssm_norm = nullptr;
  ml_delta_weights delta{};  // the same four views, as ml_op_delta takes them
};

inline constexpr int ML_MAX_LAYERS = 4096;

struct ml_model {
  ml_file file;
  ml_mlb mlb;
  ml_config cfg;
  ml_qtensor tok_embd;
  ml_qtensor output;  // == tok_embd when tied
  const float* output_norm = nullptr;
  ml_layer* layers = nullptr;  // cfg.n_layers entries
  // Set by ml_model_prepare:
  int ctx = 0;                 // the longest context any session of this model may have
  ml_rope_table rope;          // [ctx] positions: the global layers' table (every layer's without a window)
  ml_rope_table rope_local;    // the sliding-window layers' table when their base differs (Gemma 3)
  ml_arena tables;             // the RoPE tables' memory
  ml_tokenizer* tok = nullptr; // null when neither the file nor the caller brought one
  // Packed copies (model/pack.h): heap memory, or a mapped pack cache.
  void* packed_mem = nullptr;
  ml_file pack_file;
  bool packed = false, pack_from_cache = false, pack_cache_written = false;
  int pack_g = 0;
  size_t packed_bytes = 0;
};

// Opens, maps and validates path.
ml_status ml_model_load(ml_model* m, const char* path, ml_error* err);

// Same, over bytes the caller owns and keeps alive (the wasm build).
ml_status ml_model_load_memory(ml_model* m, const void* data, size_t size, ml_error* err);

// Same, over an open file the model takes (a model converted at load: engine/model_import.h's
// ml_import): closed with the model, or on failure.
ml_status ml_model_load_file(ml_model* m, ml_file* f, ml_error* err);

// What ml_model_prepare does after loading.
struct ml_model_options {
  int ctx = 0;                          // 0: the model's max_seq, at most ML_DEFAULT_CTX_CAP
  bool pack = true;                     // pack the weights when the build has packed kernels
  const char* pack_cache = nullptr;     // path of the pack cache to map or write; null: none
  const char* tokenizer_path = nullptr; // a llama2.c tokenizer.bin replacing the model's own
  int n_threads = 1;                    // threads that pack the weights (a pool for the load only)
};

// Builds the RoPE tables, packs the weights and loads the tokenizer. ML_E_ARG for a bad ctx.
ml_status ml_model_prepare(ml_model* m, const ml_model_options* o, ml_error* err);

void ml_model_free(ml_model* m);

// Writes row `token` of the embedding, dequantized and multiplied by embed_scale, into x[dim].
void ml_model_embed(const ml_model* m, int token, float* x);

// RoPE frequency scaling (the header's rope_scaling and its fields): ML_ROPE_SCALING_LLAMA3 applies
// Llama 3's per-band rule, ML_ROPE_SCALING_LINEAR divides every frequency by factor.
struct ml_rope_scaling_params {
  uint32_t type = ML_ROPE_SCALING_NONE;
  double factor = 1, low_freq_factor = 1, high_freq_factor = 1, orig_ctx = 0;
};

// Fills a RoPE table's cos/sin [ctx][n_rot / 2]: angle(pos, i) = pos * freq_i with
// freq_i = theta^(-2i / n_rot) scaled by sc (null: none), computed in double precision and
// rounded once to float.
void ml_rope_fill(float* cos_t, float* sin_t, int ctx, int n_rot, double theta, const ml_rope_scaling_params* sc);
