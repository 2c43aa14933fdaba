// Fuzzes the Hugging Face tokenizer.json reader and its encoder (model/tokenizer/hf.h): the input
// is a tokenizer.json; one that loads then encodes and decodes fixed strings -- the BPE merges,
// added-token splitting, normalizers, pre-tokenizer regexes and decoders of a tokenizer the fuzzer
// chose. Checks: encoding yields ids inside the vocabulary, every piece is readable, and decoding
// with and without special tokens succeeds. Seeds: the real SmolLM2 and tinystories tokenizer.json
// (run.py copies them from shared/) and small hand-made ones (fuzz/corpus/hf_tokenizer).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/vec.h"
#include "model/tokenizer/hf.h"

namespace {

const char* const kTexts[] = {"", "a", "Hello world, it's 2024!", "  two  spaces \n\n\t x", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                              "<|im_start|>user\nhi<|im_end|>", "<s> [INST] x [/INST]", "\xe4\xbd\xa0\xe5\xa5\xbd 123456"};

void check(const ml_hf_tok* t, const char* text) {
  ml_vec<int32_t> ids;
  ml_vec<ml_tok_span> spans;
  ml_error err{};
  const size_t len = std::strlen(text);
  for (bool special : {false, true}) {
    ids.clear();
    spans.clear();
    if (ml_hf_tok_encode(t, text, len, special, &ids, &spans, &err) != ML_OK) continue;
    const int32_t vocab = ml_hf_tok_vocab(t);
    if (spans.size() != ids.size()) std::abort();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab) std::abort();  // an id outside the vocabulary
      if (spans[i].begin > spans[i].end || spans[i].end > len) std::abort();  // a span outside the text
    }
    for (bool skip : {false, true}) {
      ml_vec<char> out;
      if (ml_hf_tok_decode(t, ids.data(), ids.size(), skip, &out, &err) != ML_OK && err.status != ML_E_NOMEM) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A heap copy of exactly size bytes, so that ASan catches a read past the end.
  char* buf = static_cast<char*>(std::malloc(size ? size : 1));
  std::memcpy(buf, data, size);
  ml_hf_tok* t = nullptr;
  ml_error err{};
  const ml_status s = ml_hf_tok_load(&t, buf, size, &err);
  std::free(buf);  // the tokenizer keeps what it needs (the contract)
  if (s != ML_OK) return 0;
  for (const char* text : kTexts) check(t, text);
  const int32_t vocab = ml_hf_tok_vocab(t);
  for (int32_t id : {-1, 0, 1, vocab - 1, vocab}) {
    size_t len = 0;
    ml_hf_tok_token(t, id, &len);
    ml_hf_tok_is_special(t, id);
    if (id >= 0 && id < vocab) {
      ml_vec<char> p;
      ml_hf_tok_piece(t, id, true, &p, &err);
      ml_hf_tok_piece(t, id, false, &p, &err);
    }
  }
  ml_hf_tok_free(t);
  return 0;
}
