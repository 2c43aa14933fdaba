// The GGUF reader (gguf.h): one pass over the header, the metadata and the tensor infos with a
// cursor that refuses to read past the end, then the checks that need every tensor (data area
// bounds, duplicate names, overlaps) over index arrays sorted by name and by offset.
#include "convert/gguf.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/checked.h"

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; add byte swaps");

gguf_file::~gguf_file() { ml_file_close(&file); }

namespace {

// Bytes of a scalar value type; 0 for strings, arrays and unknown types.
uint64_t scalar_size(uint32_t t) {
  switch (t) {
    case GGUF_V_U8: case GGUF_V_I8: case GGUF_V_BOOL: return 1;
    case GGUF_V_U16: case GGUF_V_I16: return 2;
    case GGUF_V_U32: case GGUF_V_I32: case GGUF_V_F32: return 4;
    case GGUF_V_U64: case GGUF_V_I64: case GGUF_V_F64: return 8;
    default: return 0;
  }
}

// A bounds-checked reader over the file. Every read names what it reads (`what`) in the message.
struct cursor {
  const uint8_t* base;
  uint64_t size, pos;
  const char* path;
  ml_error* err;

  uint64_t left() const { return size - pos; }
  ml_status need(uint64_t n, const char* what) {
    if (n > left())
      return ml_fail(err, ML_E_FORMAT, "%s: %s at byte %" PRIu64 " needs %" PRIu64 " bytes, the file has %" PRIu64
                     " left", path, what, pos, n, left());
    return ML_OK;
  }
  template <class T>
  ml_status get(T* v, const char* what) {
    ML_TRY(need(sizeof(T), what));
    std::memcpy(v, base + pos, sizeof(T));
    pos += sizeof(T);
    return ML_OK;
  }
  // A string: u64 length, then the bytes; at most max bytes.
  ml_status str(gguf_str* s, uint64_t max, const char* what) {
    uint64_t len;
    ML_TRY(get(&len, what));
    if (len > max)
      return ml_fail(err, ML_E_FORMAT, "%s: %s: length %" PRIu64 " at byte %" PRIu64 " exceeds %" PRIu64, path, what,
                     len, pos - 8, max);
    ML_TRY(need(len, what));
    s->p = reinterpret_cast<const char*>(base + pos);
    s->len = len;
    pos += len;
    return ML_OK;
  }
};

// Reads one value of scalar or string type t at the cursor (validating a bool's byte).
ml_status skip_value(cursor* c, uint32_t t, const gguf_str& key, uint64_t index) {
  if (t == GGUF_V_STRING) {
    gguf_str s{nullptr, 0};
    uint64_t len;
    ML_TRY(c->need(8, "a string length"));
    std::memcpy(&len, c->base + c->pos, 8);
    if (len > c->left() - 8)
      return ml_fail(c->err, ML_E_FORMAT, "%s: key %.*s: string %" PRIu64 " of length %" PRIu64
                     " runs past the end of the file (%" PRIu64 " bytes left)", c->path, (int)key.len, key.p, index,
                     len, c->left() - 8);
    return c->str(&s, UINT64_MAX, "a string");
  }
  const uint64_t n = scalar_size(t);
  if (n == 0) return ml_fail(c->err, ML_E_FORMAT, "%s: key %.*s: unknown value type %u", c->path, (int)key.len, key.p, t);
  ML_TRY(c->need(n, "a value"));
  if (t == GGUF_V_BOOL && c->base[c->pos] > 1)
    return ml_fail(c->err, ML_E_FORMAT, "%s: key %.*s: bool value %u is not 0 or 1", c->path, (int)key.len, key.p,
                   c->base[c->pos]);
  c->pos += n;
  return ML_OK;
}

ml_status read_kv(cursor* c, gguf_kv* kv, uint64_t i) {
  gguf_str key{nullptr, 0};
  char what[64];
  std::snprintf(what, sizeof what, "key %" PRIu64, i);
  ML_TRY(c->str(&key, GGUF_LIMIT_KEY_LEN, what));
  if (key.len == 0) return ml_fail(c->err, ML_E_FORMAT, "%s: key %" PRIu64 " is empty", c->path, i);
  kv->key = key.p;
  kv->key_len = (uint32_t)key.len;
  uint32_t t;
  ML_TRY(c->get(&t, "a value type"));
  kv->type = kv->elem_type = t;
  kv->n = 1;
  if (t != GGUF_V_ARRAY) {
    kv->data = c->base + c->pos;
    return skip_value(c, t, key, 0);
  }
  uint32_t et;
  uint64_t n;
  ML_TRY(c->get(&et, "an array's element type"));
  ML_TRY(c->get(&n, "an array's count"));
  if (et == GGUF_V_ARRAY)
    return ml_fail(c->err, ML_E_FORMAT, "%s: key %.*s: arrays of arrays are not supported", c->path, (int)key.len, key.p);
  const uint64_t es = scalar_size(et);
  if (es == 0 && et != GGUF_V_STRING)
    return ml_fail(c->err, ML_E_FORMAT, "%s: key %.*s: unknown array element type %u", c->path, (int)key.len, key.p, et);
  // Each element takes at least es bytes (a string at least its 8-byte length).
  uint64_t min_bytes;
  if (!ml_mul64(n, es ? es : 8, &min_bytes) || min_bytes > c->left())
    return ml_fail(c->err, ML_E_FORMAT, "%s: key %.*s: array count %" PRIu64 " of %s does not fit the %" PRIu64
                   " bytes left in the file", c->path, (int)key.len, key.p, n, gguf_vtype_name(et), c->left());
  kv->elem_type = et;
  kv->n = n;
  kv->data = c->base + c->pos;
  if (et == GGUF_V_STRING || et == GGUF_V_BOOL) {
    for (uint64_t j = 0; j < n; ++j) ML_TRY(skip_value(c, et, key, j));
  } else {
    c->pos += min_bytes;
  }
  return ML_OK;
}

bool key_is(const gguf_kv& kv, const char* key) {
  const size_t n = std::strlen(key);
  return kv.key_len == n && std::memcmp(kv.key, key, n) == 0;
}

ml_status read_tensor(cursor* c, gguf_tensor* t, uint64_t i) {
  gguf_str name{nullptr, 0};
  char what[64];
  std::snprintf(what, sizeof what, "tensor %" PRIu64 "'s name", i);
  ML_TRY(c->str(&name, GGUF_NAME_MAX - 1, what));
  if (name.len == 0) return ml_fail(c->err, ML_E_FORMAT, "%s: tensor %" PRIu64 " has an empty name", c->path, i);
  std::memset(t->name, 0, sizeof t->name);
  std::memcpy(t->name, name.p, name.len);
  if (std::memchr(name.p, 0, name.len))
    return ml_fail(c->err, ML_E_FORMAT, "%s: tensor %" PRIu64 " (%s): the name holds a NUL byte", c->path, i, t->name);
  ML_TRY(c->get(&t->n_dims, "a tensor's n_dims"));
  if (t->n_dims < 1 || t->n_dims > GGUF_LIMIT_DIMS)
    return ml_fail(c->err, ML_E_FORMAT, "%s: tensor %s: n_dims %u is outside 1..%u", c->path, t->name, t->n_dims,
                   GGUF_LIMIT_DIMS);
  uint64_t count = 1;
  for (uint32_t d = 0; d < GGUF_LIMIT_DIMS; ++d) {
    t->ne[d] = 1;
    if (d >= t->n_dims) continue;
    ML_TRY(c->get(&t->ne[d], "a tensor's dimension"));
    if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX)
      return ml_fail(c->err, ML_E_FORMAT, "%s: tensor %s: dimension %u is %" PRIu64, c->path, t->name, d, t->ne[d]);
    if (!ml_mul64(count, t->ne[d], &count) || count > (uint64_t)INT64_MAX)
      return ml_fail(c->err, ML_E_FORMAT, "%s: tensor %s: the element count overflows at dimension %u", c->path,
                     t->name, d);
  }
  ML_TRY(c->get(&t->type, "a tensor's type"));
  const gguf_block* b = gguf_block_of(t->type);
  if (!b) return ml_fail(c->err, ML_E_FORMAT, "%s: tensor %s: unknown tensor type %u", c->path, t->name, t->type);
  if (t->ne[0] % b->values != 0)
    return ml_fail(c->err, ML_E_FORMAT, "%s: tensor %s: row length %" PRIu64 " is not a multiple of %s's block of %u",
                   c->path, t->name, t->ne[0], b->name, b->values);
  if (!ml_mul64(count / b->values, b->bytes, &t->size))
    return ml_fail(c->err, ML_E_FORMAT, "%s: tensor %s: the byte size overflows", c->path, t->name);
  ML_TRY(c->get(&t->offset, "a tensor's offset"));
  return ML_OK;
}

}  // namespace

const char* gguf_vtype_name(uint32_t t) {
  static const char* const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
  return t < sizeof names / sizeof names[0] ? names[t] : "an unknown type";
}

ml_status gguf_open(gguf_file* g, const char* path, ml_error* err) {
  ML_TRY(ml_file_open(&g->file, path, err));
  return gguf_parse(g, g->file.data, g->file.size, path, err);
}

ml_status gguf_parse(gguf_file* g, const uint8_t* data, size_t size, const char* path, ml_error* err) {
  g->path = path;
  g->kv = nullptr;
  g->tensors = nullptr;
  g->by_name = nullptr;
  g->n_kv = g->n_tensors = 0;
  cursor c{data, size, 0, path, err};
  uint32_t magic = 0;
  if (size < 4 || (std::memcpy(&magic, data, 4), magic != GGUF_MAGIC))
    return ml_fail(err, ML_E_FORMAT, "%s: not a GGUF file (the magic is not \"GGUF\")", path);
  c.pos = 4;
  ML_TRY(c.get(&g->version, "the version"));
  if (g->version != 2 && g->version != 3)
    return ml_fail(err, ML_E_FORMAT, "%s: GGUF version %u is not supported (2 or 3)", path, g->version);
  uint64_t n_tensors, n_kv;
  ML_TRY(c.get(&n_tensors, "the tensor count"));
  ML_TRY(c.get(&n_kv, "the key count"));
  // A tensor info takes at least 8 + 1 + 4 + 8 + 4 + 8 bytes, a key at least 8 + 1 + 4 + 1.
  if (n_tensors > GGUF_LIMIT_TENSORS || n_tensors > c.left() / 33)
    return ml_fail(err, ML_E_FORMAT, "%s: tensor count %" PRIu64 " exceeds the limit %" PRIu64
                   " or what the file's %" PRIu64 " bytes can hold", path, n_tensors, GGUF_LIMIT_TENSORS, (uint64_t)size);
  if (n_kv > GGUF_LIMIT_KV || n_kv > c.left() / 14)
    return ml_fail(err, ML_E_FORMAT, "%s: key count %" PRIu64 " exceeds the limit %" PRIu64
                   " or what the file's %" PRIu64 " bytes can hold", path, n_kv, GGUF_LIMIT_KV, (uint64_t)size);

  ML_TRY(cv_alloc(&g->kv_buf, (size_t)n_kv, sizeof(gguf_kv), err, "%s: %" PRIu64 " keys", path, n_kv));
  g->kv = g->kv_buf.as<gguf_kv>();
  for (uint64_t i = 0; i < n_kv; ++i) {
    ML_TRY(read_kv(&c, &g->kv[i], i));
    g->n_kv = i + 1;
  }
  // Duplicate keys, over the keys sorted (n log n however many the file has).
  {
    cv_buf order;
    ML_TRY(cv_alloc(&order, n_kv ? (size_t)n_kv : 1, sizeof(uint32_t), err, "%s: the key index", path));
    uint32_t* o = order.as<uint32_t>();
    for (uint64_t i = 0; i < n_kv; ++i) o[i] = (uint32_t)i;
    const gguf_kv* kv = g->kv;
    auto less = [kv](uint32_t a, uint32_t b) {
      const uint32_t n = kv[a].key_len < kv[b].key_len ? kv[a].key_len : kv[b].key_len;
      const int cmp = std::memcmp(kv[a].key, kv[b].key, n);
      return cmp != 0 ? cmp < 0 : kv[a].key_len < kv[b].key_len;
    };
    std::sort(o, o + n_kv, less);
    for (uint64_t i = 1; i < n_kv; ++i) {
      if (!less(o[i - 1], o[i]))
        return ml_fail(err, ML_E_FORMAT, "%s: key %.*s appears twice", path, (int)kv[o[i]].key_len, kv[o[i]].key);
    }
  }
  if (const gguf_kv* a = gguf_find(g, "general.alignment")) {
    if (a->type != GGUF_V_U32)
      return ml_fail(err, ML_E_FORMAT, "%s: key general.alignment has type %s, not u32", path, gguf_vtype_name(a->type));
    uint32_t v;
    std::memcpy(&v, a->data, 4);
    if (v == 0 || (v & (v - 1)) != 0 || v > GGUF_LIMIT_ALIGNMENT)
      return ml_fail(err, ML_E_FORMAT, "%s: key general.alignment is %u, not a power of two up to %u", path, v,
                     GGUF_LIMIT_ALIGNMENT);
    g->alignment = v;
  }

  if (n_tensors > c.left() / 33)
    return ml_fail(err, ML_E_FORMAT, "%s: tensor count %" PRIu64 " does not fit the %" PRIu64
                   " bytes after the metadata", path, n_tensors, c.left());
  ML_TRY(cv_alloc(&g->tensor_buf, (size_t)n_tensors, sizeof(gguf_tensor), err, "%s: %" PRIu64 " tensors", path,
                  n_tensors));
  g->tensors = g->tensor_buf.as<gguf_tensor>();
  for (uint64_t i = 0; i < n_tensors; ++i) {
    ML_TRY(read_tensor(&c, &g->tensors[i], i));
    if (g->tensors[i].offset % g->alignment != 0)
      return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: offset %" PRIu64 " is not a multiple of the alignment %u", path,
                     g->tensors[i].name, g->tensors[i].offset, g->alignment);
  }
  g->n_tensors = n_tensors;
  // The data area starts at the next multiple of the alignment (or at the end when it is empty).
  uint64_t start = c.pos;
  if (start % g->alignment) start += g->alignment - start % g->alignment;
  if (start > size) start = size;
  g->data_offset = start;
  const uint64_t area = size - start;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    gguf_tensor& t = g->tensors[i];
    if (t.offset > area || t.size > area - t.offset)
      return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: bytes %" PRIu64 "..%" PRIu64
                     " of the data area run past its end (%" PRIu64 " bytes)", path, t.name, t.offset,
                     t.offset + (t.size < area ? t.size : area), area);
    t.data = data + start + t.offset;
  }

  // Duplicate names (sorted by name) and overlaps (sorted by offset).
  ML_TRY(cv_alloc(&g->name_buf, n_tensors ? (size_t)n_tensors : 1, sizeof(uint32_t), err, "%s: the tensor index", path));
  uint32_t* idx = g->name_buf.as<uint32_t>();
  for (uint64_t i = 0; i < n_tensors; ++i) idx[i] = (uint32_t)i;
  const gguf_tensor* ts = g->tensors;
  std::sort(idx, idx + n_tensors, [ts](uint32_t a, uint32_t b) {
    return ts[a].offset != ts[b].offset ? ts[a].offset < ts[b].offset : a < b;
  });
  for (uint64_t i = 1; i < n_tensors; ++i) {
    const gguf_tensor &a = ts[idx[i - 1]], &b = ts[idx[i]];
    if (a.offset + a.size > b.offset)
      return ml_fail(err, ML_E_FORMAT, "%s: tensors %s (bytes %" PRIu64 "..%" PRIu64 ") and %s (from %" PRIu64
                     ") overlap", path, a.name, a.offset, a.offset + a.size, b.name, b.offset);
  }
  std::sort(idx, idx + n_tensors, [ts](uint32_t a, uint32_t b) { return std::strcmp(ts[a].name, ts[b].name) < 0; });
  for (uint64_t i = 1; i < n_tensors; ++i) {
    if (std::strcmp(ts[idx[i - 1]].name, ts[idx[i]].name) == 0)
      return ml_fail(err, ML_E_FORMAT, "%s: tensor %s appears twice", path, ts[idx[i]].name);
  }
  g->by_name = idx;
  return ML_OK;
}

const gguf_kv* gguf_find(const gguf_file* g, const char* key) {
  for (uint64_t i = 0; i < g->n_kv; ++i)
    if (key_is(g->kv[i], key)) return &g->kv[i];
  return nullptr;
}

namespace {

ml_status missing(const gguf_file* g, const char* key, bool required, ml_error* err) {
  return required ? ml_fail(err, ML_E_FORMAT, "%s: key %s is missing", g->path, key) : ML_OK;
}

// An integer value widened to 64 bits with its sign; false for non-integer types.
bool int_value(const gguf_kv* kv, int64_t* s, uint64_t* u, bool* is_signed) {
  const uint8_t* p = kv->data;
  *is_signed = false;
  switch (kv->type) {
    case GGUF_V_U8: *u = p[0]; return true;
    case GGUF_V_U16: { uint16_t v; std::memcpy(&v, p, 2); *u = v; return true; }
    case GGUF_V_U32: { uint32_t v; std::memcpy(&v, p, 4); *u = v; return true; }
    case GGUF_V_U64: std::memcpy(u, p, 8); return true;
    default: break;
  }
  *is_signed = true;
  switch (kv->type) {
    case GGUF_V_I8: *s = (int8_t)p[0]; return true;
    case GGUF_V_I16: { int16_t v; std::memcpy(&v, p, 2); *s = v; return true; }
    case GGUF_V_I32: { int32_t v; std::memcpy(&v, p, 4); *s = v; return true; }
    case GGUF_V_I64: std::memcpy(s, p, 8); return true;
    default: return false;
  }
}

}  // namespace

ml_status gguf_get_u32(const gguf_file* g, const char* key, bool required, uint32_t* out, ml_error* err) {
  const gguf_kv* kv = gguf_find(g, key);
  if (!kv) return missing(g, key, required, err);
  int64_t s = 0;
  uint64_t u = 0;
  bool is_signed;
  if (!int_value(kv, &s, &u, &is_signed))
    return ml_fail(err, ML_E_FORMAT, "%s: key %s has type %s, not an integer", g->path, key, gguf_vtype_name(kv->type));
  if (is_signed && s < 0) return ml_fail(err, ML_E_FORMAT, "%s: key %s is %" PRId64 ", negative", g->path, key, s);
  if (is_signed) u = (uint64_t)s;
  if (u > UINT32_MAX) return ml_fail(err, ML_E_FORMAT, "%s: key %s is %" PRIu64 ", above 2^32 - 1", g->path, key, u);
  *out = (uint32_t)u;
  return ML_OK;
}

ml_status gguf_get_f32(const gguf_file* g, const char* key, bool required, float* out, ml_error* err) {
  const gguf_kv* kv = gguf_find(g, key);
  if (!kv) return missing(g, key, required, err);
  double v;
  int64_t s = 0;
  uint64_t u = 0;
  bool is_signed;
  if (kv->type == GGUF_V_F32) {
    float f;
    std::memcpy(&f, kv->data, 4);
    v = f;
  } else if (kv->type == GGUF_V_F64) {
    std::memcpy(&v, kv->data, 8);
  } else if (int_value(kv, &s, &u, &is_signed)) {
    v = is_signed ? (double)s : (double)u;
  } else {
    return ml_fail(err, ML_E_FORMAT, "%s: key %s has type %s, not a number", g->path, key, gguf_vtype_name(kv->type));
  }
  if (!std::isfinite(v) || std::fabs(v) > 3.4e38)
    return ml_fail(err, ML_E_FORMAT, "%s: key %s is %g, not a finite float", g->path, key, v);
  *out = (float)v;
  return ML_OK;
}

ml_status gguf_get_str(const gguf_file* g, const char* key, bool required, gguf_str* out, ml_error* err) {
  const gguf_kv* kv = gguf_find(g, key);
  if (!kv) return missing(g, key, required, err);
  if (kv->type != GGUF_V_STRING)
    return ml_fail(err, ML_E_FORMAT, "%s: key %s has type %s, not string", g->path, key, gguf_vtype_name(kv->type));
  std::memcpy(&out->len, kv->data, 8);
  out->p = reinterpret_cast<const char*>(kv->data + 8);
  return ML_OK;
}

ml_status gguf_get_array(const gguf_file* g, const char* key, uint32_t elem, bool required, const gguf_kv** out,
                         ml_error* err) {
  *out = nullptr;
  const gguf_kv* kv = gguf_find(g, key);
  if (!kv) return missing(g, key, required, err);
  if (kv->type != GGUF_V_ARRAY || kv->elem_type != elem)
    return ml_fail(err, ML_E_FORMAT, "%s: key %s has type %s%s%s, not an array of %s", g->path, key,
                   kv->type == GGUF_V_ARRAY ? "array of " : "", gguf_vtype_name(kv->elem_type), "",
                   gguf_vtype_name(elem));
  *out = kv;
  return ML_OK;
}

float gguf_arr_f32(const gguf_kv* kv, uint64_t i) {
  float v;
  std::memcpy(&v, kv->data + 4 * i, 4);
  return v;
}

int32_t gguf_arr_i32(const gguf_kv* kv, uint64_t i) {
  int32_t v;
  std::memcpy(&v, kv->data + 4 * i, 4);
  return v;
}

ml_status gguf_arr_strings(const gguf_file* g, const gguf_kv* kv, cv_buf* out, ml_error* err) {
  ML_TRY(cv_alloc(out, kv->n ? (size_t)kv->n : 1, sizeof(gguf_str), err, "%s: key %.*s's %" PRIu64 " strings", g->path,
                  (int)kv->key_len, kv->key, kv->n));
  gguf_str* s = out->as<gguf_str>();
  const uint8_t* p = kv->data;
  for (uint64_t i = 0; i < kv->n; ++i) {
    std::memcpy(&s[i].len, p, 8);
    s[i].p = reinterpret_cast<const char*>(p + 8);
    p += 8 + s[i].len;
  }
  return ML_OK;
}

const gguf_tensor* gguf_find_tensor(const gguf_file* g, const char* name) {
  size_t lo = 0, hi = (size_t)g->n_tensors;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const gguf_tensor* t = &g->tensors[g->by_name[mid]];
    const int c = std::strcmp(t->name, name);
    if (c == 0) return t;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return nullptr;
}
