// ml_tok: encode text to token ids, or decode ids to text, with a model's tokenizer or a
// llama2.c tokenizer.bin (docs/user-guide.md, "ml_tok").
//
//   ml_tok MODEL.mlb|TOKENIZER encode [TEXT] [--bos]   ids on one line, space-separated
//   ml_tok MODEL.mlb|TOKENIZER decode [IDS]            the text, byte for byte, no newline added
//
// TEXT (or IDS) comes from stdin when absent; the bytes are used exactly as given (a trailing
// newline from stdin is part of the text). A .mlb file is recognised by its magic and must carry
// a tokenizer section; any other file is read as a llama2.c tokenizer.bin. Exit codes: 0 ok,
// 2 bad usage or input (the message names the option, file or value), 1 other errors.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "krafla.h"

namespace {

const char* const PROG = "ml_tok";

#define ML_TRY_OPEN(expr)              \
  do {                                 \
    const ml_status st_ = (expr);      \
    if (st_ != ML_OK) return st_;      \
  } while (0)

struct options {
  std::string file, command, text;
  bool bos = false;
  uint32_t vocab = 0;
};

// Opens the tokenizer of a .mlb model or a raw tokenizer.bin (ml_tokenizer_open names the file).
ml_status load(const options& o, ml_tokenizer** tok, ml_error* err) {
  ML_TRY_OPEN(ml_tokenizer_open(tok, o.file.c_str(), err));
  if (o.vocab != 0 && (int64_t)o.vocab != ml_tokenizer_vocab_size(*tok)) {
    const int32_t has = ml_tokenizer_vocab_size(*tok);
    ml_tokenizer_close(*tok);
    *tok = nullptr;
    std::snprintf(err->msg, sizeof err->msg, "--vocab %u differs from %s's vocabulary of %d tokens", o.vocab,
                  o.file.c_str(), has);
    err->status = ML_E_ARG;
    return ML_E_ARG;
  }
  return ML_OK;
}

bool read_stdin(std::string* out) {
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) out->append(buf, n);
  return !std::ferror(stdin);
}

int encode(const ml_tokenizer* tok, const options& o) {
  // At most one id per byte, plus the dummy prefix and BOS.
  std::vector<int32_t> ids(o.text.size() + 2);
  size_t n = 0;
  ml_error err;
  if (ml_tokenize(tok, o.text.data(), o.text.size(), o.bos, ids.data(), ids.size(), &n, &err) != ML_OK)
    return ml::cli::report(PROG, err);
  std::string line;
  for (size_t i = 0; i < n; i++) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  return ml::cli::EXIT_OK;
}

// The sequence is decoded as if it followed BOS, so the dummy-prefix space of the first piece is
// dropped; BOS and EOS themselves print nothing.
int decode(const ml_tokenizer* tok, const options& o) {
  std::vector<int32_t> ids;
  std::string bad;
  if (!ml::cli::parse_ids(o.text, &ids, &bad)) return ml::cli::usage_error(PROG, "decode: '" + bad + "' is not a token id");
  const int32_t vocab = ml_tokenizer_vocab_size(tok), bos = ml_tokenizer_bos_id(tok);
  std::string out;
  int32_t prev = bos;
  for (size_t i = 0; i < ids.size(); i++) {
    size_t len = 0;
    const char* piece = ml_token_piece(tok, prev, ids[i], &len);  // BOS and EOS: ""
    if (!piece)
      return ml::cli::usage_error(PROG, "decode: id " + std::to_string(ids[i]) + " (item " + std::to_string(i + 1) +
                                            ") is outside the vocabulary 0.." + std::to_string(vocab - 1));
    out.append(piece, len);
    prev = ids[i];
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return ml::cli::EXIT_OK;
}

}  // namespace

int ml_main(int argc, char** argv) {
  options o;
  CLI::App app{"ml_tok: encode text to token ids or decode ids to text, with the tokenizer of a krafla model (.mlb) "
               "or a llama2.c tokenizer.bin",
               PROG};
  app.add_option("file", o.file, "model (.mlb, with a tokenizer section) or llama2.c tokenizer.bin")->required();
  app.add_option("command", o.command, "encode: text -> ids; decode: ids -> text")
      ->required()
      ->check(CLI::IsMember({"encode", "decode"}));
  auto* text_opt = app.add_option("text", o.text, "the text (encode) or the ids (decode); read from stdin when absent");
  app.add_flag("--bos", o.bos, "encode: put BOS (id 1 for llama2.c) first, as ml_run -p does (default: off)");
  app.add_option("--vocab", o.vocab, "tokenizer.bin: the vocabulary size it must have (default: every token in the file)");
  if (const int rc = ml::cli::parse(app, PROG, argc, argv); rc >= 0) return rc;
  if (text_opt->count() == 0 && !read_stdin(&o.text)) {
    std::fprintf(stderr, "%s: reading stdin failed\n", PROG);
    return ml::cli::EXIT_FAILURE_;
  }

  ml_tokenizer* tok = nullptr;
  ml_error err;
  if (load(o, &tok, &err) != ML_OK) return ml::cli::report(PROG, err);
  const int rc = o.command == "encode" ? encode(tok, o) : decode(tok, o);
  ml_tokenizer_close(tok);
  if (std::fflush(stdout) != 0) {
    std::fprintf(stderr, "%s: writing stdout failed\n", PROG);
    return ml::cli::EXIT_FAILURE_;
  }
  return rc;
}
