// Fuzzes encoding and decoding of arbitrary text with real tokenizers (SmolLM2's byte-level
// tokenizer.json and tinystories' SentencePiece-style one, loaded once from shared/): the input's
// first byte picks the tokenizer and the options, the rest is the text. Checks: invalid UTF-8 is
// refused with ML_E_ARG; valid text encodes to ids inside the vocabulary with spans inside the
// text, ordered; decode(encode(text)) succeeds; the streaming pieces concatenate to the decode.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/vec.h"
#include "fuzz_util.h"
#include "model/tokenizer/hf.h"

namespace {

ml_hf_tok* load(const char* rel) {
  std::string json;
  if (!fz::read_file(fz::shared_dir() + "/" + rel, &json)) return nullptr;
  ml_hf_tok* t = nullptr;
  ml_error err{};
  if (ml_hf_tok_load(&t, json.data(), json.size(), &err) != ML_OK) std::abort();  // a real file must load
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ml_hf_tok* toks[2] = {load("data/hf/smollm2-135m-instruct/tokenizer.json"),
                               load("models/tinystories-656k-hf/tokenizer.json")};
  if (size < 1) return 0;
  const ml_hf_tok* t = toks[data[0] & 1];
  if (!t) return 0;
  const bool special = data[0] & 2;
  const size_t len = size - 1;
  char* text = static_cast<char*>(std::malloc(len ? len : 1));
  std::memcpy(text, data + 1, len);
  ml_vec<int32_t> ids;
  ml_vec<ml_tok_span> spans;
  ml_error err{};
  const ml_status s = ml_hf_tok_encode(t, text, len, special, &ids, &spans, &err);
  if (s == ML_OK) {
    const int32_t vocab = ml_hf_tok_vocab(t);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab) std::abort();
      if (spans[i].begin > spans[i].end || spans[i].end > len) std::abort();
    }
    ml_vec<char> whole, pieces;
    if (ml_hf_tok_decode(t, ids.data(), ids.size(), false, &whole, &err) != ML_OK) std::abort();
    for (size_t i = 0; i < ids.size(); ++i)
      if (ml_hf_tok_piece(t, ids[i], i == 0, &pieces, &err) != ML_OK) std::abort();
    // The streaming guarantee of hf.h: the pieces concatenate to the whole decode -- unless the
    // whole decode replaced bytes that are not UTF-8 with U+FFFD (as the Rust library does; the
    // pieces keep the raw bytes, which the caller joins into characters).
    static const char kReplacement[] = "\xEF\xBF\xBD";
    bool lossy = false;
    for (size_t i = 0; i + 3 <= whole.size() && !lossy; ++i) lossy = std::memcmp(whole.data() + i, kReplacement, 3) == 0;
    if (!lossy &&
        (pieces.size() != whole.size() || (whole.size() && std::memcmp(pieces.data(), whole.data(), whole.size()) != 0)))
      std::abort();
  } else if (s != ML_E_ARG) {
    std::abort();  // text is refused only as a bad argument (invalid UTF-8)
  }
  std::free(text);
  return 0;
}
