// hf_tok_driver: the tokenizer.json tokenizer on the command line, for the oracle suite (e2e/hf)
// that compares it with Hugging Face's tokenizers. The interface of the future ml_tok:
//
//   hf_tok_driver FILE encode [--add-special] [--pieces] [--offsets] TEXT
//       ids space-separated on one line; with --pieces or --offsets one token per line:
//       "id<TAB>token-as-JSON-string<TAB>begin end" (byte offsets in TEXT)
//   hf_tok_driver FILE decode [--skip-special] IDS
//       the decoded text exactly, no newline added; IDS: ids separated by spaces or commas
//   TEXT or IDS "-" reads stdin. Exit 2 with a message on bad input (invalid UTF-8 names the byte
//   offset), 1 when the file cannot be read or loaded.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/vec.h"
#include "model/tokenizer/hf.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: hf_tok_driver FILE encode [--add-special] [--pieces] [--offsets] TEXT\n"
               "       hf_tok_driver FILE decode [--skip-special] IDS\n");
  return 2;
}

std::string read_stdin() {
  std::ios::sync_with_stdio(false);
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return usage();
  std::ifstream f(argv[1], std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "hf_tok_driver: cannot read %s\n", argv[1]);
    return 1;
  }
  const std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ml_hf_tok* t = nullptr;
  ml_error err{};
  if (ml_hf_tok_load(&t, json.data(), json.size(), &err) != ML_OK) {
    std::fprintf(stderr, "hf_tok_driver: %s: %s\n", argv[1], err.msg);
    return 1;
  }
  const std::string cmd = argv[2];
  bool add_special = false, pieces = false, skip_special = false;
  int i = 3;
  for (; i < argc - 1 && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
    const std::string o = argv[i];
    if (o == "--add-special" && cmd == "encode") add_special = true;
    else if ((o == "--pieces" || o == "--offsets") && cmd == "encode") pieces = true;
    else if (o == "--skip-special" && cmd == "decode") skip_special = true;
    else return usage();
  }
  if (i != argc - 1) return usage();
  const std::string arg = std::strcmp(argv[i], "-") == 0 ? read_stdin() : std::string(argv[i]);
  int rc = 0;
  if (cmd == "encode") {
    ml_vec<int32_t> ids;
    ml_vec<ml_tok_span> spans;
    if (ml_hf_tok_encode(t, arg.data(), arg.size(), add_special, &ids, pieces ? &spans : nullptr, &err) != ML_OK) {
      std::fprintf(stderr, "hf_tok_driver: %s\n", err.msg);
      rc = 2;
    } else if (pieces) {
      std::string out;
      for (size_t k = 0; k < ids.size(); k++) {
        size_t n = 0;
        const char* s = ml_hf_tok_token(t, ids[k], &n);
        ml_vec<char> q;
        ml_json_quote(&q, s ? s : "", n);
        out += std::to_string(ids[k]);
        out += '\t';
        out.append(q.data(), q.size());
        out += '\t';
        out += std::to_string(spans[k].begin);
        out += ' ';
        out += std::to_string(spans[k].end);
        out += '\n';
      }
      std::fwrite(out.data(), 1, out.size(), stdout);
    } else {
      std::string out;
      for (size_t k = 0; k < ids.size(); k++) {
        if (k) out += ' ';
        out += std::to_string(ids[k]);
      }
      out += "\n";
      std::fwrite(out.data(), 1, out.size(), stdout);
    }
  } else if (cmd == "decode") {
    std::vector<int32_t> ids;
    std::string norm = arg;
    for (char& c : norm)
      if (c == ',' || c == '\n' || c == '\t' || c == '\r') c = ' ';
    std::istringstream in(norm);
    std::string w;
    while (in >> w) {
      char* end = nullptr;
      const long long v = std::strtoll(w.c_str(), &end, 10);
      if (*end || v < INT32_MIN || v > INT32_MAX) {
        std::fprintf(stderr, "hf_tok_driver: '%s' is not an id\n", w.c_str());
        ml_hf_tok_free(t);
        return 2;
      }
      ids.push_back((int32_t)v);
    }
    ml_vec<char> out;
    if (ml_hf_tok_decode(t, ids.data(), ids.size(), skip_special, &out, &err) != ML_OK) {
      std::fprintf(stderr, "hf_tok_driver: %s\n", err.msg);
      rc = 2;
    } else {
      std::fwrite(out.data(), 1, out.size(), stdout);
    }
  } else {
    rc = usage();
  }
  ml_hf_tok_free(t);
  return rc;
}
