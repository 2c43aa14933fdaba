// The scheduler's inside (scheduler.h): a job's event queue, the slots, and the engine state that
// scheduler.cpp (threads, queue, slot choice) and sched_step.cpp (one batched step) share.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "scheduler.h"

namespace server {

// What the engine thread waits on: a new job, a cancel, a drain. Shared with the jobs, which may
// outlive the scheduler.
struct wakeup {
  std::mutex mu;
  std::condition_variable cv;
  bool pending = false;
  void notify() {
    {
      std::lock_guard<std::mutex> lk(mu);
      pending = true;
    }
    cv.notify_one();
  }
};

class job_impl final : public job {
 public:
  job_impl(job_params p, std::shared_ptr<wakeup> w) : params(std::move(p)), wake_(std::move(w)) {}
  bool next(job_event& ev, std::chrono::milliseconds timeout) override;
  void cancel() override;

  // Engine side.
  void push(job_event ev);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  const job_params params;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<job_event> events_;
  std::atomic<bool> cancelled_{false};
  std::shared_ptr<wakeup> wake_;
};

// One session and the job it serves. Only the engine thread touches a slot.
struct slot {
  ml_session* session = nullptr;
  std::shared_ptr<job_impl> job;  // null: free (its KV stays for prefix reuse)
  enum class phase { idle, prefill, decode } state = phase::idle;
  size_t fed = 0;        // prompt tokens in the session (prefill: the next one to feed is prompt[fed])
  int cached = 0;        // prompt tokens kept from before (prefix reuse)
  ml_gen* gen = nullptr;
  bool fed_this_step = false;
  int32_t prev = -1;     // the last token of the sequence (ml_token_piece's prev for logprobs)
  uint64_t assigned = 0; // order of assignment: the oldest prefill goes first
  uint64_t last_used = 0;
};

// The engine's state: the model, the executor and the slots (engine thread only), plus the queue
// and counters under mu.
struct engine_state {
  const ml_model* model = nullptr;
  const ml_tokenizer* tok = nullptr;
  ml_model_info info{};
  ml_exec* exec = nullptr;
  std::vector<slot> slots;
  int slot_ctx = 0, prefill_chunk = 0, batch = 0;
  uint64_t tick = 0;

  // Under mu.
  std::mutex mu;
  std::deque<std::shared_ptr<job_impl>> queue;
  std::condition_variable changed;  // a slot freed or the queue moved (drain waits on it)
  int busy = 0;                      // slots holding a job
  bool draining = false;             // submit refuses
  bool cancel_all = false;           // the engine cancels every job (drain's timeout, shutdown)
  scheduler_metrics m{};

  // Scratch of one step (engine thread).
  std::vector<ml_batch_token> batch_tokens;
  std::vector<slot*> step_slots;  // the slots sampled this step, their generations and results
  std::vector<ml_gen*> step_gens;
  std::vector<ml_gen_step> step_results;
  std::vector<double> probs;
  std::vector<int32_t> order;
};

// sched_step.cpp: one step over the busy slots (a prefill chunk of at most one prompt and one
// token of every decoding slot), events sent to the jobs. Returns false when there was nothing to
// run.
bool run_step(engine_state& st);
// Ends the slot's job with a done event (stop_reason) and frees the slot.
void finish_slot(engine_state& st, slot& s, int stop_reason);
// Sends an error event and frees the slot; its session starts over from position 0.
void fail_slot(engine_state& st, slot& s, const std::string& message);

// The log-softmax of logits (in double) at id, and the k most probable ids (highest first, ties by
// lower id). probs and order are scratch.
double log_softmax_top(const float* logits, int vocab, int32_t id, int k, std::vector<std::pair<int32_t, double>>* top,
                       std::vector<double>& scratch, std::vector<int32_t>& order);

}  // namespace server
