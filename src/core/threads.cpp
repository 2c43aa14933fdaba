#include "core/threads.h"

#include <new>

#ifndef ML_THREADS
#define ML_THREADS 1
#endif

#if ML_THREADS
#include <atomic>
#include <condition_variable>
#include <mutex>

#include <pthread.h>

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

constexpr int SPIN_ITERATIONS = 20000;

}  // namespace

struct ml_pool {
  int n = 1;
  pthread_t* workers = nullptr;  // n - 1 started threads
  int started = 0;
  std::atomic<uint64_t> generation{0};
  std::atomic<int> pending{0};
  std::atomic<int> sleepers{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  ml_task_fn fn = nullptr;  // written before generation is bumped, read after it is seen
  void* ctx = nullptr;

  struct start_arg {
    ml_pool* pool;
    int id;
  };
  start_arg* args = nullptr;

  static void* entry(void* a) {
    const start_arg* s = static_cast<const start_arg*>(a);
    s->pool->worker(s->id);
    return nullptr;
  }

  void worker(int id) {
    uint64_t seen = 0;
    for (;;) {
      int spins = 0;
      while (generation.load(std::memory_order_acquire) == seen) {
        if (++spins < SPIN_ITERATIONS) {
          cpu_relax();
          continue;
        }
        std::unique_lock<std::mutex> lock(mu);
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        while (generation.load(std::memory_order_seq_cst) == seen) cv.wait(lock);
        sleepers.fetch_sub(1, std::memory_order_seq_cst);
        break;
      }
      seen = generation.load(std::memory_order_acquire);
      if (stop.load(std::memory_order_acquire)) return;
      fn(ctx, id, n);
      pending.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  // Publishes a new generation and wakes sleepers. The seq_cst bump and the seq_cst read of
  // sleepers pair with the worker's seq_cst increment and re-check under the mutex: either the
  // worker sees the new generation and does not wait, or we see it counted and notify it.
  void publish() {
    generation.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard<std::mutex> lock(mu); }
      cv.notify_all();
    }
  }
};

ml_status ml_pool_create(ml_pool** out, int n_threads, ml_error* err) {
  *out = nullptr;
  if (n_threads < 1) return ml_fail(err, ML_E_ARG, "threads: %d is below 1", n_threads);
  ml_pool* p = new (std::nothrow) ml_pool;
  if (!p) return ml_fail(err, ML_E_NOMEM, "threads: cannot allocate the pool");
  p->n = n_threads;
  p->workers = new (std::nothrow) pthread_t[n_threads];
  p->args = new (std::nothrow) ml_pool::start_arg[n_threads];
  if (!p->workers || !p->args) {
    ml_pool_destroy(p);
    return ml_fail(err, ML_E_NOMEM, "threads: cannot allocate %d thread handles", n_threads);
  }
  for (int i = 1; i < n_threads; ++i) {
    p->args[i] = {p, i};
    if (pthread_create(&p->workers[i - 1], nullptr, &ml_pool::entry, &p->args[i]) != 0) {
      ml_pool_destroy(p);
      return ml_fail(err, ML_E_NOMEM, "threads: cannot start thread %d of %d", i, n_threads);
    }
    p->started = i;
  }
  *out = p;
  return ML_OK;
}

void ml_pool_destroy(ml_pool* p) {
  if (!p) return;
  p->stop.store(true, std::memory_order_release);
  p->publish();
  for (int i = 0; i < p->started; ++i) pthread_join(p->workers[i], nullptr);
  delete[] p->workers;
  delete[] p->args;
  delete p;
}

int ml_pool_size(const ml_pool* p) { return p ? p->n : 1; }

void ml_pool_run(ml_pool* p, ml_task_fn fn, void* ctx) {
  if (!p || p->n == 1) {
    fn(ctx, 0, 1);
    return;
  }
  p->fn = fn;
  p->ctx = ctx;
  p->pending.store(p->n - 1, std::memory_order_release);
  p->publish();
  fn(ctx, 0, p->n);
  while (p->pending.load(std::memory_order_acquire) != 0) cpu_relax();
}

bool ml_pool_threads_built() { return true; }

#else  // ML_THREADS == 0: no pthreads at all

struct ml_pool {
  int n = 1;
};

ml_status ml_pool_create(ml_pool** out, int n_threads, ml_error* err) {
  *out = nullptr;
  if (n_threads != 1)
    return ml_fail(err, ML_E_ARG, "threads: %d requested, but this build has no threads (ML_THREADS=0)", n_threads);
  *out = new (std::nothrow) ml_pool;
  return *out ? ML_OK : ml_fail(err, ML_E_NOMEM, "threads: cannot allocate the pool");
}
void ml_pool_destroy(ml_pool* p) { delete p; }
int ml_pool_size(const ml_pool*) { return 1; }
void ml_pool_run(ml_pool*, ml_task_fn fn, void* ctx) { fn(ctx, 0, 1); }
bool ml_pool_threads_built() { return false; }

#endif
