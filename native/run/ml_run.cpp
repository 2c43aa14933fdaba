// ml_run: generate text from a model, or dump the logits of a prompt (docs/user-guide.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "krafla.h"
#include "run/run.h"

namespace ml::run {

int on_token(void* /*user*/, int32_t /*id*/, const char* piece, size_t len, int /*generated*/) {
  std::fwrite(piece, 1, len, stdout);
  std::fflush(stdout);
  return 0;
}

namespace {

// --dump-logits: one float32 row per position into the output; the first error stops the feed.
struct logits_out {
  ml_output* out;
  size_t vocab;
  ml_error err;
  bool failed;
};

int write_row(void* user, size_t /*index*/, const float* logits) {
  auto* w = static_cast<logits_out*>(user);
  w->failed = ml_output_write(w->out, logits, w->vocab * sizeof(float), &w->err) != ML_OK;
  return w->failed ? 1 : 0;
}

// Feeds the prompt (in batches) and writes each position's logits (float32 rows) to path, through
// a temporary file renamed into place only when complete (krafla.h, "Output files"). The output
// is checked before anything runs: not the model, not the tokenizer, not a device or a directory.
int dump_logits(const engine& e, const std::vector<int32_t>& ids, const options& o) {
  const ml_model_info info = ml_model_get_info(e.model);
  const int ctx = ml_session_ctx(e.session);
  if (ids.size() > (size_t)ctx)
    return ml::cli::usage_error(PROG, "--dump-logits: " + std::to_string(ids.size()) +
                                          " tokens do not fit the context of " + std::to_string(ctx));
  const char* inputs[2] = {o.model.c_str(), o.tokenizer.empty() ? nullptr : o.tokenizer.c_str()};
  logits_out w{nullptr, (size_t)info.vocab_size, ml_error{}, false};
  ml_error err;
  if (ml_output_open(&w.out, o.dump_logits.c_str(), inputs, 2, &err) != ML_OK)
    return ml::cli::report(PROG, err);
  if (ml_session_feed_all(e.exec, e.session, ids.data(), ids.size(), write_row, &w, &err) != ML_OK) {
    ml_output_discard(w.out);
    return ml::cli::report(PROG, err);
  }
  if (w.failed) {
    ml_output_discard(w.out);
    return ml::cli::report(PROG, w.err);
  }
  if (ml_output_commit(w.out, &err) != ML_OK) return ml::cli::report(PROG, err);
  return ml::cli::EXIT_OK;
}

// The build's kernels, shown under --help: "build: avx2 kernels, packed G=8".
std::string build_footer() {
  return std::string("build: ") + ml_build_isa() + " kernels, " +
         (ml_build_pack_g() > 0 ? "packed: G=" + std::to_string(ml_build_pack_g()) : std::string("no packed kernels"));
}

void print_setup(const engine& e, const options& o) {
  const ml_model_info info = ml_model_get_info(e.model);
  std::fprintf(stderr, "%s: %s kernels, threads %d, batch %d, kv %s, ctx %d, %s", PROG, info.isa,
               ml_exec_threads(e.exec), ml_exec_batch(e.exec), o.kv.c_str(), ml_session_ctx(e.session),
               info.packed ? "packed: G=" : "row-major");
  if (info.packed)
    std::fprintf(stderr, "%d (%.1f MB%s)", info.pack_g, info.packed_bytes / 1e6,
                 info.pack_from_cache ? ", from the pack cache" : info.pack_cache_written ? ", pack cache written" : "");
  std::fprintf(stderr, "\n");
  if (o.ctx == 0 && info.ctx < info.max_seq)
    std::fprintf(stderr, "%s: ctx %d is the default cap (the model's max_seq is %d); --ctx N for more\n", PROG,
                 info.ctx, info.max_seq);
}

void print_profile(const ml_exec* e) {
  double sec[6];
  if (ml_exec_profile(e, sec) != 6) return;
  static const char* const names[6] = {"qkv", "attention", "wo", "ffn", "classifier", "other"};
  double total = 0;
  for (double v : sec) total += v;
  std::fprintf(stderr, "%s: profile (%.3f s in the forward pass):", PROG, total);
  for (int i = 0; i < 6; ++i) std::fprintf(stderr, " %s %.1f%%", names[i], total > 0 ? 100.0 * sec[i] / total : 0.0);
  std::fprintf(stderr, "\n");
}

int check_values(const options& o) {
  if (!std::isfinite(o.temp) || o.temp < 0) return ml::cli::usage_error(PROG, "--temp: must be a finite number >= 0");
  if (!std::isfinite(o.top_p) || o.top_p <= 0 || o.top_p > 1)
    return ml::cli::usage_error(PROG, "--top-p: must be in (0, 1]");
  if (o.top_k < 0) return ml::cli::usage_error(PROG, "--top-k: must be >= 0");
  if (!(o.min_p >= 0 && o.min_p < 1)) return ml::cli::usage_error(PROG, "--min-p: must be in [0, 1)");
  if (!(o.presence_penalty >= -2 && o.presence_penalty <= 2))
    return ml::cli::usage_error(PROG, "--presence-penalty: must be in [-2, 2]");
  if (!(o.frequency_penalty >= -2 && o.frequency_penalty <= 2))
    return ml::cli::usage_error(PROG, "--frequency-penalty: must be in [-2, 2]");
  if (o.steps < 0) return ml::cli::usage_error(PROG, "-n: must be >= 0");
  if (o.threads < 1 || o.threads > 1024) return ml::cli::usage_error(PROG, "-t: must be in 1..1024");
  if (o.batch < 1 || o.batch > 128) return ml::cli::usage_error(PROG, "--batch: must be in 1..128");
  if (o.ctx < 0) return ml::cli::usage_error(PROG, "--ctx: must be >= 1");
  if (!o.prompt.empty() && !o.tokens.empty()) return ml::cli::usage_error(PROG, "-p and --tokens exclude each other");
  if ((o.chat || o.interactive) && (!o.tokens.empty() || !o.dump_logits.empty()))
    return ml::cli::usage_error(PROG, "--chat and -i take text (-p, stdin), not --tokens or --dump-logits");
  if (o.chat && o.interactive) return ml::cli::usage_error(PROG, "--chat and -i exclude each other");
  if (!o.chat && !o.interactive && (!o.system.empty() || !o.chat_template.empty() || !o.vars.empty()))
    return ml::cli::usage_error(PROG, "-s, --chat-template and --vars need --chat or -i");
  return -1;
}

}  // namespace
}  // namespace ml::run

using namespace ml::run;

int ml_main(int argc, char** argv) {
  ml_install_cleanup_handlers();  // a killed --dump-logits (or pack cache write) leaves no temporary file
  options o;
  CLI::App app{"ml_run: generate text with a krafla model (.mlb), or dump its logits for a prompt", PROG};
  app.add_option("model", o.model, "model file (.mlb, from ml_convert)")->required();
  app.add_option("-z,--tokenizer", o.tokenizer, "llama2.c tokenizer.bin to use instead of the model's own");
  ml::cli::allow_empty(app.add_option("-p,--prompt", o.prompt, "prompt text (BOS is prepended)"));
  app.add_option("--tokens", o.tokens, "prompt as token ids, \"ID ID ...\", used verbatim (no BOS added)");
  app.add_option("-n,--steps", o.steps, "tokens to generate (default 256)");
  app.add_option("--temp", o.temp, "temperature, 0 = greedy (default 1.0)");
  app.add_option("--top-p", o.top_p, "nucleus sampling threshold in (0, 1] (default 0.9; 1 = off)");
  app.add_option("--top-k", o.top_k, "sample from the k most likely tokens (default 0 = off)");
  app.add_option("--min-p", o.min_p,
                 "drop tokens less likely than P times the most likely, in [0, 1) (default 0 = off)");
  app.add_option("--presence-penalty", o.presence_penalty,
                 "subtract from the logit of every token generated so far, in [-2, 2] (default 0)");
  app.add_option("--frequency-penalty", o.frequency_penalty,
                 "subtract per time a token was generated so far, in [-2, 2] (default 0)");
  auto* seed_opt = app.add_option("--seed", o.seed, "random seed (default: from the clock, printed)");
  app.add_option("-t,--threads", o.threads, "threads (default 1; the caller is one of them)");
  app.add_option("--batch", o.batch, "prompt tokens per forward step, 1..128 (default 128)");
  app.add_flag("--no-pack", o.no_pack, "keep the row-major weight layout (no packed kernels)");
  app.add_flag("--pack-cache", o.pack_cache, "map MODEL.pk<G> with the packed weights, writing it when missing or stale");
  app.add_flag("--profile", o.profile, "print how the forward pass's time splits across its stages");
  app.add_option("--ctx", o.ctx, "context length (default: the model's max_seq, at most 4096)");
  ml::cli::add_kv_option(app, &o.kv);
  app.add_option("--dump-logits", o.dump_logits, "feed the prompt and write each position's logits (float32 rows) to FILE");
  app.add_flag("--chat", o.chat, "one reply to -p as the user's message, through the model's chat template");
  app.add_flag("-i,--interactive", o.interactive,
               "a conversation: each stdin line is the user's next message; the cache is kept between turns");
  app.add_option("-s,--system", o.system, "--chat, -i: a system message first");
  app.add_option("--chat-template", o.chat_template, "--chat, -i: a Jinja chat template file replacing the model's");
  app.add_option("--vars", o.vars, "--chat, -i: a JSON object of extra template variables ('{\"enable_thinking\":false}')");
  app.footer(build_footer());
  if (const int rc = ml::cli::parse(app, PROG, argc, argv); rc >= 0) return rc;
  if (const int rc = check_values(o); rc >= 0) return rc;
  o.seed_given = seed_opt->count() > 0;

  std::vector<int32_t> ids;
  if (!o.tokens.empty()) {
    std::string bad;
    if (!ml::cli::parse_ids(o.tokens, &ids, &bad)) return ml::cli::usage_error(PROG, "--tokens: '" + bad + "' is not a token id");
    if (ids.empty()) return ml::cli::usage_error(PROG, "--tokens: no ids given");
  }

  ml_model_params mp{};
  mp.tokenizer_path = o.tokenizer.empty() ? nullptr : o.tokenizer.c_str();
  mp.ctx = o.ctx;
  mp.no_pack = o.no_pack;
  mp.pack_cache = o.pack_cache;
  mp.n_threads = o.threads;
  ml_exec_params ep{};
  ep.n_threads = o.threads;
  ep.batch = o.batch;
  ep.profile = o.profile;
  ml_session_params sp{};
  sp.kv = ml::cli::kv_type(o.kv);
  engine e;
  ml_error err;
  if (ml_model_open(&e.model, o.model.c_str(), &mp, &err) != ML_OK ||
      ml_exec_create(&e.exec, e.model, &ep, &err) != ML_OK ||
      ml_session_create(&e.session, e.model, &sp, &err) != ML_OK)
    return ml::cli::report(PROG, err);
  const ml_model_info info = ml_model_get_info(e.model);
  const int ctx = ml_session_ctx(e.session);
  print_setup(e, o);
  if (o.chat || o.interactive) {
    if (!o.seed_given) o.seed = (uint64_t)std::chrono::system_clock::now().time_since_epoch().count();
    return run_chat(e, o);
  }

  if (ids.empty()) {  // the prompt text, BOS first
    std::vector<int32_t> buf(o.prompt.size() + 3);
    size_t n = 0;
    if (ml_tokenize(ml_model_tokenizer(e.model), o.prompt.data(), o.prompt.size(), 1, buf.data(), buf.size(), &n,
                    &err) != ML_OK)
      return ml::cli::report(PROG, err);
    ids.assign(buf.begin(), buf.begin() + (long)n);
  }
  for (int32_t id : ids)
    if (id < 0 || id >= info.vocab_size)
      return ml::cli::usage_error(PROG, "--tokens: id " + std::to_string(id) + " is outside the vocabulary 0.." +
                                            std::to_string(info.vocab_size - 1));

  if (!o.dump_logits.empty()) return dump_logits(e, ids, o);
  if (ids.size() > (size_t)ctx)
    return ml::cli::usage_error(PROG, "the prompt has " + std::to_string(ids.size()) +
                                          " tokens, more than the context of " + std::to_string(ctx));

  if (!o.seed_given)
    o.seed = (uint64_t)std::chrono::system_clock::now().time_since_epoch().count();
  ml_gen_params gp{};
  gp.max_tokens = o.steps;
  gp.temperature = o.temp;
  gp.top_p = o.top_p;
  gp.top_k = o.top_k;
  gp.min_p = o.min_p;
  gp.presence_penalty = o.presence_penalty;
  gp.frequency_penalty = o.frequency_penalty;
  gp.seed = o.seed;
  gp.stop_at_eos = 1;
  ml_gen_stats st{};
  if (ml_generate(e.exec, e.session, ids.data(), ids.size(), &gp, on_token, nullptr, &st, &err) != ML_OK) {
    std::fputc('\n', stdout);
    return ml::cli::report(PROG, err);
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (st.stop_reason == ML_STOP_CONTEXT)
    std::fprintf(stderr, "%s: stopped at the context limit of %d tokens\n", PROG, ctx);
  const double gen_tps = st.gen_seconds > 0 ? st.n_generated / st.gen_seconds : 0.0;
  const double pp_tps = st.prompt_seconds > 0 ? st.n_prompt / st.prompt_seconds : 0.0;
  std::fprintf(stderr, "%s: seed %llu; prompt %d tokens (%.1f tok/s), generated %d tokens, %.2f tok/s\n", PROG,
               (unsigned long long)o.seed, st.n_prompt, pp_tps, st.n_generated, gen_tps);
  if (o.profile) print_profile(e.exec);
  return ml::cli::EXIT_OK;
}
