// The two tokenizer kinds behind one interface (tokenizer.h), and what a Hugging Face tokenizer
// takes from tokenizer_config.json and generation_config.json.
#include "model/tokenizer/tokenizer.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/bump.h"
#include "core/json.h"
#include "model/chat/template.h"
#include "model/tokenizer/hf.h"
#include "model/tokenizer/llama2c.h"

struct ml_tokenizer {
  ml_tok_kind kind = ML_TOK_LLAMA2C;
  ml_l2c* l2c = nullptr;
  ml_hf_tok* hf = nullptr;
  int32_t vocab = 0, bos = -1, eos = -1;
  // HF: every token's streaming piece, and how many of its leading bytes the start of a text drops.
  ml_vec<char> pieces;
  ml_vec<uint32_t> piece_at;  // vocab + 1 offsets into pieces
  ml_vec<uint8_t> first_skip;
  int32_t max_piece = 0;
  ml_vec<int32_t> eog;  // sorted ids that end a turn (besides eos)
  ml_template* chat = nullptr;
  ml_vec<char> bos_text, eos_text;  // NUL-terminated
};

namespace {

// bos_token / eos_token in tokenizer_config.json: a string, or an AddedToken object {content}.
const ml_json* token_text(const ml_json* v) {
  if (ml_json_is(v, ML_JSON_OBJECT)) v = ml_json_get(v, "content");
  return ml_json_is(v, ML_JSON_STRING) ? v : nullptr;
}

bool set_text(ml_vec<char>* dst, const char* s, size_t n) {
  dst->clear();
  return dst->append(s, n) && dst->push('\0');
}

ml_status add_eog(ml_tokenizer* t, int64_t id, const char* what, ml_error* err) {
  if (id < 0 || id >= t->vocab) return ml_fail(err, ML_E_FORMAT, "%s: token id %lld is outside the vocabulary 0..%d", what, (long long)id, t->vocab - 1);
  for (int32_t e : t->eog)
    if (e == (int32_t)id) return ML_OK;
  if (!t->eog.push((int32_t)id)) return ml_fail(err, ML_E_NOMEM, "tokenizer: cannot grow the end-of-turn list");
  return ML_OK;
}

ml_status read_config(ml_tokenizer* t, const ml_hf_files* f, const char** tmpl, size_t* tmpl_len, ml_bump* b,
                      ml_error* err) {
  if (!f->config_json) return ML_OK;
  ml_json* cfg = nullptr;
  ml_status s = ml_json_parse(f->config_json, f->config_json_len, b, &cfg, err);
  if (s != ML_OK) return ml_fail(err, s, "tokenizer_config.json: %s", err ? err->msg : "");
  if (!ml_json_is(cfg, ML_JSON_OBJECT)) return ml_fail(err, ML_E_FORMAT, "tokenizer_config.json: not a JSON object");
  static const char* const names[2] = {"bos_token", "eos_token"};
  for (int k = 0; k < 2; ++k) {
    const ml_json* raw = ml_json_get(cfg, names[k]);
    if (!raw || raw->type == ML_JSON_NULL) continue;
    const ml_json* v = token_text(raw);
    if (!v) return ml_fail(err, ML_E_FORMAT, "tokenizer_config.json: %s is neither a string nor {\"content\": string}", names[k]);
    const int32_t id = ml_hf_tok_find(t->hf, v->str, v->len);
    if (id < 0)
      return ml_fail(err, ML_E_FORMAT, "tokenizer_config.json: %s \"%.64s\" is not a token of tokenizer.json", names[k], v->str);
    (k == 0 ? t->bos : t->eos) = id;
    if (!set_text(k == 0 ? &t->bos_text : &t->eos_text, v->str, v->len))
      return ml_fail(err, ML_E_NOMEM, "tokenizer: out of memory");
  }
  const ml_json* ct = ml_json_get(cfg, "chat_template");
  if (ml_json_is(ct, ML_JSON_STRING)) {
    *tmpl = ct->str;
    *tmpl_len = ct->len;
  } else if (ml_json_is(ct, ML_JSON_ARRAY)) {
    // transformers' named templates: [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    for (size_t i = 0; i < ct->n; ++i) {
      const ml_json* name = ml_json_get(ct->items[i], "name");
      const ml_json* text = ml_json_get(ct->items[i], "template");
      if (!ml_json_is(name, ML_JSON_STRING) || !ml_json_is(text, ML_JSON_STRING))
        return ml_fail(err, ML_E_FORMAT, "tokenizer_config.json: chat_template[%zu] lacks a string name or template", i);
      if (std::strcmp(name->str, "default") == 0) *tmpl = text->str, *tmpl_len = text->len;
    }
    if (!*tmpl) return ml_fail(err, ML_E_FORMAT, "tokenizer_config.json: chat_template has no template named \"default\"");
  } else if (ct && ct->type != ML_JSON_NULL) {
    return ml_fail(err, ML_E_FORMAT, "tokenizer_config.json: chat_template is a %s, not a string or a list", ml_json_type_name(ct->type));
  }
  return ML_OK;
}

ml_status read_generation_config(ml_tokenizer* t, const ml_hf_files* f, ml_bump* b, ml_error* err) {
  if (!f->generation_json) return ML_OK;
  ml_json* g = nullptr;
  ml_status s = ml_json_parse(f->generation_json, f->generation_json_len, b, &g, err);
  if (s != ML_OK) return ml_fail(err, s, "generation_config.json: %s", err ? err->msg : "");
  const ml_json* e = ml_json_get(g, "eos_token_id");
  if (!e || e->type == ML_JSON_NULL) return ML_OK;
  if (ml_json_is(e, ML_JSON_NUMBER) && e->is_int) return add_eog(t, e->i64, "generation_config.json: eos_token_id", err);
  if (!ml_json_is(e, ML_JSON_ARRAY))
    return ml_fail(err, ML_E_FORMAT, "generation_config.json: eos_token_id is neither an integer nor a list of integers");
  for (size_t i = 0; i < e->n; ++i) {
    if (!ml_json_is(e->items[i], ML_JSON_NUMBER) || !e->items[i]->is_int)
      return ml_fail(err, ML_E_FORMAT, "generation_config.json: eos_token_id[%zu] is not an integer", i);
    ML_TRY(add_eog(t, e->items[i]->i64, "generation_config.json: eos_token_id", err));
  }
  return ML_OK;
}

// Every token's streaming piece, computed once so ml_tokenizer_piece can hand out pointers.
ml_status build_pieces(ml_tokenizer* t, ml_error* err) {
  if (!t->piece_at.resize((size_t)t->vocab + 1) || !t->first_skip.resize((size_t)t->vocab))
    return ml_fail(err, ML_E_NOMEM, "tokenizer: cannot allocate the piece table of %d tokens", t->vocab);
  ml_vec<char> first;
  for (int32_t id = 0; id < t->vocab; ++id) {
    t->piece_at[(size_t)id] = (uint32_t)t->pieces.size();
    if (ml_hf_tok_is_special(t->hf, id)) continue;  // special tokens are not text
    const size_t at = t->pieces.size();
    ML_TRY(ml_hf_tok_piece(t->hf, id, false, &t->pieces, err));
    first.clear();
    ML_TRY(ml_hf_tok_piece(t->hf, id, true, &first, err));
    const size_t n = t->pieces.size() - at;
    if (first.size() > n || std::memcmp(first.data(), t->pieces.data() + at + (n - first.size()), first.size()) != 0)
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: the decoder's first piece of token %d is not a suffix of its piece", id);
    if (n - first.size() > 255) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: token %d: the decoder drops %zu bytes", id, n - first.size());
    t->first_skip[(size_t)id] = (uint8_t)(n - first.size());
    if (n > (size_t)t->max_piece) t->max_piece = (int32_t)n;
    if (t->pieces.size() > 0xFFFFFFFFu) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: the pieces exceed 4 GiB");
  }
  t->piece_at[(size_t)t->vocab] = (uint32_t)t->pieces.size();
  return ML_OK;
}

ml_status load_hf(ml_tokenizer* t, const ml_hf_files* f, ml_error* err) {
  ml_status s = ml_hf_tok_load(&t->hf, f->tokenizer_json, f->tokenizer_json_len, err);
  if (s != ML_OK) return ml_fail(err, s, "tokenizer.json: %s", err ? err->msg : "");
  t->vocab = ml_hf_tok_vocab(t->hf);
  t->bos = ml_hf_tok_post_bos(t->hf);
  t->eos = ml_hf_tok_post_eos(t->hf);
  ml_bump b;
  const char* tmpl = nullptr;
  size_t tmpl_len = 0;
  ML_TRY(read_config(t, f, &tmpl, &tmpl_len, &b, err));
  ML_TRY(read_generation_config(t, f, &b, err));
  if (f->chat_template) tmpl = f->chat_template, tmpl_len = f->chat_template_len;
  if (tmpl) {
    s = ml_template_parse(tmpl, tmpl_len, &t->chat, err);
    if (s != ML_OK) return ml_fail(err, s, "chat template: %s", err ? err->msg : "");
  }
  static const char* const turn_ends[] = {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|endoftext|>"};
  for (const char* name : turn_ends) {
    const int32_t id = ml_hf_tok_find(t->hf, name, std::strlen(name));
    if (id >= 0) ML_TRY(add_eog(t, id, name, err));
  }
  for (int k = 0; k < 2; ++k) {  // texts of BOS/EOS the config did not name
    ml_vec<char>* dst = k == 0 ? &t->bos_text : &t->eos_text;
    const int32_t id = k == 0 ? t->bos : t->eos;
    if (!dst->empty()) continue;
    size_t n = 0;
    const char* s2 = id >= 0 ? ml_hf_tok_token(t->hf, id, &n) : "";
    if (!set_text(dst, s2 ? s2 : "", s2 ? n : 0)) return ml_fail(err, ML_E_NOMEM, "tokenizer: out of memory");
  }
  return build_pieces(t, err);
}

}  // namespace

ml_status ml_tokenizer_load_llama2c(ml_tokenizer** out, const uint8_t* data, size_t size, uint32_t vocab_size,
                                    ml_error* err) {
  *out = nullptr;
  ml_tokenizer* t = new (std::nothrow) ml_tokenizer;
  if (!t) return ml_fail(err, ML_E_NOMEM, "tokenizer: cannot allocate");
  const ml_status s = ml_l2c_load(&t->l2c, data, size, vocab_size, err);
  if (s != ML_OK) {
    delete t;
    return s;
  }
  t->kind = ML_TOK_LLAMA2C;
  t->vocab = ml_l2c_vocab(t->l2c);
  t->bos = ml_l2c_bos(t->l2c);
  t->eos = ml_l2c_eos(t->l2c);
  static const char BOS[] = "<s>", EOS[] = "</s>";
  if (!set_text(&t->bos_text, BOS, 3) || !set_text(&t->eos_text, EOS, 4)) {
    ml_tokenizer_free(t);
    return ml_fail(err, ML_E_NOMEM, "tokenizer: out of memory");
  }
  *out = t;
  return ML_OK;
}

ml_status ml_tokenizer_check_llama2c(const uint8_t* data, size_t size, uint32_t vocab_size, ml_error* err) {
  return ml_l2c_check(data, size, vocab_size, err);
}

ml_status ml_tokenizer_load_hf(ml_tokenizer** out, const ml_hf_files* files, ml_error* err) {
  *out = nullptr;
  ml_tokenizer* t = new (std::nothrow) ml_tokenizer;
  if (!t) return ml_fail(err, ML_E_NOMEM, "tokenizer: cannot allocate");
  t->kind = ML_TOK_HF;
  const ml_status s = load_hf(t, files, err);
  if (s != ML_OK) {
    ml_tokenizer_free(t);
    return s;
  }
  *out = t;
  return ML_OK;
}

void ml_tokenizer_free(ml_tokenizer* t) {
  if (!t) return;
  if (t->l2c) ml_l2c_free(t->l2c);
  if (t->hf) ml_hf_tok_free(t->hf);
  if (t->chat) ml_template_free(t->chat);
  delete t;
}

ml_tok_kind ml_tokenizer_kind(const ml_tokenizer* t) { return t->kind; }

ml_status ml_tokenizer_set_special(ml_tokenizer* t, int32_t bos, int32_t eos, ml_error* err) {
  if (t->l2c) ML_TRY(ml_l2c_set_special(t->l2c, bos, eos, err));
  else if (bos < -1 || bos >= t->vocab || eos < -1 || eos >= t->vocab)
    return ml_fail(err, ML_E_ARG, "bos %d / eos %d outside the vocabulary of %d tokens", bos, eos, t->vocab);
  t->bos = bos;
  t->eos = eos;
  return ML_OK;
}

int32_t ml_tokenizer_vocab(const ml_tokenizer* t) { return t->vocab; }
int32_t ml_tokenizer_bos(const ml_tokenizer* t) { return t->bos; }
int32_t ml_tokenizer_eos(const ml_tokenizer* t) { return t->eos; }

bool ml_tokenizer_is_eog(const ml_tokenizer* t, int32_t id) {
  if (id < 0) return false;
  if (id == t->eos) return true;
  for (int32_t e : t->eog)
    if (e == id) return true;
  return false;
}

bool ml_tokenizer_is_special(const ml_tokenizer* t, int32_t id) {
  if (t->hf) return ml_hf_tok_is_special(t->hf, id);
  return id >= 0 && (id == t->bos || id == t->eos);
}

int32_t ml_tokenizer_max_token_length(const ml_tokenizer* t) {
  return t->l2c ? ml_l2c_max_token_length(t->l2c) : t->max_piece;
}

ml_status ml_tokenizer_encode_vec(const ml_tokenizer* t, const char* text, size_t len, bool add_special,
                                  ml_vec<int32_t>* ids, ml_vec<uint32_t>* spans, ml_error* err) {
  if (t->hf) {
    ml_vec<ml_tok_span> sp;
    ML_TRY(ml_hf_tok_encode(t->hf, text, len, add_special, ids, spans ? &sp : nullptr, err));
    if (spans)
      for (const ml_tok_span& s : sp)
        if (!spans->push(s.begin) || !spans->push(s.end)) return ml_fail(err, ML_E_NOMEM, "tokenizer: out of memory");
    return ML_OK;
  }
  // llama2.c: at most one id per byte, plus the dummy prefix and BOS.
  const size_t at = ids->size();
  if (len > (size_t)-1 - 2 - at || !ids->resize(at + len + 2))
    return ml_fail(err, ML_E_NOMEM, "tokenizer: cannot allocate ids for %zu bytes", len);
  size_t n = 0;
  const ml_status s = ml_l2c_encode(t->l2c, text, len, add_special, ids->data() + at, len + 2, &n, err);
  ids->resize(s == ML_OK ? at + n : at);
  return s;
}

ml_status ml_tokenizer_encode(const ml_tokenizer* t, const char* text, size_t len, bool add_special, int32_t* ids,
                              size_t cap, size_t* n, ml_error* err) {
  *n = 0;
  if (t->l2c) return ml_l2c_encode(t->l2c, text, len, add_special, ids, cap, n, err);
  ml_vec<int32_t> v;
  ML_TRY(ml_hf_tok_encode(t->hf, text, len, add_special, &v, nullptr, err));
  *n = v.size();
  if (v.size() > cap) return ml_fail(err, ML_E_ARG, "the text needs %zu tokens, more than the %zu given room", v.size(), cap);
  if (!v.empty()) std::memcpy(ids, v.data(), v.size() * sizeof(int32_t));
  return ML_OK;
}

const char* ml_tokenizer_piece(const ml_tokenizer* t, int32_t prev, int32_t id, size_t* len) {
  *len = 0;
  if (t->l2c) return ml_l2c_piece(t->l2c, prev, id, len);
  if (id < 0 || id >= t->vocab) return nullptr;
  const size_t b = t->piece_at[(size_t)id], e = t->piece_at[(size_t)id + 1];
  const size_t skip = prev < 0 ? t->first_skip[(size_t)id] : 0;
  *len = e - b - skip;
  return t->pieces.data() ? t->pieces.data() + b + skip : "";
}

ml_status ml_tokenizer_decode(const ml_tokenizer* t, const int32_t* ids, size_t n, bool skip_special,
                              ml_vec<char>* out, ml_error* err) {
  if (t->hf) return ml_hf_tok_decode(t->hf, ids, n, skip_special, out, err);
  int32_t prev = t->bos;
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= t->vocab)
      return ml_fail(err, ML_E_ARG, "id %d (item %zu) is outside the vocabulary 0..%d", ids[i], i + 1, t->vocab - 1);
    size_t len = 0;
    const char* p = ids[i] == t->bos || ids[i] == t->eos ? "" : ml_l2c_piece(t->l2c, prev, ids[i], &len);
    if (len && !out->append(p, len)) return ml_fail(err, ML_E_NOMEM, "decode: out of memory");
    prev = ids[i];
  }
  return ML_OK;
}

const char* ml_tokenizer_token(const ml_tokenizer* t, int32_t id, size_t* len) {
  *len = 0;
  return t->l2c ? ml_l2c_token(t->l2c, id, len) : ml_hf_tok_token(t->hf, id, len);
}

float ml_tokenizer_score(const ml_tokenizer* t, int32_t id) { return t->l2c ? ml_l2c_score(t->l2c, id) : 0.0f; }

int32_t ml_tokenizer_find(const ml_tokenizer* t, const char* s, size_t len) {
  return t->l2c ? ml_l2c_find(t->l2c, s, len) : ml_hf_tok_find(t->hf, s, len);
}

const ml_template* ml_tokenizer_chat_template(const ml_tokenizer* t) { return t->chat; }
const char* ml_tokenizer_bos_text(const ml_tokenizer* t) { return t->bos_text.empty() ? "" : t->bos_text.data(); }
const char* ml_tokenizer_eos_text(const ml_tokenizer* t) { return t->eos_text.empty() ? "" : t->eos_text.data(); }
