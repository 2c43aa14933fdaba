// The converter's tensor helpers: quantizing float matrices into Q8/Q4 with f32 or f16 scales (the
// rule of src/core/quant_ref.h, which the engine shares), the FFN zero padding, the explicit
// little-endian encoding of F32 arrays and scales, the tokenizer.bin check, the final write, and
// cv_buf/cv_alloc, the library's only source of memory.
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "convert/convert.h"
#include "core/checked.h"
#include "core/file.h"
#include "core/half.h"
#include "core/quant_ref.h"
#include "core/types.h"
#include "model/format_write.h"
#include "model/limits.h"
#include "convert/hf_files.h"
#include "model/tokenizer/tokenizer.h"

namespace {

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void put_f32(uint8_t* p, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  put_u32(p, bits);
}

ml_status set_name(ml_mlb_tensor* t, const char* name, ml_error* err) {
  if (std::strlen(name) >= ML_MLB_NAME_MAX) return ml_fail(err, ML_E_ARG, "tensor name %s is too long", name);
  std::memset(t->name, 0, sizeof t->name);
  std::memcpy(t->name, name, std::strlen(name));
  return ML_OK;
}

// Appends a tensor whose bytes m now owns (data and scales from cv_buf::release).
ml_status push_tensor(cv_model* m, const ml_mlb_tensor& t, cv_buf* data, cv_buf* scales, ml_error* err) {
  if (m->n_tensors == m->cap_tensors) {
    const size_t cap = m->cap_tensors ? m->cap_tensors * 2 : 64;
    size_t bytes;
    if (!ml_mul(cap, sizeof(cv_tensor), &bytes))
      return ml_fail(err, ML_E_NOMEM, "tensor %s: the tensor list of %zu entries overflows", t.name, cap);
    void* p = std::realloc(m->tensors, bytes);
    if (!p)
      return ml_fail(err, ML_E_NOMEM, "tensor %s: cannot grow the tensor list to %zu entries (%zu bytes)", t.name,
                     cap, bytes);
    m->tensors = static_cast<cv_tensor*>(p);
    m->cap_tensors = cap;
  }
  cv_tensor& e = m->tensors[m->n_tensors++];
  e.t = t;
  e.data = data->release();
  e.scales = scales ? scales->release() : nullptr;
  return ML_OK;
}

}  // namespace

// --- memory ----------------------------------------------------------------------------------

cv_buf& cv_buf::operator=(cv_buf&& o) noexcept {
  if (this != &o) {
    std::free(data);
    data = o.data;
    size = o.size;
    o.data = nullptr;
    o.size = 0;
  }
  return *this;
}

cv_buf::~cv_buf() { std::free(data); }

uint8_t* cv_buf::release() {
  uint8_t* p = data;
  data = nullptr;
  size = 0;
  return p;
}

ml_status cv_alloc(cv_buf* b, size_t count, size_t elem, ml_error* err, const char* fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  std::free(b->data);
  b->data = nullptr;
  b->size = 0;
  size_t bytes;
  if (!ml_mul(count, elem, &bytes))
    return ml_fail(err, ML_E_NOMEM, "%s: %zu x %zu bytes overflow this address space", what, count, elem);
  // glibc's malloc refuses these anyway; checking first keeps sanitizers' allocators (which abort on
  // such a request by default) and other libcs out of it.
  if (bytes > (size_t)PTRDIFF_MAX)
    return ml_fail(err, ML_E_NOMEM, "%s: %zu bytes exceed this address space", what, bytes);
  ML_TRY(ml_check_ram(bytes, what, nullptr, err));
  // calloc: zeros are the FFN padding; and one byte for an empty block, so data is never null.
  void* p = std::calloc(bytes ? bytes : 1, 1);
  if (!p) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate %zu bytes", what, bytes);
  b->data = static_cast<uint8_t*>(p);
  b->size = bytes;
  return ML_OK;
}

void cv_notify(void (*fn)(void* user, const char* msg), void* user, const char* fmt, ...) {
  if (!fn) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fn(user, msg);
}

// --- a model being built ---------------------------------------------------------------------

cv_model::~cv_model() {
  for (size_t i = 0; i < n_tensors; ++i) {
    std::free(tensors[i].data);
    std::free(tensors[i].scales);
  }
  std::free(tensors);
  ml_file_close(&tokenizer);
}

ml_status cv_load_f32(const uint8_t* p, size_t n, cv_buf* out, const char* what, ml_error* err) {
  ML_TRY(cv_alloc(out, n, sizeof(float), err, "%s", what));
  float* v = out->as<float>();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = get_u32(p + 4 * i);
    std::memcpy(&v[i], &bits, 4);
  }
  return ML_OK;
}

ml_status cv_add_f32_rows(cv_model* m, const char* name, uint32_t rows, uint32_t cols, const float* x, ml_error* err) {
  ml_mlb_tensor t;
  ML_TRY(set_name(&t, name, err));
  t.type = ML_DT_F32;
  t.scale_type = 0;
  t.rows = rows;
  t.cols = cols;
  size_t n;
  if (!ml_mul(rows, cols, &n)) return ml_fail(err, ML_E_NOMEM, "tensor %s: %ux%u overflows", name, rows, cols);
  cv_buf data;
  ML_TRY(cv_alloc(&data, n, 4, err, "tensor %s", name));
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]))
      return ml_fail(err, ML_E_FORMAT, "tensor %s: value %zu is %g", name, i, (double)x[i]);
    put_f32(data.data + i * 4, x[i]);
  }
  return push_tensor(m, t, &data, nullptr, err);
}

ml_status cv_add_f32(cv_model* m, const char* name, const float* x, uint32_t n, ml_error* err) {
  return cv_add_f32_rows(m, name, 1, n, x, err);
}

ml_status cv_add_matrix(cv_model* m, const char* name, uint32_t rows, uint32_t cols, const float* src,
                        uint32_t src_rows, uint32_t src_cols, ml_error* err) {
  const uint32_t wtype = m->h.wtype, stype = m->h.scale_type;
  if (wtype != ML_DT_Q8 && wtype != ML_DT_Q4) return ml_fail(err, ML_E_ARG, "wtype %u is not Q8 (2) or Q4 (3)", wtype);
  if (cols % ML_QK != 0) return ml_fail(err, ML_E_SHAPE, "tensor %s: cols %u is not a multiple of 32", name, cols);
  if (src_rows > rows || src_cols > cols)
    return ml_fail(err, ML_E_SHAPE, "tensor %s: source %ux%u exceeds %ux%u", name, src_rows, src_cols, rows, cols);
  size_t n;
  if (!ml_mul(rows, cols, &n)) return ml_fail(err, ML_E_NOMEM, "tensor %s: %ux%u overflows", name, rows, cols);

  for (uint32_t r = 0; r < src_rows; ++r) {
    const float* row = src + (size_t)r * src_cols;
    for (uint32_t c = 0; c < src_cols; ++c) {
      if (!std::isfinite(row[c]))
        return ml_fail(err, ML_E_FORMAT, "tensor %s: value at row %u col %u is %g", name, r, c, (double)row[c]);
    }
  }
  // A source smaller than the tensor is copied into a zero-padded matrix first; a full-size one is
  // quantized in place.
  const float* x = src;
  cv_buf padded;
  if (src_rows != rows || src_cols != cols) {
    ML_TRY(cv_alloc(&padded, n, sizeof(float), err, "tensor %s (padded to %ux%u)", name, rows, cols));
    for (uint32_t r = 0; r < src_rows; ++r)
      std::memcpy(padded.as<float>() + (size_t)r * cols, src + (size_t)r * src_cols, (size_t)src_cols * sizeof(float));
    x = padded.as<float>();
  }

  ml_mlb_tensor t;
  ML_TRY(set_name(&t, name, err));
  t.type = wtype;
  t.scale_type = stype;
  t.rows = rows;
  t.cols = cols;
  // Blocks never straddle rows (cols % 32 == 0), so one call over the whole matrix quantizes
  // every row exactly as a row-by-row call would.
  const size_t nb = n / ML_QK;
  cv_buf d, data, scales;
  ML_TRY(cv_alloc(&d, nb, sizeof(float), err, "tensor %s's block scales", name));
  if (wtype == ML_DT_Q8) {
    ML_TRY(cv_alloc(&data, n, 1, err, "tensor %s's quants", name));
    ml_quantize_q8_ref(reinterpret_cast<int8_t*>(data.data), d.as<float>(), x, n);
  } else {
    ML_TRY(cv_alloc(&data, n / 2, 1, err, "tensor %s's quants", name));
    ml_quantize_q4_ref(data.data, d.as<float>(), x, n);
  }
  padded = cv_buf{};
  ML_TRY(cv_alloc(&scales, nb, stype == ML_SCALE_F32 ? 4 : 2, err, "tensor %s's scales", name));
  const float* ds = d.as<float>();
  for (size_t i = 0; i < nb; ++i) {
    if (stype == ML_SCALE_F32) {
      put_f32(scales.data + i * 4, ds[i]);
    } else {
      const uint16_t hbits = ml_float_to_half(ds[i]);
      if ((hbits & 0x7C00u) == 0x7C00u)
        return ml_fail(err, ML_E_FORMAT,
                       "tensor %s: block scale %g of row %zu does not fit an f16 scale (use --scales f32)", name,
                       (double)ds[i], i / (cols / ML_QK));
      scales.data[i * 2] = (uint8_t)(hbits & 0xFF);
      scales.data[i * 2 + 1] = (uint8_t)(hbits >> 8);
    }
  }
  return push_tensor(m, t, &data, &scales, err);
}

ml_status cv_add_quantized(cv_model* m, const char* name, uint32_t rows, uint32_t cols, cv_buf* quants,
                           cv_buf* scales, ml_error* err) {
  const uint32_t wtype = m->h.wtype, stype = m->h.scale_type;
  if (wtype != ML_DT_Q8 && wtype != ML_DT_Q4) return ml_fail(err, ML_E_ARG, "wtype %u is not Q8 (2) or Q4 (3)", wtype);
  if (cols % ML_QK != 0) return ml_fail(err, ML_E_SHAPE, "tensor %s: cols %u is not a multiple of 32", name, cols);
  const size_t n = (size_t)rows * cols, nb = n / ML_QK;
  if (quants->size != (wtype == ML_DT_Q8 ? n : n / 2) || scales->size != nb * (stype == ML_SCALE_F32 ? 4 : 2))
    return ml_fail(err, ML_E_ARG, "tensor %s: %zu quant and %zu scale bytes do not fit %ux%u", name, quants->size,
                   scales->size, rows, cols);
  if (wtype == ML_DT_Q8) {
    for (size_t i = 0; i < n; ++i)
      if (quants->data[i] == 0x80)
        return ml_fail(err, ML_E_FORMAT, "tensor %s: quant %d of row %zu is -128 (Q8 allows -127..127)", name,
                       (int)(i % cols), i / cols);
  }
  for (size_t i = 0; i < nb; ++i) {
    float d;
    if (stype == ML_SCALE_F32) {
      const uint32_t bits = get_u32(scales->data + 4 * i);
      std::memcpy(&d, &bits, 4);
    } else {
      d = ml_half_to_float((uint16_t)(scales->data[2 * i] | scales->data[2 * i + 1] << 8));
    }
    if (!std::isfinite(d))
      return ml_fail(err, ML_E_FORMAT, "tensor %s: the scale of block %zu of row %zu is %g", name,
                     i % (cols / ML_QK), i / (cols / ML_QK), (double)d);
  }
  ml_mlb_tensor t;
  ML_TRY(set_name(&t, name, err));
  t.type = wtype;
  t.scale_type = stype;
  t.rows = rows;
  t.cols = cols;
  return push_tensor(m, t, quants, scales, err);
}


namespace {

// What cv_write, cv_write_memory and cv_write_converted hand the writer: the checked header, the tensor list and the
// tokenizer section's payload.
struct write_args {
  cv_buf list;
  const uint8_t* tok = nullptr;
  size_t tok_size = 0;
};

ml_status prepare_write(const cv_model* m, const char* what, write_args* a, ml_error* err) {
  // The engine's limits (model/limits.h), checked once more on what is written: the converters
  // check their inputs first, with messages naming the option or checkpoint field.
  const ml_status hs = ml_mlb_check_header(&m->h, err);
  if (hs != ML_OK) return ml_fail(err, hs, "%s: %s", what, err ? err->msg : "");
  if (m->n_tensors == 0 || m->n_tensors > ML_LIMIT_TENSORS)
    return ml_fail(err, ML_E_SHAPE, "%s: %zu tensors, outside 1..%u", what, m->n_tensors, ML_LIMIT_TENSORS);
  ML_TRY(cv_alloc(&a->list, m->n_tensors, sizeof(ml_mlb_tensor_src), err, "%s: the list of %zu tensors", what,
                  m->n_tensors));
  ml_mlb_tensor_src* src = a->list.as<ml_mlb_tensor_src>();
  for (size_t i = 0; i < m->n_tensors; ++i) {
    src[i].t = m->tensors[i].t;
    src[i].data = m->tensors[i].data;
    src[i].scales = m->tensors[i].scales;
  }
  static const uint8_t empty = 0;
  if (m->has_tokenizer && m->tokenizer_kind == 2) {
    a->tok = m->hf_bundle.data;
    a->tok_size = m->hf_bundle.size;
  } else if (m->has_tokenizer) {
    a->tok = m->tokenizer.size == 0 ? &empty : m->tokenizer.data;
    a->tok_size = m->tokenizer.size;
  }
  return ML_OK;
}

// Frees tensor i's bytes once the writer has copied them (a model converted at load).
void free_tensor(void* user, size_t i) {
  cv_tensor& t = static_cast<cv_model*>(user)->tensors[i];
  std::free(t.data);
  std::free(t.scales);
  t.data = t.scales = nullptr;
}

}  // namespace

ml_status cv_write(const cv_model* m, const char* path, ml_error* err) {
  write_args a;
  ML_TRY(prepare_write(m, path, &a, err));
  return ml_mlb_write(path, &m->h, a.list.as<ml_mlb_tensor_src>(), m->n_tensors, a.tok, a.tok_size, err,
                      m->tokenizer_kind);
}

ml_status cv_write_memory(cv_model* m, uint8_t** out, size_t* size, ml_error* err) {
  write_args a;
  ML_TRY(prepare_write(m, "the converted model", &a, err));
  return ml_mlb_write_memory(&m->h, a.list.as<ml_mlb_tensor_src>(), m->n_tensors, a.tok, a.tok_size,
                             m->tokenizer_kind, out, size, free_tensor, m, err);
}

ml_status cv_write_converted(cv_model* m, cv_mem_out* out, ml_error* err) {
  if (out->fd < 0) return cv_write_memory(m, &out->data, &out->size, err);
  write_args a;
  ML_TRY(prepare_write(m, "the converted model", &a, err));
  return ml_mlb_write_fd(out->fd, &m->h, a.list.as<ml_mlb_tensor_src>(), m->n_tensors, a.tok, a.tok_size,
                         m->tokenizer_kind, &out->size, free_tensor, m, err);
}

// The loader's own checks (model/tokenizer/llama2c.h), so the converter writes no tokenizer the
// engine refuses (a NaN score, a negative length, a max_token_length above the limit).
ml_status cv_check_tokenizer(const uint8_t* data, size_t size, uint32_t vocab, const char* path, ml_error* err) {
  const ml_status s = ml_tokenizer_check_llama2c(data, size, vocab, err);
  if (s != ML_OK) return ml_fail(err, s, "%s: %s", path, err ? err->msg : "");
  return ML_OK;
}

namespace {

ml_status attach_hf(cv_model* m, const char* path, const char* chat_template, ml_error* err) {
  cv_hf_files f;
  ML_TRY(cv_hf_files_open(&f, path, chat_template, err));
  return cv_attach_hf_files(m, &f.files, path, err);
}

}  // namespace

ml_status cv_attach_hf_files(cv_model* m, const ml_hf_files* files, const char* path, ml_error* err) {
  ml_file_close(&m->tokenizer);
  m->has_tokenizer = false;
  m->tokenizer_kind = 1;
  ml_tokenizer* t = nullptr;
  ml_status s = ml_tokenizer_load_hf(&t, files, err);
  if (s != ML_OK) return ml_fail(err, s, "%s: %s", path, err ? err->msg : "");
  const int32_t vocab = ml_tokenizer_vocab(t), bos = ml_tokenizer_bos(t), eos = ml_tokenizer_eos(t);
  ml_tokenizer_free(t);
  if ((uint32_t)vocab > m->h.vocab_size)
    return ml_fail(err, ML_E_ARG, "%s: the tokenizer has %d tokens, more than the model's vocabulary of %u", path, vocab,
                   m->h.vocab_size);
  const size_t size = ml_hf_bundle_size(files);
  if (size == 0) return ml_fail(err, ML_E_NOMEM, "%s: the tokenizer files overflow the address space", path);
  ML_TRY(cv_alloc(&m->hf_bundle, size, 1, err, "%s: the tokenizer section", path));
  ml_hf_bundle_write(files, m->hf_bundle.data);
  if (bos >= 0) m->h.bos_id = (uint32_t)bos;
  if (eos >= 0) m->h.eos_id = (uint32_t)eos;
  m->tokenizer_kind = 2;
  m->has_tokenizer = true;
  return ML_OK;
}

ml_status cv_attach_llama2c_bytes(cv_model* m, cv_buf* bin, const char* what, ml_error* err) {
  ml_file_close(&m->tokenizer);
  m->has_tokenizer = false;
  m->tokenizer_kind = 1;
  m->tokenizer_owned = static_cast<cv_buf&&>(*bin);
  ML_TRY(cv_check_tokenizer(m->tokenizer_owned.data, m->tokenizer_owned.size, m->h.vocab_size, what, err));
  ml_file_borrow(&m->tokenizer, m->tokenizer_owned.data, m->tokenizer_owned.size);
  m->has_tokenizer = true;
  return ML_OK;
}

ml_status cv_attach_tokenizer(cv_model* m, const char* path, const char* chat_template, ml_error* err) {
  ml_file_close(&m->tokenizer);
  m->has_tokenizer = false;
  m->tokenizer_kind = 1;
  if (cv_is_hf_tokenizer(path)) return attach_hf(m, path, chat_template, err);
  if (chat_template)
    return ml_fail(err, ML_E_ARG, "--chat-template: %s is a llama2.c tokenizer.bin, which has no chat template", path);
  ML_TRY(ml_file_open(&m->tokenizer, path, err));
  ML_TRY(cv_check_tokenizer(m->tokenizer.data, m->tokenizer.size, m->h.vocab_size, path, err));
  m->has_tokenizer = true;
  return ML_OK;
}
