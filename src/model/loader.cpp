// Loading a model: parse the .mlb, check the hyperparameters this engine runs, bind every tensor
// by name with its expected type and shape, and scan Q8 quants for the excluded value -128.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <new>

#include "model/model.h"

#include "core/aligned.h"
#include "core/quant_ref.h"
#include "model/limits.h"
#include "model/tensor_table.h"
#include "model/tokenizer/tokenizer.h"

namespace {

// Rejects what the format defines but this engine does not run yet.
// The linear-attention layers' shape, checked by the op's own rules (ops/delta.h).
ml_status check_supported(const ml_mlb_header& h, ml_delta_shape* d, ml_error* err) {
  if (h.linear_period == 0) return ML_OK;
  d->n_k_heads = (int)std::min<uint32_t>(h.linear_k_heads, 1u << 20);
  d->n_v_heads = (int)std::min<uint32_t>(h.linear_v_heads, 1u << 20);
  d->k_dim = (int)std::min<uint32_t>(h.linear_k_dim, 1u << 20);
  d->v_dim = (int)std::min<uint32_t>(h.linear_v_dim, 1u << 20);
  d->conv = (int)std::min<uint32_t>(h.linear_conv, 1u << 20);
  d->eps = h.norm_eps;
  const ml_status s = ml_delta_check(d, err);
  if (s != ML_OK) return ml_fail(err, s, "header: linear attention (linear_k_heads %u, linear_v_heads %u, "
                                         "linear_k_dim %u, linear_v_dim %u, linear_conv %u): %s",
                                 h.linear_k_heads, h.linear_v_heads, h.linear_k_dim, h.linear_v_dim, h.linear_conv,
                                 err ? err->msg : "");
  if ((h.linear_v_heads * h.linear_v_dim) % 32 != 0)
    return ml_fail(err, ML_E_SHAPE, "header: linear_v_heads x linear_v_dim %u is not a multiple of 32",
                   h.linear_v_heads * h.linear_v_dim);
  return ML_OK;
}

// The directory in name order and which entries the model has bound: every entry must be used,
// so a file whose n_layers was lowered (or that carries stray tensors) is refused.
struct binder {
  ml_mlb_index idx;
  uint8_t* used = nullptr;  // [n_tensors]
  ~binder() {
    ml_mlb_index_free(&idx);
    std::free(used);
  }
};

// Finds name and marks it used; false when absent.
bool find_tensor(const ml_model* m, binder* b, const char* name, ml_mlb_tensor* out) {
  const int64_t i = ml_mlb_index_find(&b->idx, &m->mlb, name);
  if (i < 0) return false;
  b->used[i] = 1;
  *out = ml_mlb_tensor_at(&m->mlb, (uint32_t)i);
  return true;
}

// An F32 tensor of rows x n (a norm weight when rows is 1); every value must be finite.
ml_status bind_vector(const ml_model* m, binder* b, const char* name, uint32_t rows, uint32_t n, const float** out,
                      ml_error* err) {
  ml_mlb_tensor t;
  if (!find_tensor(m, b, name, &t)) return ml_fail(err, ML_E_SHAPE, "tensor %s is missing", name);
  if (t.type != ML_DT_F32) return ml_fail(err, ML_E_SHAPE, "tensor %s: type %u, expected 0 (F32)", name, t.type);
  if (t.rows != rows || t.cols != n)
    return ml_fail(err, ML_E_SHAPE, "tensor %s: shape %u x %u, expected %u x %u", name, t.rows, t.cols, rows, n);
  *out = reinterpret_cast<const float*>(m->mlb.base + t.data_offset);
  for (uint64_t i = 0; i < (uint64_t)rows * n; ++i)
    if (!std::isfinite((*out)[i]))
      return ml_fail(err, ML_E_FORMAT, "tensor %s: value %llu is %g (F32 weights must be finite)", name,
                     (unsigned long long)i, (double)(*out)[i]);
  return ML_OK;
}

// Block scales must be finite: an inf or NaN scale turns every logit into NaN.
ml_status check_scales(const char* name, const ml_mlb_tensor& t, const uint8_t* d, ml_error* err) {
  const uint64_t n = t.scale_size / (t.scale_type == ML_SCALE_F16 ? 2 : 4);
  for (uint64_t i = 0; i < n; ++i) {
    bool finite;
    if (t.scale_type == ML_SCALE_F16) {
      const uint16_t bits = (uint16_t)(d[2 * i] | d[2 * i + 1] << 8);
      finite = (bits & 0x7c00) != 0x7c00;
    } else {
      float f;
      std::memcpy(&f, d + 4 * i, 4);
      finite = std::isfinite(f);
    }
    if (!finite)
      return ml_fail(err, ML_E_FORMAT, "tensor %s: block scale %llu is not finite", name, (unsigned long long)i);
  }
  return ML_OK;
}

// The index of the first byte 0x80 (a Q8 quant of -128) in q[0, n), or n. Eight bytes at a time
// (a byte of x ^ 0x80.. is zero exactly where x has 0x80), the model's every Q8 quant being read
// at each load.
uint64_t first_q8_min(const uint8_t* q, uint64_t n) {
  constexpr uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    std::memcpy(&x, q + i, 8);
    x ^= highs;
    if ((x - ones) & ~x & highs) break;  // some byte is zero: find it below
  }
  for (; i < n; ++i)
    if (q[i] == 0x80) return i;
  return n;
}

// Binds a weight matrix of its own type (Q8 or Q4) and checks its quants: a Q8 quant of -128 is
// outside the format.
ml_status bind_matrix(const ml_model* m, binder* b, const char* name, uint32_t rows, uint32_t cols, ml_qtensor* out,
                      ml_error* err) {
  ml_mlb_tensor t;
  if (!find_tensor(m, b, name, &t)) return ml_fail(err, ML_E_SHAPE, "tensor %s is missing", name);
  if (t.type != ML_DT_Q8 && t.type != ML_DT_Q4)
    return ml_fail(err, ML_E_SHAPE, "tensor %s: type %u, expected a weight type (2 Q8 or 3 Q4)", name, t.type);
  if (t.rows != rows || t.cols != cols)
    return ml_fail(err, ML_E_SHAPE, "tensor %s: shape %u x %u, expected %u x %u", name, t.rows, t.cols, rows, cols);
  out->type = (int)t.type;
  out->q = m->mlb.base + t.data_offset;
  out->d = m->mlb.base + t.scale_offset;
  out->rows = (int)rows;
  out->cols = (int)cols;
  out->d_f16 = t.scale_type == ML_SCALE_F16;
  ML_TRY(check_scales(name, t, m->mlb.base + t.scale_offset, err));
  if (t.type == ML_DT_Q8) {
    const uint64_t i = first_q8_min(static_cast<const uint8_t*>(out->q), t.data_size);
    if (i < t.data_size)
      return ml_fail(err, ML_E_FORMAT, "tensor %s: Q8 quant -128 at index %llu (quants must be in [-127, 127])", name,
                     (unsigned long long)i);
    // The scan faulted the whole matrix in; drop its pages again (they stay in the page cache),
    // so loading does not make the whole model resident at once: packing then holds about the
    // packed model plus one matrix, and --no-pack or a pack-cache hit fault pages in as they run.
    ml_file_release(&m->file, (size_t)(static_cast<const uint8_t*>(out->q) - m->file.data), t.data_size);
  }
  return ML_OK;
}

// Binds one row of the tensor table (model/tensor_table.h) into owner; an absent optional
// tensor stays null, and a tensor the header says is absent must not be in the file.
template <class Owner>
ml_status bind_row(const ml_model* m, binder* b, const ml_tensor_row<Owner>& r, const char* name, Owner* owner,
                   ml_layer_kind kind, ml_error* err) {
  const ml_mlb_header& h = m->mlb.h;
  if (!ml_tensor_present(r, h, kind)) {
    if (ml_mlb_index_find(&b->idx, &m->mlb, name) >= 0)
      return ml_fail(err, ML_E_SHAPE, "tensor %s is present but the header's flags 0x%x say the model has none", name,
                     h.flags);
    return ML_OK;
  }
  const uint32_t rows = ml_tdim_size(r.rows, h), cols = ml_tdim_size(r.cols, h);
  if (r.vec) return bind_vector(m, b, name, rows, cols, &(owner->*r.vec), err);
  return bind_matrix(m, b, name, rows, cols, &(owner->*r.mat), err);
}

// What layer l computes: its kind, and for attention its heads, score scale, window and RoPE
// table. With a sliding window, every layer is sliding except each sliding_pattern-th (global);
// sliding layers rotate with the local table when the model has one.
void describe_layer(ml_model* m, ml_layer* L, uint32_t l) {
  const ml_mlb_header& h = m->mlb.h;
  const ml_config& c = m->cfg;
  L->kind = ml_layer_kind_of(h, l);
  L->attn.n_heads = c.n_heads;
  L->attn.n_kv_heads = c.n_kv_heads;
  L->attn.head_dim = c.head_dim;
  L->attn.scale = h.attn_scale > 0 ? h.attn_scale : 1.0f / std::sqrt((float)c.head_dim);
  const bool sliding = h.sliding_window > 0 && !(h.sliding_pattern > 0 && l % h.sliding_pattern == h.sliding_pattern - 1);
  L->attn.window = sliding ? (int)h.sliding_window : 0;
  L->rope = sliding && m->rope_local.n_rot > 0 ? &m->rope_local : &m->rope;
}

// A linear layer's F32 weights as ml_op_delta takes them (after binding).
void describe_delta(ml_layer* L) {
  L->delta.conv1d = L->ssm_conv1d;
  L->delta.a = L->ssm_a;
  L->delta.dt_bias = L->ssm_dt;
  L->delta.norm = L->ssm_norm;
}

ml_status bind_all(ml_model* m, ml_error* err) {
  const ml_mlb_header& h = m->mlb.h;
  ml_config& c = m->cfg;
  c.dim = (int)h.dim;
  c.hidden_dim = (int)h.hidden_dim;
  c.n_layers = (int)h.n_layers;
  c.n_heads = (int)h.n_heads;
  c.n_kv_heads = (int)h.n_kv_heads;
  c.head_dim = (int)h.head_dim;
  c.vocab_size = (int)h.vocab_size;
  c.max_seq = (int)h.max_seq;  // at most ML_LIMIT_MAX_SEQ (ml_mlb_parse)
  c.q_dim = c.n_heads * c.head_dim;
  c.kv_dim = c.n_kv_heads * c.head_dim;
  c.norm_eps = h.norm_eps;
  c.embed_scale = h.embed_scale;
  c.bos_id = (int)h.bos_id;
  c.eos_id = (int)h.eos_id;
  c.tied = (h.flags & ML_FLAG_TIED_CLASSIFIER) != 0;
  c.qkv_bias = (h.flags & ML_FLAG_QKV_BIAS) != 0;
  c.qk_norm = (h.flags & ML_FLAG_QK_NORM) != 0;
  c.post_norms = (h.flags & ML_FLAG_POST_NORMS) != 0;
  c.attn_gate = (h.flags & ML_FLAG_ATTN_GATE) != 0;
  c.gelu = h.activation == ML_ACT_GELU_TANH;
  c.logit_softcap = h.logit_softcap;
  m->rope.type = (int)h.rope_type;
  m->rope.n_rot = h.n_rot ? (int)h.n_rot : c.head_dim;
  m->rope.theta = (double)h.rope_theta;
  if (h.sliding_window > 0 && h.rope_local_theta > 0) {  // Gemma 3's second base
    m->rope_local = m->rope;
    m->rope_local.theta = (double)h.rope_local_theta;
  }

  binder b;
  ML_TRY(ml_mlb_index_build(&m->mlb, &b.idx, err));
  b.used = static_cast<uint8_t*>(std::calloc(h.n_tensors, 1));
  if (!b.used) return ml_fail(err, ML_E_NOMEM, "cannot allocate the use marks of %u tensors", h.n_tensors);
  for (const ml_model_row& r : ML_MODEL_TENSORS) ML_TRY(bind_row(m, &b, r, r.name, m, ML_LAYER_ATTENTION, err));
  if (c.tied) m->output = m->tok_embd;
  m->layers = static_cast<ml_layer*>(std::calloc(h.n_layers, sizeof(ml_layer)));
  if (!m->layers) return ml_fail(err, ML_E_NOMEM, "cannot allocate %u layer descriptors", h.n_layers);
  for (uint32_t l = 0; l < h.n_layers; ++l) {
    ml_layer* L = new (&m->layers[l]) ml_layer;
    describe_layer(m, L, l);
    for (const ml_layer_row& r : ML_LAYER_TENSORS) {
      if (!(r.kinds & (1u << L->kind))) continue;  // another kind's tensor (a same-named one may follow)
      char name[ML_MLB_NAME_MAX];
      std::snprintf(name, sizeof name, "blk.%u.%s", l, r.name);
      ML_TRY(bind_row(m, &b, r, name, L, L->kind, err));
    }
    if (L->kind == ML_LAYER_LINEAR) {
      describe_delta(L);
      ++c.n_linear;
    }
  }
  for (uint32_t i = 0; i < h.n_tensors; ++i)
    if (!b.used[i]) {
      char name[ML_MLB_NAME_ESC];
      ml_mlb_escape_name(ml_mlb_tensor_at(&m->mlb, i).name, name);
      return ml_fail(err, ML_E_SHAPE,
                     "tensor %s is not used by this model (n_layers %u, flags 0x%x): a stray tensor, or a header "
                     "that lists fewer layers than the file holds",
                     name, h.n_layers, h.flags);
    }
  return ML_OK;
}

ml_status load_parsed(ml_model* m, ml_error* err) {
  ML_TRY(ml_mlb_parse(&m->mlb, m->file.data, m->file.size, err));
  ML_TRY(check_supported(m->mlb.h, &m->cfg.delta, err));
  return bind_all(m, err);
}

}  // namespace

ml_status ml_model_load(ml_model* m, const char* path, ml_error* err) {
  *m = ml_model{};
  ML_TRY(ml_file_open(&m->file, path, err));
  const ml_status s = load_parsed(m, err);
  if (s != ML_OK) ml_model_free(m);
  return s;
}

ml_status ml_model_load_memory(ml_model* m, const void* data, size_t size, ml_error* err) {
  *m = ml_model{};
  ml_file_borrow(&m->file, data, size);
  const ml_status s = load_parsed(m, err);
  if (s != ML_OK) ml_model_free(m);
  return s;
}

ml_status ml_model_load_file(ml_model* m, ml_file* f, ml_error* err) {
  *m = ml_model{};
  m->file = *f;
  *f = ml_file{};
  const ml_status s = load_parsed(m, err);
  if (s != ML_OK) ml_model_free(m);
  return s;
}

void ml_model_free(ml_model* m) {
  if (m->tok) ml_tokenizer_free(m->tok);
  ml_arena_free(&m->tables);
  std::free(m->layers);
  ml_aligned_free(m->packed_mem);
  ml_file_close(&m->pack_file);
  ml_file_close(&m->file);
  *m = ml_model{};
}

void ml_model_embed(const ml_model* m, int token, float* x) {
  const ml_qtensor& E = m->tok_embd;
  const int dim = E.cols, nb = dim / ML_QK;
  const float scale = m->cfg.embed_scale;
  const size_t block0 = (size_t)token * nb;
  if (E.type == ML_DT_Q8) {
    const int8_t* q = static_cast<const int8_t*>(E.q) + (size_t)token * dim;
    for (int i = 0; i < dim; ++i) x[i] = (float)q[i] * ml_qtensor_scale(&E, block0 + i / ML_QK) * scale;
  } else {
    const uint8_t* row = static_cast<const uint8_t*>(E.q) + (size_t)token * dim / 2;
    for (int i = 0; i < dim; ++i) x[i] = (float)ml_q4_value(row, i) * ml_qtensor_scale(&E, block0 + i / ML_QK) * scale;
  }
}
