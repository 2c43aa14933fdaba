// Pieces of the GGUF importer shared by its files (not part of the converter's interface).
#pragma once
#include <cstdint>

#include "convert/convert.h"
#include "convert/gguf.h"

// The GGUF token types (llama.cpp's llama_token_type / tokenizer.ggml.token_type).
enum gguf_token_type : int32_t {
  GGUF_TOK_NORMAL = 1, GGUF_TOK_UNKNOWN = 2, GGUF_TOK_CONTROL = 3, GGUF_TOK_USER_DEFINED = 4, GGUF_TOK_UNUSED = 5,
  GGUF_TOK_BYTE = 6,
};

// Carries g's tokenizer into m (gguf_tokenizer.cpp): "llama" (SentencePiece) as a llama2.c
// tokenizer.bin, "gpt2" (byte-level BPE) as a synthesized tokenizer.json in a kind-2 section with
// tokenizer.chat_template (or the file at chat_template, when given). Sets m->h.bos_id/eos_id.
// A file without tokenizer.ggml.model gets no tokenizer (then chat_template is refused).
ml_status cv_gguf_tokenizer(cv_model* m, const gguf_file* g, const char* chat_template, ml_error* err);

// Decodes n values (a whole number of blocks) of tensor type `type` at p into out (gguf_dequant.cpp).
// false when the type has no decoder here (the caller names the tensor).
bool cv_gguf_dequant(uint32_t type, const uint8_t* p, uint64_t n, float* out);
