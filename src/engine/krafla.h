// krafla's public API: the only header the apps (native/), the wasm exports and other languages
// include. C-compatible: opaque handles, status codes, plain structs.
//
// Typical use: ml_engine_open -> ml_engine_tokenize -> ml_engine_generate (or ml_engine_eval for
// logits) -> ml_engine_close. One engine runs one sequence at a time; it is not thread-safe.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

extern "C" {

struct ml_engine;

enum ml_kv_kind { ML_ENGINE_KV_F32 = 0, ML_ENGINE_KV_Q8 = 1, ML_ENGINE_KV_F16 = 2 };

struct ml_engine_params {
  const char* tokenizer_path;  // llama2.c tokenizer.bin replacing the model's own; may be null
  int ctx;                     // context length; 0 = the model's max_seq
  int kv;                      // ml_kv_kind
  int n_threads;               // 0 or 1 = the caller alone
  int batch;                   // prompt tokens per forward step, 1..128; 0 = 128
  int no_pack;                 // keep the row-major layout even when the build has packed kernels
  int pack_cache;              // map (or write) MODEL.pk<G> instead of packing at every load
  int profile;                 // time the stages of the forward pass (ml_engine_profile)
};

struct ml_engine_info {
  int vocab_size, ctx, max_seq;
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim;
  int wtype;          // 2 Q8, 3 Q4
  int bos_id, eos_id;
  int has_tokenizer;  // 0 when neither the model nor params carry one
  const char* isa;    // the build's kernel ISA ("scalar", "avx2", ...)
  size_t state_bytes; // the arena: activations, KV cache, RoPE tables, logits
  int n_threads, batch;
  int packed;         // 1: the weights run on packed kernels
  int pack_g;         // their row group (0 when row-major)
  int pack_from_cache, pack_cache_written;
  size_t packed_bytes;
};

// The build's kernel ISA and pack group (0: no packed kernels), without opening a model.
const char* ml_build_isa(void);
int ml_build_pack_g(void);

ml_status ml_engine_open(ml_engine** out, const char* model_path, const ml_engine_params* params, ml_error* err);
// The model bytes stay owned by the caller and must outlive the engine.
ml_status ml_engine_open_memory(ml_engine** out, const void* data, size_t size, const ml_engine_params* params,
                                ml_error* err);
void ml_engine_close(ml_engine* e);
ml_engine_info ml_engine_get_info(const ml_engine* e);

// Text to ids; ML_E_ARG when there is no tokenizer or cap is too small (*n = the count needed).
ml_status ml_engine_tokenize(const ml_engine* e, const char* text, size_t len, int add_bos, int32_t* ids, size_t cap,
                             size_t* n, ml_error* err);
// The text of id after prev (null and *len = 0 when out of range or without a tokenizer).
const char* ml_engine_piece(const ml_engine* e, int32_t prev, int32_t id, size_t* len);

// Feeds ids at positions [pos, pos + n) and computes the logits of the last one (see
// ml_engine_logits). ML_E_ARG when an id is outside the vocabulary or the context would overflow.
ml_status ml_engine_eval(ml_engine* e, const int32_t* ids, size_t n, int pos, ml_error* err);
// The logits (vocab_size floats) of the last evaluated position.
const float* ml_engine_logits(const ml_engine* e);

// Like ml_engine_eval, but computes the logits of every position and calls cb(user, i, logits)
// for each, in order (prompt scoring, --dump-logits). Batched like any prompt.
typedef int (*ml_logits_cb)(void* user, size_t index, const float* logits);
ml_status ml_engine_eval_all(ml_engine* e, const int32_t* ids, size_t n, int pos, ml_logits_cb cb, void* user,
                             ml_error* err);

// Seconds spent per stage since the engine opened (params.profile): qkv, attention, wo, ffn,
// classifier, other. Returns the number of stages written (6), or 0 when profiling is off.
int ml_engine_profile(const ml_engine* e, double seconds[6]);

struct ml_gen_params {
  int max_tokens;      // tokens to generate
  float temperature;   // 0 = greedy
  float top_p;         // 1 = off
  int top_k;           // 0 = off
  uint64_t seed;
  int stop_at_eos;     // stop when BOS or EOS is sampled (llama2.c's stories end that way)
};

enum ml_stop_reason { ML_STOP_LENGTH = 0, ML_STOP_EOS = 1, ML_STOP_CONTEXT = 2, ML_STOP_CALLBACK = 3 };

struct ml_gen_stats {
  int n_prompt, n_generated;
  double prompt_seconds, gen_seconds;
  int stop_reason;  // ml_stop_reason
};

// Called for each token as it is fed (prompt, generated = 0) or sampled (generated = 1) with its
// text piece; return nonzero to stop.
typedef int (*ml_token_cb)(void* user, int32_t id, const char* piece, size_t len, int generated);

// Feeds the prompt from position 0, then samples up to max_tokens tokens. Stops at the context
// limit with stop_reason ML_STOP_CONTEXT.
ml_status ml_engine_generate(ml_engine* e, const int32_t* prompt, size_t n_prompt, const ml_gen_params* p,
                             ml_token_cb cb, void* user, ml_gen_stats* stats, ml_error* err);

}  // extern "C"
