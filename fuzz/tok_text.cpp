// Fuzzes what ml_tok and ml_run -p do with text: arbitrary bytes tokenized with the real
// 32000-token Llama 2 tokenizer (shared/models/tokenizer.bin, loaded once) through the public
// API (ml_tokenize, ml_token_piece, ml_detok_*), then decoded again.
// Round trip: with BOS first, the pieces after BOS concatenate to the input exactly (the dummy
// prefix space is dropped after BOS; every byte without a token of its own has a <0xNN> byte
// token). The one exception is text holding "<0x": a merge may then build a byte token's literal
// spelling "<0xNN>", which decodes to that raw byte, as in llama2.c's run.c. Both decoders are
// checked: ml_token_piece concatenated, and ml_detok (whole UTF-8 characters, then a flush).
// Input: the text. Seeds: fuzz/corpus/tok_text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "krafla.h"

namespace {

ml_tokenizer* g_tok = nullptr;
size_t g_max_piece = 0;  // ml_detok_max_bytes, a walk over the vocabulary: once

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string path = fz::shared_dir() + "/models/tokenizer.bin";
  ml_error err{};
  if (ml_tokenizer_open(&g_tok, path.c_str(), &err) != ML_OK) {
    std::fprintf(stderr, "tok_text: %s: %s\n", path.c_str(), err.msg);
    std::exit(1);
  }
  g_max_piece = ml_detok_max_bytes(g_tok);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  ml_error err{};
  size_t n = 0;
  // First the count (cap 0 must fail with ML_E_ARG and set n), then the ids.
  const ml_status s0 = ml_tokenize(g_tok, text, size, 1, nullptr, 0, &n, &err);
  if (s0 != ML_E_ARG || n < 1) std::abort();
  std::vector<int32_t> ids(n);
  size_t n2 = 0;
  if (ml_tokenize(g_tok, text, size, 1, ids.data(), ids.size(), &n2, &err) != ML_OK || n2 != n) std::abort();
  if (ids[0] != ml_tokenizer_bos_id(g_tok)) std::abort();
  if (n > size + 2) std::abort();  // at most one token per byte, plus BOS and the dummy prefix

  std::string pieces, detok;
  ml_detok d;
  ml_detok_reset(&d, -1);
  std::vector<char> out(g_max_piece);
  int32_t prev = -1;
  const int32_t vocab = ml_tokenizer_vocab_size(g_tok);
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) std::abort();
    size_t len = 0;
    const char* p = ml_token_piece(g_tok, prev, id, &len);
    if (!p && len) std::abort();
    pieces.append(p ? p : "", len);
    const size_t k = ml_detok_push(g_tok, &d, id, out.data(), out.size());
    if (k > out.size()) std::abort();
    detok.append(out.data(), k);
    prev = id;
  }
  const size_t k = ml_detok_flush(&d, out.data(), out.size());
  detok.append(out.data(), k);
  if (detok != pieces) std::abort();  // ml_detok hands out the same bytes, only regrouped
  const std::string in(text, size);
  if (in.find("<0x") == std::string::npos && pieces != in) {
    std::fprintf(stderr, "tok_text: decode(encode(x)) != x (%zu bytes in, %zu out)\n", in.size(), pieces.size());
    std::abort();
  }
  return 0;
}
