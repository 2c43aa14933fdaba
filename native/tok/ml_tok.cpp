// ml_tok: text to token ids and back, and chat templates, with the tokenizer of a krafla model, a
// Hugging Face tokenizer or a llama2.c tokenizer.bin (docs/user-guide.md, "ml_tok"). Each command
// means exactly what Hugging Face's transformers does, so scripts can check one against the other:
//
//   ml_tok FILE encode [TEXT] [--add-special] [--pieces] [--offsets]
//       tokenizer.encode(TEXT, add_special_tokens=False|True): ids on one line, space-separated;
//       --pieces / --offsets: one token a line, "id<TAB>piece" [<TAB>begin end] (the stored token
//       string as a JSON string; byte offsets into TEXT)
//   ml_tok FILE decode [IDS] [--skip-special]
//       tokenizer.decode(ids, skip_special_tokens=False|True), byte for byte, no newline added
//   ml_tok FILE batch
//       many requests through one process (scripts, the oracle tests): one JSON array a line on
//       stdin, ["encode", add_special, "text"] or ["decode", skip_special, [ids]], one JSON object
//       a line on stdout, {"ids": [...], "offsets": [[begin, end], ...]} (offsets: Hugging Face
//       tokenizers), {"text": "..."} or {"error": "message"}
//   ml_tok FILE chat MESSAGES.json [--no-generation-prompt] [--ids] [--chat-template F] [--vars JSON]
//       apply_chat_template(messages, tokenize=False, add_generation_prompt=True|False); --ids:
//       the ids of that text (encoded without special-token additions, as apply_chat_template's
//       tokenize=True does)
//
// FILE: a .mlb (its tokenizer section), a folder with tokenizer.json (+ tokenizer_config.json,
// generation_config.json), a tokenizer.json, or a llama2.c tokenizer.bin. TEXT, IDS or the
// messages come from stdin when absent or "-"; bytes are used exactly as given. Exit codes: 0 ok,
// 2 bad usage or input (the message names the option, file, value or byte offset), 1 other errors.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "krafla.h"

namespace {

const char* const PROG = "ml_tok";

struct options {
  std::string file, command, text, chat_template, vars;
  bool add_special = false, skip_special = false, pieces = false, offsets = false;
  bool no_generation_prompt = false, ids = false;
  uint32_t vocab = 0;
};

void print_ids(const int32_t* ids, size_t n) {
  std::string line;
  for (size_t i = 0; i < n; i++) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
}

int encode(const ml_tokenizer* tok, const options& o) {
  ml_error err;
  size_t n = 0;
  // The first call sizes the result (ML_E_ARG with *n set when it does not fit).
  std::vector<int32_t> ids(o.text.size() + 8);
  std::vector<uint32_t> spans(2 * ids.size());
  for (int attempt = 0; attempt < 2; ++attempt) {
    const ml_status s = o.offsets ? ml_tokenize_spans(tok, o.text.data(), o.text.size(), o.add_special, ids.data(),
                                                      spans.data(), ids.size(), &n, &err)
                                  : ml_tokenize(tok, o.text.data(), o.text.size(), o.add_special, ids.data(), ids.size(),
                                                &n, &err);
    if (s == ML_OK) break;
    if (n <= ids.size() || attempt == 1) return ml::cli::report(PROG, err);
    ids.resize(n);
    spans.resize(2 * n);
  }
  if (!o.pieces && !o.offsets) {
    print_ids(ids.data(), n);
    return ml::cli::EXIT_OK;
  }
  std::string out;
  for (size_t i = 0; i < n; i++) {
    size_t len = 0;
    const char* s = ml_token_text(tok, ids[i], &len);
    out += std::to_string(ids[i]) + '\t' + ml::cli::json_string(s ? s : "", s ? len : 0);
    if (o.offsets) out += '\t' + std::to_string(spans[2 * i]) + ' ' + std::to_string(spans[2 * i + 1]);
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return ml::cli::EXIT_OK;
}

int decode(const ml_tokenizer* tok, const options& o) {
  std::vector<int32_t> ids;
  std::string bad;
  if (!ml::cli::parse_ids(o.text, &ids, &bad)) return ml::cli::usage_error(PROG, "decode: '" + bad + "' is not a token id");
  ml_error err;
  size_t len = 0;
  std::string out(256, '\0');
  ml_status s = ml_detokenize(tok, ids.data(), ids.size(), o.skip_special, out.data(), out.size(), &len, &err);
  if (s != ML_OK && len > out.size()) {
    out.resize(len);
    s = ml_detokenize(tok, ids.data(), ids.size(), o.skip_special, out.data(), out.size(), &len, &err);
  }
  if (s != ML_OK) return ml::cli::report(PROG, err);
  std::fwrite(out.data(), 1, len, stdout);
  return ml::cli::EXIT_OK;
}

// One batch request (see the top of this file) to its reply.
nlohmann::json batch_reply(const ml_tokenizer* tok, const nlohmann::json& q) {
  using nlohmann::json;
  if (!q.is_array() || q.size() != 3 || !q[0].is_string() || !q[1].is_boolean())
    return json{{"error", "a request is [\"encode\", add_special, text] or [\"decode\", skip_special, [ids]]"}};
  const std::string cmd = q[0].get<std::string>();
  const bool flag = q[1].get<bool>();
  ml_error err;
  if (cmd == "encode" && q[2].is_string()) {
    const std::string text = q[2].get<std::string>();
    const bool hf = ml_tokenizer_is_hf(tok) != 0;
    std::vector<int32_t> ids(text.size() + 8);
    std::vector<uint32_t> spans(2 * ids.size());
    size_t n = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      const ml_status s = hf ? ml_tokenize_spans(tok, text.data(), text.size(), flag, ids.data(), spans.data(), ids.size(), &n, &err)
                             : ml_tokenize(tok, text.data(), text.size(), flag, ids.data(), ids.size(), &n, &err);
      if (s == ML_OK) break;
      if (n <= ids.size() || attempt == 1) return json{{"error", err.msg}};
      ids.resize(n);
      spans.resize(2 * n);
    }
    ids.resize(n);
    json r{{"ids", ids}};
    if (hf) {
      json off = json::array();
      for (size_t i = 0; i < n; ++i) off.push_back({spans[2 * i], spans[2 * i + 1]});
      r["offsets"] = off;
    }
    return r;
  }
  if (cmd == "decode" && q[2].is_array()) {
    std::vector<int32_t> ids;
    for (const json& v : q[2]) {
      if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
        return json{{"error", "decode: every id must be an integer"}};
      ids.push_back((int32_t)v.get<int64_t>());
    }
    size_t len = 0;
    std::string out(256, '\0');
    ml_status s = ml_detokenize(tok, ids.data(), ids.size(), flag, out.data(), out.size(), &len, &err);
    if (s != ML_OK && len > out.size()) {
      out.resize(len);
      s = ml_detokenize(tok, ids.data(), ids.size(), flag, out.data(), out.size(), &len, &err);
    }
    if (s != ML_OK) return json{{"error", err.msg}};
    out.resize(len);
    return json{{"text", out}};
  }
  return json{{"error", "unknown request " + q[0].dump()}};
}

int batch(const ml_tokenizer* tok) {
  std::string line;
  int ch;
  for (;;) {
    line.clear();
    while ((ch = std::fgetc(stdin)) != EOF && ch != '\n') line += (char)ch;
    if (ch == EOF && line.empty()) break;
    const nlohmann::json q = nlohmann::json::parse(line, nullptr, false);
    const nlohmann::json r = q.is_discarded() ? nlohmann::json{{"error", "the request is not JSON"}} : batch_reply(tok, q);
    const std::string out = r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (ch == EOF) break;
  }
  return ml::cli::EXIT_OK;
}

int chat(const ml_tokenizer* tok, const options& o) {
  std::string messages, tmpl;
  const std::string from = o.text.empty() ? "-" : o.text;
  if (!ml::cli::read_file(from, &messages))
    return ml::cli::usage_error(PROG, "chat: cannot read " + (from == "-" ? std::string("stdin") : from));
  if (!o.chat_template.empty() && !ml::cli::read_file(o.chat_template, &tmpl))
    return ml::cli::usage_error(PROG, "--chat-template: cannot read " + o.chat_template);
  ml_chat_params p{};
  p.messages = messages.data();
  p.messages_len = messages.size();
  p.add_generation_prompt = o.no_generation_prompt ? 0 : 1;
  if (!o.vars.empty()) p.extra = o.vars.data(), p.extra_len = o.vars.size();
  if (!o.chat_template.empty()) p.chat_template = tmpl.data(), p.chat_template_len = tmpl.size();
  char* text = nullptr;
  size_t len = 0;
  ml_error err;
  if (ml_chat_apply(tok, &p, &text, &len, &err) != ML_OK) return ml::cli::report(PROG, err);
  options enc = o;
  enc.text.assign(text, len);
  ml_free(text);
  if (!o.ids) {
    std::fwrite(enc.text.data(), 1, enc.text.size(), stdout);
    return ml::cli::EXIT_OK;
  }
  enc.add_special = false;
  enc.pieces = enc.offsets = false;
  return encode(tok, enc);
}

}  // namespace

int ml_main(int argc, char** argv) {
  options o;
  CLI::App app{"ml_tok: text to token ids and back, and chat templates, as Hugging Face's tokenizers and transformers "
               "do them, with the tokenizer of a krafla model (.mlb), a Hugging Face tokenizer (folder or "
               "tokenizer.json) or a llama2.c tokenizer.bin",
               PROG};
  app.add_option("file", o.file, "model (.mlb), Hugging Face folder or tokenizer.json, or llama2.c tokenizer.bin")->required();
  app.add_option("command", o.command, "encode: text -> ids; decode: ids -> text; chat: messages -> prompt")
      ->required()
      ->check(CLI::IsMember({"encode", "decode", "chat", "batch"}));
  auto* text_opt = app.add_option("text", o.text,
                                  "the text (encode), the ids (decode) or the messages' JSON file (chat); stdin when "
                                  "absent or -");
  ml::cli::allow_empty(text_opt);
  app.add_flag("--add-special,--bos", o.add_special,
               "encode: add the special tokens (BOS; a Hugging Face tokenizer's post-processor), as "
               "add_special_tokens=True");
  app.add_flag("--skip-special", o.skip_special, "decode: leave out special tokens (skip_special_tokens=True)");
  app.add_flag("--pieces", o.pieces, "encode: one token a line: id and its stored string");
  app.add_flag("--offsets", o.offsets, "encode: one token a line: id, string and byte offsets begin end (HF only)");
  app.add_flag("--no-generation-prompt", o.no_generation_prompt, "chat: add_generation_prompt=False");
  app.add_flag("--ids", o.ids, "chat: print the ids of the rendered prompt instead of its text");
  app.add_option("--chat-template", o.chat_template, "chat: a Jinja template file replacing the tokenizer's");
  app.add_option("--vars", o.vars, "chat: a JSON object of extra template variables, e.g. '{\"enable_thinking\":false}'");
  app.add_option("--vocab", o.vocab, "tokenizer.bin: the vocabulary size it must have (default: every token in the file)");
  if (const int rc = ml::cli::parse(app, PROG, argc, argv); rc >= 0) return rc;
  if ((o.command == "encode" || o.command == "decode") && (text_opt->count() == 0 || o.text == "-")) {
    o.text.clear();
    if (!ml::cli::read_file("-", &o.text)) {
      std::fprintf(stderr, "%s: reading stdin failed\n", PROG);
      return ml::cli::EXIT_FAILURE_;
    }
  }

  ml_tokenizer* tok = nullptr;
  ml_error err;
  if (ml_tokenizer_open(&tok, o.file.c_str(), &err) != ML_OK) return ml::cli::report(PROG, err);
  if (o.vocab != 0 && (int64_t)o.vocab != ml_tokenizer_vocab_size(tok)) {
    const int32_t has = ml_tokenizer_vocab_size(tok);
    ml_tokenizer_close(tok);
    return ml::cli::usage_error(PROG, "--vocab " + std::to_string(o.vocab) + " differs from " + o.file +
                                          "'s vocabulary of " + std::to_string(has) + " tokens");
  }
  const int rc = o.command == "encode"   ? encode(tok, o)
                 : o.command == "decode" ? decode(tok, o)
                 : o.command == "batch"  ? batch(tok)
                                         : chat(tok, o);
  ml_tokenizer_close(tok);
  if (std::fflush(stdout) != 0) {
    std::fprintf(stderr, "%s: writing stdout failed\n", PROG);
    return ml::cli::EXIT_FAILURE_;
  }
  return rc;
}
