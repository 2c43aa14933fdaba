// ml_bwprobe: the read bandwidth of this machine, the ceiling of a memory-bound decode
// (scripts/bench-peers divides each engine's decode GB/s by it). Each of T threads reads its own
// contiguous slice of one array much larger than the last-level cache with the widest vector
// loads the CPU has (AVX-512, AVX2, SSE2, else 64-bit words), summing them so the loads cannot be
// dropped; a pass is timed from a barrier before the first load to a barrier after the last, and
// the best of the passes is printed, GB/s = bytes / seconds (1 GB = 1e9 bytes). The array is
// written once first (each thread touches its own slice), so no pass pays page faults. The array
// is 2 MiB aligned and advised MADV_HUGEPAGE, as krafla's packed weights are (src/core/aligned.h):
// with 4 KiB pages the TLB misses alone cost a fifth of the bandwidth on a Zen 4 VM, and the
// probe is meant to be the ceiling. --small-pages leaves the advice out (the system's default;
// transparent huge pages as /sys/kernel/mm/transparent_hugepage/enabled says, printed).
// Each pass runs the loop in five prefetch modes in turn (read_loops.h: none, every line, a page
// kick of 1, 2 or 4 lines) and the row gives the fastest mode's figures, naming it and the others'
// best: which mode reads fastest depends on the CPU (on Zen 5 a page kick reads half again as much as plain
// loads), and the probe is meant to be the ceiling. --no-prefetch times plain loads only (the
// probe before 2026-12-05).
//
//   ml_bwprobe [--mib 1024] [--threads 1,2] [--passes 5] [--small-pages] [--no-prefetch]
//
// Prints Markdown, one row per thread count:
//   | threads | MiB | passes | best GB/s | median GB/s | loads (and prefetch mode) |
// Exit codes: 0 done, 2 bad arguments, 1 the array could not be allocated.
// Not part of the engine: no ISA flags at build time; the vector loops are compiled per target
// (function attributes) and picked by CPUID at run time.
#include <algorithm>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include "read_loops.h"

namespace {

using ml::bw::read_fn;
const char* const PROG = "ml_bwprobe";

// --- arguments ------------------------------------------------------------------------------------

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "%s: %s\nusage: %s [--mib N] [--threads T[,T...]] [--passes K] [--small-pages] [--no-prefetch]\n", PROG, msg, PROG);
  std::exit(2);
}

long parse_int(const char* opt, const char* s, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = s ? std::strtol(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || v < lo || v > hi) {
    std::string m = std::string(opt) + ": '" + (s ? s : "") + "' is not an integer in " + std::to_string(lo) +
                    ".." + std::to_string(hi);
    usage(m.c_str());
  }
  return v;
}

std::string first_line(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (!f) return "?";
  char buf[256] = {0};
  if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
  std::fclose(f);
  std::string s = buf;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "?" : s;
}

volatile uint64_t g_sink;  // the loads' sums end here, so no pass is optimised away

// Best and median GB/s of `passes` passes of `threads` threads over a[0, bytes), for each of the
// n_modes loops fns[0..n_modes): each pass runs every loop once, in turn, so that they see the
// same minutes of a machine whose bandwidth moves.
void measure(uint8_t* a, size_t bytes, int threads, int passes, const read_fn* fns, int n_modes, double* best,
             double* median) {
  const size_t slice = bytes / threads / 256 * 256;
  std::vector<double> secs((size_t)passes * n_modes);
  std::vector<uint64_t> sums(threads);
  std::chrono::steady_clock::time_point t0;
  std::barrier sync(threads);
  auto worker = [&](int id) {
    const uint8_t* p = a + id * slice;
    for (int k = 0; k < passes; ++k)
      for (int m = 0; m < n_modes; ++m) {
        sync.arrive_and_wait();
        if (id == 0) t0 = std::chrono::steady_clock::now();
        sync.arrive_and_wait();
        sums[id] ^= fns[m](p, slice);
        sync.arrive_and_wait();
        if (id == 0) secs[(size_t)m * passes + k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker, i);
  worker(0);
  for (auto& t : pool) t.join();
  for (uint64_t s : sums) g_sink = g_sink ^ s;
  const double total = static_cast<double>(slice) * threads;
  for (int m = 0; m < n_modes; ++m) {
    double* s = secs.data() + (size_t)m * passes;
    std::sort(s, s + passes);
    best[m] = total / s[0] / 1e9;
    median[m] = total / s[passes / 2] / 1e9;
  }
}

}  // namespace

int main(int argc, char** argv) {
  long mib = 1024, passes = 5;
  bool small_pages = false, no_prefetch = false;
  std::vector<int> threads = {1, 2};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!std::strcmp(a, "--mib")) mib = parse_int(a, v, 1, 1L << 20), ++i;
    else if (!std::strcmp(a, "--passes")) passes = parse_int(a, v, 1, 1000), ++i;
    else if (!std::strcmp(a, "--small-pages")) small_pages = true;
    else if (!std::strcmp(a, "--no-prefetch")) no_prefetch = true;
    else if (!std::strcmp(a, "--threads")) {
      if (!v) usage("--threads needs a value");
      threads.clear();
      std::string s = v, item;
      for (size_t p = 0; p <= s.size(); ++p) {
        if (p == s.size() || s[p] == ',') {
          threads.push_back(static_cast<int>(parse_int("--threads", item.c_str(), 1, 1024)));
          item.clear();
        } else {
          item += s[p];
        }
      }
      ++i;
    } else if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
      std::printf("usage: %s [--mib N] [--threads T[,T...]] [--passes K] [--small-pages] [--no-prefetch]\n", PROG);
      return 0;
    } else {
      usage((std::string("unknown argument ") + a).c_str());
    }
  }
  const size_t bytes = static_cast<size_t>(mib) << 20;
  uint8_t* a = static_cast<uint8_t*>(std::aligned_alloc(1 << 21, bytes));
  if (!a) {
    std::fprintf(stderr, "%s: cannot allocate %ld MiB\n", PROG, mib);
    return 1;
  }
  const bool advised = !small_pages && ::madvise(a, bytes, MADV_HUGEPAGE) == 0;
  const int most = *std::max_element(threads.begin(), threads.end());
  {  // first touch: each of `most` threads writes its share (a pattern, not zeros: no zero page)
    std::vector<std::thread> pool;
    const size_t share = bytes / most;
    for (int i = 0; i < most; ++i)
      pool.emplace_back([=] {
        const size_t end = i == most - 1 ? bytes : (i + 1) * share;
        for (size_t k = i * share; k < end; ++k) a[k] = static_cast<uint8_t>(k * 131u);
      });
    for (auto& t : pool) t.join();
  }
  const char* loads = nullptr;
  read_fn fns[ml::bw::kPrefetchModes];
  ml::bw::pick(&loads, fns);
  const int n_modes = no_prefetch ? 1 : ml::bw::kPrefetchModes;
  std::printf("ml_bwprobe: %ld MiB array, L3 %s, transparent huge pages: %s, array %s, %u CPUs online\n\n",
              mib, first_line("/sys/devices/system/cpu/cpu0/cache/index3/size").c_str(),
              first_line("/sys/kernel/mm/transparent_hugepage/enabled").c_str(),
              advised ? "advised MADV_HUGEPAGE" : "not advised", std::thread::hardware_concurrency());
  std::printf("| threads | MiB | passes | best GB/s | median GB/s | loads (and prefetch mode) |\n| --- | --- | --- | --- | --- | --- |\n");
  for (int t : threads) {
    double best[ml::bw::kPrefetchModes], median[ml::bw::kPrefetchModes];
    measure(a, bytes, t, static_cast<int>(passes), fns, n_modes, best, median);
    int top = 0;
    for (int m = 1; m < n_modes; ++m)
      if (best[m] > best[top]) top = m;
    std::string how = std::string(loads) + ", " + ml::bw::prefetch_name(top);
    if (n_modes > 1) {  // the other loops' best, so a reader sees how much the prefetch mattered
      how += " (";
      for (int m = 0, first = 1; m < n_modes; ++m)
        if (m != top) {
          char buf[96];
          std::snprintf(buf, sizeof buf, "%s%s %.2f", first ? "" : ", ", ml::bw::prefetch_name(m), best[m]);
          how += buf;
          first = 0;
        }
      how += ")";
    }
    std::printf("| %d | %ld | %ld | %.2f | %.2f | %s |\n", t, mib, passes, best[top], median[top], how.c_str());
    std::fflush(stdout);
  }
  std::free(a);
  return 0;
}
