// The .safetensors reader (safetensors.h has the contract).
#include "convert/safetensors.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/checked.h"
#include "core/half.h"
#include "core/json.h"

namespace {

uint64_t rd64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

uint32_t itemsize(uint32_t dtype) { return dtype == CV_ST_F32 ? 4 : 2; }

bool dtype_of(const char* s, uint32_t* out) {
  if (std::strcmp(s, "F32") == 0) return *out = CV_ST_F32, true;
  if (std::strcmp(s, "F16") == 0) return *out = CV_ST_F16, true;
  if (std::strcmp(s, "BF16") == 0) return *out = CV_ST_BF16, true;
  return false;
}

// A non-negative integer that fits max; false otherwise.
bool get_uint(const ml_json* v, uint64_t max, uint64_t* out) {
  if (!ml_json_is(v, ML_JSON_NUMBER) || !v->is_int || v->i64 < 0 || (uint64_t)v->i64 > max) return false;
  *out = (uint64_t)v->i64;
  return true;
}

int by_name(const void* a, const void* b) {
  return std::strcmp(static_cast<const cv_st_tensor*>(a)->name, static_cast<const cv_st_tensor*>(b)->name);
}

int by_offset(const void* a, const void* b) {
  const cv_st_tensor* x = *static_cast<const cv_st_tensor* const*>(a);
  const cv_st_tensor* y = *static_cast<const cv_st_tensor* const*>(b);
  if (x->data != y->data) return x->data < y->data ? -1 : 1;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return 0;
}

// One tensor entry of the header into *t.
ml_status parse_tensor(const char* what, const ml_json_member& m, const uint8_t* area, uint64_t area_size,
                       cv_st_tensor* t, ml_error* err) {
  const char* name = m.key;
  if (m.key_len == 0) return ml_fail(err, ML_E_FORMAT, "%s: a tensor has an empty name", what);
  if (std::strlen(name) != m.key_len) return ml_fail(err, ML_E_FORMAT, "%s: a tensor name holds a NUL byte", what);
  const ml_json* v = m.value;
  if (!ml_json_is(v, ML_JSON_OBJECT))
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: the entry is a %s, not an object", what, name,
                   ml_json_type_name(v->type));
  const ml_json* dt = ml_json_get(v, "dtype");
  const ml_json* shape = ml_json_get(v, "shape");
  const ml_json* offs = ml_json_get(v, "data_offsets");
  if (!ml_json_is(dt, ML_JSON_STRING))
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: dtype is missing or not a string", what, name);
  if (!dtype_of(dt->str, &t->dtype))
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: dtype %.32s is not supported (F32, F16 or BF16)", what, name,
                   dt->str);
  if (!ml_json_is(shape, ML_JSON_ARRAY))
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: shape is missing or not a list", what, name);
  if (shape->n > CV_ST_MAX_RANK)
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: rank %zu is above %u", what, name, shape->n, CV_ST_MAX_RANK);
  t->name = name;
  t->rank = (uint32_t)shape->n;
  t->count = 1;
  for (size_t i = 0; i < shape->n; ++i) {
    if (!get_uint(shape->items[i], CV_ST_MAX_DIM, &t->shape[i]))
      return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: shape[%zu] is not an integer in 0..%llu", what, name, i,
                     (unsigned long long)CV_ST_MAX_DIM);
    if (!ml_mul64(t->count, t->shape[i], &t->count))
      return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: the element count overflows", what, name);
  }
  if (!ml_mul64(t->count, itemsize(t->dtype), &t->size))
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: the byte size overflows", what, name);
  uint64_t begin = 0, end = 0;
  if (!ml_json_is(offs, ML_JSON_ARRAY) || offs->n != 2 || !get_uint(offs->items[0], UINT64_MAX >> 1, &begin) ||
      !get_uint(offs->items[1], UINT64_MAX >> 1, &end))
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: data_offsets is not a list of two non-negative integers", what,
                   name);
  if (begin > end || end > area_size)
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: data_offsets [%llu, %llu] lie outside the data area of %llu bytes",
                   what, name, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)area_size);
  if (end - begin != t->size)
    return ml_fail(err, ML_E_FORMAT,
                   "%s: tensor %s: data_offsets [%llu, %llu] hold %llu bytes, but %s x %llu elements need %llu", what,
                   name, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)(end - begin),
                   cv_st_dtype_name(t->dtype), (unsigned long long)t->count, (unsigned long long)t->size);
  t->data = area + begin;
  t->used = false;
  return ML_OK;
}

}  // namespace

cv_st_file::~cv_st_file() { ml_file_close(&f); }

const char* cv_st_dtype_name(uint32_t dtype) {
  return dtype == CV_ST_F32 ? "F32" : dtype == CV_ST_F16 ? "F16" : dtype == CV_ST_BF16 ? "BF16" : "?";
}

ml_status cv_st_open(cv_st_file* s, const char* path, ml_error* err) {
  ML_TRY(ml_file_open(&s->f, path, err));
  static const uint8_t empty = 0;
  return cv_st_parse(s, s->f.data ? s->f.data : &empty, s->f.size, path, err);
}

ml_status cv_st_parse(cv_st_file* s, const uint8_t* data, size_t size, const char* what, ml_error* err) {
  std::snprintf(s->path, sizeof s->path, "%s", what);
  what = s->path;
  s->n = 0;
  s->metadata = nullptr;
  if (size < 8) return ml_fail(err, ML_E_FORMAT, "%s: %zu bytes, too short for the 8-byte header length", what, size);
  const uint64_t hn = rd64(data);
  if (hn < 2 || hn > CV_ST_MAX_HEADER)
    return ml_fail(err, ML_E_FORMAT, "%s: header length %llu is outside 2..%llu", what, (unsigned long long)hn,
                   (unsigned long long)CV_ST_MAX_HEADER);
  if (hn > size - 8)
    return ml_fail(err, ML_E_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)", what,
                   (unsigned long long)hn, size);
  ml_json* root = nullptr;
  ml_status st = ml_json_parse(reinterpret_cast<const char*>(data + 8), (size_t)hn, &s->b, &root, err);
  if (st != ML_OK) return ml_fail(err, st, "%s: header: %s", what, err ? err->msg : "");
  if (!ml_json_is(root, ML_JSON_OBJECT))
    return ml_fail(err, ML_E_FORMAT, "%s: the header is a %s, not an object", what, ml_json_type_name(root->type));
  const uint8_t* area = data + 8 + hn;
  const uint64_t area_size = size - 8 - hn;

  size_t n = 0;
  for (size_t i = 0; i < root->n; ++i) {
    const ml_json_member& m = root->members[i];
    if (std::strcmp(m.key, "__metadata__") == 0 && m.key_len == 12) {
      if (s->metadata) return ml_fail(err, ML_E_FORMAT, "%s: __metadata__ appears twice", what);
      if (!ml_json_is(m.value, ML_JSON_OBJECT))
        return ml_fail(err, ML_E_FORMAT, "%s: __metadata__ is not an object", what);
      for (size_t k = 0; k < m.value->n; ++k)
        if (!ml_json_is(m.value->members[k].value, ML_JSON_STRING))
          return ml_fail(err, ML_E_FORMAT, "%s: __metadata__.%s is not a string", what, m.value->members[k].key);
      s->metadata = m.value;
    } else {
      ++n;
    }
  }
  if (n > CV_ST_MAX_TENSORS) return ml_fail(err, ML_E_FORMAT, "%s: %zu tensors, above %zu", what, n, CV_ST_MAX_TENSORS);
  ML_TRY(cv_alloc(&s->tensors, n ? n : 1, sizeof(cv_st_tensor), err, "%s: the list of %zu tensors", what, n));
  cv_st_tensor* t = s->at(0);
  size_t k = 0;
  for (size_t i = 0; i < root->n; ++i) {
    const ml_json_member& m = root->members[i];
    if (std::strcmp(m.key, "__metadata__") == 0 && m.key_len == 12) continue;
    ML_TRY(parse_tensor(what, m, area, area_size, &t[k], err));
    ++k;
  }
  s->n = n;
  std::qsort(t, n, sizeof *t, by_name);
  for (size_t i = 1; i < n; ++i)
    if (std::strcmp(t[i - 1].name, t[i].name) == 0)
      return ml_fail(err, ML_E_FORMAT, "%s: tensor %s appears twice in the header", what, t[i].name);

  // The data area must be tiled exactly: sort by offset and walk.
  cv_buf order;
  ML_TRY(cv_alloc(&order, n ? n : 1, sizeof(cv_st_tensor*), err, "%s: the offset order of %zu tensors", what, n));
  cv_st_tensor** o = order.as<cv_st_tensor*>();
  for (size_t i = 0; i < n; ++i) o[i] = &t[i];
  std::qsort(o, n, sizeof *o, by_offset);
  uint64_t at = 0;
  const cv_st_tensor* prev = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t begin = (uint64_t)(o[i]->data - area);
    if (begin < at)
      return ml_fail(err, ML_E_FORMAT, "%s: tensor %s (bytes %llu..%llu) overlaps tensor %s (ending at %llu)", what,
                     o[i]->name, (unsigned long long)begin, (unsigned long long)(begin + o[i]->size), prev->name,
                     (unsigned long long)at);
    if (begin > at)
      return ml_fail(err, ML_E_FORMAT, "%s: a gap of %llu bytes before tensor %s at data offset %llu", what,
                     (unsigned long long)(begin - at), o[i]->name, (unsigned long long)at);
    at = begin + o[i]->size;
    prev = o[i];
  }
  if (at != area_size)
    return ml_fail(err, ML_E_FORMAT, "%s: %llu bytes after the last tensor's data", what,
                   (unsigned long long)(area_size - at));
  return ML_OK;
}

cv_st_tensor* cv_st_find(const cv_st_file* s, const char* name) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const int c = std::strcmp(s->at(mid)->name, name);
    if (c == 0) return s->at(mid);
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return nullptr;
}

const char* cv_st_metadata(const cv_st_file* s, const char* key) {
  const ml_json* v = ml_json_get(s->metadata, key);
  return ml_json_is(v, ML_JSON_STRING) ? v->str : nullptr;
}

ml_status cv_st_to_f32(const cv_st_tensor* t, cv_buf* out, ml_error* err) {
  if ((uint64_t)(size_t)t->count != t->count)
    return ml_fail(err, ML_E_NOMEM, "tensor %s: %llu elements overflow this address space", t->name,
                   (unsigned long long)t->count);
  const size_t n = (size_t)t->count;
  ML_TRY(cv_alloc(out, n, sizeof(float), err, "tensor %s", t->name));
  float* v = out->as<float>();
  const uint8_t* p = t->data;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    if (t->dtype == CV_ST_F32) {
      bits = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
             (uint32_t)p[4 * i + 3] << 24;
    } else {
      const uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
      if (t->dtype == CV_ST_BF16) {
        bits = (uint32_t)h << 16;
      } else {
        v[i] = ml_half_to_float(h);
        continue;
      }
    }
    std::memcpy(&v[i], &bits, 4);
  }
  return ML_OK;
}
