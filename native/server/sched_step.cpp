// One step of the engine thread (scheduler.h): a single ml_eval_batch with the pending token of
// every decoding slot and a chunk of the oldest prompt still being prefilled, then every decoding
// slot's ml_gen_next at once, on the executor's threads (ml_gen_next_batch). Each session's
// logits are byte-identical to running it alone, so every reply equals the same request served
// alone, whatever shares its steps.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>

#include "sched_internal.h"

namespace server {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void release(engine_state& st, slot& s) {
  ml_gen_free(s.gen);
  s.gen = nullptr;
  s.job.reset();
  s.state = slot::phase::idle;
  s.last_used = ++st.tick;
  std::lock_guard<std::mutex> lk(st.mu);
  --st.busy;
  st.m.active_slots = st.busy;
  st.changed.notify_all();
}

// Starts generation on a slot whose prompt is all fed (its last token's logits are the session's).
bool start_gen(engine_state& st, slot& s) {
  const job_params& p = s.job->params;
  std::vector<const char*> stops;
  for (const std::string& x : p.stop) stops.push_back(x.c_str());
  ml_gen_params gp{};
  gp.max_tokens = p.max_tokens < 0 ? INT_MAX : p.max_tokens;
  gp.temperature = p.temperature;
  gp.top_p = p.top_p;
  gp.top_k = p.top_k;
  gp.seed = p.seed;
  gp.stop_at_eos = 1;
  gp.stop = stops.data();
  gp.n_stop = stops.size();
  gp.min_p = p.min_p;
  gp.presence_penalty = p.presence_penalty;
  gp.frequency_penalty = p.frequency_penalty;
  ml_error err;
  if (ml_gen_start(&s.gen, st.exec, s.session, nullptr, 0, &gp, &err) != ML_OK) {
    fail_slot(st, s, err.msg);
    return false;
  }
  s.state = slot::phase::decode;
  s.prev = p.prompt.back();
  return true;
}

// Hands a slot the result of its ml_gen_next (ml_gen_next_batch, after the slot's pending token
// was fed this step, or just after it started): sends the released text and the token, and ends
// the job when generation is done.
void deliver(engine_state& st, slot& s, const ml_gen_step& r) {
  if (r.status != ML_OK) {
    fail_slot(st, s, r.err.msg);
    return;
  }
  job_event ev;
  ev.text.assign(r.text, r.len);
  const int32_t id = r.id;
  if (id >= 0) {
    {
      std::lock_guard<std::mutex> lk(st.mu);  // counted before any event tells of the token
      ++st.m.generated_tokens;
    }
    const int reason = r.done ? ml_gen_get_stats(s.gen).stop_reason : -1;
    if (reason != ML_STOP_EOS) {  // the token that ends the turn is not part of the reply
      job_token t;
      t.id = id;
      size_t n = 0;
      const char* piece = st.tok ? ml_token_piece(st.tok, s.prev, id, &n) : nullptr;
      if (piece) t.piece.assign(piece, n);
      const int k = s.job->params.logprobs;
      if (k >= 0) {
        // The logits the token was drawn from: nothing is fed until the next step.
        const float* logits = ml_session_logits(s.session);
        t.logprob = log_softmax_top(logits, st.info.vocab_size, id, std::min(k, st.info.vocab_size), &t.top, st.probs,
                                    st.order);
      }
      ev.tokens.push_back(std::move(t));
    }
    s.prev = id;
  }
  if (!ev.text.empty() || !ev.tokens.empty()) s.job->push(std::move(ev));
  if (r.done) finish_slot(st, s, ml_gen_get_stats(s.gen).stop_reason);
}

// Samples every slot fed this step at once, on the executor's threads (ml_gen_next_batch), then
// delivers each result in slot order.
void next_tokens(engine_state& st) {
  st.step_slots.clear();
  st.step_gens.clear();
  for (slot& s : st.slots)
    if (s.job && s.fed_this_step) {
      st.step_slots.push_back(&s);
      st.step_gens.push_back(s.gen);
    }
  st.step_results.resize(st.step_gens.size());
  ml_gen_next_batch(st.exec, st.step_gens.data(), st.step_results.data(), st.step_gens.size());
  for (size_t i = 0; i < st.step_slots.size(); ++i) deliver(st, *st.step_slots[i], st.step_results[i]);
}

}  // namespace

double log_softmax_top(const float* logits, int vocab, int32_t id, int k, std::vector<std::pair<int32_t, double>>* top,
                       std::vector<double>& scratch, std::vector<int32_t>& order) {
  scratch.assign(logits, logits + vocab);
  const double mx = *std::max_element(scratch.begin(), scratch.end());
  double sum = 0;
  for (double v : scratch) sum += std::exp(v - mx);
  const double lse = mx + std::log(sum);
  top->clear();
  if (k > 0) {
    order.resize((size_t)vocab);
    for (int i = 0; i < vocab; ++i) order[(size_t)i] = i;
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return scratch[(size_t)a] != scratch[(size_t)b] ? scratch[(size_t)a] > scratch[(size_t)b] : a < b;
    });
    for (int i = 0; i < k; ++i) top->emplace_back(order[(size_t)i], scratch[(size_t)order[(size_t)i]] - lse);
  }
  return scratch[(size_t)id] - lse;
}

void finish_slot(engine_state& st, slot& s, int stop_reason) {
  job_event ev;
  ev.kind = job_event::done;
  ev.stop_reason = stop_reason;
  ev.prompt_tokens = (int)s.job->params.prompt.size();
  ev.cached_tokens = s.cached;
  ev.completion_tokens = s.gen ? ml_gen_get_stats(s.gen).n_generated : 0;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    st.m.prompt_tokens += (uint64_t)ev.prompt_tokens;
    st.m.cached_tokens += (uint64_t)ev.cached_tokens;
  }
  // The slot is free (and counted so) before the client hears the job ended.
  const std::shared_ptr<job_impl> j = s.job;
  release(st, s);
  j->push(std::move(ev));
}

void fail_slot(engine_state& st, slot& s, const std::string& message) {
  job_event ev;
  ev.kind = job_event::error;
  ev.message = message;
  ml_error err;
  ml_session_truncate(s.session, 0, &err);  // whatever it holds may be half-fed
  const std::shared_ptr<job_impl> j = s.job;
  release(st, s);
  j->push(std::move(ev));
}

bool run_step(engine_state& st) {
  st.batch_tokens.clear();
  int n_decode = 0;
  slot* prefill = nullptr;
  for (slot& s : st.slots) {
    s.fed_this_step = false;
    if (!s.job) continue;
    if (s.state == slot::phase::decode) {
      // -1: the context is full, and this step's ml_gen_next ends the generation.
      const int32_t t = ml_gen_take_pending(s.gen);
      if (t >= 0) {
        st.batch_tokens.push_back(ml_batch_token{s.session, t, 1});
        ++n_decode;
      }
      s.fed_this_step = true;
    } else if (s.state == slot::phase::prefill && (!prefill || s.assigned < prefill->assigned)) {
      prefill = &s;
    }
  }
  size_t chunk = 0;
  bool completes = false;
  if (prefill) {
    const std::vector<int32_t>& p = prefill->job->params.prompt;
    // Without a set chunk, the prompt fills what the decoding tokens leave of one forward step.
    const int limit = st.prefill_chunk > 0 ? st.prefill_chunk : std::max(1, st.batch - n_decode);
    chunk = std::min(p.size() - prefill->fed, (size_t)limit);
    completes = prefill->fed + chunk == p.size();
    for (size_t i = 0; i < chunk; ++i)
      st.batch_tokens.push_back(ml_batch_token{prefill->session, p[prefill->fed + i], completes && i + 1 == chunk});
  }
  bool any = prefill != nullptr;
  for (const slot& s : st.slots) any = any || s.fed_this_step;
  if (!any) return false;

  const double t0 = now_seconds();
  if (!st.batch_tokens.empty()) {
    ml_error err;
    if (ml_eval_batch(st.exec, st.batch_tokens.data(), st.batch_tokens.size(), nullptr, nullptr, &err) != ML_OK) {
      for (slot& s : st.slots)
        if (s.job && (s.fed_this_step || &s == prefill)) fail_slot(st, s, err.msg);
      return true;
    }
  }
  const double t1 = now_seconds();
  if (prefill) {
    prefill->fed += chunk;
    if (completes && start_gen(st, *prefill)) prefill->fed_this_step = true;
  }
  next_tokens(st);
  const double t2 = now_seconds();
  // The forward step's time splits between prefill and decode by their share of its tokens.
  const double n = (double)st.batch_tokens.size();
  const double prefill_share = n > 0 ? (double)chunk / n : 0.0;
  std::lock_guard<std::mutex> lk(st.mu);
  st.m.prefill_seconds += (t1 - t0) * prefill_share;
  st.m.decode_seconds += (t1 - t0) * (1 - prefill_share) + (t2 - t1);
  return true;
}

}  // namespace server
