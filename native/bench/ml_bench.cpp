// ml_bench: single-thread kernel throughput of this build's bound kernels (row-major matvec Q8/Q4
// at the shapes of spec/testing.txt, the packed matvec and the 128-token packed matmul next to
// them, quantize_q8), or, with --model, prefill and greedy decode speed on a model file, printed as
// Markdown. Timings are the best of several repetitions; the machine is shared, so compare two
// builds by running them alternately (docs/benchmarks.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "core/pack.h"
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

// The packed matvec of one token and the packed matmul of kMatmulTokens tokens on m (packed here
// with the build's layout); nothing in builds without packed kernels. GOPS count every token.
constexpr int kMatmulTokens = 128;
void bench_packed(matrix& m, bool q4, int rows, int cols, const std::vector<int8_t>& xq, const std::vector<float>& xd,
                  int reps, double min_s) {
#ifdef ML_K_PACKED
  const ml_pack_params p = k::pack;
  if (!q4 && !p.pack_q8) return;
  size_t qb = 0, db = 0;
  if (!ml_pack_sizes(q4 ? 3 : 2, rows, cols, false, &p, &qb, &db)) return;
  std::vector<uint8_t> pq(qb), pd(db);
  ml_pack_matrix(&m.t, q4 ? 3 : 2, &p, pq.data(), pd.data());
  std::vector<float> y((size_t)rows * kMatmulTokens);
  ml_qact a;
  a.q = xq.data();
  a.d = xd.data();
  a.n = cols;
  double sec = best_seconds(
      [&] {
        if (q4) k::matvec_q4_pk(y.data(), &m.t, &a, 0, rows);
        else k::matvec_q8_pk(y.data(), &m.t, &a, 0, rows);
      },
      reps, min_s);
  const double wbytes = (double)qb + (double)db;
  std::printf("| %s | %s | %d x %d | %.0f | %.2f | %.2f |\n", q4 ? "matvec_q4_pk" : "matvec_q8_pk",
              q4 ? k::matvec_q4_pk_name : k::matvec_q8_pk_name, rows, cols, sec * 1e9, (wbytes + cols) / sec / 1e9,
              2.0 * rows * cols / sec / 1e9);
  // 128 tokens: the activations repeated (the kernel's work does not depend on their values).
  std::vector<int8_t> bq((size_t)cols * kMatmulTokens);
  std::vector<float> bd((size_t)cols / 32 * kMatmulTokens);
  for (int t = 0; t < kMatmulTokens; ++t) {
    std::memcpy(bq.data() + (size_t)t * cols, xq.data(), (size_t)cols);
    std::memcpy(bd.data() + (size_t)t * (cols / 32), xd.data(), (size_t)cols / 32 * sizeof(float));
  }
  ml_qbatch X;
  X.q = bq.data();
  X.d = bd.data();
  X.n = cols;
  X.n_tokens = kMatmulTokens;
  sec = best_seconds(
      [&] {
        if (q4) k::matmul_q4_pk(y.data(), rows, &m.t, &X, 0, rows);
        else k::matmul_q8_pk(y.data(), rows, &m.t, &X, 0, rows);
      },
      reps, min_s);
  std::printf("| %s (%d tok) | %s | %d x %d | %.0f | %.2f | %.2f |\n", q4 ? "matmul_q4_pk" : "matmul_q8_pk",
              kMatmulTokens, q4 ? k::matmul_q4_pk_name : k::matmul_q8_pk_name, rows, cols, sec * 1e9,
              (wbytes + (double)cols * kMatmulTokens) / sec / 1e9, 2.0 * rows * cols * kMatmulTokens / sec / 1e9);
  m.t.pq = m.t.pd = nullptr;
#else
  (void)m, (void)q4, (void)rows, (void)cols, (void)xq, (void)xd, (void)reps, (void)min_s;
#endif
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
      bench_packed(m, q4, s.rows, s.cols, xq, xd, reps, min_s);
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

// Resident memory of this process (/proc/self/status field VmHWM: the peak so far, or VmRSS: now),
// in MiB; -1 where /proc is missing.
double rss_mib(const char* field = "VmHWM:") {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  double kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, std::strlen(field)) == 0) kb = std::atof(line + std::strlen(field));
  std::fclose(f);
  return kb < 0 ? -1 : kb / 1024.0;
}

struct model_opts {
  std::string path;
  int threads = 1, prefill = 64, decode = 128, batch = 0, runs = 5;
  bool no_pack = false, pack_cache = false;
};

// Prefill of o.prefill prompt tokens (BOS, then fixed ids) and greedy decoding of o.decode tokens,
// o.runs times; the best tok/s of each, the load time and the peak RSS after loading.
int bench_model(const model_opts& o) {
  ml_engine_params p{};
  p.n_threads = o.threads;
  p.batch = o.batch;
  p.no_pack = o.no_pack;
  p.pack_cache = o.pack_cache;
  ml_engine* e = nullptr;
  ml_error err;
  const double t0 = now();
  if (ml_engine_open(&e, o.path.c_str(), &p, &err) != ML_OK) return ml::cli::report(PROG, err);
  const double load_s = now() - t0;
  const double load_rss = rss_mib(), load_now = rss_mib("VmRSS:");
  const ml_engine_info info = ml_engine_get_info(e);
  if (o.prefill + o.decode > info.ctx) {
    ml_engine_close(e);
    return ml::cli::usage_error(PROG, "--prefill " + std::to_string(o.prefill) + " + --decode " +
                                          std::to_string(o.decode) + " exceed the context of " +
                                          std::to_string(info.ctx));
  }
  std::vector<int32_t> prompt((size_t)o.prefill);
  prompt[0] = info.bos_id;
  for (int i = 1; i < o.prefill; ++i) prompt[(size_t)i] = 3 + (int32_t)((i * 7919L) % (info.vocab_size - 3));
  double best_pf = 0, best_dec = 0;
  for (int r = 0; r < o.runs; ++r) {
    ml_gen_params g{};
    g.max_tokens = o.decode;
    g.top_p = 1.0f;
    ml_gen_stats st{};
    if (ml_engine_generate(e, prompt.data(), prompt.size(), &g, nullptr, nullptr, &st, &err) != ML_OK) {
      ml_engine_close(e);
      return ml::cli::report(PROG, err);
    }
    if (st.prompt_seconds > 0) best_pf = std::max(best_pf, st.n_prompt / st.prompt_seconds);
    if (st.gen_seconds > 0) best_dec = std::max(best_dec, st.n_generated / st.gen_seconds);
  }
  const char* pack = !info.packed ? "no" : info.pack_from_cache ? "cache" : "yes";
  std::printf("| model | ISA | wtype | dim | layers | -t | batch | packed | prefill tokens | prefill tok/s | "
              "decode tokens | decode tok/s | load s | peak RSS after load (MiB) |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
              "| %s | %s | %s | %d | %d | %d | %d | %s | %d | %.1f | %d | %.1f | %.2f | %.0f |\n",
              o.path.c_str(), info.isa, info.wtype == 3 ? "Q4" : "Q8", info.dim, info.n_layers, info.n_threads,
              info.batch, pack, o.prefill, best_pf, o.decode, best_dec, load_s, load_rss);
  std::printf("\n(best of %d runs; RSS after load %.0f MiB, peak RSS at exit %.0f MiB)\n", o.runs, load_now, rss_mib());
  ml_engine_close(e);
  return 0;
}

}  // namespace

int ml_main(int argc, char** argv) {
  model_opts mo;
  int reps = 5;
  double min_ms = 100;
  bool no_kernels = false;
  CLI::App app{"ml_bench: kernel throughput of this build (single thread), or with --model prefill and decode "
               "speed on a model file (Markdown)",
               PROG};
  app.add_option("--model", mo.path, "model file (.mlb): time prefill and greedy decoding instead of the kernels");
  app.add_option("-t,--threads", mo.threads, "--model: threads (default 1)");
  app.add_option("--prefill", mo.prefill, "--model: prompt tokens (default 64)");
  app.add_option("-n,--decode", mo.decode, "--model: tokens to decode (default 128)");
  app.add_option("--batch", mo.batch, "--model: prompt tokens per step, 1..128 (default 128)");
  app.add_flag("--no-pack", mo.no_pack, "--model: keep the row-major weights");
  app.add_flag("--pack-cache", mo.pack_cache, "--model: map (or write) the pack cache MODEL.pk<G>");
  app.add_option("--runs,--reps", reps, "repetitions; the best is reported (default 5)");
  app.add_option("--min-ms", min_ms, "kernels: minimum milliseconds per repetition (default 100)");
  app.add_flag("--no-kernels", no_kernels, "skip the kernel table");
  if (const int rc = ml::cli::parse(app, PROG, argc, argv); rc >= 0) return rc;
  if (reps < 1 || mo.decode < 0 || mo.prefill < 1 || mo.threads < 1 || mo.batch < 0 || mo.batch > 128 ||
      !(min_ms > 0))
    return ml::cli::usage_error(PROG, "--runs, --prefill, -t and --min-ms must be positive, --decode >= 0, "
                                      "--batch in 0..128");
  mo.runs = reps;

  std::printf("build ISA: %s\n", ml::k::build_isa);
#define ML_PRINT_BINDING(op) std::printf("%s -> %s\n", #op, k::op##_name);
  ML_K_OPS(ML_PRINT_BINDING)
#ifdef ML_K_PACKED
  ML_K_PK_OPS(ML_PRINT_BINDING)
#endif
#undef ML_PRINT_BINDING
  std::printf("\n");
  if (!mo.path.empty()) return bench_model(mo);
  if (!no_kernels) bench_matvecs(reps, min_ms / 1000.0);
  return 0;
}
