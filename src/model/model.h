// A loaded model: the mapped .mlb file, its validated hyperparameters and views of its weights.
// Contract: ml_model_load validates everything a forward pass relies on (header fields, every
// tensor's presence, type and shape, Q8 quants in [-127, 127]) and fails with a status and a
// message naming the field or tensor; after it succeeds, the forward pass needs no checks.
// Weights are read in place from the mapping; nothing is copied.
#pragma once
#include <cstdint>

#include "core/file.h"
#include "core/status.h"
#include "core/types.h"
#include "model/format.h"

// Hyperparameters the forward pass uses, derived from the header.
struct ml_config {
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, max_seq;
  int q_dim, kv_dim;  // n_heads * head_dim, n_kv_heads * head_dim
  int wtype;          // ML_DT_Q8 or ML_DT_Q4
  float norm_eps, rope_theta, embed_scale;
  int rope_type;  // ML_ROPE_INTERLEAVED or ML_ROPE_HALF
  int bos_id, eos_id;
  bool tied;  // the classifier is the embedding
};

struct ml_layer {
  const float* attn_norm;
  ml_qtensor wq, wk, wv, wo;
  const float* ffn_norm;
  ml_qtensor w1, w2, w3;  // gate, down, up
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
  // Packed copies (model/pack.h): heap memory, or a mapped pack cache.
  void* packed_mem = nullptr;
  ml_file pack_file;
};

// Opens, maps and validates path.
ml_status ml_model_load(ml_model* m, const char* path, ml_error* err);

// Same, over bytes the caller owns and keeps alive (the wasm build).
ml_status ml_model_load_memory(ml_model* m, const void* data, size_t size, ml_error* err);

void ml_model_free(ml_model* m);

// Writes row `token` of the embedding, dequantized and multiplied by embed_scale, into x[dim].
void ml_model_embed(const ml_model* m, int token, float* x);
