// The tokenizer section of kind 2 (docs/format.md, "Tokenizer section"): a Hugging Face
// tokenizer carried as its own files, verbatim, so one .mlb is a whole model and the engine reads
// exactly what transformers would. Entries, in any order, each at most once:
//   tokenizer.json          required: the tokenizer (model/tokenizer/hf.h)
//   tokenizer_config.json   optional: chat_template, bos_token, eos_token
//   generation_config.json  optional: eos_token_id (one id or a list) ends generation
//   chat_template.jinja     optional: a chat template that replaces tokenizer_config.json's
// Payload layout (little-endian): u32 n_entries (1..4), u32 reserved 0, then per entry u32
// name_len (1..64), u32 reserved 0, u64 size, name bytes, data bytes -- entries packed back to
// back, ending exactly at the payload's end.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"

struct ml_hf_files {
  const char* tokenizer_json = nullptr;
  size_t tokenizer_json_len = 0;
  const char* config_json = nullptr;  // null when absent
  size_t config_json_len = 0;
  const char* generation_json = nullptr;
  size_t generation_json_len = 0;
  const char* chat_template = nullptr;
  size_t chat_template_len = 0;
};

// Points f's members into p[0, n) (nothing is copied). ML_E_FORMAT naming the entry and field.
ml_status ml_hf_bundle_parse(const uint8_t* p, size_t n, ml_hf_files* f, ml_error* err);
// The payload's size for f (0 on size_t overflow), and its bytes written to out[0, size).
size_t ml_hf_bundle_size(const ml_hf_files* f);
void ml_hf_bundle_write(const ml_hf_files* f, uint8_t* out);
