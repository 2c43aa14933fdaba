// The engine: a model, its runtime state, a tokenizer and a sampler behind the C API of krafla.h.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/file.h"
#include "kernels/bind.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/state.h"
#include "model/tokenizer/llama2c.h"
#include "src/engine/krafla.h"

struct ml_engine {
  ml_model model;
  ml_state state;
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

ml_status finish_open(ml_engine* e, const ml_engine_params* p, ml_error* err) {
  const ml_config& c = e->model.cfg;
  const int ctx = p && p->ctx > 0 ? p->ctx : c.max_seq;
  const int kv = p ? p->kv : ML_ENGINE_KV_F32;
  if (p && p->ctx < 0) return ml_fail(err, ML_E_ARG, "context length %d is negative", p->ctx);
  ML_TRY(ml_state_init(&e->state, &e->model, ctx, (ml_kv_type)kv, err));
  ML_TRY(load_tokenizer(e, p, err));
  e->sampler_scratch = std::malloc(ml_sampler_scratch_bytes(c.vocab_size));
  if (!e->sampler_scratch) return ml_fail(err, ML_E_NOMEM, "cannot allocate the sampler's scratch");
  return ML_OK;
}

ml_status open_common(ml_engine** out, const ml_engine_params* p, ml_error* err, ml_engine* e, ml_status loaded) {
  if (loaded == ML_OK) loaded = finish_open(e, p, err);
  if (loaded != ML_OK) {
    ml_engine_close(e);
    return loaded;
  }
  *out = e;
  return ML_OK;
}

}  // namespace

extern "C" {

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
  return open_common(out, p, err, e, s);
}

ml_status ml_engine_open_memory(ml_engine** out, const void* data, size_t size, const ml_engine_params* p,
                                ml_error* err) {
  *out = nullptr;
  ml_engine* e = new (std::nothrow) ml_engine;
  if (!e) return ml_fail(err, ML_E_NOMEM, "cannot allocate the engine");
  return open_common(out, p, err, e, ml_model_load_memory(&e->model, data, size, err));
}

void ml_engine_close(ml_engine* e) {
  if (!e) return;
  std::free(e->sampler_scratch);
  if (e->tok) ml_tokenizer_free(e->tok);
  ml_state_free(&e->state);
  ml_model_free(&e->model);
  delete e;
}

ml_engine_info ml_engine_get_info(const ml_engine* e) {
  const ml_config& c = e->model.cfg;
  ml_engine_info i{};
  i.vocab_size = c.vocab_size;
  i.ctx = e->state.ctx;
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

ml_status ml_engine_eval(ml_engine* e, const int32_t* ids, size_t n, int pos, ml_error* err) {
  const ml_config& c = e->model.cfg;
  if (pos < 0 || n > (size_t)e->state.ctx || (size_t)pos > (size_t)e->state.ctx - n)
    return ml_fail(err, ML_E_ARG, "%zu tokens at position %d do not fit the context of %d", n, pos, e->state.ctx);
  for (size_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      return ml_fail(err, ML_E_ARG, "token id %d at index %zu is outside the vocabulary 0..%d", ids[i], i,
                     c.vocab_size - 1);
  for (size_t i = 0; i < n; ++i) ml_forward(&e->model, &e->state, ids[i], pos + (int)i, i + 1 == n);
  return ML_OK;
}

const float* ml_engine_logits(const ml_engine* e) { return e->state.logits; }

ml_status ml_engine_generate(ml_engine* e, const int32_t* prompt, size_t n_prompt, const ml_gen_params* p,
                             ml_token_cb cb, void* user, ml_gen_stats* stats, ml_error* err) {
  ml_gen_stats st{};
  st.stop_reason = ML_STOP_LENGTH;
  if (n_prompt == 0) return ml_fail(err, ML_E_ARG, "the prompt is empty: it needs at least one token (BOS)");
  if (p->max_tokens < 0) return ml_fail(err, ML_E_ARG, "max_tokens %d is negative", p->max_tokens);
  if (n_prompt > (size_t)e->state.ctx)
    return ml_fail(err, ML_E_ARG, "the prompt has %zu tokens, more than the context of %d", n_prompt, e->state.ctx);
  ml_sampler sampler;
  ML_TRY(ml_sampler_init(&sampler, e->model.cfg.vocab_size, p->temperature, p->top_p, p->top_k, p->seed,
                         e->sampler_scratch, err));

  // The prompt: each token's piece is reported as it is fed.
  const double t0 = now_seconds();
  int32_t prev = -1;
  for (size_t i = 0; i < n_prompt; ++i) {
    ML_TRY(ml_engine_eval(e, prompt + i, 1, (int)i, err));
    size_t len = 0;
    const char* piece = visible_piece(e, prev, prompt[i], &len);
    if (cb && cb(user, prompt[i], piece, len, 0)) {
      st.stop_reason = ML_STOP_CALLBACK;
      break;
    }
    prev = prompt[i];
  }
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
    if (pos >= e->state.ctx) {
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
