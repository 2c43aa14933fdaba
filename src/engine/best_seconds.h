// The timing loop of ml_bench's kernel table (kernel_bench.cpp, sampler_bench.cpp).
#pragma once
#include <algorithm>
#include <chrono>

namespace ml::bench {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best seconds per call of fn over reps repetitions of at least min_seconds each.
template <class F>
double best_seconds(F&& fn, int reps, double min_seconds) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    long iters = 0;
    const double t0 = now();
    double t = t0;
    do {
      fn();
      ++iters;
      t = now();
    } while (t - t0 < min_seconds);
    best = std::min(best, (t - t0) / (double)iters);
  }
  return best;
}

}  // namespace ml::bench
