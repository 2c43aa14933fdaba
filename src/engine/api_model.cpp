// The public API's models, executors and sessions (krafla.h) over the model layer: the C handles
// are the model layer's own structs, and a batch is cut into forward steps of the executor's size.
#include <cstring>
#include <new>

#include "core/threads.h"
#include "engine/model_import.h"
#include "kernels/bind.h"
#include "krafla.h"
#include "model/exec.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/pack.h"
#include "model/session.h"
#include "model/tokenizer/tokenizer.h"
#include "ops/matvec.h"

namespace {

ml_status open_finish(ml_model* m, ml_status loaded, const char* path, const ml_model_params* p, ml_error* err) {
  if (loaded != ML_OK) return loaded;
  const ml_model_params none{};
  if (!p) p = &none;
  ml_model_options o;
  o.ctx = p->ctx;
  o.pack = !p->no_pack;
  o.tokenizer_path = p->tokenizer_path;
  o.n_threads = p->n_threads;
  char cache[4096];
  const ml_pack_params pp = ml_op_pack_params();
  if (p->pack_cache && path && pp.g > 0) {
    ml_pack_cache_path(path, pp.g, cache, sizeof cache);
    o.pack_cache = cache;
  }
  return ml_model_prepare(m, &o, err);
}

ml_status open_common(ml_model** out, ml_model* m, ml_status s) {
  if (s != ML_OK) {
    ml_model_free(m);
    delete m;
    return s;
  }
  *out = m;
  return ML_OK;
}

// Fails unless every token fits its session: ids in the vocabulary, the same model as the
// executor's, and each session's new positions within its context.
template <class Get>
ml_status check_tokens(const ml_exec* e, size_t n, Get get, ml_error* err) {
  const int vocab = e->model->cfg.vocab_size;
  for (size_t i = 0; i < n; ++i) {
    ml_session* s;
    int32_t id;
    bool logits;
    get(i, &s, &id, &logits);
    if (!s) return ml_fail(err, ML_E_ARG, "token %zu has no session", i);
    if (s->model != e->model) return ml_fail(err, ML_E_ARG, "token %zu: its session belongs to another model", i);
    if (id < 0 || id >= vocab)
      return ml_fail(err, ML_E_ARG, "token id %d at index %zu is outside the vocabulary 0..%d", id, i, vocab - 1);
    s->pending = 0;
  }
  for (size_t i = 0; i < n; ++i) {
    ml_session* s;
    int32_t id;
    bool logits;
    get(i, &s, &id, &logits);
    if (s->n_past + ++s->pending > s->p.ctx)
      return ml_fail(err, ML_E_ARG, "%d tokens at position %d do not fit the session's context of %d",
                     s->pending, s->n_past, s->p.ctx);
  }
  return ML_OK;
}

// Runs n tokens in steps of the executor's batch: positions continue each session's, the history
// and the sessions' logits are updated, cb gets every logits row (a nonzero return stops after
// the current step).
template <class Get>
ml_status run_tokens(ml_exec* e, size_t n, Get get, ml_logits_cb cb, void* user, ml_error* err) {
  ML_TRY(check_tokens(e, n, get, err));
  const ml_model* m = e->model;
  const size_t V = (size_t)m->cfg.vocab_size, B = (size_t)e->p.max_batch;
  // A step takes up to B tokens, of which at most logit_rows ask for logits.
  for (size_t i0 = 0, len = 0; i0 < n; i0 += len) {
    len = 0;
    int rows = 0;
    ml_session* logit_session = nullptr;  // the last session asking for logits in this step
    for (; len < B && i0 + len < n; ++len) {
      ml_session* s;
      int32_t id;
      bool logits;
      get(i0 + len, &s, &id, &logits);
      if (logits && rows == e->logit_rows) break;
      rows += logits ? 1 : 0;
      if (logits) logit_session = s;
      e->step_tokens[len] = id;
      e->step_sessions[len] = s;
      e->step_pos[len] = s->n_past;
      e->step_logits[len] = logits ? 1 : 0;
      s->tokens[s->n_past++] = id;
    }
    ml_batch b;
    b.n = (int)len;
    b.tokens = e->step_tokens;
    b.sessions = e->step_sessions;
    b.pos = e->step_pos;
    b.logits = e->step_logits;
    // One token asking (decoding): the classifier writes straight into its session's logits.
    const bool direct = rows == 1;
    b.logits_out = direct ? logit_session->logits : nullptr;
    ml_forward(m, e, &b);
    bool stop = false;
    int row = 0;
    for (size_t t = 0; t < len; ++t) {
      if (!e->step_logits[t]) continue;
      ml_session* s = e->step_sessions[t];
      const float* l = direct ? s->logits : e->logits + (size_t)row++ * V;
      if (!direct) std::memcpy(s->logits, l, V * sizeof(float));
      s->has_logits = true;
      if (cb && !stop && cb(user, i0 + t, l)) stop = true;
    }
    if (stop) break;
  }
  return ML_OK;
}

}  // namespace

extern "C" {

const char* ml_build_isa(void) { return ml::k::build_isa; }
int ml_build_pack_g(void) { return ml_op_pack_params().g; }
int ml_build_threads(void) { return ml_pool_threads_built() ? 1 : 0; }

ml_status ml_model_open(ml_model** out, const char* path, const ml_model_params* p, ml_error* err) {
  *out = nullptr;
  ml_model* m = new (std::nothrow) ml_model;
  if (!m) return ml_fail(err, ML_E_NOMEM, "cannot allocate the model");
  ml_status s;
  const ml_source_kind kind = ml_source_kind_of_path(path);
  if (kind == ML_SOURCE_MLB) {
    s = ml_model_load(m, path, err);
  } else {  // a GGUF file or a Hugging Face folder, converted at load
    ml_file converted;
    s = ml_import(kind, path, nullptr, 0, &converted, err);
    if (s == ML_OK) s = ml_model_load_file(m, &converted, err);
    path = s == ML_OK ? nullptr : path;  // no pack cache: the converted bytes have no file of their own
  }
  // Name the file once: messages about the file itself (cannot open, not a regular file) already do.
  if (s != ML_OK && err && path && std::strncmp(err->msg, path, std::strlen(path)) != 0)
    ml_fail(err, s, "%s: %s", path, err->msg);
  return open_common(out, m, open_finish(m, s, path, p, err));
}

ml_status ml_model_open_memory(ml_model** out, const void* data, size_t size, const ml_model_params* p,
                               ml_error* err) {
  *out = nullptr;
  ml_model* m = new (std::nothrow) ml_model;
  if (!m) return ml_fail(err, ML_E_NOMEM, "cannot allocate the model");
  if (ml_source_kind_of_bytes(data, size) == ML_SOURCE_GGUF) {  // converted at load
    ml_file converted;
    ml_status s = ml_import(ML_SOURCE_GGUF, nullptr, data, size, &converted, err);
    if (s == ML_OK) s = ml_model_load_file(m, &converted, err);
    return open_common(out, m, open_finish(m, s, nullptr, p, err));
  }
  return open_common(out, m, open_finish(m, ml_model_load_memory(m, data, size, err), nullptr, p, err));
}

void ml_model_close(ml_model* m) {
  if (!m) return;
  ml_model_free(m);
  delete m;
}

ml_model_info ml_model_get_info(const ml_model* m) {
  const ml_config& c = m->cfg;
  ml_model_info i{};
  i.vocab_size = c.vocab_size;
  i.ctx = m->ctx;
  i.max_seq = c.max_seq;
  i.dim = c.dim;
  i.hidden_dim = c.hidden_dim;
  i.n_layers = c.n_layers;
  i.n_heads = c.n_heads;
  i.n_kv_heads = c.n_kv_heads;
  i.head_dim = c.head_dim;
  i.wtype = (int)m->mlb.h.wtype;
  // A Hugging Face tokenizer knows its own BOS/EOS (Qwen has no BOS); the header holds a copy.
  i.bos_id = m->tok && ml_tokenizer_kind(m->tok) == ML_TOK_HF ? ml_tokenizer_bos(m->tok) : c.bos_id;
  i.eos_id = m->tok && ml_tokenizer_kind(m->tok) == ML_TOK_HF ? ml_tokenizer_eos(m->tok) : c.eos_id;
  i.has_tokenizer = m->tok != nullptr;
  i.isa = ml::k::build_isa;
  i.packed = m->packed;
  i.pack_g = m->pack_g;
  i.pack_from_cache = m->pack_from_cache;
  i.pack_cache_written = m->pack_cache_written;
  i.packed_bytes = m->packed_bytes;
  i.model_bytes = m->file.size;
  i.recurrent = m->cfg.n_linear > 0 ? 1 : 0;
  return i;
}

const ml_tokenizer* ml_model_tokenizer(const ml_model* m) { return m->tok; }

ml_status ml_exec_create(ml_exec** out, const ml_model* m, const ml_exec_params* p, ml_error* err) {
  *out = nullptr;
  const ml_exec_params none{};
  if (!p) p = &none;
  if (p->n_threads < 0) return ml_fail(err, ML_E_ARG, "thread count %d is negative", p->n_threads);
  if (p->batch < 0) return ml_fail(err, ML_E_ARG, "batch %d is negative", p->batch);
  ml_exec_opts o;
  o.n_threads = p->n_threads > 0 ? p->n_threads : 1;
  o.max_batch = p->batch > 0 ? p->batch : ML_MAX_BATCH;
  o.profile = p->profile != 0;
  ml_exec* e = new (std::nothrow) ml_exec;
  if (!e) return ml_fail(err, ML_E_NOMEM, "cannot allocate the executor");
  if (const ml_status s = ml_exec_init(e, m, &o, err); s != ML_OK) {
    delete e;
    return s;
  }
  *out = e;
  return ML_OK;
}

void ml_exec_free(ml_exec* e) {
  if (!e) return;
  ml_exec_release(e);
  delete e;
}

int ml_exec_threads(const ml_exec* e) { return e->p.n_threads; }
int ml_exec_batch(const ml_exec* e) { return e->p.max_batch; }
size_t ml_exec_bytes(const ml_exec* e) { return e->arena.cap; }

int ml_exec_profile(const ml_exec* e, double seconds[6]) {
  if (!e->p.profile) return 0;
  for (int i = 0; i < ML_STAGE_COUNT; ++i) seconds[i] = e->stage_seconds[i];
  return ML_STAGE_COUNT;
}

ml_status ml_exec_time_matrices(ml_exec* e, double* seconds, double* bytes, ml_error* err) {
  if (!e || !seconds || !bytes) return ml_fail(err, ML_E_ARG, "ml_exec_time_matrices: a null argument");
  *seconds = ml_forward_matrices(e->model, e, bytes);
  return ML_OK;
}

ml_status ml_session_create(ml_session** out, const ml_model* m, const ml_session_params* p, ml_error* err) {
  *out = nullptr;
  const ml_session_params none{};
  if (!p) p = &none;
  if (p->ctx < 0) return ml_fail(err, ML_E_ARG, "context length %d is negative", p->ctx);
  ml_session_opts o;
  o.ctx = p->ctx;
  o.kv = (ml_kv_type)p->kv;
  ml_session* s = new (std::nothrow) ml_session;
  if (!s) return ml_fail(err, ML_E_NOMEM, "cannot allocate the session");
  if (const ml_status st = ml_session_init(s, m, &o, err); st != ML_OK) {
    delete s;
    return st;
  }
  *out = s;
  return ML_OK;
}

void ml_session_free(ml_session* s) {
  if (!s) return;
  ml_session_release(s);
  delete s;
}

int ml_session_ctx(const ml_session* s) { return s->p.ctx; }
size_t ml_session_bytes(const ml_session* s) { return s->arena.cap; }
int ml_session_pos(const ml_session* s) { return s->n_past; }
const int32_t* ml_session_tokens(const ml_session* s) { return s->tokens; }

ml_status ml_session_truncate(ml_session* s, int n, ml_error* err) {
  if (n < 0 || n > s->n_past)
    return ml_fail(err, ML_E_ARG, "truncate to %d positions: the session holds %d", n, s->n_past);
  // Linear-attention layers keep a recurrent state, not a per-position history: it can start
  // over, or continue where it is, but not go back.
  if (s->model->cfg.n_linear > 0 && n != s->n_past) {
    if (n != 0)
      return ml_fail(err, ML_E_ARG,
                     "truncate to %d positions: this model's linear-attention layers keep a recurrent state that "
                     "cannot rewind (the session is at %d; truncate to 0 and feed the tokens again)",
                     n, s->n_past);
    ml_session_clear_state(s);
  }
  s->n_past = n;
  s->has_logits = false;
  return ML_OK;
}

const float* ml_session_logits(const ml_session* s) { return s->has_logits ? s->logits : nullptr; }

ml_status ml_session_feed(ml_exec* e, ml_session* s, const int32_t* ids, size_t n, ml_error* err) {
  auto get = [&](size_t i, ml_session** ss, int32_t* id, bool* logits) {
    *ss = s;
    *id = ids[i];
    *logits = i + 1 == n;
  };
  return run_tokens(e, n, get, nullptr, nullptr, err);
}

ml_status ml_session_feed_all(ml_exec* e, ml_session* s, const int32_t* ids, size_t n, ml_logits_cb cb, void* user,
                              ml_error* err) {
  auto get = [&](size_t i, ml_session** ss, int32_t* id, bool* logits) {
    *ss = s;
    *id = ids[i];
    *logits = true;
  };
  return run_tokens(e, n, get, cb, user, err);
}

ml_status ml_eval_batch(ml_exec* e, const ml_batch_token* tokens, size_t n, ml_logits_cb cb, void* user,
                        ml_error* err) {
  auto get = [&](size_t i, ml_session** ss, int32_t* id, bool* logits) {
    *ss = tokens[i].session;
    *id = tokens[i].id;
    *logits = tokens[i].logits != 0;
  };
  return run_tokens(e, n, get, cb, user, err);
}

ml_status ml_session_set_sampler(ml_session* s, const ml_sampler_params* p, ml_error* err) {
  ml_sampler_opts o;
  o.temperature = p->temperature;
  o.top_p = p->top_p;
  o.top_k = p->top_k;
  o.seed = p->seed;
  return ml_sampler_init(&s->sampler, s->model->cfg.vocab_size, &o, s->sampler_scratch, err);
}

int32_t ml_session_sample(ml_session* s) {
  return s->has_logits ? ml_sampler_sample(&s->sampler, s->logits) : -1;
}

}  // extern "C"
