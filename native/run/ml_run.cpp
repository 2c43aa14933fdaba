// ml_run: generate text from a model, or dump the logits of a prompt (docs/user-guide.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "src/engine/krafla.h"

namespace {

const char* const PROG = "ml_run";

struct options {
  std::string model, tokenizer, prompt, tokens, dump_logits, kv = "f32";
  int steps = 256, top_k = 0, threads = 1, ctx = 0;
  float temp = 1.0f, top_p = 0.9f;
  uint64_t seed = 0;
  bool seed_given = false;
};

int on_token(void* /*user*/, int32_t /*id*/, const char* piece, size_t len, int /*generated*/) {
  std::fwrite(piece, 1, len, stdout);
  std::fflush(stdout);
  return 0;
}

// Feeds the prompt one position at a time and writes each position's logits (float32 rows).
int dump_logits(ml_engine* e, const std::vector<int32_t>& ids, const std::string& path) {
  const ml_engine_info info = ml_engine_get_info(e);
  if (ids.size() > (size_t)info.ctx)
    return ml::cli::usage_error(PROG, "--dump-logits: " + std::to_string(ids.size()) +
                                          " tokens do not fit the context of " + std::to_string(info.ctx));
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror((std::string(PROG) + ": --dump-logits " + path).c_str());
    return ml::cli::EXIT_FAILURE_;
  }
  ml_error err;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ml_engine_eval(e, &ids[i], 1, (int)i, &err) != ML_OK) {
      std::fclose(f);
      return ml::cli::report(PROG, err);
    }
    if (std::fwrite(ml_engine_logits(e), sizeof(float), (size_t)info.vocab_size, f) != (size_t)info.vocab_size) {
      std::fclose(f);
      return ml::cli::usage_error(PROG, "--dump-logits: write to " + path + " failed");
    }
  }
  if (std::fclose(f) != 0) return ml::cli::usage_error(PROG, "--dump-logits: closing " + path + " failed");
  return ml::cli::EXIT_OK;
}

int check_values(const options& o) {
  if (!std::isfinite(o.temp) || o.temp < 0) return ml::cli::usage_error(PROG, "--temp: must be a finite number >= 0");
  if (!std::isfinite(o.top_p) || o.top_p <= 0 || o.top_p > 1)
    return ml::cli::usage_error(PROG, "--top-p: must be in (0, 1]");
  if (o.top_k < 0) return ml::cli::usage_error(PROG, "--top-k: must be >= 0");
  if (o.steps < 0) return ml::cli::usage_error(PROG, "-n: must be >= 0");
  if (o.threads < 1) return ml::cli::usage_error(PROG, "-t: must be >= 1");
  if (o.ctx < 0) return ml::cli::usage_error(PROG, "--ctx: must be >= 1");
  if (!o.prompt.empty() && !o.tokens.empty()) return ml::cli::usage_error(PROG, "-p and --tokens exclude each other");
  return -1;
}

}  // namespace

int ml_main(int argc, char** argv) {
  options o;
  CLI::App app{"ml_run: generate text with a krafla model (.mlb), or dump its logits for a prompt", PROG};
  app.add_option("model", o.model, "model file (.mlb, from ml_convert)")->required();
  app.add_option("-z,--tokenizer", o.tokenizer, "llama2.c tokenizer.bin to use instead of the model's own");
  app.add_option("-p,--prompt", o.prompt, "prompt text (BOS is prepended)");
  app.add_option("--tokens", o.tokens, "prompt as token ids, \"ID ID ...\", used verbatim (no BOS added)");
  app.add_option("-n,--steps", o.steps, "tokens to generate (default 256)");
  app.add_option("--temp", o.temp, "temperature, 0 = greedy (default 1.0)");
  app.add_option("--top-p", o.top_p, "nucleus sampling threshold in (0, 1] (default 0.9; 1 = off)");
  app.add_option("--top-k", o.top_k, "sample from the k most likely tokens (default 0 = off)");
  auto* seed_opt = app.add_option("--seed", o.seed, "random seed (default: from the clock, printed)");
  app.add_option("-t,--threads", o.threads, "threads (default 1)");
  app.add_option("--ctx", o.ctx, "context length (default: the model's max_seq)");
  app.add_option("--kv", o.kv, "KV cache type: f32 (default), q8 or f16")->check(CLI::IsMember({"f32", "q8", "f16"}));
  app.add_option("--dump-logits", o.dump_logits, "feed the prompt and write each position's logits (float32 rows) to FILE");
  if (const int rc = ml::cli::parse(app, PROG, argc, argv); rc >= 0) return rc;
  if (const int rc = check_values(o); rc >= 0) return rc;
  o.seed_given = seed_opt->count() > 0;

  std::vector<int32_t> ids;
  if (!o.tokens.empty()) {
    std::string bad;
    if (!ml::cli::parse_ids(o.tokens, &ids, &bad)) return ml::cli::usage_error(PROG, "--tokens: '" + bad + "' is not a token id");
    if (ids.empty()) return ml::cli::usage_error(PROG, "--tokens: no ids given");
  }

  ml_engine_params params{};
  params.tokenizer_path = o.tokenizer.empty() ? nullptr : o.tokenizer.c_str();
  params.ctx = o.ctx;
  params.kv = o.kv == "q8" ? ML_ENGINE_KV_Q8 : o.kv == "f16" ? ML_ENGINE_KV_F16 : ML_ENGINE_KV_F32;
  ml_engine* e = nullptr;
  ml_error err;
  if (ml_engine_open(&e, o.model.c_str(), &params, &err) != ML_OK) return ml::cli::report(PROG, err);
  const ml_engine_info info = ml_engine_get_info(e);

  int rc = ml::cli::EXIT_OK;
  if (ids.empty()) {  // the prompt text, BOS first
    std::vector<int32_t> buf(o.prompt.size() + 3);
    size_t n = 0;
    if (ml_engine_tokenize(e, o.prompt.data(), o.prompt.size(), 1, buf.data(), buf.size(), &n, &err) != ML_OK) {
      ml_engine_close(e);
      return ml::cli::report(PROG, err);
    }
    ids.assign(buf.begin(), buf.begin() + (long)n);
  }
  for (int32_t id : ids)
    if (id < 0 || id >= info.vocab_size) {
      ml_engine_close(e);
      return ml::cli::usage_error(PROG, "--tokens: id " + std::to_string(id) + " is outside the vocabulary 0.." +
                                            std::to_string(info.vocab_size - 1));
    }

  if (!o.dump_logits.empty()) {
    rc = dump_logits(e, ids, o.dump_logits);
    ml_engine_close(e);
    return rc;
  }
  if (ids.size() > (size_t)info.ctx) {
    ml_engine_close(e);
    return ml::cli::usage_error(PROG, "the prompt has " + std::to_string(ids.size()) +
                                          " tokens, more than the context of " + std::to_string(info.ctx));
  }

  if (!o.seed_given)
    o.seed = (uint64_t)std::chrono::system_clock::now().time_since_epoch().count();
  ml_gen_params gp{};
  gp.max_tokens = o.steps;
  gp.temperature = o.temp;
  gp.top_p = o.top_p;
  gp.top_k = o.top_k;
  gp.seed = o.seed;
  gp.stop_at_eos = 1;
  ml_gen_stats st{};
  if (ml_engine_generate(e, ids.data(), ids.size(), &gp, on_token, nullptr, &st, &err) != ML_OK) {
    ml_engine_close(e);
    std::fputc('\n', stdout);
    return ml::cli::report(PROG, err);
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (st.stop_reason == ML_STOP_CONTEXT)
    std::fprintf(stderr, "%s: stopped at the context limit of %d tokens\n", PROG, info.ctx);
  const double gen_tps = st.gen_seconds > 0 ? st.n_generated / st.gen_seconds : 0.0;
  const double pp_tps = st.prompt_seconds > 0 ? st.n_prompt / st.prompt_seconds : 0.0;
  std::fprintf(stderr, "%s: %s, threads %d, seed %llu; prompt %d tokens (%.1f tok/s), generated %d tokens, %.2f tok/s\n",
               PROG, info.isa, 1, (unsigned long long)o.seed, st.n_prompt, pp_tps, st.n_generated, gen_tps);
  ml_engine_close(e);
  return rc;
}
