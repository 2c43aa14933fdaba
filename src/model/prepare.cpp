// ml_model_prepare: what a loaded model needs before it runs -- its RoPE tables, its packed
// weights and its tokenizer. Everything here is done once per model, however many sessions use it.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/checked.h"
#include "core/threads.h"
#include "model/limits.h"
#include "model/model.h"
#include "model/pack.h"
#include "model/tokenizer/tokenizer.h"
#include "ops/matvec.h"

namespace {

// One table: cos and sin [ctx][n_rot / 2] from the arena (plan pass: sizes only).
ml_status take_table(ml_arena* a, const ml_rope_table& r, float** cos_t, float** sin_t, ml_error* err) {
  size_t n;
  if (!ml_mul((size_t)r.ctx, (size_t)r.n_rot / 2, &n))
    return ml_fail(err, ML_E_NOMEM, "RoPE tables of %d x %d values overflow the address space", r.ctx, r.n_rot / 2);
  ML_TRY(ml_arena_take(a, n, cos_t, err));
  return ml_arena_take(a, n, sin_t, err);
}

// The global table (rope_theta, with the header's frequency scaling) and, when the sliding-window
// layers have their own base, theirs (unscaled: transformers scales only the global base).
ml_status build_rope(ml_model* m, ml_error* err) {
  const ml_mlb_header& h = m->mlb.h;
  const bool local = m->rope_local.n_rot > 0;
  m->rope.ctx = m->rope_local.ctx = m->ctx;
  float *cos_g = nullptr, *sin_g = nullptr, *cos_l = nullptr, *sin_l = nullptr;
  for (int pass = 0; pass < 2; ++pass) {  // plan, then carve
    m->tables.used = 0;
    ML_TRY(take_table(&m->tables, m->rope, &cos_g, &sin_g, err));
    if (local) ML_TRY(take_table(&m->tables, m->rope_local, &cos_l, &sin_l, err));
    if (pass == 0) ML_TRY(ml_arena_alloc(&m->tables, err));
  }
  ml_rope_scaling_params sc;
  sc.type = h.rope_scaling;
  sc.factor = h.rope_factor;
  sc.low_freq_factor = h.rope_low_freq_factor;
  sc.high_freq_factor = h.rope_high_freq_factor;
  sc.orig_ctx = h.rope_orig_max_seq;
  ml_rope_fill(cos_g, sin_g, m->ctx, m->rope.n_rot, m->rope.theta, &sc);
  m->rope.cos = cos_g;
  m->rope.sin = sin_g;
  if (local) {
    ml_rope_fill(cos_l, sin_l, m->ctx, m->rope_local.n_rot, m->rope_local.theta, nullptr);
    m->rope_local.cos = cos_l;
    m->rope_local.sin = sin_l;
  }
  return ML_OK;
}

ml_status load_tokenizer(ml_model* m, const char* path, ml_error* err) {
  const ml_config& c = m->cfg;
  if (path) {
    ml_file f;
    ML_TRY(ml_file_open(&f, path, err));
    const ml_status s = ml_tokenizer_load_llama2c(&m->tok, f.data, f.size, (uint32_t)c.vocab_size, err);
    ml_file_close(&f);
    if (s != ML_OK) return ml_fail(err, s, "%s: %s", path, err ? err->msg : "");
  } else if (m->mlb.tokenizer && m->mlb.tokenizer_kind == ML_TOK_HF) {
    ml_hf_files files;
    ML_TRY(ml_hf_bundle_parse(m->mlb.tokenizer, m->mlb.tokenizer_size, &files, err));
    ML_TRY(ml_tokenizer_load_hf(&m->tok, &files, err));
    if (ml_tokenizer_vocab(m->tok) > c.vocab_size)
      return ml_fail(err, ML_E_FORMAT, "tokenizer section: %d tokens, more than the model's vocab_size %d",
                     ml_tokenizer_vocab(m->tok), c.vocab_size);
    return ML_OK;  // BOS and EOS come from the tokenizer's own files (the header's are a copy)
  } else if (m->mlb.tokenizer) {
    ML_TRY(ml_tokenizer_load_llama2c(&m->tok, m->mlb.tokenizer, m->mlb.tokenizer_size, (uint32_t)c.vocab_size, err));
  } else {
    return ML_OK;
  }
  return ml_tokenizer_set_special(m->tok, c.bos_id, c.eos_id, err);
}

}  // namespace

ml_status ml_model_prepare(ml_model* m, const ml_model_options* o, ml_error* err) {
  const ml_model_options none{};
  if (!o) o = &none;
  if (o->ctx < 0 || o->ctx > m->cfg.max_seq)
    return ml_fail(err, ML_E_ARG, "context length %d is outside 1..%d (the model's max_seq)", o->ctx, m->cfg.max_seq);
  // Without a request the context is the model's max_seq, capped: a max_seq of millions would
  // otherwise size (and zero) gigabytes of cache that a short prompt never uses.
  m->ctx = o->ctx > 0 ? o->ctx : m->cfg.max_seq < ML_DEFAULT_CTX_CAP ? m->cfg.max_seq : ML_DEFAULT_CTX_CAP;
  // Before any table is built: the RoPE tables plus the smallest KV cache a session of this
  // context can have (q8: one byte per value, and a float scale per head) must fit in RAM.
  const ml_config& c = m->cfg;
  const uint64_t ctx = (uint64_t)m->ctx, L = (uint64_t)c.n_layers;
  const uint64_t rope_bytes = ctx * (uint64_t)(m->rope.n_rot / 2 + m->rope_local.n_rot / 2) * 2 * sizeof(float);
  const uint64_t kv_min = 2 * ctx * L * ((uint64_t)c.kv_dim + 4 * (uint64_t)c.n_kv_heads);  // < 2^63 by the limits
  char what[192];
  std::snprintf(what, sizeof what,
                "a context of %d (%s: RoPE tables and at least a q8 KV cache of %d layers x kv_dim %d)", m->ctx,
                o->ctx > 0 ? "--ctx" : "the model's max_seq", c.n_layers, c.kv_dim);
  ML_TRY(ml_check_ram(rope_bytes + kv_min, what, ": lower the context (--ctx)", err));
  ML_TRY(build_rope(m, err));
  if (o->pack) {
    const ml_pack_params pp = ml_op_pack_params();
    ml_pack_info info;
    ml_pool* pool = nullptr;
    if (o->n_threads > 1 && ml_pool_threads_built() && pp.g > 0) ML_TRY(ml_pool_create(&pool, o->n_threads, err));
    const ml_status s = ml_model_pack(m, &pp, pp.g > 0 ? o->pack_cache : nullptr, pool, &info, err);
    ml_pool_destroy(pool);
    ML_TRY(s);
    m->packed = info.packed;
    m->pack_from_cache = info.from_cache;
    m->pack_cache_written = info.cache_written;
    m->pack_g = info.g;
    m->packed_bytes = info.bytes;
  }
  return load_tokenizer(m, o->tokenizer_path, err);
}

namespace {

// Llama 3's rule (transformers' _compute_llama3_parameters): wavelengths shorter than
// orig_ctx / high_freq_factor keep their frequency, longer than orig_ctx / low_freq_factor are
// divided by factor, and the band between is interpolated.
double llama3_freq(double freq, const ml_rope_scaling_params& sc) {
  const double pi = 3.14159265358979323846;
  const double wavelen = 2 * pi / freq;
  const double low_wavelen = sc.orig_ctx / sc.low_freq_factor, high_wavelen = sc.orig_ctx / sc.high_freq_factor;
  if (wavelen < high_wavelen) return freq;
  if (wavelen > low_wavelen) return freq / sc.factor;
  const double smooth = (sc.orig_ctx / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
  return (1 - smooth) * freq / sc.factor + smooth * freq;
}

}  // namespace

void ml_rope_fill(float* cos_t, float* sin_t, int ctx, int n_rot, double theta, const ml_rope_scaling_params* sc) {
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    double freq = std::pow(theta, -2.0 * i / n_rot);
    if (sc && sc->type == ML_ROPE_SCALING_LINEAR) freq /= sc->factor;
    if (sc && sc->type == ML_ROPE_SCALING_LLAMA3) freq = llama3_freq(freq, *sc);
    for (int pos = 0; pos < ctx; ++pos) {
      const double angle = pos * freq;
      cos_t[(size_t)pos * half + i] = (float)std::cos(angle);
      sin_t[(size_t)pos * half + i] = (float)std::sin(angle);
    }
  }
}
