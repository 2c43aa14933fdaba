// ml_bench: single-thread kernel throughput of this build's bound kernels (ml_bench_kernels in
// krafla.h), or, with --model, prefill and greedy decode speed on a model file -- with
// --sessions N also N sessions stepped together in one batch, beside one session alone -- printed
// as Markdown; with --tokenizer FILE --encode TEXT... the tokenizer's encoding speed. Timings
// are the best of several repetitions; the machine is shared, so compare two builds by running
// them alternately (docs/benchmarks.md).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/encode_bench.h"
#include "bench/read_probe.h"
#include "cli/cli.h"
#include "krafla.h"

namespace {

const char* const PROG = "ml_bench";

// Returns a failed status from a helper (the caller reports it).
#define ML_TRY_CLI(expr)                 \
  do {                                   \
    const ml_status st_ = (expr);        \
    if (st_ != ML_OK) return st_;        \
  } while (0)

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }


void print_kernel_row(void*, const ml_kernel_bench_row* r) {
  std::string op = r->op, shape = std::to_string(r->rows) + " x " + std::to_string(r->cols);
  if (r->tokens > 1) op += " (" + std::to_string(r->tokens) + " tok)";
  if (r->rows == 1) shape = std::to_string(r->cols) + " values";
  std::printf("| %s | %s | %s | %.0f | %.2f | ", op.c_str(), r->kernel, shape.c_str(), r->ns, r->gbps);
  if (r->gops > 0) std::printf("%.2f |\n", r->gops);
  else std::printf("|\n");
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
  int threads = 1, prefill = 64, decode = 128, batch = 0, runs = 5, sessions = 1;
  bool no_pack = false, pack_cache = false;
  std::string kv = "f32";
  double probe_mb = 0;  // --probe-mb: one more decode, each token followed by a read of this many MB
};

// The prompt of session s: BOS, then fixed ids that differ between sessions.
std::vector<int32_t> make_prompt(const ml_model_info& info, int n, int s) {
  std::vector<int32_t> p((size_t)n);
  p[0] = info.bos_id;
  for (int i = 1; i < n; ++i) p[(size_t)i] = 3 + (int32_t)((i * 7919L + s * 104729L) % (info.vocab_size - 3));
  return p;
}

struct speeds {
  double prefill = 0, decode = 0;  // tok/s, best over the runs (aggregate over the sessions)
};

// One session alone: ml_generate, greedy.
ml_status run_single(ml::cli::handles& h, const std::vector<int32_t>& prompt, int decode, speeds* best, ml_error* err) {
  ml_session* s = h.sessions[0];
  ML_TRY_CLI(ml_session_truncate(s, 0, err));
  ml_gen_params g{};
  g.max_tokens = decode;
  g.top_p = 1.0f;  // greedy: no min-p, no penalties (zeros)
  ml_gen_stats st{};
  ML_TRY_CLI(ml_generate(h.exec, s, prompt.data(), prompt.size(), &g, nullptr, nullptr, &st, err));
  if (st.prompt_seconds > 0) best->prefill = std::max(best->prefill, st.n_prompt / st.prompt_seconds);
  if (st.gen_seconds > 0) best->decode = std::max(best->decode, st.n_generated / st.gen_seconds);
  return ML_OK;
}

// Every session together: their prompts in one batch, then `decode` steps of one greedy token per
// session, each step one batch.
ml_status run_together(ml::cli::handles& h, const std::vector<std::vector<int32_t>>& prompts, int decode, speeds* best,
                       ml_error* err) {
  const size_t N = h.sessions.size();
  std::vector<ml_batch_token> batch;
  for (size_t s = 0; s < N; ++s) {
    ML_TRY_CLI(ml_session_truncate(h.sessions[s], 0, err));
    for (size_t i = 0; i < prompts[s].size(); ++i)
      batch.push_back({h.sessions[s], prompts[s][i], i + 1 == prompts[s].size()});
  }
  const auto t0 = std::chrono::steady_clock::now();
  ML_TRY_CLI(ml_eval_batch(h.exec, batch.data(), batch.size(), nullptr, nullptr, err));
  const auto t1 = std::chrono::steady_clock::now();
  batch.resize(N);
  for (int d = 0; d < decode; ++d) {
    for (size_t s = 0; s < N; ++s) batch[s] = {h.sessions[s], ml_session_sample(h.sessions[s]), 1};
    ML_TRY_CLI(ml_eval_batch(h.exec, batch.data(), N, nullptr, nullptr, err));
  }
  const auto t2 = std::chrono::steady_clock::now();
  const double pf = std::chrono::duration<double>(t1 - t0).count(), dec = std::chrono::duration<double>(t2 - t1).count();
  if (pf > 0) best->prefill = std::max(best->prefill, (double)(prompts[0].size() * N) / pf);
  if (dec > 0 && decode > 0) best->decode = std::max(best->decode, (double)decode * N / dec);
  return ML_OK;
}

// One more greedy decode of `decode` tokens after the prompt, each token followed by a pass of the
// read probe: per token, the probe's seconds over the token's, i.e. the share of the probe's
// bandwidth the decode reaches if a token reads probe.bytes(). Before each pass the caller sleeps
// 2 ms, so that the engine's workers have stopped spinning (20 000 pauses, 0.4-1 ms) and do not take
// a CPU from the probe; the next token then wakes them first, which its time includes.
ml_status run_interleaved(ml::cli::handles& h, const std::vector<int32_t>& prompt, int decode, ml::bench::read_probe& probe,
                          std::vector<double>* token_s, std::vector<double>* probe_s, ml_error* err) {
  ml_session* s = h.sessions[0];
  ML_TRY_CLI(ml_session_truncate(s, 0, err));
  ml_gen_params g{};
  g.max_tokens = decode;
  g.top_p = 1.0f;
  ml_gen* gen = nullptr;
  ML_TRY_CLI(ml_gen_start(&gen, h.exec, s, prompt.data(), prompt.size(), &g, err));
  std::unique_ptr<ml_gen, void (*)(ml_gen*)> owned(gen, ml_gen_free);
  probe.read_seconds();  // the probe's array and code warm, once
  for (int step = 0, done = 0; !done; ++step) {
    const char* text;
    size_t len;
    int32_t id;
    const double t0 = now();
    ML_TRY_CLI(ml_gen_next(gen, &text, &len, &id, &done, err));
    const double t1 = now();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const double p = probe.read_seconds();
    if (step > 0 && !done) {  // the first step only samples the prompt's logits; the last feeds nothing
      token_s->push_back(t1 - t0);
      probe_s->push_back(p);
    }
  }
  return ML_OK;
}

// The same interleave over the matrix products alone (ml_exec_time_matrices): n passes over every
// weight matrix of a decode step, each followed by the probe, so the token's share of the probe
// splits into the weight stream's and the rest of the forward pass's.
ml_status run_matrices_interleaved(ml_exec* e, int n, ml::bench::read_probe& probe, std::vector<double>* pass_s,
                                   std::vector<double>* probe_s, double* bytes, ml_error* err) {
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    double s;
    ML_TRY_CLI(ml_exec_time_matrices(e, &s, bytes, err));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const double p = probe.read_seconds();
    pass_s->push_back(s);
    probe_s->push_back(p);
  }
  return ML_OK;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[(size_t)(q * (double)(v.size() - 1) + 0.5)];
}

// Prefill of o.prefill prompt tokens (BOS, then fixed ids) and greedy decoding of o.decode tokens,
// o.runs times (one session, and with --sessions N then N sessions together, alternately); the
// best tok/s of each, the load time and the resident memory.
int bench_model(const model_opts& o) {
  ml_model_params mp{};
  mp.ctx = o.prefill + o.decode;  // at most INT32_MAX (ml_main); the model refuses more than its max_seq
  mp.no_pack = o.no_pack;
  mp.pack_cache = o.pack_cache;
  mp.n_threads = o.threads;
  ml_exec_params ep{};
  ep.n_threads = o.threads;
  ep.batch = o.batch;
  ml::cli::handles h;
  ml_error err;
  const double t0 = now();
  if (ml_model_open(&h.model, o.path.c_str(), &mp, &err) != ML_OK) {
    if (err.status != ML_E_ARG) return ml::cli::report(PROG, err);
    return ml::cli::usage_error(PROG, "--prefill " + std::to_string(o.prefill) + " + --decode " +
                                          std::to_string(o.decode) + ": " + err.msg);
  }
  const double load_s = now() - t0;
  const double load_rss = rss_mib(), load_now = rss_mib("VmRSS:");
  const ml_model_info info = ml_model_get_info(h.model);
  if (ml_exec_create(&h.exec, h.model, &ep, &err) != ML_OK) return ml::cli::report(PROG, err);
  ml_session_params sp{};
  sp.ctx = o.prefill + o.decode;  // caches just large enough (the time does not depend on it)
  sp.kv = ml::cli::kv_type(o.kv);
  for (int s = 0; s < o.sessions; ++s) {
    h.sessions.push_back(nullptr);
    if (ml_session_create(&h.sessions.back(), h.model, &sp, &err) != ML_OK) return ml::cli::report(PROG, err);
  }
  const double sessions_rss = rss_mib("VmRSS:");
  std::vector<std::vector<int32_t>> prompts;
  for (int s = 0; s < o.sessions; ++s) prompts.push_back(make_prompt(info, o.prefill, s));
  speeds one, all;
  for (int r = 0; r < o.runs; ++r) {
    if (run_single(h, prompts[0], o.decode, &one, &err) != ML_OK) return ml::cli::report(PROG, err);
    if (o.sessions > 1 && run_together(h, prompts, o.decode, &all, &err) != ML_OK) return ml::cli::report(PROG, err);
  }
  std::vector<double> token_s, probe_s, pass_s, pass_probe_s;
  double pass_bytes = 0;
  ml::bench::read_probe probe;
  if (o.probe_mb > 0) {
    std::string why;
    const auto st = probe.start((size_t)(o.probe_mb * 1e6), o.threads, &why);
    if (st == ml::bench::read_probe::started::unsupported) return ml::cli::usage_error(PROG, "--probe-mb: " + why);
    if (st == ml::bench::read_probe::started::no_memory) {
      std::fprintf(stderr, "%s: --probe-mb: %s\n", PROG, why.c_str());
      return 1;
    }
    if (run_interleaved(h, prompts[0], o.decode, probe, &token_s, &probe_s, &err) != ML_OK) return ml::cli::report(PROG, err);
    if (run_matrices_interleaved(h.exec, (int)token_s.size(), probe, &pass_s, &pass_probe_s, &pass_bytes, &err) != ML_OK)
      return ml::cli::report(PROG, err);
  }
  const char* pack = !info.packed ? "no" : info.pack_from_cache ? "cache" : "yes";
  std::printf("| model | ISA | wtype | dim | layers | -t | batch | packed | sessions | prefill tokens | prefill tok/s | "
              "decode tokens | decode tok/s | load s | peak RSS after load (MiB) |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  auto row = [&](int n, const speeds& sp_) {
    std::printf("| %s | %s | %s | %d | %d | %d | %d | %s | %d | %d | %.1f | %d | %.1f | %.2f | %.0f |\n",
                o.path.c_str(), info.isa, info.wtype == ML_DT_Q4 ? "Q4" : "Q8", info.dim, info.n_layers,
                ml_exec_threads(h.exec), ml_exec_batch(h.exec), pack, n, o.prefill * n, sp_.prefill, o.decode * n,
                sp_.decode, load_s, load_rss);
  };
  row(1, one);
  if (o.sessions > 1) row(o.sessions, all);
  std::printf("\n(best of %d runs; KV cache %s; RSS after load %.0f MiB, with %d session%s %.0f MiB (%.1f MiB each by their "
              "arenas), peak RSS at exit %.0f MiB)\n",
              o.runs, o.kv.c_str(), load_now, o.sessions, o.sessions > 1 ? "s" : "", sessions_rss,
              ml_session_bytes(h.sessions[0]) / 1048576.0, rss_mib());
  if (o.sessions > 1)
    std::printf("%d sessions together: decode %.2fx, prefill %.2fx one session's tok/s\n", o.sessions,
                one.decode > 0 ? all.decode / one.decode : 0.0, one.prefill > 0 ? all.prefill / one.prefill : 0.0);
  if (!token_s.empty()) {
    std::vector<double> ratio;
    for (size_t i = 0; i < token_s.size(); ++i) ratio.push_back(probe_s[i] / token_s[i]);
    const double mb = (double)probe.bytes() / 1e6, tok = quantile(token_s, 0.5), pr = quantile(probe_s, 0.5);
    // One line, parsed by scripts/bench-peers: keep its words.
    std::printf("interleaved probe: %zu tokens, each followed by a %.1f MB read on %d threads (%s): token median %.3f ms "
                "(%.1f tok/s), probe median %.3f ms (%.2f GB/s); probe / token seconds per token: median %.1f%% "
                "(quartiles %.1f-%.1f%%)\n",
                token_s.size(), mb, o.threads, probe.loads().c_str(), tok * 1e3, 1.0 / tok, pr * 1e3, mb / 1e3 / pr,
                100 * quantile(ratio, 0.5), 100 * quantile(ratio, 0.25), 100 * quantile(ratio, 0.75));
  }
  if (!pass_s.empty()) {
    // Each pass's read rate over the probe's that followed it (the passes read pass_bytes, the
    // probe its own size).
    std::vector<double> share;
    for (size_t i = 0; i < pass_s.size(); ++i)
      share.push_back((pass_bytes / pass_s[i]) / ((double)probe.bytes() / pass_probe_s[i]));
    const double ps = quantile(pass_s, 0.5);
    std::printf("matrices alone: %zu passes over the %.3f MB of weights a token reads, each followed by the probe: pass "
                "median %.3f ms (%.2f GB/s), the token's other work about %.3f ms; pass / probe read rate per pass: "
                "median %.1f%% (quartiles %.1f-%.1f%%)\n",
                pass_s.size(), pass_bytes / 1e6, ps * 1e3, pass_bytes / 1e9 / ps, (quantile(token_s, 0.5) - ps) * 1e3,
                100 * quantile(share, 0.5), 100 * quantile(share, 0.25), 100 * quantile(share, 0.75));
  }
  return 0;
}

void print_binding(void*, const char* op, const char* kernel) { std::printf("%s -> %s\n", op, kernel); }

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
  app.add_option("--batch", mo.batch, "--model: tokens per forward step, 1..128 (default 128)");
  app.add_option("--sessions", mo.sessions, "--model: also time N sessions stepped together in one batch (default 1)");
  ml::cli::add_kv_option(app, &mo.kv, "--model: ");
  app.add_flag("--no-pack", mo.no_pack, "--model: keep the row-major weights");
  app.add_flag("--pack-cache", mo.pack_cache, "--model: map (or write) the pack cache MODEL.pk<G>");
  app.add_option("--probe-mb", mo.probe_mb,
                 "--model: one more decode, each token followed by a read of this many MB (1e6 bytes) on -t threads; "
                 "prints the probe's time over the token's (Linux; its array counts in the peak RSS at exit)");
  app.add_option("--runs,--reps", reps, "repetitions; the best is reported (default 5)");
  app.add_option("--min-ms", min_ms, "kernels: minimum milliseconds per repetition (default 100)");
  app.add_flag("--no-kernels", no_kernels, "skip the kernel table");
  std::string tokenizer;
  std::vector<std::string> texts;
  app.add_option("--tokenizer", tokenizer, "time encoding with this tokenizer (.mlb, HF folder or tokenizer.json, tokenizer.bin)");
  app.add_option("--encode", texts, "--tokenizer: text files to encode whole (MB/s)");
  if (const int rc = ml::cli::parse(app, PROG, argc, argv); rc >= 0) return rc;
  if (reps < 1 || mo.decode < 0 || mo.prefill < 1 || mo.threads < 1 || mo.batch < 0 || mo.batch > 128 ||
      !(min_ms > 0) || mo.sessions < 1 || mo.sessions > 256 || !(mo.probe_mb >= 0 && mo.probe_mb <= 65536))
    return ml::cli::usage_error(PROG, "--runs, --prefill, -t and --min-ms must be positive, --decode >= 0, "
                                      "--batch in 0..128, --sessions in 1..256, --probe-mb in 0..65536");
  mo.runs = reps;
  if (!tokenizer.empty() || !texts.empty()) {
    if (tokenizer.empty() || texts.empty()) return ml::cli::usage_error(PROG, "--tokenizer and --encode go together");
    return bench_encode(PROG, tokenizer, texts, reps);
  }
  // Checked before any work: the context is prefill + decode positions, an int.
  if ((int64_t)mo.prefill + mo.decode > INT32_MAX)
    return ml::cli::usage_error(PROG, "--prefill " + std::to_string(mo.prefill) + " + --decode " +
                                          std::to_string(mo.decode) + " exceed " + std::to_string(INT32_MAX) +
                                          " positions (the context must hold both, within the model's max_seq)");

  std::printf("build ISA: %s\n", ml_build_isa());
  ml_build_bindings(print_binding, nullptr);
  std::printf("\n");
  if (!mo.path.empty()) return bench_model(mo);
  if (!no_kernels) {
    std::printf("| op | kernel | rows x cols | ns/iter | GB/s | GOPS |\n| --- | --- | --- | --- | --- | --- |\n");
    ml_error err;
    if (ml_bench_kernels(reps, min_ms / 1000.0, print_kernel_row, nullptr, &err) != ML_OK)
      return ml::cli::report(PROG, err);
  }
  return 0;
}
