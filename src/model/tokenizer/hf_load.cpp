// tokenizer.json loading (ml_hf_tok_load / ml_hf_tok_free) and the read-only accessors: parses the
// document, then the model, the added tokens, the normalizer (before the added-token matchers,
// which match normalized contents), pre-tokenizer, post-processor and decoder, refusing what it
// does not support with the field's name.
#include <cstring>
#include <new>

#include "model/tokenizer/hf_impl.h"
#include "model/tokenizer/regex.h"

namespace {

ml_status check_null_or_ok(const ml_json* doc, const char* key, ml_error* err) {
  const ml_json* v = ml_json_get(doc, key);
  if (!v || v->type == ML_JSON_NULL) return ML_OK;
  return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: only null is supported (encode does not %s)", key,
                 !std::strcmp(key, "truncation") ? "truncate" : "pad");
}

ml_status load(ml_hf_tok* t, const char* json, size_t len, ml_error* err) {
  ml_bump jb;
  jb.limit = len * 32 + (1u << 20);  // bounds what one document may make the parser hold
  ml_json* doc = nullptr;
  ML_TRY(ml_json_parse(json, len, &jb, &doc, err));
  if (!ml_json_is(doc, ML_JSON_OBJECT)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: the top level is not an object");
  ML_TRY(check_null_or_ok(doc, "truncation", err));
  // Padding to the batch's longest does nothing to one sequence: accepted; any other is refused.
  const ml_json* pad = ml_json_get(doc, "padding");
  const ml_json* strategy = ml_json_get(pad, "strategy");
  const ml_json* multiple = ml_json_get(pad, "pad_to_multiple_of");
  if (!(ml_json_is(strategy, ML_JSON_STRING) && !std::strcmp(strategy->str, "BatchLongest") && (!multiple || multiple->type == ML_JSON_NULL)))
    ML_TRY(check_null_or_ok(doc, "padding", err));
  const ml_json* model = ml_json_get(doc, "model");
  if (!model) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model: missing");
  ML_TRY(hf_bpe_load(t, model, err));
  ML_TRY(hf_added_load(t, ml_json_get(doc, "added_tokens"), err));
  ML_TRY(hf_norm_load(t, ml_json_get(doc, "normalizer"), &t->norm, "normalizer", 0, err));
  ML_TRY(hf_added_build(t, err));
  ML_TRY(hf_pre_load(t, ml_json_get(doc, "pre_tokenizer"), &t->pre, "pre_tokenizer", 0, err));
  ML_TRY(hf_post_load(t, ml_json_get(doc, "post_processor"), err));
  ML_TRY(hf_dec_load(t, ml_json_get(doc, "decoder"), &t->dec, "decoder", 0, err));
  if (t->n_ids == 0) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.vocab: empty");
  // The longest piece, for streaming buffers.
  ml_vec<char> piece;
  for (uint32_t id = 0; id < t->n_ids; id++) {
    if (!t->dtok[id].s) continue;
    for (int first = 0; first < 2; first++) {
      piece.clear();
      ML_TRY(hf_decode_tokens(t, &t->dtok[id], 1, true, first == 1, &piece, err));
      if (piece.size() > t->max_piece) t->max_piece = piece.size();
    }
  }
  return ML_OK;
}

}  // namespace

ml_status ml_hf_tok_load(ml_hf_tok** out, const char* json, size_t len, ml_error* err) {
  *out = nullptr;
  ml_hf_tok* t = new (std::nothrow) ml_hf_tok();
  if (!t) return hf_nomem(err, "tokenizer");
  const ml_status st = load(t, json, len, err);
  if (st != ML_OK) {
    ml_hf_tok_free(t);
    return st;
  }
  *out = t;
  return ML_OK;
}

void ml_hf_tok_free(ml_hf_tok* t) {
  if (!t) return;
  for (ml_regex* re : t->regexes) ml_regex_free(re);
  delete t;
}

int32_t ml_hf_tok_vocab(const ml_hf_tok* t) { return (int32_t)t->n_ids; }

const char* ml_hf_tok_token(const ml_hf_tok* t, int32_t id, size_t* len) {
  if (id < 0 || (uint32_t)id >= t->n_ids || !t->dtok[id].s) {
    if (len) *len = 0;
    return nullptr;
  }
  if (len) *len = t->dtok[id].n;
  return t->dtok[id].s;
}

int32_t ml_hf_tok_find(const ml_hf_tok* t, const char* s, size_t len) {
  // An added token that is also in the vocabulary has the same id there (checked at load).
  const int32_t id = hf_vocab_find(t, s, len);
  if (id >= 0) return id;
  for (uint32_t i = 0; i < t->n_added; i++)
    if (t->added[i].content.n == len && std::memcmp(t->added[i].content.s, s, len) == 0) return t->added[i].id;
  return -1;
}

bool ml_hf_tok_is_special(const ml_hf_tok* t, int32_t id) {
  return id >= 0 && (uint32_t)id < t->n_ids && (t->flags[id] & HF_F_SPECIAL);
}

size_t ml_hf_tok_max_piece(const ml_hf_tok* t) { return t->max_piece; }

int32_t ml_hf_tok_post_bos(const ml_hf_tok* t) { return t->post_before.empty() ? -1 : t->post_before[0]; }
int32_t ml_hf_tok_post_eos(const ml_hf_tok* t) { return t->post_after.empty() ? -1 : t->post_after.back(); }
