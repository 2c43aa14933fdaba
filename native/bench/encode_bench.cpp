// ml_bench --tokenizer FILE --encode TEXT...: encoding speed of a tokenizer (any kind ml_tok
// opens) on whole text files, best of --runs, as Markdown. e2e/hf/bench_encode.mjs runs it beside
// Hugging Face's Rust library on the same files (docs/benchmarks.md, "Tokenizers").
#include "bench/encode_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "krafla.h"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int bench_encode(const char* prog, const std::string& tokenizer, const std::vector<std::string>& texts, int runs) {
  ml_tokenizer* tok = nullptr;
  ml_error err;
  if (ml_tokenizer_open(&tok, tokenizer.c_str(), &err) != ML_OK) return ml::cli::report(prog, err);
  std::printf("| text | bytes | tokens | best ms | MB/s | tokens/s |\n| --- | --- | --- | --- | --- | --- |\n");
  int rc = ml::cli::EXIT_OK;
  for (const std::string& path : texts) {
    std::string text;
    if (!ml::cli::read_file(path, &text)) {
      rc = ml::cli::usage_error(prog, "--encode: cannot read " + path);
      break;
    }
    std::vector<int32_t> ids(text.size() + 8);
    size_t n = 0;
    double best = 1e30;
    for (int r = 0; r < runs && rc == ml::cli::EXIT_OK; ++r) {
      const double t0 = now();
      if (ml_tokenize(tok, text.data(), text.size(), 0, ids.data(), ids.size(), &n, &err) != ML_OK)
        rc = ml::cli::report(prog, err);
      best = std::min(best, now() - t0);
    }
    if (rc != ml::cli::EXIT_OK) break;
    const size_t slash = path.find_last_of('/');
    std::printf("| %s | %zu | %zu | %.2f | %.2f | %.0f |\n", path.substr(slash == std::string::npos ? 0 : slash + 1).c_str(),
                text.size(), n, best * 1e3, text.size() / best / 1e6, n / best);
  }
  ml_tokenizer_close(tok);
  return rc;
}
