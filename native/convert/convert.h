// ml_convert's pieces: a model under construction (header + quantized tensors with owned bytes,
// in file order), the helpers that quantize float matrices into it, and the two converters.
// Contract: every function returns ml_status with a message naming the file, option, field or
// tensor at fault; bad input contents are ML_E_FORMAT/ML_E_SHAPE/ML_E_ARG (exit 2), files that
// cannot be read or written ML_E_IO (exit 1). Allocation failure throws std::bad_alloc, which
// ml_main reports (exit 1).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/format.h"

// One tensor of the output file with its bytes (little-endian, as they go into the file).
struct cv_tensor {
  ml_mlb_tensor t;
  std::vector<uint8_t> data;
  std::vector<uint8_t> scales;  // Q8/Q4 only
};

// A model being built. h.wtype and h.scale_type decide how cv_add_matrix quantizes.
struct cv_model {
  ml_mlb_header h;
  std::vector<cv_tensor> tensors;
  bool has_tokenizer = false;
  std::vector<uint8_t> tokenizer;  // llama2.c tokenizer.bin bytes, verbatim
};

// --- tensors.cpp -----------------------------------------------------------------------------

// Appends an F32 tensor 1 x n (a norm weight). Fails (ML_E_FORMAT) on a non-finite value.
ml_status cv_add_f32(cv_model* m, const char* name, const float* x, uint32_t n, ml_error* err);

// Appends a rows x cols matrix of type m->h.wtype with scales of m->h.scale_type, quantized with
// ml_quantize_q8_ref / ml_quantize_q4_ref from src, a row-major src_rows x src_cols float matrix
// (src_rows <= rows, src_cols <= cols). The rows and columns src lacks are zeros: that is the FFN
// padding of docs/format.md. cols must be a multiple of 32. f16 scales are the float scales
// rounded to half (ml_float_to_half) after the quants were computed with the float scale, as
// GGUF's Q8_0/Q4_0 do. Fails (ML_E_FORMAT) on a non-finite value or a scale f16 cannot hold.
ml_status cv_add_matrix(cv_model* m, const char* name, uint32_t rows, uint32_t cols, const float* src,
                        uint32_t src_rows, uint32_t src_cols, ml_error* err);

// Writes the model with ml_mlb_write.
ml_status cv_write(const cv_model* m, const char* path, ml_error* err);

// Reads a whole file.
ml_status cv_read_file(const char* path, std::vector<uint8_t>* out, ml_error* err);

// Decodes n little-endian float32 values.
std::vector<float> cv_load_f32(const uint8_t* p, size_t n);

// Walks a llama2.c tokenizer.bin (u32 max_token_length, then per token f32 score, i32 len,
// len bytes with 0 <= len <= max_token_length) and requires exactly vocab tokens and no trailing
// bytes. path names the file in messages.
ml_status cv_check_tokenizer(const uint8_t* data, size_t size, uint32_t vocab, const char* path, ml_error* err);

// Loads path into m (has_tokenizer) after cv_check_tokenizer against m->h.vocab_size.
ml_status cv_attach_tokenizer(cv_model* m, const char* path, ml_error* err);

// --- llama2c.cpp -----------------------------------------------------------------------------

struct cv_llama2c_opts {
  std::string checkpoint, tokenizer, out;
  uint32_t wtype = ML_DT_Q8;
  uint32_t scale_type = ML_SCALE_F32;
};

// Converts a llama2.c float32 checkpoint (legacy header or version 1 "ak42") and its tokenizer.
ml_status cv_llama2c(const cv_llama2c_opts* o, ml_error* err);

// --- random.cpp ------------------------------------------------------------------------------

struct cv_random_opts {
  int64_t dim = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, vocab = 0, max_seq = 0;
  int64_t head_dim = 0;  // 0: dim / heads
  uint64_t seed = 1;
  uint32_t wtype = ML_DT_Q8;
  uint32_t scale_type = ML_SCALE_F32;
  bool tied = false;
  uint32_t rope_type = ML_ROPE_INTERLEAVED;
  float rope_theta = 10000.0f;
  std::string tokenizer;  // empty: the file has none
  std::string out;
};

// Writes a random Llama model of the given shape (random.cpp documents the generator).
ml_status cv_random(const cv_random_opts* o, ml_error* err);
