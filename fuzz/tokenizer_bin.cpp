// Fuzzes the llama2.c tokenizer.bin reader (model/tokenizer/llama2c.h): ml_tokenizer_load_llama2c
// over the whole input with vocab_size 0 (as many tokens as the file holds), then, for a file
// that loads, encoding and decoding a few fixed strings: run.c's merge loop over a vocabulary
// the fuzzer chose (duplicate strings, empty tokens, NaN-free but extreme scores, no byte tokens).
// Input: the file's bytes. Seeds: tok512.bin (fuzz/corpus/tokenizer_bin) and small edits of it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "model/tokenizer/tokenizer.h"

namespace {

const char* const kTexts[] = {"", "a", "Once upon a time", "  two  spaces ", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                              "\xff\xfe\x80 broken \xc3", "<0x41><s></s>"};

void roundtrip(const ml_tokenizer* t, const char* text) {
  int32_t ids[256];
  size_t n = 0;
  ml_error err{};
  const size_t len = std::strlen(text);
  if (ml_tokenizer_encode(t, text, len, true, ids, 256, &n, &err) != ML_OK) return;
  if (n > 256) std::abort();  // success must fit the caller's buffer
  const int32_t vocab = ml_tokenizer_vocab(t);
  int32_t prev = -1;
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) std::abort();  // an id outside the vocabulary
    size_t plen = 0;
    const char* p = ml_tokenizer_piece(t, prev, ids[i], &plen);
    if (p && plen) {
      volatile char c = p[plen - 1];  // the piece's bytes must be readable (ASan checks)
      (void)c;
    }
    prev = ids[i];
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A heap copy of exactly size bytes, so that ASan catches a read past the end.
  uint8_t* buf = static_cast<uint8_t*>(std::malloc(size ? size : 1));
  std::memcpy(buf, data, size);
  ml_tokenizer* t = nullptr;
  ml_error err{};
  const ml_status s = ml_tokenizer_load_llama2c(&t, buf, size, 0, &err);
  std::free(buf);  // the tokenizer copies what it needs (the contract)
  if (s != ML_OK) return 0;
  for (const char* text : kTexts) roundtrip(t, text);
  const int32_t vocab = ml_tokenizer_vocab(t);
  for (int32_t id : {-1, 0, 1, 2, vocab - 1, vocab}) {
    size_t len = 0;
    ml_tokenizer_token(t, id, &len);
    ml_tokenizer_piece(t, 1, id, &len);
  }
  ml_tokenizer_set_special(t, vocab - 1, 0, &err);
  ml_tokenizer_free(t);
  return 0;
}
