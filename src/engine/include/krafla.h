/* krafla's public API: the only header the apps (native/), the wasm module and other languages
 * include. C11 and C++, self-contained: opaque handles, status codes, plain structs.
 *
 *   ml_model    a model file, mapped, validated and packed once; read-only afterwards, so any
 *               number of sessions and threads may use it at once. Owns its tokenizer.
 *   ml_session  one sequence: its KV cache, position, token history, logits and sampler.
 *   ml_exec     a thread pool and the scratch of one forward step. One caller at a time.
 *
 * Typical use: ml_model_open -> ml_exec_create -> ml_session_create -> ml_tokenize ->
 * ml_generate (or ml_session_feed for logits) -> free them in reverse order. ml_eval_batch runs
 * tokens of many sessions in one step (the weights are read once for all of them); each
 * session's logits are byte-identical to running it alone, for any mix, batch size and thread
 * count.
 *
 * Every fallible call returns ml_status and fills the ml_error it is given (may be NULL) with a
 * message naming the file, field, option or value at fault. */
#ifndef KRAFLA_H
#define KRAFLA_H
#include <stddef.h>
#include <stdint.h>

#include "krafla_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ml_model ml_model;
typedef struct ml_session ml_session;
typedef struct ml_exec ml_exec;
typedef struct ml_tokenizer ml_tokenizer;
typedef struct ml_gen ml_gen;

/* "ok", "io", "format", "shape", "nomem", "isa", "arg". */
const char* ml_status_name(ml_status s);

/* ---- The build ------------------------------------------------------------------------------ */

/* The build's kernel ISA ("scalar", "avx2", ...) and pack group (0: no packed kernels). */
const char* ml_build_isa(void);
int ml_build_pack_g(void);
/* 1 when the build has the thread pool (the single-threaded wasm builds compile it out). */
int ml_build_threads(void);
/* The first CPU feature that `isa` needs and this CPU lacks ("avx2", ...), or NULL when it runs.
 * Compiled without ISA flags, so it is safe to call before any kernel (native/main_guard.cpp). */
const char* ml_cpu_missing(const char* isa);

/* ---- Models --------------------------------------------------------------------------------- */

typedef struct ml_model_params {
  const char* tokenizer_path; /* llama2.c tokenizer.bin replacing the model's own; may be NULL */
  int ctx;                    /* the longest context of any session; 0 = the model's max_seq, at most 4096 */
  int no_pack;                /* keep the row-major layout even when the build has packed kernels */
  int pack_cache;             /* map (or write) MODEL.pk<G> instead of packing at every load */
  int n_threads;              /* threads that pack the weights while loading; 0 or 1 = the caller alone */
} ml_model_params;

typedef struct ml_model_info {
  int vocab_size, ctx, max_seq;
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim;
  int wtype; /* ml_dtype of the header (ML_DT_Q8 or ML_DT_Q4; single matrices may differ) */
  int bos_id, eos_id;
  int has_tokenizer; /* 0 when neither the model nor the params carry one */
  const char* isa;
  int packed; /* 1: the weights run on packed kernels */
  int pack_g; /* their row group (0 when row-major) */
  int pack_from_cache, pack_cache_written;
  size_t packed_bytes;
  size_t model_bytes; /* the file */
  int recurrent; /* 1: linear-attention layers keep a state that cannot rewind: a session truncates
                    only to 0 or to its own position (ml_session_truncate) */
} ml_model_info;

/* params may be NULL (defaults). */
ml_status ml_model_open(ml_model** out, const char* path, const ml_model_params* params, ml_error* err);
/* The bytes stay owned by the caller and must outlive the model. */
ml_status ml_model_open_memory(ml_model** out, const void* data, size_t size, const ml_model_params* params,
                               ml_error* err);
void ml_model_close(ml_model* m);
ml_model_info ml_model_get_info(const ml_model* m);
/* The model's tokenizer, or NULL. Owned by the model. */
const ml_tokenizer* ml_model_tokenizer(const ml_model* m);

/* ---- Executors ------------------------------------------------------------------------------ */

typedef struct ml_exec_params {
  int n_threads; /* 0 or 1 = the caller alone */
  int batch;     /* tokens per forward step, 1..128; 0 = 128 */
  int profile;   /* time the stages of the forward pass (ml_exec_profile) */
} ml_exec_params;

ml_status ml_exec_create(ml_exec** out, const ml_model* m, const ml_exec_params* params, ml_error* err);
void ml_exec_free(ml_exec* e);
int ml_exec_threads(const ml_exec* e);
int ml_exec_batch(const ml_exec* e);
size_t ml_exec_bytes(const ml_exec* e); /* its scratch */
/* Seconds per stage since creation (profile on): qkv, attention, wo, ffn, classifier, other.
 * Returns the number of stages written (6), or 0 when profiling is off. */
int ml_exec_profile(const ml_exec* e, double seconds[6]);
/* Times the matrix products of one decode step alone: every weight matrix of the forward pass
 * once, in its order and grouping, on e's threads, over a fixed activation (e's scratch is
 * overwritten; no session is touched). *seconds: their time; *bytes: the weight bytes they read.
 * For benchmarks (ml_bench --probe-mb): a token's time beyond it is its other work. */
ml_status ml_exec_time_matrices(ml_exec* e, double* seconds, double* bytes, ml_error* err);

/* ---- Sessions ------------------------------------------------------------------------------- */

typedef struct ml_session_params {
  int ctx; /* positions it holds; 0 = the model's ctx */
  int kv;  /* ml_kv_type */
} ml_session_params;

ml_status ml_session_create(ml_session** out, const ml_model* m, const ml_session_params* params, ml_error* err);
void ml_session_free(ml_session* s);
int ml_session_ctx(const ml_session* s);
size_t ml_session_bytes(const ml_session* s); /* its cache, history, logits and sampler */
/* The positions filled, and the ids at them (valid until the session changes). */
int ml_session_pos(const ml_session* s);
const int32_t* ml_session_tokens(const ml_session* s);
/* Keeps the first n positions: the next token fed goes at position n, so a caller that shares a
 * prefix with what the session holds feeds only the rest (multi-turn chat). ML_E_ARG when n is
 * outside [0, pos]. */
ml_status ml_session_truncate(ml_session* s, int n, ml_error* err);
/* The logits (vocab_size floats) of the last token fed that asked for them, or NULL when none
 * was fed since creation or the last truncate. */
const float* ml_session_logits(const ml_session* s);

/* Feeds ids at the session's next positions and computes the logits of the last. ML_E_ARG when an
 * id is outside the vocabulary or the tokens do not fit the session's context; nothing is fed
 * then. */
ml_status ml_session_feed(ml_exec* e, ml_session* s, const int32_t* ids, size_t n, ml_error* err);

/* Like ml_session_feed, but computes every token's logits and calls cb(user, i, logits) for each
 * in order (prompt scoring, --dump-logits); a nonzero return stops early (the tokens fed so far
 * stay fed). */
typedef int (*ml_logits_cb)(void* user, size_t index, const float* logits);
ml_status ml_session_feed_all(ml_exec* e, ml_session* s, const int32_t* ids, size_t n, ml_logits_cb cb, void* user,
                              ml_error* err);

/* One token of a batch across sessions. It goes at its session's next position; a session's
 * tokens keep their order in the batch. */
typedef struct ml_batch_token {
  ml_session* session;
  int32_t id;
  int logits; /* nonzero: compute its logits (they become the session's, and go to cb) */
} ml_batch_token;

/* Runs the tokens of any sessions together, exec-batch tokens per forward step. cb (may be NULL)
 * gets (user, index in tokens, logits) for each token that asked, in order. ML_E_ARG (nothing
 * fed) for a bad id or a session whose context the tokens would overflow. */
ml_status ml_eval_batch(ml_exec* e, const ml_batch_token* tokens, size_t n, ml_logits_cb cb, void* user,
                        ml_error* err);

/* ---- Sampling ------------------------------------------------------------------------------- */

typedef struct ml_sampler_params {
  float temperature; /* 0 = greedy */
  float top_p;       /* 1 = off */
  int top_k;         /* 0 = off */
  uint64_t seed;
} ml_sampler_params;

/* Sets the session's sampler and restarts its generator from seed. ML_E_ARG names a bad value.
 * (min_p and the penalties are ml_gen_params': the penalties need the generation's history.) */
ml_status ml_session_set_sampler(ml_session* s, const ml_sampler_params* p, ml_error* err);
/* Draws the next id from the session's logits (-1 when it has none). */
int32_t ml_session_sample(ml_session* s);

/* ---- Tokenizers ----------------------------------------------------------------------------- */

/* A tokenizer alone (ml_tok): path is a .mlb (its tokenizer section), a llama2.c tokenizer.bin, a
 * Hugging Face tokenizer.json, or a folder holding tokenizer.json (with tokenizer_config.json and
 * generation_config.json when present: the chat template, BOS/EOS, the tokens that end a turn). */
ml_status ml_tokenizer_open(ml_tokenizer** out, const char* path, ml_error* err);
void ml_tokenizer_close(ml_tokenizer* t);
int32_t ml_tokenizer_vocab_size(const ml_tokenizer* t);
int32_t ml_tokenizer_bos_id(const ml_tokenizer* t); /* -1 when the tokenizer has none */
int32_t ml_tokenizer_eos_id(const ml_tokenizer* t);
/* Whether sampling id ends a turn: EOS, generation_config.json's eos_token_id(s), and the
 * end-of-turn tokens of known chat formats (<|eot_id|>, <|im_end|>, <end_of_turn>, ...). */
int ml_token_is_eog(const ml_tokenizer* t, int32_t id);
/* Whether id is a special token (an added token marked special; llama2.c: BOS and EOS). */
int ml_token_is_special(const ml_tokenizer* t, int32_t id);
/* 1 for a Hugging Face tokenizer.json, 0 for llama2.c's tokenizer.bin. */
int ml_tokenizer_is_hf(const ml_tokenizer* t);

/* Text to ids. add_special: llama2.c puts BOS first; a Hugging Face tokenizer applies its
 * post-processor (tokenizer.encode(text, add_special_tokens=True)), else exactly
 * tokenizer.encode(text, add_special_tokens=False). ML_E_ARG when cap is too small (*n = the count
 * needed), and for text that is not valid UTF-8 with a Hugging Face tokenizer (the message names
 * the byte offset; llama2.c's encoder takes any bytes, as run.c does). */
ml_status ml_tokenize(const ml_tokenizer* t, const char* text, size_t len, int add_special, int32_t* ids, size_t cap,
                      size_t* n, ml_error* err);
/* Like ml_tokenize, also giving each token's byte span [spans[2i], spans[2i+1]) in text (Hugging
 * Face tokenizers; llama2.c fails with ML_E_ARG). */
ml_status ml_tokenize_spans(const ml_tokenizer* t, const char* text, size_t len, int add_special, int32_t* ids,
                            uint32_t* spans, size_t cap, size_t* n, ml_error* err);
/* The whole text of ids: for a Hugging Face tokenizer exactly tokenizer.decode(ids,
 * skip_special_tokens); for llama2.c the pieces as if after BOS (BOS and EOS give nothing). Writes
 * at most cap bytes and sets *len to the text's length; ML_E_ARG when cap is too small (then *len
 * is the size needed) or an id is out of range. Not NUL-terminated. */
ml_status ml_detokenize(const ml_tokenizer* t, const int32_t* ids, size_t n, int skip_special, char* out, size_t cap,
                        size_t* len, ml_error* err);
/* The bytes of id after prev (-1 at the start of the text), as printed: special tokens give ""
 * (length 0). Not NUL-terminated; NULL with *len = 0 when id is out of range. A piece may end
 * inside a UTF-8 character (byte tokens): ml_detok joins them. */
const char* ml_token_piece(const ml_tokenizer* t, int32_t prev, int32_t id, size_t* len);
/* The token's string as the vocabulary stores it ("\xe2\x96\x81the", "Ghello", "<0x0A>"); NULL
 * when out of range. */
const char* ml_token_text(const ml_tokenizer* t, int32_t id, size_t* len);

/* ---- Chat templates --------------------------------------------------------------------------- */

typedef struct ml_chat_params {
  const char* messages; /* a JSON array of {"role": ..., "content": ...} (OpenAI/transformers shape) */
  size_t messages_len;
  int add_generation_prompt; /* open an assistant turn at the end */
  const char* extra;    /* NULL, or a JSON object whose members join the template's variables
                           (enable_thinking, tools, ...); they override the defaults */
  size_t extra_len;
  const char* chat_template; /* NULL: the tokenizer's; else this template's text */
  size_t chat_template_len;
} ml_chat_params;

/* Renders the chat template over the messages as transformers' apply_chat_template(tokenize=False)
 * does (variables: messages, add_generation_prompt, bos_token, eos_token, then extra). *out is a
 * NUL-terminated string the caller frees with ml_free; *len its length. ML_E_ARG: no template,
 * messages that are not a JSON array, raise_exception() in the template, or a limit reached;
 * ML_E_FORMAT: a template that does not parse (the message names the construct and line). */
ml_status ml_chat_apply(const ml_tokenizer* t, const ml_chat_params* p, char** out, size_t* len, ml_error* err);
/* Whether the tokenizer carries a chat template. */
int ml_tokenizer_has_chat_template(const ml_tokenizer* t);
/* Frees memory the API allocated for the caller (ml_chat_apply's text). */
void ml_free(void* p);

/* Incremental detokenization that hands out whole UTF-8 characters only: the bytes of a
 * character split across byte tokens are held until it is complete. Plain data; zero it (or
 * ml_detok_reset) to start. */
typedef struct ml_detok {
  int32_t prev;          /* the previous id (-1: none) */
  unsigned char held[4]; /* an incomplete character's bytes */
  int n_held;
} ml_detok;
void ml_detok_reset(ml_detok* d, int32_t prev);
/* Appends id's text to out (cap bytes) and returns the bytes written; whole characters only. A
 * piece never needs more than ml_detok_max_bytes(t). */
size_t ml_detok_push(const ml_tokenizer* t, ml_detok* d, int32_t id, char* out, size_t cap);
/* The bytes still held (an incomplete character at the end of the text), written as they are. */
size_t ml_detok_flush(ml_detok* d, char* out, size_t cap);
size_t ml_detok_max_bytes(const ml_tokenizer* t);

/* ---- Generation ----------------------------------------------------------------------------- */

/* Sampling, in this order: the penalties (OpenAI's), logit[j] -= c[j] * frequency_penalty +
 * (c[j] > 0) * presence_penalty, where c[j] counts id j among the tokens this generation has
 * sampled so far (not the prompt), computed in double into scratch (ml_session_logits stays the
 * model's); temperature 0 (or top_k 1) then takes the argmax of the penalized logits, ties to the
 * lowest id; else the temperature, top_k, top_p, then min_p (ids whose probability after the
 * temperature is below min_p times the most probable one's are dropped), and one seeded draw.
 * The same seed gives the same ids on every build (model/sampler.h has the exact rules).
 * ML_E_ARG names a value out of range. */
typedef struct ml_gen_params {
  int max_tokens; /* tokens to sample */
  float temperature;        /* finite, >= 0; 0 = greedy */
  float top_p;              /* (0, 1]; 1 = off */
  int top_k;                /* >= 0; 0 = off */
  uint64_t seed;
  int stop_at_eos;          /* stop when EOS, BOS or an end-of-turn token (ml_token_is_eog) is sampled */
  const char* const* stop;  /* stop strings (UTF-8); the text ends before the first match */
  size_t n_stop;
  float min_p;              /* [0, 1); 0 = off */
  float presence_penalty;   /* [-2, 2]; 0 = off: subtracted once from the logit of every id sampled so far */
  float frequency_penalty;  /* [-2, 2]; 0 = off: subtracted once per time the id was sampled so far */
} ml_gen_params;

typedef enum ml_stop_reason {
  ML_STOP_LENGTH = 0,   /* max_tokens sampled */
  ML_STOP_EOS = 1,      /* EOS, BOS or an end-of-turn token sampled */
  ML_STOP_CONTEXT = 2,  /* the session's context is full */
  ML_STOP_CALLBACK = 3, /* the callback (or the caller of ml_gen_next) stopped it */
  ML_STOP_STRING = 4    /* a stop string matched */
} ml_stop_reason;

typedef struct ml_gen_stats {
  int n_prompt, n_generated;
  double prompt_seconds, gen_seconds;
  int stop_reason; /* ml_stop_reason */
} ml_gen_stats;

/* The one generation loop, one token per ml_gen_next, so that a caller can stop between tokens
 * (the browser's worker returns to its event loop after each).
 * ml_gen_start feeds the prompt at the session's next positions (continuing what it holds) and
 * sets up the sampler. Each ml_gen_next first feeds the token the previous call sampled (that is
 * where a full context ends generation, with a last call that samples nothing), then samples the
 * next token and sets *text and *len to the text it releases: whole UTF-8 characters, with
 * anything that may still become a stop string held back, and the text of a matched stop string
 * never released. *done becomes 1 on the last step; ml_gen_stats then says why. The text pointer
 * is valid until the next call. The token that ends generation (EOS, a stop string, max_tokens)
 * is never fed. */
ml_status ml_gen_start(ml_gen** out, ml_exec* e, ml_session* s, const int32_t* prompt, size_t n_prompt,
                       const ml_gen_params* p, ml_error* err);
ml_status ml_gen_next(ml_gen* g, const char** text, size_t* len, int32_t* id, int* done, ml_error* err);
/* For a caller that steps many generations in one batch (ml_server's continuous batching): hands
 * over the token that the next ml_gen_next would feed first, so that the caller feeds it itself
 * (ml_eval_batch, with logits) before that call, which then only samples. -1 when there is none,
 * or when the session's context is full (ml_gen_next then ends generation with ML_STOP_CONTEXT).
 * A taken token that is not fed before ml_gen_next leaves the sample drawn from stale logits. */
int32_t ml_gen_take_pending(ml_gen* g);
/* One ml_gen_next for each of n generations (distinct, on sessions of e's model), run on e's
 * threads: for the caller of ml_gen_take_pending that fed every taken token in one ml_eval_batch,
 * so that sampling, which reads the whole vocabulary, does not run one generation after another.
 * steps[i] is what ml_gen_next(gens[i], ...) would give (its text valid until that generation's
 * next call); a generation that still holds a token to feed gets ML_E_ARG. Results do not depend
 * on e's thread count. Not to be called while e runs anything else. */
typedef struct ml_gen_step {
  const char* text;
  size_t len;
  int32_t id;
  int done;
  ml_status status;
  ml_error err;
} ml_gen_step;
void ml_gen_next_batch(ml_exec* e, ml_gen* const* gens, ml_gen_step* steps, size_t n);
/* Ends generation now (reason ML_STOP_CALLBACK) and returns the text still held back, if any. */
void ml_gen_cancel(ml_gen* g, const char** text, size_t* len);
ml_gen_stats ml_gen_get_stats(const ml_gen* g);
void ml_gen_free(ml_gen* g);

/* Called for every prompt token as it is fed (generated = 0, its text) and for every released
 * piece of generated text (generated = 1, id = the sampled token); return nonzero to stop. */
typedef int (*ml_token_cb)(void* user, int32_t id, const char* text, size_t len, int generated);

/* The whole loop: ml_gen_start, then ml_gen_next until done, reporting through cb. */
ml_status ml_generate(ml_exec* e, ml_session* s, const int32_t* prompt, size_t n_prompt, const ml_gen_params* p,
                      ml_token_cb cb, void* user, ml_gen_stats* stats, ml_error* err);

/* ---- Converting (ml_convert) --------------------------------------------------------------- */

/* A llama2.c float32 checkpoint (legacy or version 1) and its tokenizer.bin to an .mlb. */
typedef struct ml_convert_llama2c_params {
  const char* checkpoint;
  const char* tokenizer; /* embedded in the output: a llama2.c tokenizer.bin, or a Hugging Face
                          * tokenizer (a folder with tokenizer.json [+ tokenizer_config.json,
                          * generation_config.json], or a tokenizer.json) */
  const char* chat_template; /* NULL, or a Jinja file replacing the HF tokenizer's chat template */
  const char* out;       /* written through a temporary file and a rename */
  int wtype;             /* ML_DT_Q8 or ML_DT_Q4 */
  int scales_f16;        /* 1: block scales as IEEE halves */
} ml_convert_llama2c_params;

/* A random Llama model of any shape (tests, benchmarks); the same seed gives the same bytes. */
typedef struct ml_convert_random_params {
  int64_t dim, hidden, layers, heads, kv_heads, vocab, max_seq;
  int64_t head_dim; /* 0: dim / heads */
  uint64_t seed;
  int wtype, scales_f16;
  int tied;            /* the embedding is the classifier */
  int rope_half;       /* 1: Hugging Face's half-split RoPE pairs; 0: interleaved (llama2.c, GGUF) */
  float rope_theta;
  const char* tokenizer; /* a tokenizer to embed (as in ml_convert_llama2c_params), or NULL */
  const char* chat_template;
  const char* out;
  const char* gguf;      /* NULL, or also write the model as GGUF v3 for llama.cpp (needs scales_f16 and
                          * GGUF's RoPE layout of the architecture: interleaved for Llama) */
  /* NULL, or a Hugging Face config.json: the model gets its architecture and shape, except the
   * shape fields above that are non-zero (e.g. layers and vocab, to shorten it for a test);
   * rope_half, rope_theta and tied then come from the config too. */
  const char* config;
} ml_convert_random_params;

/* A Hugging Face model folder (config.json, model.safetensors or model.safetensors.index.json and
 * its shards, tokenizer.json [+ tokenizer_config.json, generation_config.json]) to an .mlb:
 * Llama/Mistral, Qwen2, Qwen3, Gemma 3 and Qwen3.5 causal LMs, F32/F16/BF16 weights. */
typedef struct ml_convert_hf_params {
  const char* dir;
  const char* chat_template; /* NULL, or a Jinja file replacing the tokenizer's chat template */
  const char* out;
  int wtype;      /* ML_DT_Q8 or ML_DT_Q4 */
  int scales_f16; /* 1: block scales as IEEE halves */
  void (*note)(void* user, const char* msg); /* NULL, or told of tensors skipped on purpose */
  void* note_user;
} ml_convert_hf_params;

/* The defaults (Q8, f32 scales, seed 1, theta 10000, interleaved, untied). */
ml_convert_llama2c_params ml_convert_llama2c_defaults(void);
ml_convert_random_params ml_convert_random_defaults(void);
ml_convert_hf_params ml_convert_hf_defaults(void);
ml_status ml_convert_llama2c(const ml_convert_llama2c_params* p, ml_error* err);
ml_status ml_convert_random(const ml_convert_random_params* p, ml_error* err);
ml_status ml_convert_hf(const ml_convert_hf_params* p, ml_error* err);

/* A GGUF file (llama.cpp's format: llama, qwen2, qwen3, gemma3, qwen35) with its tokenizer to an .mlb.
 * Q8_0/Q4_0 tensors are copied bit for bit, F32/F16/BF16 quantized, K-quants and other 32-value
 * types decoded and requantized (one call of warn names them); others refused naming the tensor. */
typedef struct ml_convert_gguf_params {
  const char* path;
  const char* out;
  int wtype;                 /* 0: from the file (Q4 when its quantized matrices are all Q4_0, else Q8); ML_DT_Q8 or ML_DT_Q4 */
  const char* chat_template; /* NULL, or a Jinja file replacing tokenizer.chat_template (BPE vocabularies) */
  void (*warn)(void* user, const char* msg); /* NULL: warnings dropped */
  void* warn_user;
} ml_convert_gguf_params;
ml_convert_gguf_params ml_convert_gguf_defaults(void);
ml_status ml_convert_gguf(const ml_convert_gguf_params* p, ml_error* err);

/* ---- Kernel benchmark (ml_bench) ---------------------------------------------------------- */

/* cb(user, op, kernel) for every op and the kernel this build binds it to ("matvec_q8" ->
 * "avx2::matvec_q8"). */
typedef void (*ml_binding_cb)(void* user, const char* op, const char* kernel);
void ml_build_bindings(ml_binding_cb cb, void* user);

/* One timed kernel: ns per call (best of the repetitions), bytes and operations per second. */
typedef struct ml_kernel_bench_row {
  const char* op;
  const char* kernel;
  int rows, cols, tokens;
  double ns, gbps, gops;
} ml_kernel_bench_row;
typedef void (*ml_kernel_bench_cb)(void* user, const ml_kernel_bench_row* row);
/* Times the build's kernels on one thread (row-major and packed matvec, the 128-token packed
 * matmul, quantize_q8) at spec/testing.txt's shapes, then the sampler over a 151936-id vocabulary,
 * reps repetitions of at least min_seconds. */
ml_status ml_bench_kernels(int reps, double min_seconds, ml_kernel_bench_cb cb, void* user, ml_error* err);

/* ---- Output files -------------------------------------------------------------------------- */

/* A file being written safely: to a temporary file in the target's directory, fsync'd and renamed
 * over the target only by ml_output_commit, so a failure never leaves a partial file and the
 * target is untouched unless the whole file was written. ml_output_open refuses (ML_E_ARG, before
 * anything is created) a target that exists and is not a regular file (a directory, a FIFO, a
 * device), or that is the same file (device and inode) as one of inputs (n_inputs paths; NULL
 * entries and missing files are skipped) or as any file the library has open (a model, its pack
 * cache). Write errors are ML_E_IO naming the target; the temporary file is removed at once. */
typedef struct ml_output ml_output;
ml_status ml_output_open(ml_output** out, const char* path, const char* const* inputs, size_t n_inputs,
                         ml_error* err);
ml_status ml_output_write(ml_output* out, const void* data, size_t n, ml_error* err);
/* Renames the file into place. Frees out, whatever the outcome. */
ml_status ml_output_commit(ml_output* out, ml_error* err);
/* Removes the temporary file and frees out (NULL is ignored). */
void ml_output_discard(ml_output* out);

/* For programs that write files (ml_convert, ml_run): on SIGTERM, SIGINT, SIGHUP or SIGQUIT,
 * removes the temporary file of every output (ml_output_*, the converters, the pack cache) still
 * being written, then dies of the same signal. A signal the process started out ignoring stays
 * ignored. Async-signal-safe; call once, early in main. */
void ml_install_cleanup_handlers(void);

#ifdef __cplusplus
}
#endif
#endif
