// The public API's tokenizers (krafla.h): a model's own, or one opened alone from a .mlb or a
// llama2.c tokenizer.bin (ml_tok), and the incremental detokenizer that releases whole UTF-8
// characters only.
#include <cstring>

#include "core/file.h"
#include "krafla.h"
#include "model/format.h"
#include "model/tokenizer/llama2c.h"

namespace {

// The length of the UTF-8 sequence a lead byte starts (0: not a lead byte).
int utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

// How many bytes at the end of p[0, n) are an incomplete character to hold back (0..3).
size_t incomplete_tail(const unsigned char* p, size_t n) {
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const unsigned char c = p[n - back];
    if (is_cont(c)) continue;
    const int need = utf8_len(c);
    return need > (int)back ? back : 0;  // a lead byte still missing continuation bytes
  }
  return 0;
}

}  // namespace

extern "C" {

ml_status ml_tokenizer_open(ml_tokenizer** out, const char* path, ml_error* err) {
  *out = nullptr;
  ml_file f;
  ML_TRY(ml_file_open(&f, path, err));
  ml_status s;
  if (f.size >= sizeof ML_MLB_MAGIC && std::memcmp(f.data, ML_MLB_MAGIC, sizeof ML_MLB_MAGIC) == 0) {
    ml_mlb mlb;
    s = ml_mlb_parse(&mlb, f.data, f.size, err);
    if (s == ML_OK && !mlb.tokenizer)
      s = ml_fail(err, ML_E_ARG, "the model has no tokenizer section; pass a tokenizer.bin instead");
    else if (s == ML_OK && mlb.tokenizer_kind != 1)
      s = ml_fail(err, ML_E_FORMAT, "tokenizer kind %u is not supported (1 = llama2.c)", mlb.tokenizer_kind);
    if (s == ML_OK) s = ml_tokenizer_load_llama2c(out, mlb.tokenizer, mlb.tokenizer_size, mlb.h.vocab_size, err);
    if (s == ML_OK) s = ml_tokenizer_set_special(*out, (int32_t)mlb.h.bos_id, (int32_t)mlb.h.eos_id, err);
  } else {
    s = ml_tokenizer_load_llama2c(out, f.data, f.size, 0, err);
  }
  ml_file_close(&f);
  if (s != ML_OK) {
    if (*out) ml_tokenizer_free(*out);
    *out = nullptr;
    return ml_fail(err, s, "%s: %s", path, err ? err->msg : "");
  }
  return ML_OK;
}

void ml_tokenizer_close(ml_tokenizer* t) {
  if (t) ml_tokenizer_free(t);
}

int32_t ml_tokenizer_vocab_size(const ml_tokenizer* t) { return ml_tokenizer_vocab(t); }
int32_t ml_tokenizer_bos_id(const ml_tokenizer* t) { return ml_tokenizer_bos(t); }
int32_t ml_tokenizer_eos_id(const ml_tokenizer* t) { return ml_tokenizer_eos(t); }

ml_status ml_tokenize(const ml_tokenizer* t, const char* text, size_t len, int add_bos, int32_t* ids, size_t cap,
                      size_t* n, ml_error* err) {
  *n = 0;
  if (!t) return ml_fail(err, ML_E_ARG, "the model has no tokenizer: pass one (-z tokenizer.bin) or token ids");
  return ml_tokenizer_encode(t, text, len, add_bos != 0, ids, cap, n, err);
}

const char* ml_token_piece(const ml_tokenizer* t, int32_t prev, int32_t id, size_t* len) {
  *len = 0;
  if (!t) return nullptr;
  if (id == ml_tokenizer_bos(t) || id == ml_tokenizer_eos(t)) return id >= 0 && id < ml_tokenizer_vocab(t) ? "" : nullptr;
  return ml_tokenizer_piece(t, prev, id, len);
}

void ml_detok_reset(ml_detok* d, int32_t prev) {
  d->prev = prev;
  d->n_held = 0;
}

size_t ml_detok_max_bytes(const ml_tokenizer* t) {
  // The loader checked every token against max_token_length; a piece is at most its string.
  const size_t most = t && ml_tokenizer_max_token_length(t) > 0 ? (size_t)ml_tokenizer_max_token_length(t) : 1;
  return most + sizeof(((ml_detok*)nullptr)->held);
}

size_t ml_detok_push(const ml_tokenizer* t, ml_detok* d, int32_t id, char* out, size_t cap) {
  size_t len = 0;
  const char* piece = ml_token_piece(t, d->prev, id, &len);
  if (!piece) len = 0;
  const size_t total = (size_t)d->n_held + len;
  if (total > cap) return 0;  // cap below ml_detok_max_bytes: nothing written, the state unchanged
  d->prev = id;
  unsigned char* o = reinterpret_cast<unsigned char*>(out);
  std::memcpy(o, d->held, (size_t)d->n_held);
  if (len) std::memcpy(o + d->n_held, piece, len);
  const size_t hold = incomplete_tail(o, total);
  std::memcpy(d->held, o + total - hold, hold);
  d->n_held = (int)hold;
  return total - hold;
}

size_t ml_detok_flush(ml_detok* d, char* out, size_t cap) {
  const size_t n = (size_t)d->n_held <= cap ? (size_t)d->n_held : 0;
  std::memcpy(out, d->held, n);
  d->n_held = 0;
  return n;
}

}  // extern "C"
