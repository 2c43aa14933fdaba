// ml_perplexity: the perplexity of a model on a text, scored in chunks as llama.cpp's
// llama-perplexity does (docs/user-guide.md, "ml_perplexity"):
//   - the text is tokenized once, with the tokenizer's special tokens (BOS for llama2.c and
//     Llama-style tokenizers), and cut into K = tokens / ctx chunks of ctx tokens (the rest is
//     dropped; --chunks caps K);
//   - each chunk is evaluated from an empty cache; when the tokenizer starts a text with one special
//     token (BOS, <|begin_of_text|>: what it puts before "" with add_special), the chunk's first
//     token is replaced by it (the model always sees a text start; --ids: chunks verbatim);
//   - only the second half is scored: the logits at positions ctx/2 .. ctx-2 predict the tokens at
//     ctx/2+1 .. ctx-1, so every scored token has at least ctx/2 tokens of context, and the figure
//     barely depends on where the chunk boundaries fall;
//   - PPL = exp(mean NLL) over all scored tokens; its standard error is PPL * the standard error of
//     the mean NLL (sample standard deviation / sqrt(count)), llama.cpp's "+/-".
// Chunks run in sessions evaluated together (ml_eval_batch: as many chunks as fit the batch), and
// each session's logits are byte-identical to running it alone, so the output does not depend on
// -t or --batch. The log-softmax is computed in double, in id order.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "cli/cli.h"
#include "krafla.h"

namespace {

const char* const PROG = "ml_perplexity";

struct options {
  std::string model, text, tokenizer, kv = "f32";
  int ctx = 0, chunks = 0, threads = 1, batch = 128;
  bool no_pack = false, pack_cache = false, json = false, ids = false;
};

// The NLL of the chunks being evaluated, filled by the logits callback.
struct scorer {
  const std::vector<int32_t>* tokens;
  size_t vocab, ctx, first, chunk0;  // chunk0: the first chunk of the group
  std::vector<double>* nll;          // per chunk: the sum of its scored tokens' NLL
  std::vector<double>* nll2;         // per chunk: the sum of their squares
};

// Called for the scored positions j in [first, ctx-1) of each chunk of the group, in order.
int score(void* user, size_t index, const float* logits) {
  auto* s = static_cast<scorer*>(user);
  const size_t k = index / s->ctx, j = index % s->ctx, chunk = s->chunk0 + k;
  const int32_t target = (*s->tokens)[chunk * s->ctx + j + 1];
  double mx = logits[0];
  for (size_t v = 1; v < s->vocab; ++v) mx = std::max(mx, (double)logits[v]);
  double sum = 0;
  for (size_t v = 0; v < s->vocab; ++v) sum += std::exp((double)logits[v] - mx);
  const double nll = std::log(sum) - ((double)logits[target] - mx);
  (*s->nll)[chunk] += nll;
  (*s->nll2)[chunk] += nll * nll;
  return 0;
}

int check_values(const options& o) {
  if (o.ctx != 0 && o.ctx < 3)
    return ml::cli::usage_error(PROG, "--ctx: must be >= 3 (a chunk scores ctx - 1 - ctx/2 tokens)");
  if (o.chunks < 0) return ml::cli::usage_error(PROG, "--chunks: must be >= 0 (0 = all)");
  if (o.threads < 1 || o.threads > 1024) return ml::cli::usage_error(PROG, "-t: must be in 1..1024");
  if (o.batch < 1 || o.batch > 128) return ml::cli::usage_error(PROG, "--batch: must be in 1..128");
  return -1;
}

// TEXT's tokens (with the tokenizer's special tokens), or its ids verbatim with --ids. *start: the
// one token the tokenizer puts before any text (BOS; <|begin_of_text|>; -1 when none or several),
// which then starts every chunk.
int read_tokens(const options& o, const ml_model* m, std::vector<int32_t>* ids, int32_t* start) {
  std::string text;
  struct stat st_text;
  if (o.text != "-" && stat(o.text.c_str(), &st_text) == 0 && !S_ISREG(st_text.st_mode))
    return ml::cli::usage_error(PROG, o.text + ": the text is not a regular file");
  if (!ml::cli::read_file(o.text, &text)) {
    std::fprintf(stderr, "%s: %s: cannot read the text: %s\n", PROG, o.text.c_str(), std::strerror(errno));
    return ml::cli::EXIT_FAILURE_;
  }
  const int vocab = ml_model_get_info(m).vocab_size;
  *start = -1;
  if (o.ids) {
    std::string bad;
    if (!ml::cli::parse_ids(text, ids, &bad))
      return ml::cli::usage_error(PROG, o.text + ": '" + bad + "' is not a token id");
    for (int32_t id : *ids)
      if (id < 0 || id >= vocab)
        return ml::cli::usage_error(PROG, o.text + ": id " + std::to_string(id) + " is outside the vocabulary 0.." +
                                              std::to_string(vocab - 1));
    return -1;
  }
  const ml_tokenizer* t = ml_model_tokenizer(m);
  if (!t) return ml::cli::usage_error(PROG, o.model + ": the model has no tokenizer (give -z TOKENIZER, or --ids)");
  ml_error err;
  size_t n = 0;
  int32_t probe[8];
  if (ml_tokenize(t, "", 0, 1, probe, 8, &n, &err) != ML_OK) return ml::cli::report(PROG, err);
  if (n == 1) *start = probe[0];
  ids->resize(text.size() + 8);
  ml_status st = ml_tokenize(t, text.data(), text.size(), 1, ids->data(), ids->size(), &n, &err);
  if (st == ML_E_ARG && n > ids->size()) {  // cap too small (cannot happen for these tokenizers)
    ids->resize(n);
    st = ml_tokenize(t, text.data(), text.size(), 1, ids->data(), ids->size(), &n, &err);
  }
  if (st != ML_OK) return ml::cli::report(PROG, err);
  ids->resize(n);
  return -1;
}

void print_json(const options& o, const ml_model_info& info, size_t n_tokens, size_t ctx, int32_t start_id, size_t count,
                const std::vector<double>& chunk_ppl, double nll, double nll_se, double ppl, double ppl_se) {
  std::printf("{\"model\": %s, \"wtype\": \"%s\", \"kv\": \"%s\", \"tokens\": %zu, \"ctx\": %zu, \"chunks\": %zu, "
              "\"scored\": %zu, \"chunk_start\": %d, \"nll\": %.17g, \"nll_stderr\": %.17g, \"ppl\": %.17g, "
              "\"ppl_stderr\": %.17g, \"chunk_ppl\": [",
              ml::cli::json_string(o.model.data(), o.model.size()).c_str(), info.wtype == ML_DT_Q4 ? "q4" : "q8",
              o.kv.c_str(), n_tokens, ctx, chunk_ppl.size(), count, (int)start_id, nll, nll_se, ppl,
              ppl_se);
  for (size_t i = 0; i < chunk_ppl.size(); ++i) std::printf("%s%.17g", i ? ", " : "", chunk_ppl[i]);
  std::printf("]}\n");
}

}  // namespace

int ml_main(int argc, char** argv) {
  ml_install_cleanup_handlers();  // a killed pack cache write leaves no temporary file
  options o;
  CLI::App app{"ml_perplexity: the perplexity of a model on a text, scored in chunks as llama.cpp's llama-perplexity does",
               PROG};
  app.add_option("model", o.model, "model: .mlb, GGUF file or Hugging Face folder")->required();
  app.add_option("text", o.text, "text file to score (\"-\": stdin)")->required();
  app.add_option("--ctx", o.ctx, "tokens per chunk, >= 3 (default 512, at most the model's context)");
  app.add_option("--chunks", o.chunks, "score at most this many chunks (default 0 = all)");
  app.add_flag("--ids", o.ids, "TEXT holds token ids (\"ID ID ...\"), used verbatim (no BOS added or replaced)");
  app.add_flag("--json", o.json, "print one JSON object (perplexity, standard error, per-chunk figures)");
  app.add_option("-z,--tokenizer", o.tokenizer, "llama2.c tokenizer.bin to use instead of the model's own");
  app.add_option("-t,--threads", o.threads, "threads (default 1; the caller is one of them)");
  app.add_option("--batch", o.batch, "tokens per forward step, 1..128 (default 128)");
  ml::cli::add_kv_option(app, &o.kv);
  app.add_flag("--no-pack", o.no_pack, "keep the row-major weight layout (no packed kernels)");
  app.add_flag("--pack-cache", o.pack_cache, "map MODEL.pk<G> with the packed weights, writing it when missing or stale");
  if (const int rc = ml::cli::parse(app, PROG, argc, argv); rc >= 0) return rc;
  if (const int rc = check_values(o); rc >= 0) return rc;

  ml_model_params mp{};
  mp.tokenizer_path = o.tokenizer.empty() ? nullptr : o.tokenizer.c_str();
  mp.ctx = o.ctx;
  mp.no_pack = o.no_pack;
  mp.pack_cache = o.pack_cache;
  mp.n_threads = o.threads;
  ml::cli::handles h;
  ml_error err;
  if (ml_model_open(&h.model, o.model.c_str(), &mp, &err) != ML_OK) {
    if (err.status == ML_E_ARG && o.ctx)  // the context the model cannot take
      return ml::cli::usage_error(PROG, "--ctx " + std::to_string(o.ctx) + ": " + err.msg);
    return ml::cli::report(PROG, err);
  }
  const ml_model_info info = ml_model_get_info(h.model);
  const size_t ctx = o.ctx ? (size_t)o.ctx : (size_t)std::min(512, info.ctx);
  if (ctx < 3) return ml::cli::usage_error(PROG, "the model's context of " + std::to_string(ctx) + " is below 3 tokens");

  std::vector<int32_t> tokens;
  int32_t start_id = -1;
  if (const int rc = read_tokens(o, h.model, &tokens, &start_id); rc >= 0) return rc;
  const bool add_bos = start_id >= 0;
  size_t n_chunks = tokens.size() / ctx;
  if (n_chunks == 0)
    return ml::cli::usage_error(PROG, o.text + ": " + std::to_string(tokens.size()) +
                                          " tokens, fewer than one chunk of --ctx " + std::to_string(ctx) +
                                          " (give a longer text or a smaller --ctx)");
  if (o.chunks > 0) n_chunks = std::min(n_chunks, (size_t)o.chunks);

  // As many chunks per ml_eval_batch as fill the batch (llama.cpp: n_seq = n_batch / n_ctx).
  const size_t group = std::min(n_chunks, std::max<size_t>(1, (size_t)o.batch / ctx));
  ml_exec_params ep{};
  ep.n_threads = o.threads;
  ep.batch = o.batch;
  ml_session_params sp{};
  sp.ctx = (int)ctx;
  sp.kv = ml::cli::kv_type(o.kv);
  if (ml_exec_create(&h.exec, h.model, &ep, &err) != ML_OK) return ml::cli::report(PROG, err);
  h.sessions.assign(group, nullptr);
  for (ml_session*& s : h.sessions)
    if (ml_session_create(&s, h.model, &sp, &err) != ML_OK) return ml::cli::report(PROG, err);
  std::fprintf(stderr, "%s: %s kernels, threads %d, batch %d, kv %s; %zu tokens, %zu chunks of %zu (%zu at a time), %s\n",
               PROG, info.isa, ml_exec_threads(h.exec), ml_exec_batch(h.exec), o.kv.c_str(), tokens.size(), n_chunks,
               ctx, group,
               add_bos ? ("every chunk starts with token " + std::to_string(start_id)).c_str() : "chunks used verbatim");

  const size_t first = ctx / 2;
  std::vector<double> nll(n_chunks, 0.0), nll2(n_chunks, 0.0);
  std::vector<ml_batch_token> batch;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t c0 = 0; c0 < n_chunks; c0 += group) {
    const size_t nc = std::min(group, n_chunks - c0);
    batch.clear();
    for (size_t k = 0; k < nc; ++k) {
      ml_session* s = h.sessions[k];
      if (ml_session_truncate(s, 0, &err) != ML_OK) return ml::cli::report(PROG, err);
      const size_t start = (c0 + k) * ctx;
      for (size_t j = 0; j < ctx; ++j)
        batch.push_back({s, j == 0 && add_bos ? start_id : tokens[start + j], j >= first && j + 1 < ctx});
    }
    scorer sc{&tokens, (size_t)info.vocab_size, ctx, first, c0, &nll, &nll2};
    if (ml_eval_batch(h.exec, batch.data(), batch.size(), score, &sc, &err) != ML_OK) return ml::cli::report(PROG, err);
    if (!o.json) {
      for (size_t k = 0; k < nc; ++k) {  // llama.cpp's running figure: [chunk]PPL so far
        double sum = 0;
        for (size_t c = 0; c <= c0 + k; ++c) sum += nll[c];
        std::printf("[%zu]%.4f,", c0 + k + 1, std::exp(sum / (double)((c0 + k + 1) * (ctx - 1 - first))));
      }
      std::fflush(stdout);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const size_t per_chunk = ctx - 1 - first, count = n_chunks * per_chunk;
  double sum = 0, sum2 = 0;
  std::vector<double> chunk_ppl(n_chunks);
  for (size_t c = 0; c < n_chunks; ++c) {
    sum += nll[c];
    sum2 += nll2[c];
    chunk_ppl[c] = std::exp(nll[c] / (double)per_chunk);
  }
  const double mean = sum / (double)count;
  const double var = sum2 / (double)count - mean * mean;  // llama.cpp's estimate
  const double nll_se = count > 1 && var > 0 ? std::sqrt(var / (double)(count - 1)) : 0.0;
  const double ppl = std::exp(mean), ppl_se = ppl * nll_se;
  if (o.json) {
    print_json(o, info, tokens.size(), ctx, start_id, count, chunk_ppl, mean, nll_se, ppl, ppl_se);
  } else {
    std::printf("\nPPL = %.4f +/- %.5f (%zu tokens scored in %zu chunks of %zu, kv %s)\n", ppl, ppl_se, count,
                n_chunks, ctx, o.kv.c_str());
  }
  std::fprintf(stderr, "%s: %zu tokens evaluated in %.3f s (%.1f tok/s)\n", PROG, n_chunks * ctx, secs,
               secs > 0 ? (double)(n_chunks * ctx) / secs : 0.0);
  return ml::cli::EXIT_OK;
}
