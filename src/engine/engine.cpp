// The engine: a model, its runtime state, a tokenizer and a sampler behind the C API of krafla.h.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/file.h"
#include "core/threads.h"
#include "ops/matvec.h"
#include "kernels/bind.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/pack.h"
#include "model/sampler.h"
#include "model/state.h"
#include "model/tokenizer/llama2c.h"
#include "src/engine/krafla.h"

struct ml_engine {
  ml_model model;
  ml_state state;
  ml_pool* pool = nullptr;
  ml_pack_info pack;
  ml_tokenizer* tok = nullptr;
  void* sampler_scratch = nullptr;
};

namespace {

// The printable text of id after prev: BOS and EOS print nothing.
const char* visible_piece(const ml_engine* e, int32_t prev, int32_t id, size_t* len) {
  *len = 0;
  if (id == e->model.cfg.bos_id || id == e->model.cfg.eos_id) return "";
  const char* p = ml_engine_piece(e, prev, id, len);
  return p ? p : "";
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ml_status load_tokenizer(ml_engine* e, const ml_engine_params* p, ml_error* err) {
  const ml_config& c = e->model.cfg;
  if (p && p->tokenizer_path) {
    ml_file f;
    ML_TRY(ml_file_open(&f, p->tokenizer_path, err));
    const ml_status s = ml_tokenizer_load_llama2c(&e->tok, f.data, f.size, (uint32_t)c.vocab_size, err);
    ml_file_close(&f);
    if (s != ML_OK) return ml_fail(err, s, "%s: %s", p->tokenizer_path, err ? err->msg : "");
  } else if (e->model.mlb.tokenizer) {
    ML_TRY(ml_tokenizer_load_llama2c(&e->tok, e->model.mlb.tokenizer, e->model.mlb.tokenizer_size,
                                     (uint32_t)c.vocab_size, err));
  } else {
    return ML_OK;
  }
  return ml_tokenizer_set_special(e->tok, c.bos_id, c.eos_id, err);
}

ml_status finish_open(ml_engine* e, const char* model_path, const ml_engine_params* p, ml_error* err) {
  const ml_config& c = e->model.cfg;
  const ml_engine_params none{};
  if (!p) p = &none;
  if (p->ctx < 0) return ml_fail(err, ML_E_ARG, "context length %d is negative", p->ctx);
  if (p->n_threads < 0) return ml_fail(err, ML_E_ARG, "thread count %d is negative", p->n_threads);
  ml_state_params sp;
  sp.ctx = p->ctx > 0 ? p->ctx : c.max_seq;
  sp.kv = (ml_kv_type)p->kv;
  sp.batch = p->batch > 0 ? p->batch : ML_MAX_BATCH;
  sp.n_threads = p->n_threads > 0 ? p->n_threads : 1;
  ML_TRY(ml_state_init(&e->state, &e->model, &sp, err));
  ML_TRY(ml_pool_create(&e->pool, sp.n_threads, err));
  e->state.exec.pool = e->pool;
  e->state.profile = p->profile != 0;
  if (!p->no_pack) {
    const ml_pack_params pp = ml_op_pack_params();
    char cache[4096];
    const bool use_cache = p->pack_cache && model_path && pp.g > 0;
    if (use_cache) ml_pack_cache_path(model_path, pp.g, cache, sizeof cache);
    ML_TRY(ml_model_pack(&e->model, &pp, use_cache ? cache : nullptr, &e->pack, err));
  }
  ML_TRY(load_tokenizer(e, p, err));
  e->sampler_scratch = std::malloc(ml_sampler_scratch_bytes(c.vocab_size));
  if (!e->sampler_scratch) return ml_fail(err, ML_E_NOMEM, "cannot allocate the sampler's scratch");
  return ML_OK;
}

ml_status open_common(ml_engine** out, const char* path, const ml_engine_params* p, ml_error* err, ml_engine* e,
                      ml_status loaded) {
  if (loaded == ML_OK) loaded = finish_open(e, path, p, err);
  if (loaded != ML_OK) {
    ml_engine_close(e);
    return loaded;
  }
  *out = e;
  return ML_OK;
}

}  // namespace

extern "C" {

const char* ml_build_isa(void) { return ml::k::build_isa; }
int ml_build_pack_g(void) { return ml_op_pack_params().g; }

ml_status ml_engine_open(ml_engine** out, const char* model_path, const ml_engine_params* p, ml_error* err) {
  *out = nullptr;
  ml_engine* e = new (std::nothrow) ml_engine;
  if (!e) return ml_fail(err, ML_E_NOMEM, "cannot allocate the engine");
  ml_status s = ml_model_load(&e->model, model_path, err);
  if (s != ML_OK && err) {
    char msg[sizeof err->msg];
    std::memcpy(msg, err->msg, sizeof msg);
    ml_fail(err, s, "%s: %s", model_path, msg);
  }
  return open_common(out, model_path, p, err, e, s);
}

ml_status ml_engine_open_memory(ml_engine** out, const void* data, size_t size, const ml_engine_params* p,
                                ml_error* err) {
  *out = nullptr;
  ml_engine* e = new (std::nothrow) ml_engine;
  if (!e) return ml_fail(err, ML_E_NOMEM, "cannot allocate the engine");
  return open_common(out, nullptr, p, err, e, ml_model_load_memory(&e->model, data, size, err));
}

void ml_engine_close(ml_engine* e) {
  if (!e) return;
  std::free(e->sampler_scratch);
  if (e->tok) ml_tokenizer_free(e->tok);
  ml_pool_destroy(e->pool);
  ml_state_free(&e->state);
  ml_model_free(&e->model);
  delete e;
}

ml_engine_info ml_engine_get_info(const ml_engine* e) {
  const ml_config& c = e->model.cfg;
  ml_engine_info i{};
  i.vocab_size = c.vocab_size;
  i.ctx = e->state.p.ctx;
  i.max_seq = c.max_seq;
  i.dim = c.dim;
  i.hidden_dim = c.hidden_dim;
  i.n_layers = c.n_layers;
  i.n_heads = c.n_heads;
  i.n_kv_heads = c.n_kv_heads;
  i.head_dim = c.head_dim;
  i.wtype = c.wtype;
  i.bos_id = c.bos_id;
  i.eos_id = c.eos_id;
  i.has_tokenizer = e->tok != nullptr;
  i.isa = ml::k::build_isa;
  i.state_bytes = e->state.arena.cap;
  i.n_threads = e->state.p.n_threads;
  i.batch = e->state.p.batch;
  i.packed = e->pack.packed;
  i.pack_g = e->pack.g;
  i.pack_from_cache = e->pack.from_cache;
  i.pack_cache_written = e->pack.cache_written;
  i.packed_bytes = e->pack.bytes;
  return i;
}

ml_status ml_engine_tokenize(const ml_engine* e, const char* text, size_t len, int add_bos, int32_t* ids, size_t cap,
                             size_t* n, ml_error* err) {
  *n = 0;
  if (!e->tok) return ml_fail(err, ML_E_ARG, "the model has no tokenizer: pass one (-z tokenizer.bin) or token ids");
  return ml_tokenizer_encode(e->tok, text, len, add_bos != 0, ids, cap, n, err);
}

const char* ml_engine_piece(const ml_engine* e, int32_t prev, int32_t id, size_t* len) {
  *len = 0;
  return e->tok ? ml_tokenizer_piece(e->tok, prev, id, len) : nullptr;
}

namespace {

ml_status check_span(const ml_engine* e, const int32_t* ids, size_t n, int pos, ml_error* err) {
  const ml_config& c = e->model.cfg;
  const int ctx = e->state.p.ctx;
  if (pos < 0 || n > (size_t)ctx || (size_t)pos > (size_t)ctx - n)
    return ml_fail(err, ML_E_ARG, "%zu tokens at position %d do not fit the context of %d", n, pos, ctx);
  for (size_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      return ml_fail(err, ML_E_ARG, "token id %d at index %zu is outside the vocabulary 0..%d", ids[i], i,
                     c.vocab_size - 1);
  return ML_OK;
}

}  // namespace

ml_status ml_engine_eval(ml_engine* e, const int32_t* ids, size_t n, int pos, ml_error* err) {
  ML_TRY(check_span(e, ids, n, pos, err));
  const size_t B = (size_t)e->state.p.batch;
  for (size_t i = 0; i < n; i += B) {
    const size_t len = n - i < B ? n - i : B;
    ml_forward(&e->model, &e->state, ids + i, (int)len, pos + (int)i, i + len == n ? ML_LOGITS_LAST : ML_LOGITS_NONE);
  }
  return ML_OK;
}

ml_status ml_engine_eval_all(ml_engine* e, const int32_t* ids, size_t n, int pos, ml_logits_cb cb, void* user,
                             ml_error* err) {
  ML_TRY(check_span(e, ids, n, pos, err));
  const size_t B = (size_t)e->state.p.batch, V = (size_t)e->model.cfg.vocab_size;
  for (size_t i = 0; i < n; i += B) {
    const size_t len = n - i < B ? n - i : B;
    ml_forward(&e->model, &e->state, ids + i, (int)len, pos + (int)i, ML_LOGITS_ALL);
    for (size_t t = 0; t < len; ++t)
      if (cb(user, i + t, e->state.logits + t * V)) return ML_OK;
  }
  return ML_OK;
}

int ml_engine_profile(const ml_engine* e, double seconds[6]) {
  if (!e->state.profile) return 0;
  for (int i = 0; i < ML_STAGE_COUNT; ++i) seconds[i] = e->state.stage_seconds[i];
  return ML_STAGE_COUNT;
}

const float* ml_engine_logits(const ml_engine* e) { return e->state.logits; }

ml_status ml_engine_generate(ml_engine* e, const int32_t* prompt, size_t n_prompt, const ml_gen_params* p,
                             ml_token_cb cb, void* user, ml_gen_stats* stats, ml_error* err) {
  ml_gen_stats st{};
  st.stop_reason = ML_STOP_LENGTH;
  if (n_prompt == 0) return ml_fail(err, ML_E_ARG, "the prompt is empty: it needs at least one token (BOS)");
  if (p->max_tokens < 0) return ml_fail(err, ML_E_ARG, "max_tokens %d is negative", p->max_tokens);
  if (n_prompt > (size_t)e->state.p.ctx)
    return ml_fail(err, ML_E_ARG, "the prompt has %zu tokens, more than the context of %d", n_prompt, e->state.p.ctx);
  ml_sampler sampler;
  ML_TRY(ml_sampler_init(&sampler, e->model.cfg.vocab_size, p->temperature, p->top_p, p->top_k, p->seed,
                         e->sampler_scratch, err));

  // The prompt: every token's piece is reported, then the prompt is fed in batches.
  const double t0 = now_seconds();
  int32_t prev = -1;
  for (size_t i = 0; i < n_prompt; ++i) {
    size_t len = 0;
    const char* piece = visible_piece(e, prev, prompt[i], &len);
    if (cb && cb(user, prompt[i], piece, len, 0)) {
      st.stop_reason = ML_STOP_CALLBACK;
      break;
    }
    prev = prompt[i];
  }
  if (st.stop_reason == ML_STOP_LENGTH) ML_TRY(ml_engine_eval(e, prompt, n_prompt, 0, err));
  st.n_prompt = (int)n_prompt;
  const double t1 = now_seconds();
  st.prompt_seconds = t1 - t0;

  int pos = (int)n_prompt;
  while (st.stop_reason == ML_STOP_LENGTH && st.n_generated < p->max_tokens) {
    const int32_t next = ml_sampler_sample(&sampler, e->state.logits);
    ++st.n_generated;
    if (p->stop_at_eos && (next == e->model.cfg.eos_id || next == e->model.cfg.bos_id)) {
      st.stop_reason = ML_STOP_EOS;
      break;
    }
    size_t len = 0;
    const char* piece = visible_piece(e, prev, next, &len);
    if (cb && cb(user, next, piece, len, 1)) {
      st.stop_reason = ML_STOP_CALLBACK;
      break;
    }
    prev = next;
    if (st.n_generated == p->max_tokens) break;
    if (pos >= e->state.p.ctx) {
      st.stop_reason = ML_STOP_CONTEXT;
      break;
    }
    ML_TRY(ml_engine_eval(e, &next, 1, pos, err));
    ++pos;
  }
  st.gen_seconds = now_seconds() - t1;
  if (stats) *stats = st;
  return ML_OK;
}

}  // extern "C"
