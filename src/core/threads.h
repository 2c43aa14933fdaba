// A pool of worker threads for data-parallel ops. The caller is worker 0; workers 1..n-1 wait
// on a generation counter, spinning about 20 000 pause iterations before they sleep on a
// condition variable. A sequentially consistent sleepers counter makes ml_pool_run wake every
// sleeping worker, so no wake-up is missed.
// Contract: ml_pool_run(fn) calls fn(ctx, i, n) once for every i in [0, n) -- i = 0 on the
// calling thread -- and returns when all calls have returned. Work is split by the callers in
// a fixed way, so results never depend on which thread is faster. Built with ML_THREADS=0 (the
// single-threaded wasm build) all pthread code is compiled out and n is always 1.
#pragma once
#include "core/status.h"

struct ml_pool;

typedef void (*ml_task_fn)(void* ctx, int thread, int n_threads);

// Starts n_threads - 1 workers. ML_E_ARG when n_threads < 1 or, in a build without threads,
// n_threads > 1; ML_E_NOMEM when a thread cannot be started.
ml_status ml_pool_create(ml_pool** out, int n_threads, ml_error* err);
void ml_pool_destroy(ml_pool* p);
int ml_pool_size(const ml_pool* p);  // 1 for a null pool

// Runs fn on every worker, the caller included. A null pool runs fn(ctx, 0, 1).
void ml_pool_run(ml_pool* p, ml_task_fn fn, void* ctx);

// Whether this build has threads (ML_THREADS).
bool ml_pool_threads_built();
