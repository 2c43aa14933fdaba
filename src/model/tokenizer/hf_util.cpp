// Helpers shared by the tokenizer.json components: typed JSON member readers that name the field
// on a wrong type, UTF-8 stepping, the character classes of the pre-tokenizers (Rust's char
// methods and the regex crate's \s \w \p{L} \p{N}), and literal/regex match enumeration.
#include <cstring>

#include "model/tokenizer/hf_impl.h"
#include "model/tokenizer/regex.h"
#include "model/tokenizer/unicode.h"

ml_status hf_nomem(ml_error* err, const char* what) { return ml_fail(err, ML_E_NOMEM, "tokenizer.json: out of memory (%s)", what); }

uint32_t hf_hash(const char* s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h ^ (h >> 15);
}

bool hf_text_push(hf_text* t, const char* s, size_t n, ml_tok_span span) {
  if (!t->s.append(s, n) || !t->al.reserve(t->al.size() + n)) return false;
  for (size_t i = 0; i < n; i++) t->al.push(span);
  return true;
}

uint32_t hf_next_cp(const char* s, size_t n, size_t* i) { return ml_utf8_next(s, n, i); }
int hf_put_cp(uint32_t cp, char out[4]) { return ml_utf8_put(cp, out); }

bool hf_json_char(const ml_json* v, uint32_t* cp) {
  if (!ml_json_is(v, ML_JSON_STRING) || v->len == 0 || v->len > 4) return false;
  size_t i = 0;
  *cp = ml_utf8_next(v->str, v->len, &i);
  return i == v->len;
}

ml_status hf_get_bool(const ml_json* obj, const char* key, bool dflt, bool* out, const char* path, ml_error* err) {
  const ml_json* v = ml_json_get(obj, key);
  if (!v || v->type == ML_JSON_NULL) {
    *out = dflt;
    return ML_OK;
  }
  if (!ml_json_is_bool(v)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.%s: expected a boolean, got %s", path, key, ml_json_type_name(v->type));
  *out = v->type == ML_JSON_TRUE;
  return ML_OK;
}

ml_status hf_get_str(const ml_json* obj, const char* key, bool required, hf_strv* out, ml_bump* mem, const char* path,
                     ml_error* err) {
  const ml_json* v = ml_json_get(obj, key);
  *out = hf_strv{};
  if (!v || v->type == ML_JSON_NULL) {
    if (required) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.%s: missing", path, key);
    return ML_OK;
  }
  if (v->type != ML_JSON_STRING) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.%s: expected a string, got %s", path, key, ml_json_type_name(v->type));
  if (v->len > HF_MAX_TOKEN_BYTES) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.%s: longer than %u bytes", path, key, HF_MAX_TOKEN_BYTES);
  char* c = ml_bump_strdup(mem, v->str, v->len);
  if (!c) return hf_nomem(err, path);
  *out = hf_strv{c, (uint32_t)v->len};
  return ML_OK;
}

ml_status hf_get_uint(const ml_json* obj, const char* key, uint32_t dflt, uint32_t max, uint32_t* out, const char* path,
                      ml_error* err) {
  const ml_json* v = ml_json_get(obj, key);
  if (!v || v->type == ML_JSON_NULL) {
    *out = dflt;
    return ML_OK;
  }
  if (v->type != ML_JSON_NUMBER || !v->is_int || v->i64 < 0 || (uint64_t)v->i64 > max)
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.%s: expected an integer in [0, %u]", path, key, max);
  *out = (uint32_t)v->i64;
  return ML_OK;
}

ml_status hf_get_pattern(ml_hf_tok* t, const ml_json* obj, hf_strv* lit, ml_regex** re, const char* path,
                         ml_error* err) {
  const ml_json* p = ml_json_get(obj, "pattern");
  *lit = hf_strv{};
  *re = nullptr;
  if (!ml_json_is(p, ML_JSON_OBJECT)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", path);
  const ml_json* s = ml_json_get(p, "String");
  const ml_json* r = ml_json_get(p, "Regex");
  if (ml_json_is(s, ML_JSON_STRING)) return hf_get_str(p, "String", true, lit, &t->mem, path, err);
  if (!ml_json_is(r, ML_JSON_STRING)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", path);
  if (!t->regexes.reserve(t->regexes.size() + 1)) return hf_nomem(err, path);
  ml_error e2{};
  if (ml_regex_compile(r->str, r->len, re, &e2) != ML_OK) {
    if (e2.status == ML_E_NOMEM) return hf_nomem(err, path);
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.pattern.Regex: %s", path, e2.msg);
  }
  t->regexes.push(*re);
  return ML_OK;
}

bool hf_is_ws(uint32_t cp) {
  if (cp < 128) return cp == ' ' || (cp >= 9 && cp <= 13);
  return ml_unicode_is_white_space(cp);
}
bool hf_is_letter(uint32_t cp) {
  if (cp < 128) return (cp | 32) >= 'a' && (cp | 32) <= 'z';
  const ml_ucat c = ml_unicode_category(cp);
  return c >= ML_UCAT_Lu && c <= ML_UCAT_Lo;
}
bool hf_is_number(uint32_t cp) {
  if (cp < 128) return cp >= '0' && cp <= '9';
  const ml_ucat c = ml_unicode_category(cp);
  return c >= ML_UCAT_Nd && c <= ML_UCAT_No;
}
bool hf_is_word(uint32_t cp) {
  if (cp < 128) return hf_is_letter(cp) || hf_is_number(cp) || cp == '_';
  if (cp == 0x200C || cp == 0x200D) return true;  // Join_Control is part of \w
  const ml_ucat c = ml_unicode_category(cp);
  return (c >= ML_UCAT_Lu && c <= ML_UCAT_Nd) || c == ML_UCAT_Nl || c == ML_UCAT_No || c == ML_UCAT_Pc;
}
bool hf_is_punct(uint32_t cp) {
  if (cp < 128) return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
  const ml_ucat c = ml_unicode_category(cp);
  return c >= ML_UCAT_Pc && c <= ML_UCAT_Po;
}

ml_status hf_find_all(const hf_strv* lit, const ml_regex* re, const char* s, size_t n, ml_vec<uint32_t>* out,
                      ml_error* err) {
  out->clear();
  if (!re) {
    if (lit->n == 0) return ML_OK;
    for (size_t i = 0; i + lit->n <= n;) {
      if (std::memcmp(s + i, lit->s, lit->n) == 0) {
        if (!out->push((uint32_t)i) || !out->push((uint32_t)(i + lit->n))) return hf_nomem(err, "matches");
        i += lit->n;
      } else {
        i++;
      }
    }
    return ML_OK;
  }
  // The regex runs over code points: decode once, keep each code point's byte offset.
  ml_vec<uint32_t> cps, offs;
  if (!cps.reserve(n) || !offs.reserve(n + 1)) return hf_nomem(err, "regex input");
  for (size_t i = 0; i < n;) {
    offs.push((uint32_t)i);
    cps.push(ml_utf8_next(s, n, &i));
  }
  offs.push((uint32_t)n);
  size_t from = 0;
  while (from <= cps.size()) {
    bool found = false;
    size_t b = 0, e = 0;
    ML_TRY(ml_regex_find(re, cps.data(), cps.size(), from, &found, &b, &e, err));
    if (!found) break;
    if (!out->push(offs[b]) || !out->push(offs[e])) return hf_nomem(err, "matches");
    from = e > b ? e : e + 1;  // after an empty match, move on one character
  }
  return ML_OK;
}
