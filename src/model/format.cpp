// Parsing and validating .mlb files (docs/format.md). Reads every field explicitly as
// little-endian, checks values, then checks every array's bounds, alignment and overlap.
#include "model/format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/checked.h"
#include "model/limits.h"

namespace {

uint32_t rd32(const uint8_t* p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
uint64_t rd64(const uint8_t* p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
float rdf32(const uint8_t* p) {
  const uint32_t u = rd32(p);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void decode_header(const uint8_t* p, ml_mlb_header* h) {
  h->version = rd32(p + 8);
  h->header_size = rd32(p + 12);
  h->arch = rd32(p + 16);
  h->dim = rd32(p + 20);
  h->hidden_dim = rd32(p + 24);
  h->n_layers = rd32(p + 28);
  h->n_heads = rd32(p + 32);
  h->n_kv_heads = rd32(p + 36);
  h->head_dim = rd32(p + 40);
  h->vocab_size = rd32(p + 44);
  h->max_seq = rd32(p + 48);
  h->wtype = rd32(p + 52);
  h->scale_type = rd32(p + 56);
  h->norm_eps = rdf32(p + 60);
  h->rope_theta = rdf32(p + 64);
  h->rope_type = rd32(p + 68);
  h->rope_scaling = rd32(p + 72);
  h->rope_factor = rdf32(p + 76);
  h->rope_low_freq_factor = rdf32(p + 80);
  h->rope_high_freq_factor = rdf32(p + 84);
  h->rope_orig_max_seq = rd32(p + 88);
  h->flags = rd32(p + 92);
  h->activation = rd32(p + 96);
  h->embed_scale = rdf32(p + 100);
  h->sliding_window = rd32(p + 104);
  h->sliding_pattern = rd32(p + 108);
  h->linear_period = rd32(p + 112);
  h->linear_k_heads = rd32(p + 116);
  h->linear_v_heads = rd32(p + 120);
  h->linear_k_dim = rd32(p + 124);
  h->linear_v_dim = rd32(p + 128);
  h->linear_conv = rd32(p + 132);
  h->bos_id = rd32(p + 136);
  h->eos_id = rd32(p + 140);
  h->hidden_dim_orig = rd32(p + 144);
  h->n_tensors = rd32(p + 148);
  h->dir_offset = rd64(p + 152);
  h->tokenizer_offset = rd64(p + 160);
  h->tokenizer_size = rd64(p + 168);
  h->file_size = rd64(p + 176);
  if (h->version >= 2) {
    h->rope_local_theta = rdf32(p + 184);
    h->n_rot = rd32(p + 188);
    h->attn_scale = rdf32(p + 192);
    h->logit_softcap = rdf32(p + 196);
  }
}

const char* dtype_name(uint32_t t) {
  switch (t) {
    case ML_DT_F32: return "F32";
    case ML_DT_F16: return "F16";
    case ML_DT_Q8: return "Q8";
    case ML_DT_Q4: return "Q4";
  }
  return "?";
}

}  // namespace

// Hyperparameters the format defines, independent of which tensors exist (model/limits.h bounds).
ml_status ml_mlb_check_header(const ml_mlb_header* h, ml_error* err) {
  if (h->version < ML_MLB_VERSION_MIN || h->version > ML_MLB_VERSION)
    return ml_fail(err, ML_E_FORMAT, "header: version %u is not supported (expected %u..%u)", h->version,
                   ML_MLB_VERSION_MIN, ML_MLB_VERSION);
  if (h->header_size != ML_MLB_HEADER_SIZE)
    return ml_fail(err, ML_E_FORMAT, "header: header_size %u (expected %u)", h->header_size, ML_MLB_HEADER_SIZE);
  if (h->arch > ML_ARCH_QWEN35) return ml_fail(err, ML_E_FORMAT, "header: unknown arch %u", h->arch);
  if (h->dim == 0 || h->dim % 32 != 0)
    return ml_fail(err, ML_E_SHAPE, "header: dim %u is not a positive multiple of 32", h->dim);
  if (h->hidden_dim == 0 || h->hidden_dim % 32 != 0)
    return ml_fail(err, ML_E_SHAPE, "header: hidden_dim %u is not a positive multiple of 32", h->hidden_dim);
  if (h->dim > ML_LIMIT_DIM) return ml_fail(err, ML_E_SHAPE, "header: dim %u is above the limit %u", h->dim, ML_LIMIT_DIM);
  if (h->hidden_dim > ML_LIMIT_HIDDEN)
    return ml_fail(err, ML_E_SHAPE, "header: hidden_dim %u is above the limit %u", h->hidden_dim, ML_LIMIT_HIDDEN);
  if (h->n_layers == 0 || h->n_layers > ML_LIMIT_LAYERS)
    return ml_fail(err, ML_E_SHAPE, "header: n_layers %u is out of range 1..%u", h->n_layers, ML_LIMIT_LAYERS);
  if (h->n_heads == 0 || h->n_heads > ML_LIMIT_HEADS)
    return ml_fail(err, ML_E_SHAPE, "header: n_heads %u is out of range 1..%u", h->n_heads, ML_LIMIT_HEADS);
  if (h->n_kv_heads == 0 || h->n_kv_heads > h->n_heads || h->n_heads % h->n_kv_heads != 0)
    return ml_fail(err, ML_E_SHAPE, "header: n_kv_heads %u must divide n_heads %u", h->n_kv_heads, h->n_heads);
  if (h->head_dim == 0 || h->head_dim % 2 != 0 || h->head_dim > ML_LIMIT_HEAD_DIM)
    return ml_fail(err, ML_E_SHAPE, "header: head_dim %u must be even and at most %u", h->head_dim, ML_LIMIT_HEAD_DIM);
  if (((uint64_t)h->n_heads * h->head_dim) % 32 != 0)
    return ml_fail(err, ML_E_SHAPE, "header: n_heads*head_dim %llu is not a multiple of 32",
                   (unsigned long long)h->n_heads * h->head_dim);
  if (h->vocab_size < 3 || h->vocab_size > ML_LIMIT_VOCAB)
    return ml_fail(err, ML_E_SHAPE, "header: vocab_size %u is out of range 3..%u", h->vocab_size, ML_LIMIT_VOCAB);
  if (h->max_seq == 0 || h->max_seq > ML_LIMIT_MAX_SEQ)
    return ml_fail(err, ML_E_SHAPE, "header: max_seq %u is out of range 1..%u", h->max_seq, ML_LIMIT_MAX_SEQ);
  if (h->wtype != ML_DT_Q8 && h->wtype != ML_DT_Q4)
    return ml_fail(err, ML_E_FORMAT, "header: unknown wtype %u (expected 2 Q8 or 3 Q4)", h->wtype);
  if (h->scale_type > ML_SCALE_F16) return ml_fail(err, ML_E_FORMAT, "header: unknown scale_type %u", h->scale_type);
  if (!(h->norm_eps > 0.0f && h->norm_eps < 1.0f))
    return ml_fail(err, ML_E_FORMAT, "header: norm_eps %g is not in (0, 1)", (double)h->norm_eps);
  if (!(h->rope_theta > 0.0f && h->rope_theta < 1e12f))
    return ml_fail(err, ML_E_FORMAT, "header: rope_theta %g is not positive and finite", (double)h->rope_theta);
  if (h->rope_type > ML_ROPE_HALF) return ml_fail(err, ML_E_FORMAT, "header: unknown rope_type %u", h->rope_type);
  if (h->rope_scaling > ML_ROPE_SCALING_LINEAR)
    return ml_fail(err, ML_E_FORMAT, "header: unknown rope_scaling %u", h->rope_scaling);
  if (!(h->rope_factor > 0.0f && h->rope_factor < 1e6f))
    return ml_fail(err, ML_E_FORMAT, "header: rope_factor %g is not positive and finite", (double)h->rope_factor);
  if (h->activation > ML_ACT_GELU_TANH) return ml_fail(err, ML_E_FORMAT, "header: unknown activation %u", h->activation);
  if (!(h->embed_scale > 0.0f && h->embed_scale < 1e6f))
    return ml_fail(err, ML_E_FORMAT, "header: embed_scale %g is not positive and finite", (double)h->embed_scale);
  if (h->rope_scaling == ML_ROPE_SCALING_LLAMA3 &&
      !(h->rope_orig_max_seq > 0 && h->rope_low_freq_factor > 0.0f && h->rope_high_freq_factor > h->rope_low_freq_factor &&
        h->rope_high_freq_factor < 1e6f))
    return ml_fail(err, ML_E_FORMAT,
                   "header: llama3 rope scaling needs rope_orig_max_seq > 0 (%u) and 0 < rope_low_freq_factor (%g) < "
                   "rope_high_freq_factor (%g)",
                   h->rope_orig_max_seq, (double)h->rope_low_freq_factor, (double)h->rope_high_freq_factor);
  if (h->sliding_window > ML_LIMIT_MAX_SEQ)
    return ml_fail(err, ML_E_SHAPE, "header: sliding_window %u is above the limit %u", h->sliding_window, ML_LIMIT_MAX_SEQ);
  if (h->flags & ~ML_FLAGS_KNOWN) return ml_fail(err, ML_E_FORMAT, "header: unknown flags 0x%x", h->flags & ~ML_FLAGS_KNOWN);
  if (!(h->rope_local_theta >= 0.0f && h->rope_local_theta < 1e12f))
    return ml_fail(err, ML_E_FORMAT, "header: rope_local_theta %g is not 0 or positive and finite", (double)h->rope_local_theta);
  if (h->n_rot % 2 != 0 || h->n_rot > h->head_dim)
    return ml_fail(err, ML_E_SHAPE, "header: n_rot %u must be even and at most head_dim %u", h->n_rot, h->head_dim);
  if (!(h->attn_scale >= 0.0f && h->attn_scale < 1e6f))
    return ml_fail(err, ML_E_FORMAT, "header: attn_scale %g is not 0 or positive and finite", (double)h->attn_scale);
  if (!(h->logit_softcap >= 0.0f && h->logit_softcap < 1e6f))
    return ml_fail(err, ML_E_FORMAT, "header: logit_softcap %g is not 0 or positive and finite", (double)h->logit_softcap);
  if (h->bos_id >= h->vocab_size || h->eos_id >= h->vocab_size)
    return ml_fail(err, ML_E_FORMAT, "header: bos_id %u or eos_id %u is outside the vocabulary of %u", h->bos_id,
                   h->eos_id, h->vocab_size);
  return ML_OK;
}

void ml_mlb_escape_name(const char* name, char out[ML_MLB_NAME_ESC]) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < ML_MLB_NAME_MAX && name[i]; ++i) {
    const uint8_t c = (uint8_t)name[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out[o++] = (char)c;
    } else {
      out[o++] = '\\';
      out[o++] = 'x';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    }
  }
  out[o] = 0;
}

ml_mlb_tensor ml_mlb_tensor_at(const ml_mlb* m, uint32_t i) {
  const uint8_t* p = m->dir + (size_t)i * ML_MLB_DIR_ENTRY_SIZE;
  ml_mlb_tensor t;
  std::memcpy(t.name, p, ML_MLB_NAME_MAX);
  t.name[ML_MLB_NAME_MAX - 1] = 0;
  t.type = rd32(p + 48);
  t.scale_type = rd32(p + 52);
  t.rows = rd32(p + 56);
  t.cols = rd32(p + 60);
  t.data_offset = rd64(p + 64);
  t.data_size = rd64(p + 72);
  t.scale_offset = rd64(p + 80);
  t.scale_size = rd64(p + 88);
  return t;
}

bool ml_mlb_find(const ml_mlb* m, const char* name, ml_mlb_tensor* out) {
  for (uint32_t i = 0; i < m->n_tensors; ++i) {
    const uint8_t* p = m->dir + (size_t)i * ML_MLB_DIR_ENTRY_SIZE;
    if (std::strncmp(reinterpret_cast<const char*>(p), name, ML_MLB_NAME_MAX) == 0) {
      *out = ml_mlb_tensor_at(m, i);
      return true;
    }
  }
  return false;
}

namespace {

const char* entry_name(const ml_mlb* m, uint32_t i) {
  return reinterpret_cast<const char*>(m->dir + (size_t)i * ML_MLB_DIR_ENTRY_SIZE);
}

// Directory indices in name order (strncmp over the 48-byte field).
ml_status sort_by_name(const ml_mlb* m, uint32_t** out, ml_error* err) {
  *out = static_cast<uint32_t*>(std::malloc((size_t)m->n_tensors * sizeof(uint32_t)));
  if (!*out) return ml_fail(err, ML_E_NOMEM, "cannot allocate the name index of %u tensors", m->n_tensors);
  for (uint32_t i = 0; i < m->n_tensors; ++i) (*out)[i] = i;
  std::sort(*out, *out + m->n_tensors, [m](uint32_t a, uint32_t b) {
    return std::strncmp(entry_name(m, a), entry_name(m, b), ML_MLB_NAME_MAX) < 0;
  });
  return ML_OK;
}

}  // namespace

ml_status ml_mlb_index_build(const ml_mlb* m, ml_mlb_index* idx, ml_error* err) {
  *idx = ml_mlb_index{};
  ML_TRY(sort_by_name(m, &idx->order, err));
  idx->n = m->n_tensors;
  return ML_OK;
}

int64_t ml_mlb_index_find(const ml_mlb_index* idx, const ml_mlb* m, const char* name) {
  uint32_t lo = 0, hi = idx->n;  // binary search in [lo, hi)
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const int c = std::strncmp(entry_name(m, idx->order[mid]), name, ML_MLB_NAME_MAX);
    if (c == 0) return idx->order[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

void ml_mlb_index_free(ml_mlb_index* idx) {
  std::free(idx->order);
  *idx = ml_mlb_index{};
}

namespace {

// Expected byte sizes of a tensor's arrays; false on overflow.
bool tensor_sizes(const ml_mlb_tensor& t, uint64_t* data, uint64_t* scales) {
  uint64_t n;
  if (!ml_mul64(t.rows, t.cols, &n)) return false;
  switch (t.type) {
    case ML_DT_F32: *scales = 0; return ml_mul64(n, 4, data);
    case ML_DT_F16: *scales = 0; return ml_mul64(n, 2, data);
    case ML_DT_Q8: *data = n; return ml_mul64(n / 32, t.scale_type == ML_SCALE_F16 ? 2 : 4, scales);
    case ML_DT_Q4: *data = n / 2; return ml_mul64(n / 32, t.scale_type == ML_SCALE_F16 ? 2 : 4, scales);
  }
  return false;
}

// raw: the entry's 48 name bytes as stored (t.name is a NUL-terminated copy).
ml_status check_tensor(const ml_mlb_tensor& t, const uint8_t* raw, uint32_t i, uint64_t file_size, ml_error* err) {
  const void* nul = std::memchr(raw, 0, ML_MLB_NAME_MAX);
  if (nul == nullptr || raw[0] == 0)
    return ml_fail(err, ML_E_FORMAT, "tensor %u: name is empty or not NUL-terminated", i);
  char name[ML_MLB_NAME_ESC];  // printable: every other byte as \xNN
  ml_mlb_escape_name(t.name, name);
  for (const uint8_t* q = static_cast<const uint8_t*>(nul); q < raw + ML_MLB_NAME_MAX; ++q)
    if (*q != 0)
      return ml_fail(err, ML_E_FORMAT, "tensor %s: name padding byte %d is 0x%02x, not 0", name, (int)(q - raw), *q);
  if (t.type > ML_DT_Q4) return ml_fail(err, ML_E_FORMAT, "tensor %s: unknown type %u", name, t.type);
  const bool quant = t.type == ML_DT_Q8 || t.type == ML_DT_Q4;
  if (quant && t.scale_type > ML_SCALE_F16)
    return ml_fail(err, ML_E_FORMAT, "tensor %s: unknown scale_type %u", name, t.scale_type);
  if (!quant && (t.scale_type != 0 || t.scale_offset != 0 || t.scale_size != 0))
    return ml_fail(err, ML_E_FORMAT, "tensor %s: %s tensor has scale fields set", name, dtype_name(t.type));
  if (t.rows == 0 || t.cols == 0)
    return ml_fail(err, ML_E_SHAPE, "tensor %s: empty shape %u x %u", name, t.rows, t.cols);
  if (quant && t.cols % 32 != 0)
    return ml_fail(err, ML_E_SHAPE, "tensor %s: %s tensor has %u columns, not a multiple of 32", name,
                   dtype_name(t.type), t.cols);
  uint64_t want_data, want_scales;
  if (!tensor_sizes(t, &want_data, &want_scales))
    return ml_fail(err, ML_E_FORMAT, "tensor %s: size of %u x %u overflows", name, t.rows, t.cols);
  if (t.data_size != want_data)
    return ml_fail(err, ML_E_FORMAT, "tensor %s: data_size %llu, expected %llu for %s %u x %u", name,
                   (unsigned long long)t.data_size, (unsigned long long)want_data, dtype_name(t.type), t.rows, t.cols);
  if (t.scale_size != want_scales)
    return ml_fail(err, ML_E_FORMAT, "tensor %s: scale_size %llu, expected %llu", name,
                   (unsigned long long)t.scale_size, (unsigned long long)want_scales);
  uint64_t end;
  if (t.data_offset % ML_MLB_ALIGN != 0)
    return ml_fail(err, ML_E_FORMAT, "tensor %s: data_offset %llu is not 64-byte aligned", name,
                   (unsigned long long)t.data_offset);
  if (!ml_add64(t.data_offset, t.data_size, &end) || end > file_size)
    return ml_fail(err, ML_E_FORMAT, "tensor %s: data at offset %llu size %llu runs past the end of the file (%llu bytes)",
                   name, (unsigned long long)t.data_offset, (unsigned long long)t.data_size,
                   (unsigned long long)file_size);
  if (quant) {
    if (t.scale_offset % ML_MLB_ALIGN != 0)
      return ml_fail(err, ML_E_FORMAT, "tensor %s: scale_offset %llu is not 64-byte aligned", name,
                     (unsigned long long)t.scale_offset);
    if (!ml_add64(t.scale_offset, t.scale_size, &end) || end > file_size)
      return ml_fail(err, ML_E_FORMAT,
                     "tensor %s: scales at offset %llu size %llu run past the end of the file (%llu bytes)", name,
                     (unsigned long long)t.scale_offset, (unsigned long long)t.scale_size,
                     (unsigned long long)file_size);
  }
  return ML_OK;
}

// One array (data or scales) of a tensor: [begin, end) in the file.
struct span {
  uint64_t begin, end;
  uint32_t tensor;
};

// No two arrays overlap: sorted by start, an array that overlaps any later one overlaps the next
// one, so comparing neighbours suffices (O(n log n) for n arrays).
ml_status check_overlaps(const ml_mlb* m, ml_error* err) {
  const uint32_t n = m->n_tensors;
  span* s = static_cast<span*>(std::malloc((size_t)n * 2 * sizeof(span)));
  if (!s) return ml_fail(err, ML_E_NOMEM, "cannot allocate the array list of %u tensors", n);
  size_t k = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const ml_mlb_tensor t = ml_mlb_tensor_at(m, i);
    if (t.data_size) s[k++] = span{t.data_offset, t.data_offset + t.data_size, i};
    if (t.scale_size) s[k++] = span{t.scale_offset, t.scale_offset + t.scale_size, i};
  }
  std::sort(s, s + k, [](const span& a, const span& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  ml_status st = ML_OK;
  for (size_t j = 1; j < k && st == ML_OK; ++j) {
    if (s[j].begin >= s[j - 1].end) continue;
    char a[ML_MLB_NAME_ESC], b[ML_MLB_NAME_ESC];
    ml_mlb_escape_name(ml_mlb_tensor_at(m, s[j - 1].tensor).name, a);
    ml_mlb_escape_name(ml_mlb_tensor_at(m, s[j].tensor).name, b);
    if (s[j].tensor == s[j - 1].tensor) st = ml_fail(err, ML_E_FORMAT, "tensor %s: its quants and scales overlap", a);
    else
      st = ml_fail(err, ML_E_FORMAT, "tensor %s overlaps tensor %s (offsets %llu and %llu)", b, a,
                   (unsigned long long)s[j].begin, (unsigned long long)s[j - 1].begin);
  }
  std::free(s);
  return st;
}

// No name appears twice: neighbours in name order.
ml_status check_names(const ml_mlb* m, ml_error* err) {
  uint32_t* order;
  ML_TRY(sort_by_name(m, &order, err));
  ml_status st = ML_OK;
  for (uint32_t j = 1; j < m->n_tensors; ++j)
    if (std::strncmp(entry_name(m, order[j - 1]), entry_name(m, order[j]), ML_MLB_NAME_MAX) == 0) {
      char nm[ML_MLB_NAME_ESC];
      ml_mlb_escape_name(ml_mlb_tensor_at(m, order[j]).name, nm);
      st = ml_fail(err, ML_E_FORMAT, "tensor %s: the name appears twice in the directory", nm);
      break;
    }
  std::free(order);
  return st;
}

}  // namespace

ml_status ml_mlb_parse(ml_mlb* m, const uint8_t* data, size_t size, ml_error* err) {
  *m = ml_mlb{};
  if (size == 0) return ml_fail(err, ML_E_FORMAT, "file is empty");
  if (size < ML_MLB_HEADER_SIZE)
    return ml_fail(err, ML_E_FORMAT, "file is truncated: %zu bytes, the header alone needs %u", size, ML_MLB_HEADER_SIZE);
  if (std::memcmp(data, ML_MLB_MAGIC, 8) != 0) return ml_fail(err, ML_E_FORMAT, "bad magic: not a .mlb file (expected KRAFLMLB)");
  ml_mlb_header h;
  decode_header(data, &h);
  ML_TRY(ml_mlb_check_header(&h, err));
  const uint32_t reserved = h.version == 1 ? ML_MLB_RESERVED_OFFSET_V1 : ML_MLB_RESERVED_OFFSET;
  for (uint32_t i = reserved; i < ML_MLB_HEADER_SIZE; ++i)
    if (data[i] != 0)
      return ml_fail(err, ML_E_FORMAT, "header: reserved byte %u is 0x%02x (version %u: bytes %u..%u must be zero)", i,
                     data[i], h.version, reserved, ML_MLB_HEADER_SIZE - 1);
  if (h.file_size != size)
    return ml_fail(err, ML_E_FORMAT, "header: file_size %llu but the file has %zu bytes (truncated or padded)",
                   (unsigned long long)h.file_size, size);
  if (h.n_tensors == 0 || h.n_tensors > ML_LIMIT_TENSORS)
    return ml_fail(err, ML_E_FORMAT, "header: n_tensors %u is out of range 1..%u", h.n_tensors, ML_LIMIT_TENSORS);
  uint64_t dir_bytes, dir_end;
  if (h.dir_offset < ML_MLB_HEADER_SIZE || !ml_mul64(h.n_tensors, ML_MLB_DIR_ENTRY_SIZE, &dir_bytes) ||
      !ml_add64(h.dir_offset, dir_bytes, &dir_end) || dir_end > size)
    return ml_fail(err, ML_E_FORMAT, "header: directory at offset %llu with %u entries runs past the end of the file",
                   (unsigned long long)h.dir_offset, h.n_tensors);

  m->h = h;
  m->base = data;
  m->size = size;
  m->n_tensors = h.n_tensors;
  m->dir = data + h.dir_offset;

  uint64_t tok_end = 0;
  if (h.tokenizer_offset != 0) {
    if (h.tokenizer_size < 8 || !ml_add64(h.tokenizer_offset, h.tokenizer_size, &tok_end) || tok_end > size ||
        h.tokenizer_offset < dir_end)
      return ml_fail(err, ML_E_FORMAT, "header: tokenizer section at offset %llu size %llu is outside the file",
                     (unsigned long long)h.tokenizer_offset, (unsigned long long)h.tokenizer_size);
    const uint8_t* t = data + h.tokenizer_offset;
    m->tokenizer_kind = rd32(t);
    if (m->tokenizer_kind != 1 && m->tokenizer_kind != 2)
      return ml_fail(err, ML_E_FORMAT, "tokenizer section: unknown kind %u", m->tokenizer_kind);
    if (rd32(t + 4) != 0)
      return ml_fail(err, ML_E_FORMAT, "tokenizer section: reserved field is %u, not 0", rd32(t + 4));
    m->tokenizer = t + 8;
    m->tokenizer_size = (size_t)(h.tokenizer_size - 8);
  } else if (h.tokenizer_size != 0) {
    return ml_fail(err, ML_E_FORMAT, "header: tokenizer_size %llu without a tokenizer_offset",
                   (unsigned long long)h.tokenizer_size);
  }

  for (uint32_t i = 0; i < h.n_tensors; ++i) {
    const ml_mlb_tensor t = ml_mlb_tensor_at(m, i);
    ML_TRY(check_tensor(t, m->dir + (size_t)i * ML_MLB_DIR_ENTRY_SIZE, i, size, err));
    // Arrays must lie after the directory and outside the tokenizer section.
    const uint64_t begins[2] = {t.data_offset, t.scale_offset};
    const uint64_t sizes[2] = {t.data_size, t.scale_size};
    for (int k = 0; k < 2; ++k) {
      if (sizes[k] == 0) continue;
      const uint64_t b = begins[k], e = b + sizes[k];
      char name[ML_MLB_NAME_ESC];
      ml_mlb_escape_name(t.name, name);
      if (b < dir_end)
        return ml_fail(err, ML_E_FORMAT, "tensor %s: array at offset %llu overlaps the header or directory", name,
                       (unsigned long long)b);
      if (h.tokenizer_offset != 0 && b < tok_end && e > h.tokenizer_offset)
        return ml_fail(err, ML_E_FORMAT, "tensor %s: array at offset %llu overlaps the tokenizer section", name,
                       (unsigned long long)b);
    }
  }
  ML_TRY(check_names(m, err));
  return check_overlaps(m, err);
}
