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
//
//   ml_bwprobe [--mib 1024] [--threads 1,2] [--passes 5] [--small-pages]
//
// Prints Markdown, one row per thread count:
//   | threads | MiB | passes | best GB/s | median GB/s | loads |
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

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ML_BW_X86 1
#endif

namespace {

const char* const PROG = "ml_bwprobe";

// --- the read loops: bytes n (a multiple of 256) from p (64-byte aligned) -----------------------

uint64_t read_words(const uint8_t* p, size_t n) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i < n / 8; i += 4) {
    a += w[i], b += w[i + 1], c += w[i + 2], d += w[i + 3];
  }
  return a ^ b ^ c ^ d;
}

#ifdef ML_BW_X86
__attribute__((target("sse2"))) uint64_t read_sse2(const uint8_t* p, size_t n) {
  __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 64) {
    a = _mm_add_epi64(a, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i)));
    b = _mm_add_epi64(b, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 16)));
    c = _mm_add_epi64(c, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 32)));
    d = _mm_add_epi64(d, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 48)));
  }
  a = _mm_xor_si128(_mm_xor_si128(a, b), _mm_xor_si128(c, d));
  uint64_t out[2];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), a);
  return out[0] ^ out[1];
}

__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 128) {
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  uint64_t out[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), a);
  return out[0] ^ out[1] ^ out[2] ^ out[3];
}

__attribute__((target("avx512f"))) uint64_t read_avx512(const uint8_t* p, size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 256) {
    a = _mm512_add_epi64(a, _mm512_load_si512(p + i));
    b = _mm512_add_epi64(b, _mm512_load_si512(p + i + 64));
    c = _mm512_add_epi64(c, _mm512_load_si512(p + i + 128));
    d = _mm512_add_epi64(d, _mm512_load_si512(p + i + 192));
  }
  a = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
  uint64_t out[8];
  _mm512_storeu_si512(out, a);
  return out[0] ^ out[1] ^ out[2] ^ out[3] ^ out[4] ^ out[5] ^ out[6] ^ out[7];
}
#endif

using read_fn = uint64_t (*)(const uint8_t*, size_t);

// The widest loop this CPU runs, and its name.
read_fn pick(const char** name) {
#ifdef ML_BW_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return *name = "avx512 (64-byte loads)", read_avx512;
  if (__builtin_cpu_supports("avx2")) return *name = "avx2 (32-byte loads)", read_avx2;
  if (__builtin_cpu_supports("sse2")) return *name = "sse2 (16-byte loads)", read_sse2;
#endif
  *name = "64-bit words";
  return read_words;
}

// --- arguments ------------------------------------------------------------------------------------

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "%s: %s\nusage: %s [--mib N] [--threads T[,T...]] [--passes K] [--small-pages]\n", PROG, msg, PROG);
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

// Best and median GB/s of `passes` passes of `threads` threads over a[0, bytes).
void measure(uint8_t* a, size_t bytes, int threads, int passes, read_fn fn, double* best, double* median) {
  const size_t slice = bytes / threads / 256 * 256;
  std::vector<double> secs(passes);
  std::vector<uint64_t> sums(threads);
  std::chrono::steady_clock::time_point t0;
  std::barrier sync(threads);
  auto worker = [&](int id) {
    const uint8_t* p = a + id * slice;
    for (int k = 0; k < passes; ++k) {
      sync.arrive_and_wait();
      if (id == 0) t0 = std::chrono::steady_clock::now();
      sync.arrive_and_wait();
      sums[id] ^= fn(p, slice);
      sync.arrive_and_wait();
      if (id == 0) secs[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker, i);
  worker(0);
  for (auto& t : pool) t.join();
  for (uint64_t s : sums) g_sink = g_sink ^ s;
  const double total = static_cast<double>(slice) * threads;
  std::sort(secs.begin(), secs.end());
  *best = total / secs.front() / 1e9;
  *median = total / secs[secs.size() / 2] / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  long mib = 1024, passes = 5;
  bool small_pages = false;
  std::vector<int> threads = {1, 2};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!std::strcmp(a, "--mib")) mib = parse_int(a, v, 1, 1L << 20), ++i;
    else if (!std::strcmp(a, "--passes")) passes = parse_int(a, v, 1, 1000), ++i;
    else if (!std::strcmp(a, "--small-pages")) small_pages = true;
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
      std::printf("usage: %s [--mib N] [--threads T[,T...]] [--passes K] [--small-pages]\n", PROG);
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
  const read_fn fn = pick(&loads);
  std::printf("ml_bwprobe: %ld MiB array, L3 %s, transparent huge pages: %s, array %s, %u CPUs online\n\n",
              mib, first_line("/sys/devices/system/cpu/cpu0/cache/index3/size").c_str(),
              first_line("/sys/kernel/mm/transparent_hugepage/enabled").c_str(),
              advised ? "advised MADV_HUGEPAGE" : "not advised", std::thread::hardware_concurrency());
  std::printf("| threads | MiB | passes | best GB/s | median GB/s | loads |\n| --- | --- | --- | --- | --- | --- |\n");
  for (int t : threads) {
    double best = 0, median = 0;
    measure(a, bytes, t, static_cast<int>(passes), fn, &best, &median);
    std::printf("| %d | %ld | %ld | %.2f | %.2f | %s |\n", t, mib, passes, best, median, loads);
    std::fflush(stdout);
  }
  std::free(a);
  return 0;
}
