// Reading a Hugging Face tokenizer from disk: a folder (tokenizer.json, and tokenizer_config.json
// and generation_config.json when present) or a lone tokenizer.json. The converter embeds what it
// reads as a kind-2 tokenizer section (model/tokenizer/bundle.h); ml_tokenizer_open and ml_tok
// load it directly.
#pragma once
#include "core/file.h"
#include "core/status.h"
#include "model/tokenizer/bundle.h"

// The files, kept open (mapped) while the struct lives.
struct cv_hf_files {
  ml_file tokenizer, config, generation, chat_template;
  ml_hf_files files;  // points into the mapped files
  cv_hf_files() = default;
  cv_hf_files(const cv_hf_files&) = delete;
  cv_hf_files& operator=(const cv_hf_files&) = delete;
  ~cv_hf_files();
};

// Whether path names a Hugging Face tokenizer: a directory, or a file whose first non-blank byte
// is '{'. (A .mlb starts with KRAFLMLB, a llama2.c tokenizer.bin with a binary u32.)
bool cv_is_hf_tokenizer(const char* path);

// Opens path (a folder or a tokenizer.json); chat_template (may be null) is a Jinja file that
// replaces the config's template. ML_E_IO / ML_E_ARG naming the file.
ml_status cv_hf_files_open(cv_hf_files* f, const char* path, const char* chat_template, ml_error* err);
