#include "engine/model_import.h"

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/convert.h"
#include "core/file.h"
#include "core/posix_compat.h"
#include "convert/gguf_types.h"

ml_source_kind ml_source_kind_of_bytes(const void* data, size_t size) {
  uint32_t magic = 0;
  if (size >= 4) std::memcpy(&magic, data, 4);
  return magic == GGUF_MAGIC ? ML_SOURCE_GGUF : ML_SOURCE_MLB;
}

ml_source_kind ml_source_kind_of_path(const char* path) {
  struct stat st;
  if (::stat(path, &st) != 0) return ML_SOURCE_MLB;
  if (S_ISDIR(st.st_mode)) {
    char config[4096];
    std::snprintf(config, sizeof config, "%s/config.json", path);
    struct stat cs;
    return ::stat(config, &cs) == 0 && S_ISREG(cs.st_mode) ? ML_SOURCE_HF_DIR : ML_SOURCE_MLB;
  }
  if (!S_ISREG(st.st_mode)) return ML_SOURCE_MLB;  // the loader refuses it, naming what it is
  // O_NONBLOCK: the file may have become a FIFO since the stat.
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ML_SOURCE_MLB;
  uint8_t head[4] = {0};
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  return ml_source_kind_of_bytes(head, n > 0 ? (size_t)n : 0);
}

ml_status ml_import(ml_source_kind kind, const char* path, const void* data, size_t size, ml_file* f, ml_error* err) {
  *f = ml_file{};
  cv_mem_out out;
  out.fd = ml_file_temp();  // -1 where there is none (wasm): the .mlb is built in memory instead
  ml_status s;
  if (kind == ML_SOURCE_HF_DIR) {
    cv_hf_opts o = cv_hf_defaults();
    o.dir = path;
    o.mem = &out;
    s = cv_hf(&o, err);
  } else {
    cv_gguf_opts o = cv_gguf_defaults();
    o.path = path ? path : "the GGUF model";
    o.data = data;
    o.size = size;
    o.mem = &out;
    s = cv_gguf(&o, err);
  }
  if (out.fd >= 0) {
    if (s == ML_OK) return ml_file_adopt_temp(f, out.fd, out.size, err);
    ::close(out.fd);
  } else if (s == ML_OK) {
    ml_file_adopt(f, out.data, out.size);
  }
  return s;
}
