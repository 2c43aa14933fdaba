// The engine side of ml_server: a fixed set of slots (one ml_session each) over one model, and one
// engine thread that runs them all. Each step it puts the pending token of every decoding slot and
// a chunk of at most one waiting prompt into one ml_eval_batch (the weights are read once for all
// clients: continuous batching), then samples each slot through its own ml_gen. A slot is chosen
// by the longest common prefix of its tokens with the new prompt, whose KV is kept (a recurrent
// model keeps it only when the prompt continues exactly what the slot holds). Every reply is
// byte-identical to the same request served alone: the engine's logits do not depend on the batch.
//
// Threads: submit/cancel/metrics from any thread (the HTTP handlers); a job's events are read by
// the one thread that submitted it.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "krafla.h"

namespace server {

// What a request asks of the engine (the API layer has tokenized the prompt).
struct job_params {
  std::vector<int32_t> prompt;
  int max_tokens = -1;  // -1: until EOS or the context ends
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  int top_k = 0;
  uint64_t seed = 0;
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  std::vector<std::string> stop;
  int logprobs = -1;  // -1: none; else the top alternatives per token
};

struct job_token {
  int32_t id = -1;
  std::string piece;  // the token's own bytes (ml_token_piece), for logprobs
  double logprob = 0;
  std::vector<std::pair<int32_t, double>> top;  // when job_params::logprobs > 0, most probable first
};

// One step of a job, in order: deltas, then exactly one final event (done or error).
struct job_event {
  enum kind_t { delta, done, error } kind = delta;
  std::string text;               // released text (whole UTF-8 characters; stop strings held back)
  std::vector<job_token> tokens;  // the tokens sampled in this step (with logprobs when asked)
  int stop_reason = 0;            // done: ml_stop_reason (LENGTH, EOS, CONTEXT, STRING, CALLBACK)
  int prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;  // done
  std::string message;            // error
};

class job {
 public:
  virtual ~job() = default;
  // Waits up to timeout for the next event; false on timeout.
  virtual bool next(job_event& ev, std::chrono::milliseconds timeout) = 0;
  // The client went away or gave up: the engine stops the job at its next step, frees its slot
  // (keeping its KV for prefix reuse) and sends a done event (ML_STOP_CALLBACK).
  virtual void cancel() = 0;
};

struct scheduler_options {
  int parallel = 4;      // slots (sessions)
  int ctx = 0;           // positions per slot; 0 = the model's ctx
  int kv = 0;            // ml_kv_type
  int threads = 0;       // exec threads; 0 = hardware
  int batch = 0;         // tokens per forward step; 0 = the engine's default
  int queue = 64;        // requests that may wait for a slot; beyond: submit refuses (HTTP 503)
  int prefill_chunk = 0; // prompt tokens per step while others decode; 0 = the batch
};

// The engine threads for a requested count (scheduler_options::threads, ml_server's -t): 0 = every
// core the system reports; 1 in a build without threads. Both the load (packing) and the executor
// use it.
int engine_threads(int requested);

struct scheduler_metrics {
  uint64_t requests = 0, prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
  int queue_depth = 0, active_slots = 0, slots = 0;
  double prefill_seconds = 0, decode_seconds = 0;  // engine time spent, for tok/s
};

class scheduler {
 public:
  virtual ~scheduler() = default;
  // nullptr with *err set when the model, the options or the memory do not allow it.
  static std::unique_ptr<scheduler> create(const ml_model* m, const scheduler_options& o, std::string* err);
  // nullptr with *err when the queue is full (503) or the server is draining; the prompt must fit
  // the slot's context (the caller checks: context_length_exceeded).
  virtual std::shared_ptr<job> submit(job_params p, std::string* err) = 0;
  virtual scheduler_metrics metrics() const = 0;
  virtual int slot_ctx() const = 0;
  // Stops accepting; waits up to timeout for running and queued jobs, then cancels the rest.
  virtual void drain(std::chrono::milliseconds timeout) = 0;
};

}  // namespace server
