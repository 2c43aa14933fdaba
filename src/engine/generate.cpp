// The one generation loop (krafla.h, "Generation"): ml_run, the wasm module and the npm package
// all step it. One ml_gen_next = feed the token sampled last time, sample the next, and release
// its text through the detokenizer (whole UTF-8 characters) and the stop-string filter. With
// presence/frequency penalties it keeps how often it sampled each id, a sparse list handed to the
// sampler (the prompt does not count, as in OpenAI's API).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/stop_filter.h"
#include "krafla.h"
#include "core/threads.h"
#include "model/exec.h"
#include "model/session.h"

struct ml_gen {
  ml_exec* exec = nullptr;
  ml_session* session = nullptr;
  const ml_tokenizer* tok = nullptr;
  int max_tokens = 0;
  bool stop_at_eos = false;
  int32_t eos = -1, bos = -1;
  ml_detok detok{};
  ml_stop_filter stop;
  int32_t pending = -1;  // sampled, not yet fed
  ml_token_count* counts = nullptr;  // penalties only: each distinct id sampled so far, in order
  int32_t n_counts = 0, counts_cap = 0;
  bool done = false;
  ml_gen_stats st{};
  double t_gen0 = 0;
  // One allocation: the counts, the stop strings and their lengths, the filter's held bytes, the
  // piece and the released text.
  void* mem = nullptr;
  char* piece = nullptr;
  char* out = nullptr;
  size_t piece_cap = 0;
};

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// counts_cap: the most distinct ids the generation can sample (0 without penalties).
ml_status setup_buffers(ml_gen* g, const ml_gen_params* p, int32_t counts_cap, ml_error* err) {
  size_t n_stop = 0, stop_bytes = 0, longest = 0;
  for (size_t i = 0; i < p->n_stop; ++i) {
    const size_t L = p->stop[i] ? std::strlen(p->stop[i]) : 0;
    if (L == 0) continue;  // an empty stop string would match everywhere: ignored, as OpenAI does
    ++n_stop;
    stop_bytes += L + 1;
    if (L > longest) longest = L;
  }
  g->piece_cap = ml_detok_max_bytes(g->tok) + 8;
  const size_t held_cap = longest + 1;
  const size_t out_cap = held_cap + g->piece_cap;
  // The counts come first: 8-byte entries keep the pointer array after them aligned.
  const size_t counts_bytes = (size_t)counts_cap * sizeof(ml_token_count);
  const size_t total =
      counts_bytes + n_stop * (sizeof(char*) + sizeof(size_t)) + stop_bytes + held_cap + g->piece_cap + out_cap;
  g->mem = std::malloc(total);
  if (!g->mem)
    return ml_fail(err, ML_E_NOMEM, "generation: cannot allocate %zu bytes for the stop strings and counts", total);
  char* at = static_cast<char*>(g->mem);
  g->counts = reinterpret_cast<ml_token_count*>(at);
  g->counts_cap = counts_cap;
  at += counts_bytes;
  const char** stops = reinterpret_cast<const char**>(at);
  at += n_stop * sizeof(char*);
  size_t* lens = reinterpret_cast<size_t*>(at);
  at += n_stop * sizeof(size_t);
  size_t k = 0;
  for (size_t i = 0; i < p->n_stop; ++i) {
    const size_t L = p->stop[i] ? std::strlen(p->stop[i]) : 0;
    if (L == 0) continue;
    std::memcpy(at, p->stop[i], L + 1);
    stops[k] = at;
    lens[k++] = L;
    at += L + 1;
  }
  g->stop.stops = stops;
  g->stop.lens = lens;
  g->stop.n = n_stop;
  g->stop.held = at;
  g->stop.cap = held_cap;
  at += held_cap;
  g->piece = at;
  at += g->piece_cap;
  g->out = at;
  return ML_OK;
}

// Ends generation: the detokenizer's and the filter's held bytes are released (unless a stop
// string matched), appended to out at *len.
void finish(ml_gen* g, int reason, size_t* len) {
  g->done = true;
  g->st.stop_reason = reason;
  if (reason != ML_STOP_STRING) {
    const size_t tail = ml_detok_flush(&g->detok, g->piece, g->piece_cap);
    size_t rel = 0;
    const bool hit = ml_stop_push(&g->stop, g->piece, tail, g->out + *len, &rel);
    *len += rel;
    if (hit) g->st.stop_reason = ML_STOP_STRING;
    else *len += ml_stop_finish(&g->stop, g->out + *len);
  }
  g->st.gen_seconds = now_seconds() - g->t_gen0;
}

// Counts one more sampling of id (the penalties' history). The list is sized at ml_gen_start for
// every sample the session's context leaves room for; it overflows only when the session was
// truncated behind the generation's back.
ml_status count_sampled(ml_gen* g, int32_t id, ml_error* err) {
  for (int32_t i = 0; i < g->n_counts; ++i)
    if (g->counts[i].id == id) {
      ++g->counts[i].count;
      return ML_OK;
    }
  if (g->n_counts == g->counts_cap)
    return ml_fail(err, ML_E_ARG,
                   "generation: more distinct tokens than the %d the context left room for (was the session "
                   "truncated during generation?)",
                   (int)g->counts_cap);
  g->counts[g->n_counts++] = ml_token_count{id, 1};
  return ML_OK;
}

}  // namespace

extern "C" {

ml_status ml_gen_start(ml_gen** out, ml_exec* e, ml_session* s, const int32_t* prompt, size_t n_prompt,
                       const ml_gen_params* p, ml_error* err) {
  *out = nullptr;
  if (p->max_tokens < 0) return ml_fail(err, ML_E_ARG, "max_tokens %d is negative", p->max_tokens);
  if (n_prompt == 0 && !ml_session_logits(s))
    return ml_fail(err, ML_E_ARG, "the prompt is empty: it needs at least one token (BOS)");
  const int ctx = ml_session_ctx(s), pos = ml_session_pos(s);
  if (n_prompt > (size_t)(ctx - pos))
    return ml_fail(err, ML_E_ARG, "the prompt has %zu tokens, more than the %d positions left of the context of %d",
                   n_prompt, ctx - pos, ctx);
  ml_sampler_opts so;
  so.temperature = p->temperature;
  so.top_p = p->top_p;
  so.top_k = p->top_k;
  so.min_p = p->min_p;
  so.presence_penalty = p->presence_penalty;
  so.frequency_penalty = p->frequency_penalty;
  so.seed = p->seed;
  const int32_t vocab = s->model->cfg.vocab_size;
  ML_TRY(ml_sampler_init(&s->sampler, vocab, &so, s->sampler_scratch, err));
  // Samples happen at positions pos + n_prompt .. ctx (the last one is never fed), at most
  // max_tokens of them; each adds at most one distinct id.
  int32_t counts_cap = 0;
  if (p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f) {
    const int64_t samples = std::min<int64_t>(p->max_tokens, (int64_t)ctx - pos - (int64_t)n_prompt + 1);
    counts_cap = (int32_t)std::min<int64_t>(samples, vocab);
  }
  ml_gen* g = new (std::nothrow) ml_gen;
  if (!g) return ml_fail(err, ML_E_NOMEM, "cannot allocate the generator");
  g->exec = e;
  g->session = s;
  g->tok = ml_model_tokenizer(s->model);
  g->max_tokens = p->max_tokens;
  g->stop_at_eos = p->stop_at_eos != 0;
  const ml_model_info info = ml_model_get_info(s->model);
  g->eos = info.eos_id;
  g->bos = info.bos_id;
  ml_status st = setup_buffers(g, p, counts_cap, err);
  const double t0 = now_seconds();
  if (st == ML_OK && n_prompt > 0) st = ml_session_feed(e, s, prompt, n_prompt, err);
  if (st != ML_OK) {
    ml_gen_free(g);
    return st;
  }
  g->t_gen0 = now_seconds();
  g->st.n_prompt = (int)n_prompt;
  g->st.prompt_seconds = g->t_gen0 - t0;
  const int n = ml_session_pos(s);
  ml_detok_reset(&g->detok, n > 0 ? ml_session_tokens(s)[n - 1] : -1);
  *out = g;
  return ML_OK;
}

}  // extern "C"

namespace {

// ml_gen_next; may_feed false (ml_gen_next_batch, on a pool thread): a token still to feed is an
// error instead of a forward pass, which would run the executor from inside its own pool.
ml_status gen_next(ml_gen* g, bool may_feed, const char** text, size_t* len, int32_t* id, int* done, ml_error* err) {
  *text = g->out;
  *len = 0;
  *id = -1;
  *done = g->done ? 1 : 0;
  if (g->done) return ML_OK;
  if (g->st.n_generated >= g->max_tokens) {
    finish(g, ML_STOP_LENGTH, len);
    *done = 1;
    return ML_OK;
  }
  if (g->pending >= 0) {
    if (ml_session_pos(g->session) >= ml_session_ctx(g->session)) {
      finish(g, ML_STOP_CONTEXT, len);
      *done = 1;
      return ML_OK;
    }
    if (!may_feed)
      return ml_fail(err, ML_E_ARG, "generation: token %d is not fed yet (take it with ml_gen_take_pending and feed it)",
                     (int)g->pending);
    const int32_t t = g->pending;
    g->pending = -1;
    ML_TRY(ml_session_feed(g->exec, g->session, &t, 1, err));
  }
  const float* logits = ml_session_logits(g->session);
  const int32_t next =
      logits ? ml_sampler_sample(&g->session->sampler, logits, g->counts, (size_t)g->n_counts) : -1;
  if (g->counts_cap > 0 && next >= 0) ML_TRY(count_sampled(g, next, err));
  ++g->st.n_generated;
  *id = next;
  if (g->stop_at_eos && (next == g->eos || next == g->bos || ml_token_is_eog(g->tok, next))) {
    finish(g, ML_STOP_EOS, len);
    *done = 1;
    return ML_OK;
  }
  const size_t n = g->tok ? ml_detok_push(g->tok, &g->detok, next, g->piece, g->piece_cap) : 0;
  if (ml_stop_push(&g->stop, g->piece, n, g->out, len)) {
    finish(g, ML_STOP_STRING, len);
    *done = 1;
    return ML_OK;
  }
  if (g->st.n_generated == g->max_tokens) {
    finish(g, ML_STOP_LENGTH, len);
    *done = 1;
    return ML_OK;
  }
  g->pending = next;
  return ML_OK;
}

struct next_batch_task {
  ml_gen* const* gens;
  ml_gen_step* steps;
  size_t n;
};

// Generation i runs on thread i % n_threads: a fixed split, and each generation's result depends
// only on its own session, so the results are the same for any thread count.
void next_batch_worker(void* ctx, int thread, int n_threads) {
  const next_batch_task* t = static_cast<const next_batch_task*>(ctx);
  for (size_t i = (size_t)thread; i < t->n; i += (size_t)n_threads) {
    ml_gen_step* o = &t->steps[i];
    o->status = gen_next(t->gens[i], false, &o->text, &o->len, &o->id, &o->done, &o->err);
  }
}

}  // namespace

extern "C" {

ml_status ml_gen_next(ml_gen* g, const char** text, size_t* len, int32_t* id, int* done, ml_error* err) {
  return gen_next(g, true, text, len, id, done, err);
}

void ml_gen_next_batch(ml_exec* e, ml_gen* const* gens, ml_gen_step* steps, size_t n) {
  for (size_t i = 0; i < n; ++i) steps[i] = ml_gen_step{};
  next_batch_task t{gens, steps, n};
  if (n > 1 && e->pool)
    ml_pool_run(e->pool, next_batch_worker, &t);
  else
    next_batch_worker(&t, 0, 1);
}

int32_t ml_gen_take_pending(ml_gen* g) {
  if (g->done || g->pending < 0) return -1;
  if (ml_session_pos(g->session) >= ml_session_ctx(g->session)) return -1;
  const int32_t t = g->pending;
  g->pending = -1;
  return t;
}

void ml_gen_cancel(ml_gen* g, const char** text, size_t* len) {
  *text = g->out;
  *len = 0;
  if (!g->done) finish(g, ML_STOP_CALLBACK, len);
}

ml_gen_stats ml_gen_get_stats(const ml_gen* g) { return g->st; }

void ml_gen_free(ml_gen* g) {
  if (!g) return;
  std::free(g->mem);
  delete g;
}

ml_status ml_generate(ml_exec* e, ml_session* s, const int32_t* prompt, size_t n_prompt, const ml_gen_params* p,
                      ml_token_cb cb, void* user, ml_gen_stats* stats, ml_error* err) {
  if (stats) *stats = ml_gen_stats{};
  // The prompt's text first, as each token would print (whole characters).
  const ml_tokenizer* tok = ml_model_tokenizer(s->model);
  if (cb && tok && n_prompt > 0) {
    const size_t cap = ml_detok_max_bytes(tok) + 8;
    char* buf = static_cast<char*>(std::malloc(cap));
    if (!buf) return ml_fail(err, ML_E_NOMEM, "generation: cannot allocate %zu bytes", cap);
    ml_detok d;
    const int pos = ml_session_pos(s);
    ml_detok_reset(&d, pos > 0 ? ml_session_tokens(s)[pos - 1] : -1);
    bool stopped = false;
    for (size_t i = 0; i < n_prompt && !stopped; ++i) {
      const size_t n = ml_detok_push(tok, &d, prompt[i], buf, cap);
      stopped = cb(user, prompt[i], buf, n, 0) != 0;
    }
    if (!stopped) {
      const size_t n = ml_detok_flush(&d, buf, cap);
      if (n) stopped = cb(user, -1, buf, n, 0) != 0;
    }
    std::free(buf);
    if (stopped) {
      if (stats) stats->stop_reason = ML_STOP_CALLBACK;
      return ML_OK;
    }
  }
  ml_gen* g = nullptr;
  ML_TRY(ml_gen_start(&g, e, s, prompt, n_prompt, p, err));
  ml_status st = ML_OK;
  for (int done = 0; !done;) {
    const char* text;
    size_t len;
    int32_t id;
    st = ml_gen_next(g, &text, &len, &id, &done, err);
    if (st != ML_OK) break;
    if (cb && (len > 0 || !done) && cb(user, id, text, len, 1)) {
      ml_gen_cancel(g, &text, &len);
      if (len) cb(user, -1, text, len, 1);
      break;
    }
  }
  if (stats) *stats = ml_gen_get_stats(g);
  ml_gen_free(g);
  return st;
}

}  // extern "C"
