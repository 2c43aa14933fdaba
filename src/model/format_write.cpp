// The .mlb writer (ml_convert). Lays out the file exactly as docs/format.md says: the header,
// the directory right after it (dir_offset = 256), every array (quants, then scales) starting at
// a multiple of 64 in the order given, then the tokenizer section (also 64-aligned) last; gaps
// are zero bytes and file_size is the exact length. Every offset and size is overflow-checked.
// The file goes through core/out_file.h: written to "<path>.tmp.<pid>" and renamed over path
// only once it is complete and fsync'd; on any failure (or SIGTERM/SIGINT once the program called
// ml_cleanup_install) the temporary file is removed and ML_E_IO names the path and the OS error.
// path must be a regular file or a new path, and not a file the process has open as an input
// (the checkpoint, the tokenizer): ML_E_ARG, before anything is written.
#include "model/format_write.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/aligned.h"
#include "core/checked.h"
#include "core/file.h"
#include "core/out_file.h"

namespace {

bool align64(uint64_t v, uint64_t* out) {
  uint64_t t;
  if (!ml_add64(v, ML_MLB_ALIGN - 1, &t)) return false;
  *out = t & ~(ML_MLB_ALIGN - 1);
  return true;
}

bool is_quant(uint32_t type) { return type == ML_DT_Q8 || type == ML_DT_Q4; }

// Checks that entry i is writable (name, type, shape, scale type, pointers) and computes its
// data_size and scale_size from its type and shape.
ml_status tensor_sizes(const ml_mlb_tensor_src* s, size_t i, uint32_t header_scale_type, uint64_t* data_size,
                       uint64_t* scale_size, ml_error* err) {
  const ml_mlb_tensor* t = &s->t;
  const size_t len = strnlen(t->name, ML_MLB_NAME_MAX);
  if (len == 0 || len >= ML_MLB_NAME_MAX)
    return ml_fail(err, ML_E_ARG, "tensor %zu: name must be 1..%u bytes", i, ML_MLB_NAME_MAX - 1);
  if (t->rows == 0 || t->cols == 0)
    return ml_fail(err, ML_E_ARG, "tensor %s: shape %ux%u is empty", t->name, t->rows, t->cols);
  const uint64_t n = (uint64_t)t->rows * t->cols;  // two u32: cannot overflow u64
  *scale_size = 0;
  switch (t->type) {
    case ML_DT_F32:
    case ML_DT_F16:
      if (t->scale_type != 0)
        return ml_fail(err, ML_E_ARG, "tensor %s: scale_type %u on an unquantized tensor", t->name, t->scale_type);
      *data_size = n * (t->type == ML_DT_F32 ? 4 : 2);
      break;
    case ML_DT_Q8:
    case ML_DT_Q4:
      if (t->cols % 32 != 0)
        return ml_fail(err, ML_E_ARG, "tensor %s: cols %u is not a multiple of 32", t->name, t->cols);
      if (t->scale_type != header_scale_type)
        return ml_fail(err, ML_E_ARG, "tensor %s: scale_type %u differs from the header's %u", t->name, t->scale_type,
                       header_scale_type);
      if (t->scale_type != ML_SCALE_F32 && t->scale_type != ML_SCALE_F16)
        return ml_fail(err, ML_E_ARG, "tensor %s: scale_type %u is not 0 (f32) or 1 (f16)", t->name, t->scale_type);
      *data_size = t->type == ML_DT_Q8 ? n : n / 2;
      *scale_size = n / 32 * (t->scale_type == ML_SCALE_F32 ? 4 : 2);
      if (!s->scales) return ml_fail(err, ML_E_ARG, "tensor %s: no scales", t->name);
      break;
    default:
      return ml_fail(err, ML_E_ARG, "tensor %s: type %u is not 0..3", t->name, t->type);
  }
  if (!s->data) return ml_fail(err, ML_E_ARG, "tensor %s: no data", t->name);
  if (*data_size > SIZE_MAX || *scale_size > SIZE_MAX)
    return ml_fail(err, ML_E_NOMEM, "tensor %s: %llu bytes do not fit in memory", t->name,
                   (unsigned long long)*data_size);
  return ML_OK;
}

// Validates every entry and computes the header's tokenizer fields and file_size, checking
// every offset for overflow (the write loop below then repeats the same arithmetic unchecked).
ml_status layout(const char* path, ml_mlb_header* hdr, const ml_mlb_tensor_src* tensors, size_t n,
                 bool has_tokenizer, size_t tokenizer_size, ml_error* err) {
  uint64_t pos;
  if (!ml_mul64(n, ML_MLB_DIR_ENTRY_SIZE, &pos) || !ml_add64(pos, ML_MLB_HEADER_SIZE, &pos))
    return ml_fail(err, ML_E_NOMEM, "%s: directory size overflows", path);
  for (size_t i = 0; i < n; ++i) {
    ml_mlb_tensor t = tensors[i].t;
    ML_TRY(tensor_sizes(&tensors[i], i, hdr->scale_type, &t.data_size, &t.scale_size, err));
    t.scale_offset = 0;
    if (!align64(pos, &t.data_offset) || !ml_add64(t.data_offset, t.data_size, &pos))
      return ml_fail(err, ML_E_NOMEM, "%s: file size overflows at tensor %s", path, t.name);
    if (is_quant(t.type) && (!align64(pos, &t.scale_offset) || !ml_add64(t.scale_offset, t.scale_size, &pos)))
      return ml_fail(err, ML_E_NOMEM, "%s: file size overflows at tensor %s", path, t.name);
  }
  hdr->tokenizer_offset = 0;
  hdr->tokenizer_size = 0;
  if (has_tokenizer) {
    if (!align64(pos, &hdr->tokenizer_offset) || !ml_add64(tokenizer_size, 8, &hdr->tokenizer_size) ||
        !ml_add64(hdr->tokenizer_offset, hdr->tokenizer_size, &pos))
      return ml_fail(err, ML_E_NOMEM, "%s: file size overflows at the tokenizer", path);
  }
  hdr->file_size = pos;
  return ML_OK;
}

// Where the bytes go: the output file, an open file descriptor, or one buffer of file_size bytes.
struct sink {
  ml_out_file* f = nullptr;
  int fd = -1;
  uint8_t* mem = nullptr;
  ml_status put(const void* p, uint64_t at, uint64_t n, ml_error* err) {
    if (f) return ml_out_write(f, p, (size_t)n, err);
    if (fd >= 0) return ml_file_write_all(fd, p, (size_t)n, "the converted model", err);
    std::memcpy(mem + at, p, (size_t)n);
    return ML_OK;
  }
};

// Writes zeros from *pos up to offset, then n bytes of p; *pos follows.
ml_status write_at(sink* o, uint64_t* pos, uint64_t offset, const void* p, uint64_t n, ml_error* err) {
  static const uint8_t zeros[ML_MLB_ALIGN] = {0};
  while (*pos < offset) {
    const uint64_t k = offset - *pos < ML_MLB_ALIGN ? offset - *pos : ML_MLB_ALIGN;
    ML_TRY(o->put(zeros, *pos, k, err));
    *pos += k;
  }
  ML_TRY(o->put(p, *pos, n, err));
  *pos += n;
  return ML_OK;
}

// Checks the arguments and computes the final header (layout()).
ml_status plan(const char* what, const ml_mlb_header* h, const ml_mlb_tensor_src* tensors, size_t n_tensors,
               const uint8_t* tokenizer, size_t tokenizer_size, uint32_t tokenizer_kind, ml_mlb_header* hdr,
               ml_error* err) {
  if (tokenizer && tokenizer_kind != 1 && tokenizer_kind != 2)
    return ml_fail(err, ML_E_ARG, "%s: tokenizer kind %u is not 1 or 2", what, tokenizer_kind);
  if (n_tensors > UINT32_MAX)
    return ml_fail(err, ML_E_ARG, "%s: %zu tensors do not fit the directory", what, n_tensors);
  if (n_tensors > 0 && !tensors) return ml_fail(err, ML_E_ARG, "%s: no tensors given", what);
  *hdr = *h;
  hdr->version = ML_MLB_VERSION;
  hdr->header_size = ML_MLB_HEADER_SIZE;
  hdr->n_tensors = (uint32_t)n_tensors;
  hdr->dir_offset = ML_MLB_HEADER_SIZE;
  return layout(what, hdr, tensors, n_tensors, tokenizer != nullptr, tokenizer_size, err);
}

// The header, the directory, the arrays in order and the tokenizer section, laid out by plan().
ml_status emit(sink* o, const char* what, const ml_mlb_header& hdr, const ml_mlb_tensor_src* tensors,
               size_t n_tensors, const uint8_t* tokenizer, size_t tokenizer_size, uint32_t tokenizer_kind,
               void (*after_tensor)(void*, size_t), void* user, ml_error* err) {
  uint64_t at = 0;  // bytes written so far
  uint8_t buf[ML_MLB_HEADER_SIZE];
  ml_mlb_encode_header(&hdr, buf);
  ml_status s = write_at(o, &at, 0, buf, ML_MLB_HEADER_SIZE, err);

  // The directory, then the arrays in order. Each entry is recomputed one at a time, so the
  // writer needs no allocation; layout() already validated every entry.
  for (size_t pass = 0; pass < 2; ++pass) {
    uint64_t pos = (uint64_t)ML_MLB_HEADER_SIZE + (uint64_t)n_tensors * ML_MLB_DIR_ENTRY_SIZE;
    for (size_t i = 0; s == ML_OK && i < n_tensors; ++i) {
      ml_mlb_tensor t = tensors[i].t;
      tensor_sizes(&tensors[i], i, hdr.scale_type, &t.data_size, &t.scale_size, nullptr);
      align64(pos, &t.data_offset);
      pos = t.data_offset + t.data_size;
      t.scale_offset = 0;
      if (is_quant(t.type)) {
        align64(pos, &t.scale_offset);
        pos = t.scale_offset + t.scale_size;
      } else {
        t.scale_size = 0;
      }
      if (pass == 0) {
        uint8_t e[ML_MLB_DIR_ENTRY_SIZE];
        ml_mlb_encode_tensor(&t, e);
        s = write_at(o, &at, ML_MLB_HEADER_SIZE + (uint64_t)i * ML_MLB_DIR_ENTRY_SIZE, e, ML_MLB_DIR_ENTRY_SIZE, err);
      } else {
        s = write_at(o, &at, t.data_offset, tensors[i].data, t.data_size, err);
        if (s == ML_OK && is_quant(t.type)) s = write_at(o, &at, t.scale_offset, tensors[i].scales, t.scale_size, err);
        if (s == ML_OK && after_tensor) after_tensor(user, i);
      }
    }
  }
  if (s == ML_OK && tokenizer) {
    const uint8_t head[8] = {(uint8_t)tokenizer_kind, 0, 0, 0, 0, 0, 0, 0};  // kind, reserved 0
    s = write_at(o, &at, hdr.tokenizer_offset, head, 8, err);
    if (s == ML_OK) s = write_at(o, &at, at, tokenizer, tokenizer_size, err);
  }
  if (s == ML_OK && at != hdr.file_size)  // cannot happen unless the layout passes disagree
    s = ml_fail(err, ML_E_IO, "cannot write %s: wrote %llu bytes, the layout says %llu", what,
                (unsigned long long)at, (unsigned long long)hdr.file_size);
  return s;
}

}  // namespace

ml_status ml_mlb_write(const char* path, const ml_mlb_header* h, const ml_mlb_tensor_src* tensors, size_t n_tensors,
                       const uint8_t* tokenizer, size_t tokenizer_size, ml_error* err, uint32_t tokenizer_kind) {
  ml_mlb_header hdr;
  ML_TRY(plan(path, h, tensors, n_tensors, tokenizer, tokenizer_size, tokenizer_kind, &hdr, err));
  // The output is big (up to the whole model): on the heap, not the stack.
  ml_out_file* f = new (std::nothrow) ml_out_file;
  if (!f) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the output", path);
  ml_status s = ml_out_open(f, path, nullptr, 0, err);
  if (s != ML_OK) {
    delete f;
    return s;
  }
  sink o;
  o.f = f;
  s = emit(&o, path, hdr, tensors, n_tensors, tokenizer, tokenizer_size, tokenizer_kind, nullptr, nullptr, err);
  if (s == ML_OK) s = ml_out_commit(f, err);
  ml_out_discard(f);  // a no-op after a commit
  delete f;
  return s;
}

ml_status ml_mlb_write_memory(const ml_mlb_header* h, const ml_mlb_tensor_src* tensors, size_t n_tensors,
                              const uint8_t* tokenizer, size_t tokenizer_size, uint32_t tokenizer_kind, uint8_t** out,
                              size_t* size, void (*after_tensor)(void*, size_t), void* user, ml_error* err) {
  *out = nullptr;
  *size = 0;
  ml_mlb_header hdr;
  ML_TRY(plan("the converted model", h, tensors, n_tensors, tokenizer, tokenizer_size, tokenizer_kind, &hdr, err));
  if (hdr.file_size > SIZE_MAX - ML_MLB_ALIGN)
    return ml_fail(err, ML_E_NOMEM, "the converted model of %llu bytes does not fit in memory",
                   (unsigned long long)hdr.file_size);
  const size_t bytes = (size_t)((hdr.file_size + ML_MLB_ALIGN - 1) & ~(ML_MLB_ALIGN - 1));
  uint8_t* mem = static_cast<uint8_t*>(ml_aligned_alloc(ML_MLB_ALIGN, bytes));
  if (!mem)
    return ml_fail(err, ML_E_NOMEM, "cannot allocate %zu bytes for the converted model", bytes);
  sink o;
  o.mem = mem;
  const ml_status s = emit(&o, "the converted model", hdr, tensors, n_tensors, tokenizer, tokenizer_size,
                           tokenizer_kind, after_tensor, user, err);
  if (s != ML_OK) {
    ml_aligned_free(mem);
    return s;
  }
  *out = mem;
  *size = (size_t)hdr.file_size;
  return ML_OK;
}

ml_status ml_mlb_write_fd(int fd, const ml_mlb_header* h, const ml_mlb_tensor_src* tensors, size_t n_tensors,
                          const uint8_t* tokenizer, size_t tokenizer_size, uint32_t tokenizer_kind, size_t* size,
                          void (*after_tensor)(void*, size_t), void* user, ml_error* err) {
  *size = 0;
  ml_mlb_header hdr;
  ML_TRY(plan("the converted model", h, tensors, n_tensors, tokenizer, tokenizer_size, tokenizer_kind, &hdr, err));
  if (hdr.file_size > SIZE_MAX)
    return ml_fail(err, ML_E_NOMEM, "the converted model of %llu bytes does not fit in memory",
                   (unsigned long long)hdr.file_size);
  sink o;
  o.fd = fd;
  ML_TRY(emit(&o, "the converted model", hdr, tensors, n_tensors, tokenizer, tokenizer_size, tokenizer_kind,
              after_tensor, user, err));
  *size = (size_t)hdr.file_size;
  return ML_OK;
}
