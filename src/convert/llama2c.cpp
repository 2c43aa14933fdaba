// cv_llama2c (`ml_convert llama2c`): llama2.c float32 checkpoints to .mlb.
// Two layouts exist (llama2.c export.py):
//   legacy (version 0): 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
//     seq_len; a negative vocab_size means a separate classifier follows), then token_embedding,
//     rms_att[L], wq[L], wk[L], wv[L], wo[L], rms_ffn[L], w1[L], w2[L], w3[L], rms_final,
//     freq_cis_real[seq][head_size/2], freq_cis_imag[...] (skipped), wcls (when not shared).
//   version 1: u32 magic 0x616b3432 ("ak42"), i32 version 1, the 7 int32, u8 shared_classifier,
//     zeros up to byte 256, then rms_att[L], rms_ffn[L], rms_final, token_embedding, wq[L], wk[L],
//     wv[L], wo[L], w1[L], w2[L], w3[L], wcls (when not shared); no freq_cis tables.
// The file's size must equal exactly what the header implies. The output is a Llama model with
// llama2.c's conventions: interleaved RoPE, theta 10000, eps 1e-5, bos 1, eos 2, and the FFN
// width padded to a multiple of 32 (docs/format.md, "Padding the FFN width").
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "convert/convert.h"
#include "core/checked.h"
#include "core/file.h"

namespace {

constexpr uint32_t L2C_MAGIC = 0x616b3432;  // "ak42"

int32_t get_i32(const uint8_t* p) {
  return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

struct file_guard {
  ml_file* f;
  ~file_guard() { ml_file_close(f); }
};

// Float offsets (from the start of the weights) of each tensor group.
struct l2c_layout {
  uint64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls, total;
};

struct l2c_params {
  uint32_t dim, hidden, layers, heads, kv_heads, vocab, seq;
  bool shared;
  bool legacy;
  uint64_t header_bytes;
};

// Adds n floats to *cursor and returns the group's start; false on overflow.
bool take(uint64_t* cursor, uint64_t a, uint64_t b, uint64_t c, uint64_t* start) {
  uint64_t n;
  *start = *cursor;
  return ml_mul64(a, b, &n) && ml_mul64(n, c, &n) && ml_add64(*cursor, n, cursor);
}

ml_status read_params(const char* path, const uint8_t* d, size_t size, l2c_params* p, ml_error* err) {
  if (size < 28)
    return ml_fail(err, ML_E_FORMAT, "%s: %zu bytes, too short for a llama2.c header (28 bytes)", path, size);
  const uint8_t* q = d;
  if ((uint32_t)get_i32(d) == L2C_MAGIC) {
    if (size < 256)
      return ml_fail(err, ML_E_FORMAT, "%s: %zu bytes, too short for a llama2.c version 1 header (256 bytes)", path,
                     size);
    const int32_t version = get_i32(d + 4);
    if (version != 1)
      return ml_fail(err, ML_E_FORMAT,
                     "%s: llama2.c version %d is not supported (float32 checkpoints only: legacy or version 1)", path,
                     version);
    q = d + 8;
    p->legacy = false;
    p->header_bytes = 256;
  } else {
    p->legacy = true;
    p->header_bytes = 28;
  }
  static const char* const names[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                       "n_kv_heads", "vocab_size", "seq_len"};
  int32_t v[7];
  for (int i = 0; i < 7; ++i) v[i] = get_i32(q + 4 * i);
  p->shared = p->legacy ? v[5] > 0 : d[36] != 0;
  if (p->legacy && v[5] < 0 && v[5] != INT32_MIN) v[5] = -v[5];
  if (!p->legacy && d[36] > 1)
    return ml_fail(err, ML_E_FORMAT, "%s: shared_classifier is %u, not 0 or 1", path, d[36]);
  for (int i = 0; i < 7; ++i) {
    if (v[i] <= 0) return ml_fail(err, ML_E_FORMAT, "%s: header field %s is %d, not positive", path, names[i], v[i]);
  }
  p->dim = (uint32_t)v[0];
  p->hidden = (uint32_t)v[1];
  p->layers = (uint32_t)v[2];
  p->heads = (uint32_t)v[3];
  p->kv_heads = (uint32_t)v[4];
  p->vocab = (uint32_t)v[5];
  p->seq = (uint32_t)v[6];
  if (p->heads > p->dim || p->dim % p->heads != 0)
    return ml_fail(err, ML_E_FORMAT, "%s: dim %u is not a multiple of n_heads %u", path, p->dim, p->heads);
  if (p->kv_heads > p->heads || p->heads % p->kv_heads != 0)
    return ml_fail(err, ML_E_FORMAT, "%s: n_heads %u is not a multiple of n_kv_heads %u", path, p->heads, p->kv_heads);
  if ((p->dim / p->heads) % 2 != 0)
    return ml_fail(err, ML_E_FORMAT, "%s: head size dim/n_heads = %u is odd (RoPE rotates pairs)", path,
                   p->dim / p->heads);
  if (p->vocab < 3)
    return ml_fail(err, ML_E_FORMAT, "%s: vocab_size %u is below 3 (bos 1 and eos 2 must exist)", path, p->vocab);
  return ML_OK;
}

// The offsets of every group in file order; fails when the sizes overflow.
bool compute_layout(const l2c_params* p, l2c_layout* o) {
  const uint64_t dim = p->dim, L = p->layers, kv_dim = (uint64_t)p->dim / p->heads * p->kv_heads;
  const uint64_t hs = p->dim / p->heads;
  uint64_t c = 0, freq;
  bool ok = true;
  *o = l2c_layout{};
  if (p->legacy) {
    ok = take(&c, p->vocab, dim, 1, &o->emb) && take(&c, L, dim, 1, &o->rms_att) && take(&c, L, dim, dim, &o->wq) &&
         take(&c, L, kv_dim, dim, &o->wk) && take(&c, L, kv_dim, dim, &o->wv) && take(&c, L, dim, dim, &o->wo) &&
         take(&c, L, dim, 1, &o->rms_ffn) && take(&c, L, p->hidden, dim, &o->w1) &&
         take(&c, L, dim, p->hidden, &o->w2) && take(&c, L, p->hidden, dim, &o->w3) &&
         take(&c, dim, 1, 1, &o->rms_final) && take(&c, p->seq, hs / 2, 2, &freq);
  } else {
    ok = take(&c, L, dim, 1, &o->rms_att) && take(&c, L, dim, 1, &o->rms_ffn) && take(&c, dim, 1, 1, &o->rms_final) &&
         take(&c, p->vocab, dim, 1, &o->emb) && take(&c, L, dim, dim, &o->wq) && take(&c, L, kv_dim, dim, &o->wk) &&
         take(&c, L, kv_dim, dim, &o->wv) && take(&c, L, dim, dim, &o->wo) && take(&c, L, p->hidden, dim, &o->w1) &&
         take(&c, L, dim, p->hidden, &o->w2) && take(&c, L, p->hidden, dim, &o->w3);
  }
  if (ok && !p->shared) ok = take(&c, p->vocab, dim, 1, &o->wcls);
  o->total = c;
  return ok;
}

}  // namespace

cv_llama2c_opts cv_llama2c_defaults() { return cv_llama2c_opts{}; }

ml_status cv_llama2c(const cv_llama2c_opts* o, ml_error* err) {
  if (!o->checkpoint) return ml_fail(err, ML_E_ARG, "llama2c: no checkpoint path given");
  if (!o->tokenizer) return ml_fail(err, ML_E_ARG, "llama2c: no --tokenizer path given");
  if (!o->out) return ml_fail(err, ML_E_ARG, "llama2c: no --output path given");
  const char* path = o->checkpoint;
  ml_file f;
  ML_TRY(ml_file_open(&f, path, err));
  file_guard guard{&f};

  l2c_params p = {};
  ML_TRY(read_params(path, f.data, f.size, &p, err));
  l2c_layout lay;
  uint64_t expected;
  if (!compute_layout(&p, &lay) || !ml_mul64(lay.total, 4, &expected) || !ml_add64(expected, p.header_bytes, &expected))
    return ml_fail(err, ML_E_FORMAT, "%s: the header's sizes overflow", path);
  if (expected != (uint64_t)f.size)
    return ml_fail(err, ML_E_FORMAT,
                   "%s: %zu bytes, but its %s header (dim %u, hidden_dim %u, n_layers %u, n_heads %u, n_kv_heads %u, "
                   "vocab_size %u, seq_len %u, %s classifier) implies %" PRIu64 " bytes",
                   path, f.size, p.legacy ? "legacy" : "version 1", p.dim, p.hidden, p.layers, p.heads, p.kv_heads,
                   p.vocab, p.seq, p.shared ? "shared" : "separate", expected);
  // dim and n_heads * head_dim (= dim here) cannot be padded: RMSNorm divides by dim.
  if (p.dim % 32 != 0)
    return ml_fail(err, ML_E_SHAPE, "%s: dim %u is not a multiple of 32 (only hidden_dim can be padded)", path, p.dim);

  cv_model m;
  ml_mlb_header& h = m.h;
  h.arch = ML_ARCH_LLAMA;
  h.dim = p.dim;
  h.hidden_dim = (p.hidden + 31) / 32 * 32;
  h.hidden_dim_orig = p.hidden;
  h.n_layers = p.layers;
  h.n_heads = p.heads;
  h.n_kv_heads = p.kv_heads;
  h.head_dim = p.dim / p.heads;
  h.vocab_size = p.vocab;
  h.max_seq = p.seq;
  h.wtype = o->wtype;
  h.scale_type = o->scale_type;
  h.norm_eps = 1e-5f;
  h.rope_theta = 10000.0f;
  h.rope_type = ML_ROPE_INTERLEAVED;
  h.flags = p.shared ? (uint32_t)ML_FLAG_TIED_CLASSIFIER : 0u;
  h.bos_id = 1;
  h.eos_id = 2;
  // The engine's limits (model/limits.h: n_layers, vocab_size, seq_len as max_seq, ...), before any work.
  const ml_status hs = ml_mlb_check_header(&h, err);
  if (hs != ML_OK) return ml_fail(err, hs, "%s: %s", path, err ? err->msg : "");

  ML_TRY(cv_attach_tokenizer(&m, o->tokenizer, o->chat_template, err));

  const uint8_t* w = f.data + p.header_bytes;
  const uint32_t dim = p.dim, hid = p.hidden, kv_dim = p.kv_heads * h.head_dim;
  char name[ML_MLB_NAME_MAX];
  cv_buf x;  // the float32 values of the tensor being added
  // Decodes n floats of group `base`, layer l (each layer n floats), into x; the file's size check
  // above keeps every group inside the mapping, but n itself may not fit size_t on 32-bit targets.
  auto group = [&](uint64_t base, uint32_t l, uint64_t n, const char* what) {
    if ((uint64_t)(size_t)n != n)
      return ml_fail(err, ML_E_NOMEM, "tensor %s: %" PRIu64 " floats overflow this address space", what, n);
    return cv_load_f32(w + 4 * (base + l * n), (size_t)n, &x, what, err);
  };
  auto add_norm = [&](uint32_t l, const char* suffix, uint64_t base) {
    std::snprintf(name, sizeof name, "blk.%u.%s", l, suffix);
    ML_TRY(group(base, l, dim, name));
    return cv_add_f32(&m, name, x.as<float>(), dim, err);
  };
  // A rows x cols matrix from a src_rows x src_cols one (the FFN padding when they differ).
  auto add_mat = [&](uint32_t l, const char* suffix, uint64_t base, uint32_t rows, uint32_t cols, uint32_t src_rows,
                     uint32_t src_cols) {
    std::snprintf(name, sizeof name, "blk.%u.%s", l, suffix);
    ML_TRY(group(base, l, (uint64_t)src_rows * src_cols, name));
    return cv_add_matrix(&m, name, rows, cols, x.as<float>(), src_rows, src_cols, err);
  };

  ML_TRY(group(lay.emb, 0, (uint64_t)p.vocab * dim, "tok_embd"));
  ML_TRY(cv_add_matrix(&m, "tok_embd", p.vocab, dim, x.as<float>(), p.vocab, dim, err));
  const uint32_t hp = h.hidden_dim;
  for (uint32_t l = 0; l < p.layers; ++l) {
    ML_TRY(add_norm(l, "attn_norm", lay.rms_att));
    ML_TRY(add_mat(l, "attn_q", lay.wq, dim, dim, dim, dim));
    ML_TRY(add_mat(l, "attn_k", lay.wk, kv_dim, dim, kv_dim, dim));
    ML_TRY(add_mat(l, "attn_v", lay.wv, kv_dim, dim, kv_dim, dim));
    ML_TRY(add_mat(l, "attn_output", lay.wo, dim, dim, dim, dim));
    ML_TRY(add_norm(l, "ffn_norm", lay.rms_ffn));
    ML_TRY(add_mat(l, "ffn_gate", lay.w1, hp, dim, hid, dim));
    ML_TRY(add_mat(l, "ffn_up", lay.w3, hp, dim, hid, dim));
    ML_TRY(add_mat(l, "ffn_down", lay.w2, dim, hp, dim, hid));
  }
  ML_TRY(group(lay.rms_final, 0, dim, "output_norm"));
  ML_TRY(cv_add_f32(&m, "output_norm", x.as<float>(), dim, err));
  if (!p.shared) {
    ML_TRY(group(lay.wcls, 0, (uint64_t)p.vocab * dim, "output"));
    ML_TRY(cv_add_matrix(&m, "output", p.vocab, dim, x.as<float>(), p.vocab, dim, err));
  }
  x = cv_buf{};
  return cv_write(&m, o->out, err);
}
