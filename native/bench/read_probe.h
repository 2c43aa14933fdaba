// A read-bandwidth probe that runs between decoded tokens (ml_bench --probe-mb): T threads read
// their slices of one array larger than the last-level cache with ml_bwprobe's loops
// (bwprobe/read_loops.h), and a pass is timed from the barrier before the first load to the one
// after the last. Taken token by token, the probe sees the bandwidth of the same seconds as the
// decode, which on a VM whose bandwidth moves within seconds a probe before or after a whole run
// does not (docs/benchmarks.md, "-t 2 at the VM's two bandwidth levels").
// Linux only (threads, madvise); elsewhere start() says so.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ml::bench {

class read_probe {
 public:
  read_probe();
  ~read_probe();
  read_probe(const read_probe&) = delete;
  read_probe& operator=(const read_probe&) = delete;

  // Allocates `bytes` (rounded up to 256 per thread; 2 MiB aligned, advised MADV_HUGEPAGE, written
  // once), starts threads - 1 workers and keeps the fastest of the loop's prefetch modes over two
  // passes each (as ml_bwprobe reports the fastest). Otherwise *why says what failed.
  enum class started { ok, unsupported, no_memory };
  started start(size_t bytes, int threads, std::string* why);
  // One pass over the array on every thread, in seconds.
  double read_seconds();
  size_t bytes() const;
  std::string loads() const;  // which loop reads: "avx512 (64-byte loads), page kick of 2 lines", ...

 private:
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace ml::bench
