// The GGUF importer's tensors (gguf_import.cpp's top comment says what is copied, what
// requantized, what refused): each one taken by name, shape-checked against the header, then
// copied bit for bit (Q8_0/Q4_0 blocks) or decoded to float and quantized to the header's wtype.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "convert/convert.h"
#include "convert/gguf.h"
#include "convert/gguf_internal.h"
#include "core/checked.h"
#include "core/half.h"
#include "core/types.h"
#include "model/limits.h"

const gguf_tensor* gguf_importer::take(const char* gname, bool required, ml_status* s) {
  const gguf_tensor* t = gguf_find_tensor(&g, gname);
  if (!t) {
    if (required) *s = ml_fail(err, ML_E_FORMAT, "%s: tensor %s is missing", g.path, gname);
    return nullptr;
  }
  used[t - g.tensors] = true;
  return t;
}

ml_status gguf_importer::check_shape(const gguf_tensor* t, uint64_t cols, uint64_t rows) {
  if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
    return ml_fail(err, ML_E_SHAPE, "%s: tensor %s: shape [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
                   "] does not match the header's [%" PRIu64 ", %" PRIu64 "]", g.path, t->name, t->ne[0], t->ne[1],
                   t->ne[2], t->ne[3], cols, rows);
  return ML_OK;
}

ml_status gguf_importer::to_float(const gguf_tensor* t, cv_buf* out) {
  const uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
  if ((uint64_t)(size_t)n != n)
    return ml_fail(err, ML_E_NOMEM, "%s: tensor %s: %" PRIu64 " values overflow this address space", g.path, t->name, n);
  ML_TRY(cv_alloc(out, (size_t)n, sizeof(float), err, "%s: tensor %s as float", g.path, t->name));
  if (!cv_gguf_dequant(t->type, t->data, n, out->as<float>()))
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: type %s is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
                   "Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", g.path, t->name, gguf_block_of(t->type)->name);
  release(t);
  return ML_OK;
}

// elem_of: element i of the result is the tensor's element elem_of[i] (null: i).
ml_status gguf_importer::add_vector(const char* name, const char* gname, uint32_t n, uint32_t n_src, bool is_norm,
                                    const uint32_t* elem_of) {
  ml_status s = ML_OK;
  const gguf_tensor* t = take(gname, true, &s);
  ML_TRY(s);
  ML_TRY(check_shape(t, n_src, 1));
  if (t->type != GGUF_T_F32 && t->type != GGUF_T_F16 && t->type != GGUF_T_BF16)
    return ml_fail(err, ML_E_FORMAT, "%s: tensor %s: type %s, not F32, F16 or BF16", g.path, gname,
                   gguf_block_of(t->type)->name);
  cv_buf f, padded;
  ML_TRY(to_float(t, &f));
  ML_TRY(cv_alloc(&padded, n, sizeof(float), err, "%s: tensor %s", g.path, gname));
  for (uint32_t i = 0; i < n_src; ++i)
    padded.as<float>()[i] = f.as<float>()[elem_of ? elem_of[i] : i] * (is_norm ? norm_mul : 1.0f);
  return cv_add_f32(&m, name, padded.as<float>(), n, err);
}

// Q8_0 / Q4_0 blocks into the header's wtype without decoding. Without row_of, rows may exceed the
// tensor's (zero rows); with it, row r is the tensor's row row_of[r]. blk_of: block b of a row is
// the tensor's block blk_of[b] of that row (null: b).
ml_status gguf_importer::copy_quant(const char* name, const gguf_tensor* t, uint32_t rows, uint32_t cols,
                                    const uint32_t* row_of, const uint32_t* blk_of) {
  const bool to_q8 = m.h.wtype == ML_DT_Q8;
  const size_t nbr = cols / 32, nb = (size_t)rows * nbr, src_rows = row_of ? rows : (size_t)t->ne[1];
  cv_buf q, sc;
  ML_TRY(cv_alloc(&q, nb, to_q8 ? 32 : 16, err, "%s: tensor %s's quants", g.path, t->name));
  ML_TRY(cv_alloc(&sc, nb, 2, err, "%s: tensor %s's scales", g.path, t->name));
  const uint32_t bs = t->type == GGUF_T_Q8_0 ? 34 : 18;
  for (size_t b = 0; b < src_rows * nbr; ++b) {
    const size_t r = b / nbr, c = b % nbr;
    const uint8_t* p = t->data + ((row_of ? row_of[r] : r) * nbr + (blk_of ? blk_of[c] : c)) * bs;
    sc.data[2 * b] = p[0];
    sc.data[2 * b + 1] = p[1];
    if (t->type == GGUF_T_Q8_0) {
      std::memcpy(q.data + 32 * b, p + 2, 32);
    } else if (!to_q8) {
      std::memcpy(q.data + 16 * b, p + 2, 16);
    } else {  // Q4_0 widened: nibble - 8 in [-8, 7], the same scale
      for (int j = 0; j < 16; ++j) {
        q.data[32 * b + j] = (uint8_t)(int8_t)((p[2 + j] & 0xF) - 8);
        q.data[32 * b + j + 16] = (uint8_t)(int8_t)((p[2 + j] >> 4) - 8);
      }
    }
  }
  release(t);
  ml_status s = cv_add_quantized(&m, name, rows, cols, &q, &sc, err);
  if (s != ML_OK) return ml_fail(err, s, "%s: %s", g.path, err ? err->msg : "");
  return ML_OK;
}

// A matrix of a type other than F32/F16/BF16 decoded and requantized: listed in the warning.
void gguf_importer::note_requant(const gguf_tensor* t) {
  if (t->type == GGUF_T_F32 || t->type == GGUF_T_F16 || t->type == GGUF_T_BF16) return;
  const size_t len = std::strlen(requant), add = std::strlen(t->name);
  if (n_requant < 8 && len + add + 3 < sizeof requant)
    std::snprintf(requant + len, sizeof requant - len, "%s%s (%s)", len ? ", " : "", t->name,
                  gguf_block_of(t->type)->name);
  ++n_requant;
}

// A rows x cols matrix picked from t (taken and shape-checked by the caller; t->ne[0] == cols): row
// r is t's row row_of[r], column c its column col_of[c] (null: r, c). Q8_0/Q4_0 rows are copied bit
// for bit, and so are columns when col_of moves whole aligned 32-wide blocks.
ml_status gguf_importer::add_picked(const char* name, const gguf_tensor* t, uint32_t rows, uint32_t cols,
                                    const uint32_t* row_of, const uint32_t* col_of) {
  cv_buf blk;
  bool blocks = cols % 32 == 0;
  if (col_of && blocks) {
    ML_TRY(cv_alloc(&blk, cols / 32, sizeof(uint32_t), err, "%s: tensor %s's block order", g.path, t->name));
    for (uint32_t b = 0; b < cols / 32 && blocks; ++b) {
      const uint32_t first = col_of[32 * b];
      blocks = first % 32 == 0;
      for (uint32_t j = 1; j < 32 && blocks; ++j) blocks = col_of[32 * b + j] == first + j;
      blk.as<uint32_t>()[b] = first / 32;
    }
  }
  const bool copyable = (t->type == GGUF_T_Q8_0 || t->type == GGUF_T_Q4_0) && blocks &&
                        !(t->type == GGUF_T_Q8_0 && m.h.wtype == ML_DT_Q4);
  if (copyable) return copy_quant(name, t, rows, cols, row_of, col_of ? blk.as<uint32_t>() : nullptr);
  note_requant(t);
  cv_buf f, dst;
  ML_TRY(to_float(t, &f));
  ML_TRY(cv_alloc(&dst, (size_t)rows * cols, sizeof(float), err, "%s: tensor %s", g.path, t->name));
  const float* x = f.as<float>();
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < cols; ++c)
      dst.as<float>()[(size_t)r * cols + c] = x[(size_t)(row_of ? row_of[r] : r) * cols + (col_of ? col_of[c] : c)];
  return cv_add_matrix(&m, name, rows, cols, dst.as<float>(), rows, cols, err);
}

// head_pad_rows / head_pad_cols: nonzero when the rows (q, k, v) or columns (attn_output) are
// heads of head_dim_src to spread into heads of the header's head_dim (the padding gguf_import.cpp describes).
ml_status gguf_importer::add_matrix(const char* name, const char* gname, uint32_t rows, uint32_t cols, uint32_t src_rows,
                                    uint32_t src_cols, uint32_t head_pad_rows, uint32_t head_pad_cols) {
  ml_status s = ML_OK;
  const gguf_tensor* t = take(gname, true, &s);
  ML_TRY(s);
  ML_TRY(check_shape(t, src_cols, src_rows));
  const bool copyable = (t->type == GGUF_T_Q8_0 || t->type == GGUF_T_Q4_0) && src_cols == cols && !head_pad_rows &&
                        !head_pad_cols && !(t->type == GGUF_T_Q8_0 && m.h.wtype == ML_DT_Q4);
  if (copyable) return copy_quant(name, t, rows, cols);
  note_requant(t);
  cv_buf f;
  ML_TRY(to_float(t, &f));
  if (head_pad_rows || head_pad_cols) {
    // Spread heads of head_dim_src into heads of m.h.head_dim: a rows x cols zero matrix gets
    // each source value at its padded place.
    const uint32_t hs = head_dim_src, hp = m.h.head_dim;
    cv_buf dst;
    ML_TRY(cv_alloc(&dst, (size_t)rows * cols, sizeof(float), err, "%s: tensor %s padded", g.path, t->name));
    const float* x = f.as<float>();
    for (uint32_t r = 0; r < src_rows; ++r)
      for (uint32_t c = 0; c < src_cols; ++c) {
        const uint32_t dr = head_pad_rows ? r / hs * hp + r % hs : r, dc = head_pad_cols ? c / hs * hp + c % hs : c;
        dst.as<float>()[(size_t)dr * cols + dc] = x[(size_t)r * src_cols + c];
      }
    ML_TRY(cv_add_matrix(&m, name, rows, cols, dst.as<float>(), rows, cols, err));
  } else {
    ML_TRY(cv_add_matrix(&m, name, rows, cols, f.as<float>(), src_rows, src_cols, err));
  }
  return ML_OK;
}

ml_status gguf_importer::tensors() {
  const ml_mlb_header& h = m.h;
  const uint32_t D = h.dim, Ds = dim_src, hs = head_dim_src, H = h.hidden_dim, Hs = h.hidden_dim_orig;
  const uint32_t q = h.n_heads * h.head_dim, kv = h.n_kv_heads * h.head_dim;
  const uint32_t qs = h.n_heads * hs, kvs = h.n_kv_heads * hs;
  const bool ph = h.head_dim != hs;
  char name[ML_MLB_NAME_MAX], gname[GGUF_NAME_MAX + 8];
  ML_TRY(add_matrix("tok_embd", "token_embd.weight", h.vocab_size, D, h.vocab_size, Ds, 0, 0));
  for (uint32_t l = 0; l < h.n_layers && a->arch == ML_ARCH_QWEN35; ++l) ML_TRY(qwen35_layer(l));
  for (uint32_t l = 0; l < h.n_layers && a->arch != ML_ARCH_QWEN35; ++l) {
    auto mat = [&](const char* x, uint32_t rows, uint32_t cols, uint32_t sr, uint32_t sc, bool pr, bool pc) {
      std::snprintf(name, sizeof name, "blk.%u.%s", l, x);
      std::snprintf(gname, sizeof gname, "blk.%u.%s.weight", l, x);
      return add_matrix(name, gname, rows, cols, sr, sc, pr ? 1 : 0, pc ? 1 : 0);
    };
    auto vec = [&](const char* x, const char* suffix, uint32_t n, uint32_t ns, bool norm) {
      std::snprintf(name, sizeof name, "blk.%u.%s%s", l, x, suffix);
      std::snprintf(gname, sizeof gname, "blk.%u.%s%s", l, x, *suffix ? suffix : ".weight");
      return add_vector(name, gname, n, ns, norm);
    };
    ML_TRY(vec("attn_norm", "", D, Ds, true));
    ML_TRY(mat("attn_q", q, D, qs, Ds, ph, false));
    ML_TRY(mat("attn_k", kv, D, kvs, Ds, ph, false));
    ML_TRY(mat("attn_v", kv, D, kvs, Ds, ph, false));
    if (h.flags & ML_FLAG_QKV_BIAS) {
      ML_TRY(vec("attn_q", ".bias", q, q, false));
      ML_TRY(vec("attn_k", ".bias", kv, kv, false));
      ML_TRY(vec("attn_v", ".bias", kv, kv, false));
    }
    if (h.flags & ML_FLAG_QK_NORM) {
      ML_TRY(vec("attn_q_norm", "", h.head_dim, h.head_dim, false));
      ML_TRY(vec("attn_k_norm", "", h.head_dim, h.head_dim, false));
    }
    ML_TRY(mat("attn_output", D, q, Ds, qs, false, ph));
    if (h.flags & ML_FLAG_POST_NORMS) ML_TRY(vec("post_attention_norm", "", D, D, true));
    ML_TRY(vec("ffn_norm", "", D, Ds, true));
    ML_TRY(mat("ffn_gate", H, D, Hs, Ds, false, false));
    ML_TRY(mat("ffn_up", H, D, Hs, Ds, false, false));
    ML_TRY(mat("ffn_down", D, H, Ds, Hs, false, false));
    if (h.flags & ML_FLAG_POST_NORMS) ML_TRY(vec("post_ffw_norm", "", D, D, true));
  }
  ML_TRY(add_vector("output_norm", "output_norm.weight", D, Ds, true));
  if (!(h.flags & ML_FLAG_TIED_CLASSIFIER))
    ML_TRY(add_matrix("output", "output.weight", h.vocab_size, D, h.vocab_size, Ds, 0, 0));
  if (n_blocks > h.n_layers) ML_TRY(skip_mtp());
  for (uint64_t i = 0; i < g.n_tensors; ++i)
    if (!used[i])
      return ml_fail(err, ML_E_FORMAT, "%s: tensor %s is not part of a %s model with %u layers", g.path,
                     g.tensors[i].name, a->name, h.n_layers);
  return ML_OK;
}
