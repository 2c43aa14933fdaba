// tokenizer.json post-processors, reduced to what encode(text, add_special_tokens=true) of one
// sequence does: ids put before and after it. TemplateProcessing ("single"), RobertaProcessing and
// BertProcessing (cls ... sep), ByteLevel (nothing on ids) and Sequence (each wraps the result of
// the previous one).
#include <cstdio>
#include <cstring>

#include "model/tokenizer/hf_impl.h"

namespace {

ml_status id_of(const ml_json* v, int32_t* id, const char* path, ml_error* err) {
  if (!v || v->type != ML_JSON_NUMBER || !v->is_int || v->i64 < 0 || v->i64 >= HF_MAX_VOCAB)
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: expected an id in [0, %u)", path, HF_MAX_VOCAB);
  *id = (int32_t)v->i64;
  return ML_OK;
}

// {"sep": ["</s>", 2], ...}: the id of the pair.
ml_status pair_id(const ml_json* v, const char* key, int32_t* id, const char* path, ml_error* err) {
  const ml_json* p = ml_json_get(v, key);
  char sub[160];
  std::snprintf(sub, sizeof sub, "%s.%s", path, key);
  if (!ml_json_is(p, ML_JSON_ARRAY) || p->n != 2 || !ml_json_is(p->items[0], ML_JSON_STRING))
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: expected [\"token\", id]", sub);
  return id_of(p->items[1], id, sub, err);
}

// The single template: ids before and after the one "Sequence" item.
ml_status template_single(const ml_json* v, ml_vec<int32_t>* before, ml_vec<int32_t>* after, const char* path, ml_error* err) {
  const ml_json* single = ml_json_get(v, "single");
  const ml_json* specials = ml_json_get(v, "special_tokens");
  if (!ml_json_is(single, ML_JSON_ARRAY)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.single: expected an array", path);
  if (single->n > HF_MAX_SEQ_ITEMS) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.single: more than %u items", path, HF_MAX_SEQ_ITEMS);
  if (specials && specials->type != ML_JSON_OBJECT && specials->type != ML_JSON_NULL)
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.special_tokens: expected an object", path);
  bool seen_seq = false;
  for (size_t i = 0; i < single->n; i++) {
    const ml_json* it = single->items[i];
    const ml_json* sq = ml_json_get(it, "Sequence");
    const ml_json* sp = ml_json_get(it, "SpecialToken");
    if (sq) {
      if (seen_seq) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.single[%zu]: a second Sequence", path, i);
      seen_seq = true;
      continue;
    }
    const ml_json* name = ml_json_get(sp, "id");
    if (!ml_json_is(name, ML_JSON_STRING))
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.single[%zu]: expected {\"Sequence\": ...} or {\"SpecialToken\": {\"id\": ...}}", path, i);
    const ml_json* def = ml_json_get(specials, name->str);
    const ml_json* ids = ml_json_get(def, "ids");
    if (!ml_json_is(ids, ML_JSON_ARRAY))
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.special_tokens['%.64s'].ids: missing (the template names it)", path, name->str);
    if (ids->n > HF_MAX_SEQ_ITEMS) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.special_tokens['%.64s'].ids: too many", path, name->str);
    for (size_t k = 0; k < ids->n; k++) {
      int32_t id = 0;
      char sub[200];
      std::snprintf(sub, sizeof sub, "%s.special_tokens['%.64s'].ids[%zu]", path, name->str, k);
      ML_TRY(id_of(ids->items[k], &id, sub, err));
      if (!(seen_seq ? after : before)->push(id)) return hf_nomem(err, path);
    }
  }
  if (!seen_seq) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.single: no Sequence item", path);
  return ML_OK;
}

ml_status load_one(ml_hf_tok* t, const ml_json* v, const char* path, int depth, ml_error* err) {
  if (!v || v->type == ML_JSON_NULL) return ML_OK;
  if (depth > HF_MAX_NEST) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: nested deeper than %d", path, HF_MAX_NEST);
  if (v->type != ML_JSON_OBJECT) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: expected an object", path);
  const ml_json* type = ml_json_get(v, "type");
  if (!ml_json_is(type, ML_JSON_STRING)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.type: expected a string", path);
  const char* ty = type->str;
  ml_vec<int32_t> before, after;
  if (!std::strcmp(ty, "Sequence")) {
    const ml_json* kids = ml_json_get(v, "processors");
    if (!ml_json_is(kids, ML_JSON_ARRAY)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.processors: expected an array", path);
    if (kids->n > HF_MAX_SEQ_ITEMS) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.processors: more than %u", path, HF_MAX_SEQ_ITEMS);
    for (size_t i = 0; i < kids->n; i++) {
      char sub[160];
      std::snprintf(sub, sizeof sub, "%s.processors[%zu]", path, i);
      ML_TRY(load_one(t, kids->items[i], sub, depth + 1, err));
    }
    return ML_OK;
  }
  if (!std::strcmp(ty, "ByteLevel")) {
    // Nothing on ids; with trim_offsets the spans of tokens lose their leading/trailing spaces.
    bool trim = false, prefix = false;
    ML_TRY(hf_get_bool(v, "trim_offsets", true, &trim, path, err));
    ML_TRY(hf_get_bool(v, "add_prefix_space", true, &prefix, path, err));
    t->has_post = true;
    if (trim) t->post_trim_bytelevel = true, t->post_trim_prefix = prefix;
    return ML_OK;
  }
  if (!std::strcmp(ty, "TemplateProcessing")) {
    ML_TRY(template_single(v, &before, &after, path, err));
  } else if (!std::strcmp(ty, "RobertaProcessing") || !std::strcmp(ty, "BertProcessing")) {
    int32_t cls = 0, sep = 0;
    ML_TRY(pair_id(v, "cls", &cls, path, err));
    ML_TRY(pair_id(v, "sep", &sep, path, err));
    if (!before.push(cls) || !after.push(sep)) return hf_nomem(err, path);
  } else {
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.type: post-processor '%.64s' is not supported", path, ty);
  }
  // This processor wraps what the earlier ones made.
  t->has_post = true;
  if (!before.append(t->post_before.data(), t->post_before.size()) || !t->post_after.append(after.data(), after.size()))
    return hf_nomem(err, path);
  t->post_before = static_cast<ml_vec<int32_t>&&>(before);
  return ML_OK;
}

}  // namespace

ml_status hf_post_load(ml_hf_tok* t, const ml_json* v, ml_error* err) {
  ML_TRY(load_one(t, v, "post_processor", 0, err));
  for (int32_t id : t->post_before)
    if ((uint32_t)id >= t->n_ids) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: post_processor: id %d is out of range (vocabulary %u)", id, t->n_ids);
  for (int32_t id : t->post_after)
    if ((uint32_t)id >= t->n_ids) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: post_processor: id %d is out of range (vocabulary %u)", id, t->n_ids);
  return ML_OK;
}
