#include "bench/read_probe.h"

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#define ML_READ_PROBE 1
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include "bwprobe/read_loops.h"
#endif

namespace ml::bench {

#if ML_READ_PROBE

struct read_probe::impl {
  uint8_t* a = nullptr;
  size_t slice = 0;  // bytes per thread, a multiple of 256
  int threads = 1;
  ml::bw::read_fn fn = nullptr;
  const char* loads = "";
  int mode = 0;  // the prefetch mode read_seconds uses
  std::barrier<> sync{1};
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  uint64_t sink = 0;

  explicit impl(int t) : threads(t), sync(t) {}
  ~impl() {
    if (!workers.empty()) {
      stop.store(true, std::memory_order_release);
      sync.arrive_and_wait();  // the workers wake, see stop and leave
      for (auto& w : workers) w.join();
    }
    std::free(a);
  }
  void worker(int id) {
    uint64_t s = 0;
    for (;;) {
      sync.arrive_and_wait();
      if (stop.load(std::memory_order_acquire)) break;
      s ^= fn(a + (size_t)id * slice, slice);
      sync.arrive_and_wait();
    }
    volatile uint64_t keep = s;  // the loads' sums end here, so no pass is optimised away
    (void)keep;
  }
};

read_probe::read_probe() = default;
read_probe::~read_probe() = default;

read_probe::started read_probe::start(size_t bytes, int threads, std::string* why) {
  if (threads < 1 || bytes == 0) return *why = "the probe needs bytes and threads", started::unsupported;
  p_ = std::make_unique<impl>(threads);
  p_->slice = (bytes / (size_t)threads + 255) / 256 * 256;
  const size_t total = (p_->slice * (size_t)threads + ((size_t)1 << 21) - 1) / ((size_t)1 << 21) * ((size_t)1 << 21);
  p_->a = static_cast<uint8_t*>(std::aligned_alloc((size_t)1 << 21, total));
  if (!p_->a) {
    *why = "cannot allocate " + std::to_string(total >> 20) + " MiB for the probe";
    p_.reset();
    return started::no_memory;
  }
  ::madvise(p_->a, total, MADV_HUGEPAGE);  // as the packed weights are; a refusal only costs speed
  for (size_t k = 0; k < total; ++k) p_->a[k] = static_cast<uint8_t>(k * 131u);  // no zero page
  ml::bw::read_fn fns[ml::bw::kPrefetchModes];
  ml::bw::pick(&p_->loads, fns);
  for (int i = 1; i < threads; ++i) p_->workers.emplace_back([this, i] { p_->worker(i); });
  // The fastest prefetch mode of two passes each (read_loops.h: it depends on the CPU). fn is
  // only read by the workers after the barrier that follows each change.
  double best = 0;
  for (int round = 0; round < 2; ++round)
    for (int m = 0; m < ml::bw::kPrefetchModes; ++m) {
      p_->fn = fns[m];
      const double s = read_seconds();
      if (best == 0 || s < best) best = s, p_->mode = m;
    }
  p_->fn = fns[p_->mode];
  return started::ok;
}

double read_probe::read_seconds() {
  impl& m = *p_;
  m.sync.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  m.sink ^= m.fn(m.a, m.slice);
  m.sync.arrive_and_wait();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

size_t read_probe::bytes() const { return p_ ? p_->slice * (size_t)p_->threads : 0; }
std::string read_probe::loads() const {
  return p_ ? std::string(p_->loads) + ", " + ml::bw::prefetch_name(p_->mode) : std::string();
}

#else  // no threads or no madvise: the option is refused

struct read_probe::impl {};
read_probe::read_probe() = default;
read_probe::~read_probe() = default;
read_probe::started read_probe::start(size_t, int, std::string* why) {
  *why = "the interleaved probe is built for Linux only";
  return started::unsupported;
}
double read_probe::read_seconds() { return 0; }
size_t read_probe::bytes() const { return 0; }
std::string read_probe::loads() const { return std::string(); }

#endif

}  // namespace ml::bench
