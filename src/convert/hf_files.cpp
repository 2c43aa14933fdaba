#include "convert/hf_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/posix_compat.h"

cv_hf_files::~cv_hf_files() {
  ml_file_close(&tokenizer);
  ml_file_close(&config);
  ml_file_close(&generation);
  ml_file_close(&chat_template);
}

namespace {

bool is_dir(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// Opens dir/name into *f when it exists; *present says whether it did.
ml_status open_optional(const char* dir, const char* name, ml_file* f, bool* present, ml_error* err) {
  char path[4096];
  if (std::snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
    return ml_fail(err, ML_E_ARG, "%s: the path is too long", dir);
  *present = access(path, F_OK) == 0;
  return *present ? ml_file_open(f, path, err) : ML_OK;
}

}  // namespace

bool cv_is_hf_tokenizer(const char* path) {
  struct stat st;
  if (stat(path, &st) != 0) return false;
  if (S_ISDIR(st.st_mode)) return true;
  // Only a regular file is peeked at: opening a FIFO would block (ml_file_open refuses it later).
  if (!S_ISREG(st.st_mode)) return false;
  FILE* fp = std::fopen(path, "rb");
  if (!fp) return false;
  int c;
  while ((c = std::fgetc(fp)) == ' ' || c == '\t' || c == '\n' || c == '\r') {
  }
  std::fclose(fp);
  return c == '{';
}

ml_status cv_hf_files_open(cv_hf_files* f, const char* path, const char* chat_template, ml_error* err) {
  f->files = ml_hf_files{};
  if (is_dir(path)) {
    bool present = false;
    ML_TRY(open_optional(path, "tokenizer.json", &f->tokenizer, &present, err));
    if (!present) return ml_fail(err, ML_E_ARG, "%s: the folder has no tokenizer.json", path);
    ML_TRY(open_optional(path, "tokenizer_config.json", &f->config, &present, err));
    if (present) f->files.config_json = reinterpret_cast<const char*>(f->config.data), f->files.config_json_len = f->config.size;
    ML_TRY(open_optional(path, "generation_config.json", &f->generation, &present, err));
    if (present)
      f->files.generation_json = reinterpret_cast<const char*>(f->generation.data), f->files.generation_json_len = f->generation.size;
  } else {
    ML_TRY(ml_file_open(&f->tokenizer, path, err));
  }
  // An empty file maps to no data: point at "" so the JSON reader reports it as empty.
  f->files.tokenizer_json = f->tokenizer.data ? reinterpret_cast<const char*>(f->tokenizer.data) : "";
  f->files.tokenizer_json_len = f->tokenizer.size;
  if (f->files.config_json && !f->config.data) f->files.config_json = "";
  if (f->files.generation_json && !f->generation.data) f->files.generation_json = "";
  if (chat_template) {
    ML_TRY(ml_file_open(&f->chat_template, chat_template, err));
    f->files.chat_template = f->chat_template.data ? reinterpret_cast<const char*>(f->chat_template.data) : "";
    f->files.chat_template_len = f->chat_template.size;
  }
  return ML_OK;
}
