// The converter library (ml_convert_lib; ml_convert and the wasm module link it): a model under
// construction (header + quantized tensors with owned bytes, in file order), the helpers that
// quantize float matrices into it, and the converters (llama2.c checkpoints, random models).
// Contract: like the rest of the core, it never throws, aborts or exits (built with
// -fno-exceptions -fno-rtti; no std containers, memory from malloc through cv_buf). Every function
// returns ml_status with a message naming the file, option, field or tensor at fault: bad input
// contents are ML_E_FORMAT/ML_E_SHAPE/ML_E_ARG (ml_convert exits 2), files that cannot be read or
// written ML_E_IO, and an allocation that fails or whose size overflows ML_E_NOMEM naming what it
// was for (exit 1). The option structs are plain data (C types only) for a C API to wrap.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/file.h"
#include "core/status.h"
#include "model/format.h"
#include "model/tokenizer/bundle.h"

// --- options and converters ------------------------------------------------------------------

// `ml_convert llama2c`: the three paths are required (null fails with ML_E_ARG naming the option).
struct cv_llama2c_opts {
  const char* checkpoint = nullptr;  // llama2.c float32 checkpoint
  const char* tokenizer = nullptr;   // its tokenizer.bin, or a Hugging Face tokenizer (folder or tokenizer.json)
  const char* chat_template = nullptr;  // a Jinja chat template replacing the tokenizer's (HF only), or null
  const char* out = nullptr;         // the .mlb to write
  uint32_t wtype = ML_DT_Q8;         // ML_DT_Q8 or ML_DT_Q4
  uint32_t scale_type = ML_SCALE_F32;  // ML_SCALE_F32 or ML_SCALE_F16
};

// `ml_convert random`: the hyperparameters are int64_t so that out-of-range values reach the
// range checks (and their messages, which name the ml_convert option) instead of wrapping.
struct cv_random_opts {
  int64_t dim = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, vocab = 0, max_seq = 0;
  int64_t head_dim = 0;  // 0: dim / heads
  uint64_t seed = 1;
  uint32_t wtype = ML_DT_Q8;
  uint32_t scale_type = ML_SCALE_F32;
  int tied = 0;  // nonzero: the embedding is the classifier (no output tensor)
  uint32_t rope_type = ML_ROPE_INTERLEAVED;
  float rope_theta = 10000.0f;
  const char* tokenizer = nullptr;  // null or "": the file has none; else as cv_llama2c_opts
  const char* chat_template = nullptr;
  const char* out = nullptr;        // the .mlb to write (required: null fails with ML_E_ARG)
  const char* gguf = nullptr;       // null or "": none; else the same model as GGUF too (gguf_write.h)
  // An architecture and shape to copy (e.g. from a Hugging Face config.json): when set, every
  // header field comes from it except the ones the options above give explicitly (a non-zero
  // dim..max_seq, head_dim; wtype, scale_type and seed always come from the options).
  const ml_mlb_header* config = nullptr;
};

// Where a model converted at load goes (cv_write_converted): written to fd when fd >= 0 (an
// unlinked temporary file, core/file.h's ml_file_temp; size is then the bytes written), else into
// one malloc'd buffer (data, size; free data with std::free).
struct cv_mem_out {
  int fd = -1;
  uint8_t* data = nullptr;
  size_t size = 0;
};

// `ml_convert hf`: a Hugging Face model folder (hf_import.cpp documents what it reads).
struct cv_hf_opts {
  const char* dir = nullptr;            // config.json, model.safetensors (or the index and its shards), tokenizer.json, ...
  const char* out = nullptr;            // the .mlb to write, or null with mem
  cv_mem_out* mem = nullptr;            // when set: the .mlb goes there instead (a model converted at load)
  const char* chat_template = nullptr;  // a Jinja file replacing the tokenizer's template, or null
  uint32_t wtype = ML_DT_Q8;
  uint32_t scale_type = ML_SCALE_F32;
  // Called (when set) with a note the user may want (tensors skipped on purpose), one line each.
  void (*note)(void* user, const char* msg) = nullptr;
  void* note_user = nullptr;
};

// The defaults above, for callers without C++ member initializers (a C API).
cv_llama2c_opts cv_llama2c_defaults();
cv_random_opts cv_random_defaults();
cv_hf_opts cv_hf_defaults();

// Converts a llama2.c float32 checkpoint (legacy header or version 1 "ak42") and its tokenizer.
ml_status cv_llama2c(const cv_llama2c_opts* o, ml_error* err);

// Writes a random Llama model of the given shape (random.cpp documents the generator).
ml_status cv_random(const cv_random_opts* o, ml_error* err);

// Converts a Hugging Face folder (safetensors weights, config.json, tokenizer files).
ml_status cv_hf(const cv_hf_opts* o, ml_error* err);
// The same conversion into memory (o->out unused), for a folder converted at load: the .mlb bytes
// in one buffer as cv_write_memory gives them (free with ml_aligned_free, core/aligned.h).
ml_status cv_hf_memory(const cv_hf_opts* o, uint8_t** out, size_t* size, ml_error* err);

// --- memory ----------------------------------------------------------------------------------

// An owned malloc'd block, freed on destruction; move-only. Empty (data null, size 0) until
// cv_alloc fills it.
struct cv_buf {
  uint8_t* data = nullptr;
  size_t size = 0;  // bytes

  cv_buf() = default;
  cv_buf(const cv_buf&) = delete;
  cv_buf& operator=(const cv_buf&) = delete;
  cv_buf(cv_buf&& o) noexcept : data(o.data), size(o.size) { o.data = nullptr, o.size = 0; }
  cv_buf& operator=(cv_buf&& o) noexcept;
  ~cv_buf();

  template <class T>
  T* as() const { return reinterpret_cast<T*>(data); }
  // Hands the block to the caller, who frees it with std::free.
  uint8_t* release();
};

// Replaces b's block with count * elem zero-filled bytes (malloc alignment). Fails with ML_E_NOMEM
// when the product overflows size_t, exceeds PTRDIFF_MAX (no malloc is attempted then) or malloc
// fails; the message is "<what>: ..." with what formatted from fmt (e.g. "tensor tok_embd").
ml_status cv_alloc(cv_buf* b, size_t count, size_t elem, ml_error* err, const char* fmt, ...)
    ML_PRINTF(5, 6);

// A converter's warning or note: formats fmt (up to 511 bytes) and hands it to fn with user;
// nothing when fn is null (cv_gguf_opts::warn, cv_hf_opts::note).
void cv_notify(void (*fn)(void* user, const char* msg), void* user, const char* fmt, ...)
    ML_PRINTF(3, 4);

// --- a model being built (tensors.cpp) -------------------------------------------------------

// One tensor of the output file with its bytes (little-endian, as they go into the file). Trivially
// copyable, so cv_model's list grows with realloc; cv_model frees data and scales.
struct cv_tensor {
  ml_mlb_tensor t;
  uint8_t* data;    // t's data bytes
  uint8_t* scales;  // Q8/Q4: scale bytes; else null
};

// A model being built. h.wtype and h.scale_type decide how cv_add_matrix quantizes. Owns its
// tensors' bytes and the tokenizer file (mapped or read), released on destruction.
struct cv_model {
  ml_mlb_header h;
  cv_tensor* tensors = nullptr;
  size_t n_tensors = 0, cap_tensors = 0;
  bool has_tokenizer = false;
  uint32_t tokenizer_kind = 1;  // 1: tokenizer holds a llama2.c tokenizer.bin; 2: hf_bundle a kind-2 section
  ml_file tokenizer;  // llama2.c tokenizer.bin, verbatim
  cv_buf tokenizer_owned;  // the bytes `tokenizer` borrows when made in memory (cv_attach_llama2c_bytes)
  cv_buf hf_bundle;   // Hugging Face files (model/tokenizer/bundle.h)

  cv_model() = default;
  cv_model(const cv_model&) = delete;
  cv_model& operator=(const cv_model&) = delete;
  ~cv_model();
};

// Appends an F32 tensor 1 x n (a norm weight). Fails (ML_E_FORMAT) on a non-finite value.
ml_status cv_add_f32(cv_model* m, const char* name, const float* x, uint32_t n, ml_error* err);

// Appends an F32 tensor rows x cols from a row-major float matrix (Qwen3.5's ssm_conv1d). Fails
// (ML_E_FORMAT) on a non-finite value.
ml_status cv_add_f32_rows(cv_model* m, const char* name, uint32_t rows, uint32_t cols, const float* x, ml_error* err);

// Appends a rows x cols matrix of type m->h.wtype with scales of m->h.scale_type, quantized with
// ml_quantize_q8_ref / ml_quantize_q4_ref from src, a row-major src_rows x src_cols float matrix
// (src_rows <= rows, src_cols <= cols). The rows and columns src lacks are zeros: that is the FFN
// padding of docs/format.md. cols must be a multiple of 32. f16 scales are the float scales
// rounded to half (ml_float_to_half) after the quants were computed with the float scale, as
// GGUF's Q8_0/Q4_0 do. Fails (ML_E_FORMAT) on a non-finite value or a scale f16 cannot hold.
ml_status cv_add_matrix(cv_model* m, const char* name, uint32_t rows, uint32_t cols, const float* src,
                        uint32_t src_rows, uint32_t src_cols, ml_error* err);

// Appends a rows x cols Q8/Q4 matrix whose quants (rows*cols or rows*cols/2 bytes) and scales
// (rows*cols/32 values of m->h.scale_type, little-endian) the caller made; m takes both blocks.
// type must be m->h.wtype. Fails (ML_E_FORMAT) on a Q8 quant of -128 or a non-finite scale.
ml_status cv_add_quantized(cv_model* m, const char* name, uint32_t rows, uint32_t cols, cv_buf* quants,
                           cv_buf* scales, ml_error* err);

// Writes the model with ml_mlb_write.
ml_status cv_write(const cv_model* m, const char* path, ml_error* err);

// The same .mlb bytes into one 64-byte-aligned buffer (*out, *size; free with ml_aligned_free
// of core/aligned.h), for a model converted at load. Each tensor's bytes are freed as soon as they are
// copied, so the peak stays near one model's size; m is spent afterwards (write it no more).
ml_status cv_write_memory(cv_model* m, uint8_t** out, size_t* size, ml_error* err);

// A model converted at load into out: into out->fd (ml_mlb_write_fd) when it is open, else as
// cv_write_memory into out->data. Each tensor's bytes are freed once written; m is spent afterwards.
ml_status cv_write_converted(cv_model* m, cv_mem_out* out, ml_error* err);

// Decodes n little-endian float32 values from p into out (allocated here; what names them in the
// ML_E_NOMEM message).
ml_status cv_load_f32(const uint8_t* p, size_t n, cv_buf* out, const char* what, ml_error* err);

// Walks a llama2.c tokenizer.bin (u32 max_token_length, then per token f32 score, i32 len,
// len bytes with 0 <= len <= max_token_length) and requires exactly vocab tokens and no trailing
// bytes. path names the file in messages.
ml_status cv_check_tokenizer(const uint8_t* data, size_t size, uint32_t vocab, const char* path, ml_error* err);

// Attaches the tokenizer at path: a llama2.c tokenizer.bin into m->tokenizer after
// cv_check_tokenizer against m->h.vocab_size, or a Hugging Face tokenizer (convert/hf_files.h)
// into m->hf_bundle after loading it as the engine will (its vocabulary must fit vocab_size; its
// BOS/EOS become the header's). chat_template (may be null) replaces an HF tokenizer's template.
ml_status cv_attach_tokenizer(cv_model* m, const char* path, const char* chat_template, ml_error* err);

// The same from memory. A llama2.c tokenizer.bin (m takes the block; checked as above) ...
ml_status cv_attach_llama2c_bytes(cv_model* m, cv_buf* bin, const char* what, ml_error* err);
// ... or Hugging Face files (loaded as the engine will, then bundled; what names them in messages).
ml_status cv_attach_hf_files(cv_model* m, const ml_hf_files* files, const char* what, ml_error* err);

// --- GGUF (gguf_import.cpp) ------------------------------------------------------------------

// `ml_convert gguf`: path and out are required.
struct cv_gguf_opts {
  const char* path = nullptr;           // the .gguf file (with data: only its name, for messages)
  const void* data = nullptr;           // null, or the file's bytes (the caller's; a browser download)
  size_t size = 0;
  const char* out = nullptr;            // the .mlb to write, or null with mem
  cv_mem_out* mem = nullptr;            // when set: the .mlb goes there instead (a model converted at load)
  uint32_t wtype = 0;                   // 0: from the file (Q8 unless its quantized tensors are all Q4_0); ML_DT_Q8 or ML_DT_Q4
  const char* chat_template = nullptr;  // a Jinja file replacing tokenizer.chat_template, or null
  // Called once per warning (requantized tensors), or null: warnings are then dropped.
  void (*warn)(void* user, const char* msg) = nullptr;
  void* warn_user = nullptr;
};
cv_gguf_opts cv_gguf_defaults();

// Converts a GGUF file (gguf_import.cpp documents what is copied, what requantized, what refused).
ml_status cv_gguf(const cv_gguf_opts* o, ml_error* err);

// The tokenizer alone (ml_tok on a GGUF file): parses o's file and reads its header as cv_gguf
// does, then carries only the tokenizer into m (m->h gets the header with its BOS and EOS; see
// cv_gguf_tokenizer), without reading the weights. m->has_tokenizer stays false for a file
// without one. o->out, mem and wtype are unused.
ml_status cv_gguf_read_tokenizer(const cv_gguf_opts* o, cv_model* m, ml_error* err);
