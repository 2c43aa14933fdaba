#include "ops/matvec.h"

#include <atomic>

#include "kernels/bind.h"
#include "ops/parallel.h"

namespace k = ml::k::active;

namespace {

// Rows [r0, r1) of Y = W X for every token.
void run_rows(const ml_matmul_job& j, const ml_qbatch* X, int r0, int r1) {
  if (r0 >= r1) return;
  const ml_qtensor* W = j.W;
#ifdef ML_K_PACKED
  if (W->pq) {
    if (X->n_tokens == 1) {
      ml_qact x;
      x.q = X->q;
      x.d = X->d;
      x.n = X->n;
      if (W->type == ML_DT_Q4) k::matvec_q4_pk(j.y, W, &x, r0, r1);
      else k::matvec_q8_pk(j.y, W, &x, r0, r1);
    } else {
      if (W->type == ML_DT_Q4) k::matmul_q4_pk(j.y, j.ldy, W, X, r0, r1);
      else k::matmul_q8_pk(j.y, j.ldy, W, X, r0, r1);
    }
    return;
  }
#endif
  for (int tok = 0; tok < X->n_tokens; ++tok) {
    ml_qact x;
    x.q = X->q + (size_t)tok * X->n;
    x.d = X->d + (size_t)tok * (X->n / ML_QK);
    x.n = X->n;
    float* y = j.y + (size_t)tok * j.ldy;
    if (W->type == ML_DT_Q4) k::matvec_q4(y, W, &x, r0, r1);
    else k::matvec_q8(y, W, &x, r0, r1);
  }
}

// g[r] = act(g[r]) * u[r] for rows [r0, r1) of every token (the kernels are element-wise and
// bit-exact across lengths, so a split by rows gives the same values as one call per token).
void run_gate(const ml_gate_job& gj, int n_tokens, int r0, int r1) {
  if (r0 >= r1) return;
  for (int t = 0; t < n_tokens; ++t) {
    float* g = gj.g + (size_t)t * gj.ld + r0;
    const float* u = gj.u + (size_t)t * gj.ld + r0;
    if (gj.gelu) k::gelu_mul(g, u, r1 - r0);
    else k::silu_mul(g, u, r1 - r0);
  }
}

// One or two matrices with the same rows, computed chunk by chunk, and an optional gate over
// each chunk once both are done.
struct unit {
  const ml_matmul_job* first;
  const ml_matmul_job* second;  // or null
  const ml_gate_job* gate;      // or null (needs second)
  int rows;
};

constexpr int kMaxUnits = 4;
constexpr int kMaxStealThreads = 64;  // more threads: each keeps to its own rows
// Each thread's region is cut into this many chunks. A thread claims half of what is left of its
// own region at a time (few restarts of its weight stream); one that has run out takes single
// chunks from the back of the others', so threads finish at most a chunk apart.
constexpr int kChunksPerThread = 16;

// A region's unclaimed chunks [front, back), alone on its cache line.
struct alignas(64) region_counter {
  std::atomic<uint64_t> range;  // front | back << 32, set by run_group for the counters a pass uses
};

// Claims chunks [*c0, *c1) of a region: the owner half of what is left from the front (at least
// one), another thread one from the back. False when none is left.
bool claim_chunks(std::atomic<uint64_t>& range, bool owner, int* c0, int* c1) {
  uint64_t r = range.load(std::memory_order_relaxed);
  for (;;) {
    const uint32_t front = (uint32_t)r, back = (uint32_t)(r >> 32);
    if (front >= back) return false;
    const uint32_t take = owner ? (back - front + 1) / 2 : 1;
    const uint32_t f = owner ? front + take : front, b = owner ? back : back - 1;
    if (range.compare_exchange_weak(r, (uint64_t)f | (uint64_t)b << 32, std::memory_order_relaxed)) {
      *c0 = (int)(owner ? front : back - 1);
      *c1 = *c0 + (int)take;
      return true;
    }
  }
}

struct group_task {
  unit units[kMaxUnits];
  int n_units;
  const ml_qbatch* X;
  region_counter* counters;  // n_units * n_threads, or null: no stealing
};

// Thread i of n owns the i-th of n equal runs of pack groups of each unit's rows, cut into
// chunks of whole groups; which rows a chunk holds depends only on the shapes and the thread
// count, and every row is computed by the same kernel whichever thread runs its chunk.
struct split {
  int region_rows, chunk_rows, chunks;
};

split split_rows(int rows, int n_threads) {
  const int g = k::pack.g > 4 ? k::pack.g : 4;
  const int groups = (rows + g - 1) / g;
  const int region_groups = (groups + n_threads - 1) / n_threads;
  const int chunk_groups = (region_groups + kChunksPerThread - 1) / kChunksPerThread;
  return split{region_groups * g, chunk_groups * g, (region_groups + chunk_groups - 1) / chunk_groups};
}

// Chunks [c0, c1) of a region, as one run of rows: each matrix's rows in one call, then the gate.
void run_chunks(const unit& u, const ml_qbatch* X, const split& sp, int region, int c0, int c1) {
  const int r0 = region * sp.region_rows + c0 * sp.chunk_rows;
  const int region_end = (region + 1) * sp.region_rows < u.rows ? (region + 1) * sp.region_rows : u.rows;
  const int r1 = r0 + (c1 - c0) * sp.chunk_rows < region_end ? r0 + (c1 - c0) * sp.chunk_rows : region_end;
  if (r0 >= r1) return;
  run_rows(*u.first, X, r0, r1);
  if (u.second) run_rows(*u.second, X, r0, r1);
  if (u.gate) run_gate(*u.gate, X->n_tokens, r0, r1);
}

void group_worker(void* ctx, int thread, int n_threads) {
  const group_task& t = *static_cast<const group_task*>(ctx);
  for (int i = 0; i < t.n_units; ++i) {
    const unit& u = t.units[i];
    const split sp = split_rows(u.rows, n_threads);
    if (!t.counters) {
      run_chunks(u, t.X, sp, thread, 0, sp.chunks);
      continue;
    }
    // Our own region first, then what the others have not claimed yet.
    for (int j = 0; j < n_threads; ++j) {
      const int region = (thread + j) % n_threads;
      std::atomic<uint64_t>& range = t.counters[i * n_threads + region].range;
      int c0, c1;
      while (claim_chunks(range, j == 0, &c0, &c1)) run_chunks(u, t.X, sp, region, c0, c1);
    }
  }
}

void run_group(ml_pool* pool, group_task* t) {
  double macs = 0;
  for (int i = 0; i < t->n_units; ++i) {
    const unit& u = t->units[i];
    macs += (double)u.rows * u.first->W->cols * t->X->n_tokens;
    if (u.second) macs += (double)u.rows * u.second->W->cols * t->X->n_tokens;
  }
  const int n_threads = ml_pool_size(pool);
  if (n_threads == 1 || macs < ML_PARALLEL_MIN_MACS) {
    t->counters = nullptr;
    group_worker(t, 0, 1);
    return;
  }
  region_counter counters[kMaxUnits * kMaxStealThreads];  // 16 KB of stack, only the used ones zeroed
  t->counters = nullptr;
  if (n_threads <= kMaxStealThreads) {
    for (int i = 0; i < t->n_units; ++i) {
      const uint64_t chunks = (uint64_t)split_rows(t->units[i].rows, n_threads).chunks;
      for (int r = 0; r < n_threads; ++r)
        counters[i * n_threads + r].range.store(chunks << 32, std::memory_order_relaxed);  // [0, chunks)
    }
    t->counters = counters;
  }
  ml_pool_run(pool, group_worker, t);
}

}  // namespace

void ml_op_matmul_group(ml_pool* pool, const ml_matmul_job* jobs, int n_jobs, const ml_qbatch* X) {
  for (int i0 = 0; i0 < n_jobs; i0 += kMaxUnits) {
    group_task t{};
    t.X = X;
    for (int i = i0; i < n_jobs && i < i0 + kMaxUnits; ++i) t.units[t.n_units++] = unit{&jobs[i], nullptr, nullptr, jobs[i].W->rows};
    run_group(pool, &t);
  }
}

void ml_op_matmul(ml_pool* pool, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X) {
  const ml_matmul_job j{Y, ldy, W};
  ml_op_matmul_group(pool, &j, 1, X);
}

void ml_op_gated_up(ml_pool* pool, float* G, float* U, int ld, const ml_qtensor* W_gate,
                    const ml_qtensor* W_up, const ml_qbatch* X, bool gelu) {
  const ml_matmul_job up{U, ld, W_up}, gate_proj{G, ld, W_gate};
  const ml_gate_job gate{G, U, ld, gelu};
  group_task t{};
  t.X = X;
  t.units[0] = unit{&up, &gate_proj, &gate, W_gate->rows < W_up->rows ? W_gate->rows : W_up->rows};
  t.n_units = 1;
  run_group(pool, &t);
}

void ml_op_matvec(ml_pool* pool, float* y, const ml_qtensor* W, const ml_qact* x) {
  ml_qbatch b;
  b.q = x->q;
  b.d = x->d;
  b.n = x->n;
  b.n_tokens = 1;
  ml_op_matmul(pool, y, W->rows, W, &b);
}

ml_qact ml_op_quantize(int8_t* q, float* d, const float* x, int n) {
  k::quantize_q8(q, d, x, n);
  ml_qact a;
  a.q = q;
  a.d = d;
  a.n = n;
  return a;
}

ml_pack_params ml_op_pack_params() {
#ifdef ML_K_PACKED
  return k::pack;
#else
  return ml_pack_params{};
#endif
}
