// The thread pool: every worker runs each task exactly once, the caller is worker 0, and no
// wake-up is missed when workers have gone to sleep between tasks (run under ThreadSanitizer by
// the tsan preset).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/threads.h"

namespace {

struct counts {
  std::vector<std::atomic<int>> per_thread;
  std::atomic<int> calls{0};
  std::thread::id caller;
  std::atomic<bool> caller_was_zero{false};
  explicit counts(int n) : per_thread(n) {}
};

void count_task(void* ctx, int thread, int n_threads) {
  auto* c = static_cast<counts*>(ctx);
  c->per_thread[thread].fetch_add(1);
  c->calls.fetch_add(1);
  if (thread == 0 && std::this_thread::get_id() == c->caller) c->caller_was_zero = true;
  (void)n_threads;
}

}  // namespace

TEST_CASE("threads: each worker runs every task once, the caller as worker 0", "[threads]") {
  for (int n : {1, 2, 3, 4, 7}) {
    if (n > 1 && !ml_pool_threads_built()) continue;  // the single-threaded wasm build: see below
    ml_pool* pool = nullptr;
    ml_error err;
    REQUIRE(ml_pool_create(&pool, n, &err) == ML_OK);
    CHECK(ml_pool_size(pool) == n);
    counts c(n);
    c.caller = std::this_thread::get_id();
    const int runs = 500;
    for (int r = 0; r < runs; ++r) ml_pool_run(pool, count_task, &c);
    CHECK(c.calls.load() == runs * n);
    for (int i = 0; i < n; ++i) CHECK(c.per_thread[i].load() == runs);
    CHECK(c.caller_was_zero.load());
    ml_pool_destroy(pool);
  }
}

TEST_CASE("threads: no missed wake-up after workers fall asleep", "[threads]") {
  if (!ml_pool_threads_built()) return;  // no workers to wake
  ml_pool* pool = nullptr;
  ml_error err;
  REQUIRE(ml_pool_create(&pool, 4, &err) == ML_OK);
  counts c(4);
  c.caller = std::this_thread::get_id();
  for (int r = 0; r < 60; ++r) {
    // Long enough for the workers to spin out and sleep on the condition variable.
    std::this_thread::sleep_for(std::chrono::milliseconds(r % 3 == 0 ? 20 : 1));
    ml_pool_run(pool, count_task, &c);
  }
  CHECK(c.calls.load() == 60 * 4);
  ml_pool_destroy(pool);
}

TEST_CASE("threads: a null pool runs on the caller, and bad sizes are rejected", "[threads]") {
  counts c(1);
  c.caller = std::this_thread::get_id();
  ml_pool_run(nullptr, count_task, &c);
  CHECK(c.calls.load() == 1);
  CHECK(ml_pool_size(nullptr) == 1);
  ml_pool* pool = nullptr;
  ml_error err;
  CHECK(ml_pool_create(&pool, 0, &err) == ML_E_ARG);
  CHECK(pool == nullptr);
}

TEST_CASE("threads: a build without threads refuses more than one, naming ML_THREADS", "[threads]") {
  if (ml_pool_threads_built()) return;
  ml_pool* pool = nullptr;
  ml_error err;
  CHECK(ml_pool_create(&pool, 2, &err) == ML_E_ARG);
  CHECK(pool == nullptr);
  CHECK(std::string(err.msg).find("ML_THREADS") != std::string::npos);
  REQUIRE(ml_pool_create(&pool, 1, &err) == ML_OK);
  ml_pool_destroy(pool);
}
