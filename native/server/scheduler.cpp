// The scheduler (scheduler.h): the slots, the queue and the one engine thread. This file holds the
// threads' side (submit, cancel, drain, the engine loop) and the slot choice (longest common
// prefix); sched_step.cpp runs one batched step.
#include <algorithm>
#include <thread>

#include "sched_internal.h"

namespace server {

bool job_impl::next(job_event& ev, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return false;
  ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

void job_impl::cancel() {
  cancelled_.store(true, std::memory_order_release);
  wake_->notify();
}

void job_impl::push(job_event ev) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

namespace {

class scheduler_impl final : public scheduler {
 public:
  scheduler_impl() : wake_(std::make_shared<wakeup>()) {}
  ~scheduler_impl() override;
  bool init(const ml_model* m, const scheduler_options& o, std::string* err);

  std::shared_ptr<job> submit(job_params p, std::string* err) override;
  scheduler_metrics metrics() const override;
  int slot_ctx() const override { return st_.slot_ctx; }
  void drain(std::chrono::milliseconds timeout) override;

 private:
  void loop();
  void admit();
  slot& choose_slot(const std::vector<int32_t>& prompt, size_t* keep);
  void assign(slot& s, std::shared_ptr<job_impl> j, size_t keep);
  bool idle_locked() const { return st_.queue.empty() && st_.busy == 0; }

  mutable engine_state st_;
  std::shared_ptr<wakeup> wake_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  int queue_bound_ = 0;
};

// The number of leading tokens a and b share.
size_t common_prefix(const int32_t* a, size_t na, const std::vector<int32_t>& b) {
  size_t n = 0;
  const size_t lim = std::min(na, b.size());
  while (n < lim && a[n] == b[n]) ++n;
  return n;
}

bool scheduler_impl::init(const ml_model* m, const scheduler_options& o, std::string* err) {
  auto fail = [&](const std::string& msg) {
    if (err) *err = msg;
    return false;
  };
  if (o.parallel < 1 || o.parallel > 256) return fail("parallel: " + std::to_string(o.parallel) + " slots, not in 1..256");
  if (o.ctx < 0) return fail("ctx: " + std::to_string(o.ctx) + " is negative");
  if (o.queue < 0) return fail("queue: " + std::to_string(o.queue) + " is negative");
  if (o.threads < 0 || o.threads > 1024) return fail("threads: " + std::to_string(o.threads) + " not in 0..1024");
  if (o.batch < 0 || o.batch > 128) return fail("batch: " + std::to_string(o.batch) + " not in 0..128");
  if (o.prefill_chunk < 0) return fail("prefill_chunk: " + std::to_string(o.prefill_chunk) + " is negative");
  if (o.kv != ML_KV_F32 && o.kv != ML_KV_Q8 && o.kv != ML_KV_F16) return fail("kv: unknown cache type " + std::to_string(o.kv));
  st_.model = m;
  st_.tok = ml_model_tokenizer(m);
  st_.info = ml_model_get_info(m);
  ml_exec_params ep{};
  ep.n_threads = engine_threads(o.threads);
  ep.batch = o.batch;
  ml_error e;
  if (ml_exec_create(&st_.exec, m, &ep, &e) != ML_OK) return fail(e.msg);
  st_.slots.resize((size_t)o.parallel);
  ml_session_params sp{};
  sp.ctx = o.ctx;
  sp.kv = o.kv;
  for (slot& s : st_.slots)
    if (ml_session_create(&s.session, m, &sp, &e) != ML_OK) return fail(e.msg);
  st_.slot_ctx = ml_session_ctx(st_.slots[0].session);
  st_.batch = ml_exec_batch(st_.exec);
  st_.prefill_chunk = o.prefill_chunk;
  queue_bound_ = o.queue;
  st_.m.slots = o.parallel;
  thread_ = std::thread([this] { loop(); });
  return true;
}

scheduler_impl::~scheduler_impl() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(st_.mu);
      st_.draining = true;
      st_.cancel_all = true;
    }
    stop_.store(true);
    wake_->notify();
    thread_.join();
  }
  for (slot& s : st_.slots) {
    ml_gen_free(s.gen);
    ml_session_free(s.session);
  }
  ml_exec_free(st_.exec);
}

std::shared_ptr<job> scheduler_impl::submit(job_params p, std::string* err) {
  auto fail = [&](const std::string& msg) {
    if (err) *err = msg;
    return std::shared_ptr<job>();
  };
  if (p.prompt.empty()) return fail("the prompt is empty: it needs at least one token");
  if (p.prompt.size() > (size_t)st_.slot_ctx)
    return fail("the prompt has " + std::to_string(p.prompt.size()) + " tokens, more than the context of " +
                std::to_string(st_.slot_ctx));
  for (int32_t id : p.prompt)
    if (id < 0 || id >= st_.info.vocab_size)
      return fail("token id " + std::to_string(id) + " is outside the vocabulary 0.." +
                  std::to_string(st_.info.vocab_size - 1));
  auto j = std::make_shared<job_impl>(std::move(p), wake_);
  {
    std::lock_guard<std::mutex> lk(st_.mu);
    if (st_.draining) return fail("the server is shutting down");
    const size_t capacity = st_.slots.size() + (size_t)queue_bound_;
    if (st_.queue.size() + (size_t)st_.busy >= capacity)
      return fail("every slot is busy and the queue is full (" + std::to_string(st_.queue.size()) + " waiting)");
    st_.queue.push_back(j);
    ++st_.m.requests;
    st_.m.queue_depth = (int)st_.queue.size();
  }
  wake_->notify();
  return j;
}

scheduler_metrics scheduler_impl::metrics() const {
  std::lock_guard<std::mutex> lk(st_.mu);
  return st_.m;
}

void scheduler_impl::drain(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(st_.mu);
  st_.draining = true;
  if (st_.changed.wait_for(lk, timeout, [&] { return idle_locked(); })) return;
  st_.cancel_all = true;
  lk.unlock();
  wake_->notify();
  lk.lock();
  // Cancelled jobs end at the engine's next step; a step is bounded, but not by us: wait a while.
  st_.changed.wait_for(lk, std::chrono::seconds(30), [&] { return idle_locked(); });
}

// The free slot whose tokens share the longest prefix with prompt (ties: the least recently
// used), and the tokens it keeps: at least one prompt token must be fed anew to get logits, and a
// recurrent state keeps all it holds or nothing.
slot& scheduler_impl::choose_slot(const std::vector<int32_t>& prompt, size_t* keep) {
  slot* best = nullptr;
  size_t best_keep = 0;
  for (slot& s : st_.slots) {
    if (s.job) continue;
    const size_t held = (size_t)ml_session_pos(s.session);
    size_t k = held ? common_prefix(ml_session_tokens(s.session), held, prompt) : 0;
    if (k == prompt.size()) --k;
    if (st_.info.recurrent && k != held) k = 0;
    if (!best || k > best_keep || (k == best_keep && s.last_used < best->last_used)) {
      best = &s;
      best_keep = k;
    }
  }
  *keep = best_keep;
  return *best;
}

void scheduler_impl::assign(slot& s, std::shared_ptr<job_impl> j, size_t keep) {
  ml_error e;
  if (ml_session_truncate(s.session, (int)keep, &e) != ML_OK) {  // keep is within [0, pos]: cannot fail
    s.job = std::move(j);
    fail_slot(st_, s, e.msg);
    return;
  }
  s.job = std::move(j);
  s.state = slot::phase::prefill;
  s.fed = keep;
  s.cached = (int)keep;
  s.prev = -1;
  s.assigned = ++st_.tick;
}

// Between steps: ends cancelled jobs, drops cancelled queued ones, and gives free slots to the
// oldest waiting jobs.
void scheduler_impl::admit() {
  bool cancel_all;
  {
    std::lock_guard<std::mutex> lk(st_.mu);
    cancel_all = st_.cancel_all;
  }
  for (slot& s : st_.slots)
    if (s.job && (cancel_all || s.job->cancelled())) {
      if (s.gen) {
        const char* text;
        size_t len;
        ml_gen_cancel(s.gen, &text, &len);  // its held-back text goes nowhere: the client is gone
      }
      finish_slot(st_, s, ML_STOP_CALLBACK);
    }
  std::vector<std::shared_ptr<job_impl>> dropped, starting;
  {
    std::lock_guard<std::mutex> lk(st_.mu);
    for (auto it = st_.queue.begin(); it != st_.queue.end();) {
      if (cancel_all || (*it)->cancelled()) {
        dropped.push_back(std::move(*it));
        it = st_.queue.erase(it);
      } else {
        ++it;
      }
    }
    while (!st_.queue.empty() && st_.busy < (int)st_.slots.size()) {
      starting.push_back(std::move(st_.queue.front()));
      st_.queue.pop_front();
      ++st_.busy;
    }
    st_.m.queue_depth = (int)st_.queue.size();
    st_.m.active_slots = st_.busy;
    if (!dropped.empty()) st_.changed.notify_all();
  }
  for (auto& j : dropped) {
    job_event ev;
    ev.kind = job_event::done;
    ev.stop_reason = ML_STOP_CALLBACK;
    ev.prompt_tokens = (int)j->params.prompt.size();
    j->push(std::move(ev));
  }
  for (auto& j : starting) {
    size_t keep = 0;
    slot& s = choose_slot(j->params.prompt, &keep);
    assign(s, std::move(j), keep);
  }
}

void scheduler_impl::loop() {
  for (;;) {
    admit();
    if (run_step(st_)) continue;
    std::unique_lock<std::mutex> lk(wake_->mu);
    if (stop_.load()) {
      std::lock_guard<std::mutex> lk2(st_.mu);
      if (idle_locked()) break;
    }
    // A bounded wait: a lost wakeup costs at most this much.
    wake_->cv.wait_for(lk, std::chrono::milliseconds(200), [&] { return wake_->pending || stop_.load(); });
    wake_->pending = false;
  }
}

}  // namespace

int engine_threads(int requested) {
  if (!ml_build_threads()) return 1;
  return requested > 0 ? requested : (int)std::max(1u, std::thread::hardware_concurrency());
}

std::unique_ptr<scheduler> scheduler::create(const ml_model* m, const scheduler_options& o, std::string* err) {
  auto s = std::make_unique<scheduler_impl>();
  if (!s->init(m, o, err)) return nullptr;
  return s;
}

}  // namespace server
