// ml_convert's tensor helpers: quantizing float matrices into Q8/Q4 with f32 or f16 scales (the
// rule of src/core/quant_ref.h, which the engine shares), the FFN zero padding, the explicit
// little-endian encoding of F32 arrays and scales, the tokenizer.bin check, and the final write.
#include <cmath>
#include <cstring>

#include "convert/convert.h"
#include "core/checked.h"
#include "core/file.h"
#include "core/half.h"
#include "core/quant_ref.h"
#include "core/types.h"
#include "model/format_write.h"

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

}  // namespace

std::vector<float> cv_load_f32(const uint8_t* p, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = get_u32(p + 4 * i);
    std::memcpy(&v[i], &bits, 4);
  }
  return v;
}

ml_status cv_add_f32(cv_model* m, const char* name, const float* x, uint32_t n, ml_error* err) {
  cv_tensor t;
  ML_TRY(set_name(&t.t, name, err));
  t.t.type = ML_DT_F32;
  t.t.scale_type = 0;
  t.t.rows = 1;
  t.t.cols = n;
  t.data.resize((size_t)n * 4);
  for (uint32_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return ml_fail(err, ML_E_FORMAT, "tensor %s: value %d is %g", name, (int)i, (double)x[i]);
    put_f32(&t.data[(size_t)i * 4], x[i]);
  }
  m->tensors.push_back(std::move(t));
  return ML_OK;
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

  // The padded float matrix (zeros where src has no rows/columns).
  std::vector<float> x(n, 0.0f);
  for (uint32_t r = 0; r < src_rows; ++r) {
    const float* row = src + (size_t)r * src_cols;
    for (uint32_t c = 0; c < src_cols; ++c) {
      if (!std::isfinite(row[c]))
        return ml_fail(err, ML_E_FORMAT, "tensor %s: value at row %u col %u is %g", name, r, c, (double)row[c]);
    }
    std::memcpy(&x[(size_t)r * cols], row, (size_t)src_cols * sizeof(float));
  }

  cv_tensor t;
  ML_TRY(set_name(&t.t, name, err));
  t.t.type = wtype;
  t.t.scale_type = stype;
  t.t.rows = rows;
  t.t.cols = cols;
  // Blocks never straddle rows (cols % 32 == 0), so one call over the whole matrix quantizes
  // every row exactly as a row-by-row call would.
  std::vector<float> d(n / ML_QK);
  if (wtype == ML_DT_Q8) {
    t.data.resize(n);
    ml_quantize_q8_ref(reinterpret_cast<int8_t*>(t.data.data()), d.data(), x.data(), n);
  } else {
    t.data.resize(n / 2);
    ml_quantize_q4_ref(t.data.data(), d.data(), x.data(), n);
  }
  t.scales.resize(d.size() * (stype == ML_SCALE_F32 ? 4 : 2));
  for (size_t i = 0; i < d.size(); ++i) {
    if (stype == ML_SCALE_F32) {
      put_f32(&t.scales[i * 4], d[i]);
    } else {
      const uint16_t hbits = ml_float_to_half(d[i]);
      if ((hbits & 0x7C00u) == 0x7C00u)
        return ml_fail(err, ML_E_FORMAT,
                       "tensor %s: block scale %g of row %zu does not fit an f16 scale (use --scales f32)", name,
                       (double)d[i], i / (cols / ML_QK));
      t.scales[i * 2] = (uint8_t)(hbits & 0xFF);
      t.scales[i * 2 + 1] = (uint8_t)(hbits >> 8);
    }
  }
  m->tensors.push_back(std::move(t));
  return ML_OK;
}

ml_status cv_write(const cv_model* m, const char* path, ml_error* err) {
  std::vector<ml_mlb_tensor_src> src(m->tensors.size());
  for (size_t i = 0; i < src.size(); ++i) {
    src[i].t = m->tensors[i].t;
    src[i].data = m->tensors[i].data.data();
    src[i].scales = m->tensors[i].scales.empty() ? nullptr : m->tensors[i].scales.data();
  }
  static const uint8_t empty = 0;
  const uint8_t* tok = nullptr;
  if (m->has_tokenizer) tok = m->tokenizer.empty() ? &empty : m->tokenizer.data();
  return ml_mlb_write(path, &m->h, src.data(), src.size(), tok, m->tokenizer.size(), err);
}

ml_status cv_read_file(const char* path, std::vector<uint8_t>* out, ml_error* err) {
  ml_file f;
  ML_TRY(ml_file_open(&f, path, err));
  out->assign(f.data, f.data + f.size);
  ml_file_close(&f);
  return ML_OK;
}

ml_status cv_check_tokenizer(const uint8_t* data, size_t size, uint32_t vocab, const char* path, ml_error* err) {
  if (size < 4)
    return ml_fail(err, ML_E_FORMAT, "tokenizer %s: %zu bytes, too short for max_token_length", path, size);
  const uint32_t max_len = get_u32(data);
  if (max_len == 0 || max_len > (1u << 20))
    return ml_fail(err, ML_E_FORMAT, "tokenizer %s: max_token_length %u is not in 1..%u", path, max_len, 1u << 20);
  size_t pos = 4;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (size - pos < 8)
      return ml_fail(err, ML_E_FORMAT, "tokenizer %s: ends at token %u, but vocab_size is %u", path, i, vocab);
    const uint32_t len = get_u32(data + pos + 4);
    if (len > max_len)
      return ml_fail(err, ML_E_FORMAT, "tokenizer %s: token %u has length %d, more than max_token_length %u", path, i,
                     (int32_t)len, max_len);
    pos += 8;
    if (size - pos < len)
      return ml_fail(err, ML_E_FORMAT, "tokenizer %s: token %u (length %u) runs past the end of the file", path, i,
                     len);
    pos += len;
  }
  if (pos != size)
    return ml_fail(err, ML_E_FORMAT,
                   "tokenizer %s: %zu bytes follow token %u: it holds more tokens than vocab_size %u", path,
                   size - pos, vocab - 1, vocab);
  return ML_OK;
}

ml_status cv_attach_tokenizer(cv_model* m, const char* path, ml_error* err) {
  ML_TRY(cv_read_file(path, &m->tokenizer, err));
  ML_TRY(cv_check_tokenizer(m->tokenizer.data(), m->tokenizer.size(), m->h.vocab_size, path, err));
  m->has_tokenizer = true;
  return ML_OK;
}
