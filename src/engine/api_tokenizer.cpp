// The public API's tokenizers (krafla.h): a model's own, or one opened alone from a .mlb, a
// llama2.c tokenizer.bin or a Hugging Face tokenizer (ml_tok), and the incremental detokenizer that releases whole UTF-8
// characters only.
#include <cstring>

#include "core/file.h"
#include "krafla.h"
#include "engine/model_import.h"
#include "convert/convert.h"
#include "convert/hf_files.h"
#include "model/format.h"
#include "model/tokenizer/tokenizer.h"

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

// A tokenizer section's payload (docs/format.md; null: the model has none): kind ML_TOK_HF a
// bundle of Hugging Face files, else a llama2.c tokenizer.bin of vocab tokens with the header's
// BOS and EOS.
ml_status load_section(ml_tokenizer** out, uint32_t kind, const uint8_t* data, size_t size, uint32_t vocab,
                       uint32_t bos, uint32_t eos, ml_error* err) {
  if (!data) return ml_fail(err, ML_E_ARG, "the model has no tokenizer section; pass a tokenizer.bin instead");
  if (kind == ML_TOK_HF) {
    ml_hf_files files;
    ML_TRY(ml_hf_bundle_parse(data, size, &files, err));
    return ml_tokenizer_load_hf(out, &files, err);
  }
  ML_TRY(ml_tokenizer_load_llama2c(out, data, size, vocab, err));
  return ml_tokenizer_set_special(*out, (int32_t)bos, (int32_t)eos, err);
}

// A GGUF file's tokenizer: the section cv_gguf would write into the .mlb (cv_gguf_read_tokenizer
// builds only that, not the weights), loaded as from the .mlb.
ml_status load_gguf(ml_tokenizer** out, const char* path, ml_error* err) {
  cv_gguf_opts o = cv_gguf_defaults();
  o.path = path;
  cv_model m;
  ML_TRY(cv_gguf_read_tokenizer(&o, &m, err));
  static const uint8_t empty = 0;  // the writer's payload for an empty tokenizer.bin
  const uint8_t* data = nullptr;
  size_t size = 0;
  if (m.has_tokenizer && m.tokenizer_kind == ML_TOK_HF) {
    data = m.hf_bundle.data;
    size = m.hf_bundle.size;
  } else if (m.has_tokenizer) {
    data = m.tokenizer.size == 0 ? &empty : m.tokenizer.data;
    size = m.tokenizer.size;
  }
  return load_section(out, m.tokenizer_kind, data, size, m.h.vocab_size, m.h.bos_id, m.h.eos_id, err);
}

// Frees what *out holds and names path in err's message.
ml_status fail_open(ml_tokenizer** out, const char* path, ml_status s, ml_error* err) {
  if (*out) ml_tokenizer_free(*out);
  *out = nullptr;
  return ml_fail(err, s, "%s: %s", path, err ? err->msg : "");
}

}  // namespace

extern "C" {

ml_status ml_tokenizer_open(ml_tokenizer** out, const char* path, ml_error* err) {
  *out = nullptr;
  ml_status s;
  if (cv_is_hf_tokenizer(path)) {
    cv_hf_files files;
    s = cv_hf_files_open(&files, path, nullptr, err);
    if (s == ML_OK) s = ml_tokenizer_load_hf(out, &files.files, err);
    if (s != ML_OK) return ml_fail(err, s, "%s: %s", path, err ? err->msg : "");
    return ML_OK;
  }
  const ml_source_kind kind = ml_source_kind_of_path(path);
  if (kind == ML_SOURCE_GGUF) {  // its tokenizer alone, as the converted model would hold it
    s = load_gguf(out, path, err);
    if (s != ML_OK) return fail_open(out, path, s, err);
    return ML_OK;
  }
  ml_file f;
  if (kind == ML_SOURCE_HF_DIR) {  // a model folder without tokenizer.json: from the converted model
    s = ml_import(kind, path, nullptr, 0, &f, err);
    if (s != ML_OK) return ml_fail(err, s, "%s: %s", path, err ? err->msg : "");
  } else {
    ML_TRY(ml_file_open(&f, path, err));
  }
  if (f.size >= sizeof ML_MLB_MAGIC && std::memcmp(f.data, ML_MLB_MAGIC, sizeof ML_MLB_MAGIC) == 0) {
    ml_mlb mlb;
    s = ml_mlb_parse(&mlb, f.data, f.size, err);
    if (s == ML_OK)
      s = load_section(out, mlb.tokenizer_kind, mlb.tokenizer, mlb.tokenizer_size, mlb.h.vocab_size, mlb.h.bos_id,
                       mlb.h.eos_id, err);
  } else {
    s = ml_tokenizer_load_llama2c(out, f.data, f.size, 0, err);
  }
  ml_file_close(&f);
  if (s != ML_OK) return fail_open(out, path, s, err);
  return ML_OK;
}

void ml_tokenizer_close(ml_tokenizer* t) {
  if (t) ml_tokenizer_free(t);
}

int32_t ml_tokenizer_vocab_size(const ml_tokenizer* t) { return ml_tokenizer_vocab(t); }
int32_t ml_tokenizer_bos_id(const ml_tokenizer* t) { return ml_tokenizer_bos(t); }
int32_t ml_tokenizer_eos_id(const ml_tokenizer* t) { return ml_tokenizer_eos(t); }
int ml_token_is_eog(const ml_tokenizer* t, int32_t id) { return t && ml_tokenizer_is_eog(t, id) ? 1 : 0; }
int ml_token_is_special(const ml_tokenizer* t, int32_t id) { return t && ml_tokenizer_is_special(t, id) ? 1 : 0; }
int ml_tokenizer_is_hf(const ml_tokenizer* t) { return t && ml_tokenizer_kind(t) == ML_TOK_HF ? 1 : 0; }

ml_status ml_tokenize(const ml_tokenizer* t, const char* text, size_t len, int add_special, int32_t* ids, size_t cap,
                      size_t* n, ml_error* err) {
  *n = 0;
  if (!t) return ml_fail(err, ML_E_ARG, "the model has no tokenizer: pass one (-z tokenizer.bin) or token ids");
  return ml_tokenizer_encode(t, text, len, add_special != 0, ids, cap, n, err);
}

ml_status ml_tokenize_spans(const ml_tokenizer* t, const char* text, size_t len, int add_special, int32_t* ids,
                            uint32_t* spans, size_t cap, size_t* n, ml_error* err) {
  *n = 0;
  if (!t) return ml_fail(err, ML_E_ARG, "the model has no tokenizer");
  if (ml_tokenizer_kind(t) != ML_TOK_HF)
    return ml_fail(err, ML_E_ARG, "byte offsets need a Hugging Face tokenizer (llama2.c's tokenizer.bin has none)");
  ml_vec<int32_t> v;
  ml_vec<uint32_t> sp;
  ML_TRY(ml_tokenizer_encode_vec(t, text, len, add_special != 0, &v, &sp, err));
  *n = v.size();
  if (v.size() > cap) return ml_fail(err, ML_E_ARG, "the text needs %zu tokens, more than the %zu given room", v.size(), cap);
  if (!v.empty()) {
    std::memcpy(ids, v.data(), v.size() * sizeof(int32_t));
    std::memcpy(spans, sp.data(), sp.size() * sizeof(uint32_t));
  }
  return ML_OK;
}

ml_status ml_detokenize(const ml_tokenizer* t, const int32_t* ids, size_t n, int skip_special, char* out, size_t cap,
                        size_t* len, ml_error* err) {
  *len = 0;
  if (!t) return ml_fail(err, ML_E_ARG, "the model has no tokenizer");
  ml_vec<char> text;
  ML_TRY(ml_tokenizer_decode(t, ids, n, skip_special != 0, &text, err));
  *len = text.size();
  if (text.size() > cap) return ml_fail(err, ML_E_ARG, "the text has %zu bytes, more than the %zu given room", text.size(), cap);
  if (!text.empty()) std::memcpy(out, text.data(), text.size());
  return ML_OK;
}

const char* ml_token_piece(const ml_tokenizer* t, int32_t prev, int32_t id, size_t* len) {
  *len = 0;
  if (!t || id < 0 || id >= ml_tokenizer_vocab(t)) return nullptr;
  if (ml_tokenizer_kind(t) == ML_TOK_LLAMA2C && (id == ml_tokenizer_bos(t) || id == ml_tokenizer_eos(t))) return "";
  return ml_tokenizer_piece(t, prev, id, len);
}

const char* ml_token_text(const ml_tokenizer* t, int32_t id, size_t* len) {
  *len = 0;
  return t ? ml_tokenizer_token(t, id, len) : nullptr;
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
  // A special token is not text: the next piece still starts where the text stands (a decoder
  // that drops the text's first space keeps doing so after <s> or <|im_start|>).
  if (ml_tokenizer_kind(t) == ML_TOK_LLAMA2C || !ml_tokenizer_is_special(t, id)) d->prev = id;
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
