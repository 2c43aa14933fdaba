// ml_bench: single-thread kernel throughput of this build's bound kernels (matvec Q8/Q4 at the
// shapes of spec/testing.txt, quantize_q8) and, on a model file, greedy decode and batched prefill
// speed (-t threads), printed as Markdown. Timings are the best of several repetitions; the machine
// is shared, so compare two builds by running them alternately (docs/benchmarks.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "core/quant_ref.h"
#include "kernels/bind.h"
#include "src/engine/krafla.h"

namespace {

const char* const PROG = "ml_bench";
namespace k = ml::k::active;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

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

uint64_t g_state = 0x243F6A8885A308D3ull;
float frand() {  // xorshift64*, uniform in [-1, 1)
  g_state ^= g_state >> 12;
  g_state ^= g_state << 25;
  g_state ^= g_state >> 27;
  return (float)((double)((g_state * 0x2545F4914F6CDD1Dull) >> 11) / 4503599627370496.0 - 1.0);
}

struct matrix {
  std::vector<uint8_t> q;
  std::vector<float> d;
  ml_qtensor t;
};

matrix make_matrix(int rows, int cols, bool q4) {
  matrix m;
  std::vector<float> w((size_t)cols);
  m.q.resize((size_t)rows * cols / (q4 ? 2 : 1));
  m.d.resize((size_t)rows * cols / 32);
  for (int r = 0; r < rows; ++r) {
    for (auto& v : w) v = frand();
    if (q4)
      ml_quantize_q4_ref(m.q.data() + (size_t)r * cols / 2, m.d.data() + (size_t)r * cols / 32, w.data(), cols);
    else
      ml_quantize_q8_ref(reinterpret_cast<int8_t*>(m.q.data()) + (size_t)r * cols, m.d.data() + (size_t)r * cols / 32,
                         w.data(), cols);
  }
  m.t.q = m.q.data();
  m.t.d = m.d.data();
  m.t.rows = rows;
  m.t.cols = cols;
  return m;
}

void bench_matvecs(int reps, double min_s) {
  struct shape {
    int rows, cols;
  };
  const shape shapes[] = {{768, 768}, {4096, 4096}, {4864, 896}, {896, 4864}};
  std::printf("| op | kernel | rows x cols | ns/iter | GB/s | GOPS |\n| --- | --- | --- | --- | --- | --- |\n");
  for (bool q4 : {false, true}) {
    for (const shape& s : shapes) {
      matrix m = make_matrix(s.rows, s.cols, q4);
      std::vector<float> x((size_t)s.cols), y((size_t)s.rows);
      std::vector<int8_t> xq((size_t)s.cols);
      std::vector<float> xd((size_t)s.cols / 32);
      for (auto& v : x) v = frand();
      ml_quantize_q8_ref(xq.data(), xd.data(), x.data(), x.size());
      ml_qact a;
      a.q = xq.data();
      a.d = xd.data();
      a.n = s.cols;
      const double sec = best_seconds(
          [&] {
            if (q4) k::matvec_q4(y.data(), &m.t, &a, 0, s.rows);
            else k::matvec_q8(y.data(), &m.t, &a, 0, s.rows);
          },
          reps, min_s);
      const double bytes = (double)m.q.size() + (double)m.d.size() * 4 + (double)s.cols;
      const double ops = 2.0 * s.rows * s.cols;
      std::printf("| %s | %s | %d x %d | %.0f | %.2f | %.2f |\n", q4 ? "matvec_q4" : "matvec_q8",
                  q4 ? k::matvec_q4_name : k::matvec_q8_name, s.rows, s.cols, sec * 1e9, bytes / sec / 1e9,
                  ops / sec / 1e9);
    }
  }
  std::vector<float> x(4096);
  std::vector<int8_t> q(4096);
  std::vector<float> d(4096 / 32);
  for (auto& v : x) v = frand();
  const double sec = best_seconds([&] { k::quantize_q8(q.data(), d.data(), x.data(), 4096); }, reps, min_s);
  std::printf("| quantize_q8 | %s | 4096 values | %.0f | %.2f | |\n", k::quantize_q8_name, sec * 1e9,
              4096.0 * 4 / sec / 1e9);
}

int bench_decode(const std::string& path, int steps, int reps, int prefill, int threads) {
  ml_engine_params p{};
  p.n_threads = threads;
  ml_engine* e = nullptr;
  ml_error err;
  if (ml_engine_open(&e, path.c_str(), &p, &err) != ML_OK) return ml::cli::report(PROG, err);
  const ml_engine_info info = ml_engine_get_info(e);
  const int n = std::min(steps, info.ctx - 1);
  // Prefill: a prompt of BOS plus fixed ids (2, 3, ...), fed in batches; no token generated.
  const int np = std::max(1, std::min(prefill, info.ctx));
  std::vector<int32_t> prompt(np);
  for (int i = 0; i < np; ++i) prompt[i] = i == 0 ? info.bos_id : 2 + (i * 7) % (info.vocab_size - 2);
  double best = 0, best_prefill = 0;
  for (int r = 0; r < reps; ++r) {
    ml_gen_params g{};
    g.max_tokens = n;
    g.top_p = 1.0f;
    const int32_t bos = info.bos_id;
    ml_gen_stats st{};
    if (ml_engine_generate(e, &bos, 1, &g, nullptr, nullptr, &st, &err) != ML_OK) {
      ml_engine_close(e);
      return ml::cli::report(PROG, err);
    }
    if (st.gen_seconds > 0) best = std::max(best, st.n_generated / st.gen_seconds);
    if (prefill > 0) {
      g.max_tokens = 0;
      if (ml_engine_generate(e, prompt.data(), prompt.size(), &g, nullptr, nullptr, &st, &err) != ML_OK) {
        ml_engine_close(e);
        return ml::cli::report(PROG, err);
      }
      if (st.prompt_seconds > 0) best_prefill = std::max(best_prefill, np / st.prompt_seconds);
    }
  }
  std::printf("\n| model | ISA | threads | dim | layers | wtype | decode tokens | decode tok/s | prefill tokens | "
              "prefill tok/s |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
              "| %s | %s | %d | %d | %d | %s | %d | %.1f | %d | %.1f |\n(best of %d)\n",
              path.c_str(), info.isa, info.n_threads, info.dim, info.n_layers, info.wtype == 3 ? "Q4" : "Q8", n, best,
              prefill > 0 ? np : 0, best_prefill, reps);
  ml_engine_close(e);
  return 0;
}

}  // namespace

int ml_main(int argc, char** argv) {
  std::string model;
  int steps = 128, reps = 5, prefill = 64, threads = 1;
  double min_ms = 100;
  bool no_kernels = false;
  CLI::App app{"ml_bench: kernel throughput (single thread) and decode/prefill speed of this build (Markdown)", PROG};
  app.add_option("--model", model, "model file (.mlb) to time greedy decoding on");
  app.add_option("-n,--steps", steps, "tokens to decode (default 128)");
  app.add_option("--reps", reps, "repetitions; the best is reported (default 5)");
  app.add_option("--min-ms", min_ms, "minimum milliseconds per kernel repetition (default 100)");
  app.add_flag("--no-kernels", no_kernels, "skip the kernel table");
  app.add_option("--prefill", prefill, "prompt tokens to time prefill on (with --model; default 64, 0 = off)");
  app.add_option("-t,--threads", threads, "threads for --model (default 1)");
  if (const int rc = ml::cli::parse(app, PROG, argc, argv); rc >= 0) return rc;
  if (reps < 1 || steps < 1 || !(min_ms > 0)) return ml::cli::usage_error(PROG, "--reps, -n and --min-ms must be positive");
  if (prefill < 0 || threads < 1) return ml::cli::usage_error(PROG, "--prefill must be >= 0 and -t >= 1");

  std::printf("build ISA: %s\n", ml::k::build_isa);
#define ML_PRINT_BINDING(op) std::printf("%s -> %s\n", #op, k::op##_name);
  ML_K_OPS(ML_PRINT_BINDING)
#undef ML_PRINT_BINDING
  std::printf("\n");
  if (!no_kernels) bench_matvecs(reps, min_ms / 1000.0);
  if (!model.empty()) return bench_decode(model, steps, reps, prefill, threads);
  return 0;
}
