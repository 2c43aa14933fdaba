// tokenizer.json normalizers: Sequence, Prepend, Replace (String or Regex pattern), NFC, NFD, NFKC,
// NFKD, Lowercase, Strip. Each rewrites an hf_text and keeps every byte's original span: a
// replacement's bytes take the span of what they replace, a prepended string the span of the
// first character (as the Rust library's NormalizedString does).
#include <cstdio>
#include <cstring>

#include "model/tokenizer/hf_impl.h"
#include "model/tokenizer/unicode.h"

namespace {

void swap_text(hf_text* a, hf_text* b) {
  ml_vec<char> s = static_cast<ml_vec<char>&&>(a->s);
  ml_vec<ml_tok_span> al = static_cast<ml_vec<ml_tok_span>&&>(a->al);
  a->s = static_cast<ml_vec<char>&&>(b->s);
  a->al = static_cast<ml_vec<ml_tok_span>&&>(b->al);
  b->s = static_cast<ml_vec<char>&&>(s);
  b->al = static_cast<ml_vec<ml_tok_span>&&>(al);
}

ml_status replace(const hf_norm* nm, hf_text* x, hf_text* tmp, ml_error* err) {
  ml_vec<uint32_t> m;
  ML_TRY(hf_find_all(&nm->a, nm->re, x->s.data(), x->s.size(), &m, err));
  if (m.empty()) return ML_OK;
  tmp->s.clear(), tmp->al.clear();
  size_t at = 0;
  for (size_t k = 0; k < m.size(); k += 2) {
    const uint32_t b = m[k], e = m[k + 1];
    if (!tmp->s.append(x->s.data() + at, b - at) || !tmp->al.append(x->al.data() + at, b - at)) return hf_nomem(err, "normalizer");
    if (e > b) {
      const ml_tok_span sp{x->al[b].begin, x->al[e - 1].end};
      if (!hf_text_push(tmp, nm->b.s, nm->b.n, sp)) return hf_nomem(err, "normalizer");
    } else if (nm->b.n) {
      // An empty match inserts: the span of the character it precedes (or follows, at the end).
      const ml_tok_span sp = b < x->s.size() ? x->al[b] : (b ? x->al[b - 1] : ml_tok_span{0, 0});
      if (!hf_text_push(tmp, nm->b.s, nm->b.n, sp)) return hf_nomem(err, "normalizer");
    }
    at = e;
  }
  if (!tmp->s.append(x->s.data() + at, x->s.size() - at) || !tmp->al.append(x->al.data() + at, x->s.size() - at))
    return hf_nomem(err, "normalizer");
  swap_text(x, tmp);
  return ML_OK;
}

ml_status unicode_map(const hf_norm* nm, hf_text* x, hf_text* tmp, ml_error* err) {
  ml_vec<uint32_t> align;
  tmp->s.clear(), tmp->al.clear();
  ml_status st;
  if (nm->kind == HF_N_LOWER) {
    st = ml_unicode_lowercase(x->s.data(), x->s.size(), &tmp->s, &align, err);
  } else {
    const ml_unorm f = nm->kind == HF_N_NFC ? ML_NFC : nm->kind == HF_N_NFD ? ML_NFD : nm->kind == HF_N_NFKC ? ML_NFKC : ML_NFKD;
    st = ml_unicode_normalize(f, x->s.data(), x->s.size(), &tmp->s, &align, err);
  }
  if (st != ML_OK) return st;
  if (!tmp->al.resize(tmp->s.size())) return hf_nomem(err, "normalizer");
  for (size_t i = 0; i < tmp->s.size(); i++) tmp->al[i] = x->al[align[i]];
  swap_text(x, tmp);
  return ML_OK;
}

ml_status strip(const hf_norm* nm, hf_text* x) {
  size_t b = 0, e = x->s.size();
  const char* s = x->s.data();
  if (nm->left)
    while (b < e) {
      size_t j = b;
      if (!hf_is_ws(hf_next_cp(s, e, &j))) break;
      b = j;
    }
  if (nm->right)
    while (e > b) {
      size_t k = e - 1;
      while (k > b && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
      size_t j = k;
      if (!hf_is_ws(hf_next_cp(s, e, &j))) break;
      e = k;
    }
  if (b > 0) {
    std::memmove(x->s.data(), s + b, e - b);
    std::memmove(x->al.data(), x->al.data() + b, (e - b) * sizeof(ml_tok_span));
  }
  x->s.resize(e - b);
  x->al.resize(e - b);
  return ML_OK;
}

}  // namespace

ml_status hf_norm_apply(const hf_norm* nm, hf_text* x, hf_text* tmp, ml_error* err) {
  switch (nm->kind) {
    case HF_N_SEQ:
      for (uint32_t i = 0; i < nm->nkids; i++) ML_TRY(hf_norm_apply(nm->kids[i], x, tmp, err));
      return ML_OK;
    case HF_N_PREPEND: {
      if (x->s.empty()) return ML_OK;
      tmp->s.clear(), tmp->al.clear();
      if (!hf_text_push(tmp, nm->a.s, nm->a.n, x->al[0]) || !tmp->s.append(x->s.data(), x->s.size()) ||
          !tmp->al.append(x->al.data(), x->al.size()))
        return hf_nomem(err, "normalizer");
      swap_text(x, tmp);
      return ML_OK;
    }
    case HF_N_REPLACE:
      return replace(nm, x, tmp, err);
    case HF_N_STRIP:
      return strip(nm, x);
    default:
      return unicode_map(nm, x, tmp, err);
  }
}

ml_status hf_norm_load(ml_hf_tok* t, const ml_json* v, hf_norm** out, const char* path, int depth, ml_error* err) {
  *out = nullptr;
  if (!v || v->type == ML_JSON_NULL) return ML_OK;
  if (depth > HF_MAX_NEST) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: nested deeper than %d", path, HF_MAX_NEST);
  if (v->type != ML_JSON_OBJECT) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: expected an object", path);
  const ml_json* type = ml_json_get(v, "type");
  if (!ml_json_is(type, ML_JSON_STRING)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.type: expected a string", path);
  hf_norm* n = ml_bump_new<hf_norm>(&t->mem);
  if (!n) return hf_nomem(err, path);
  const char* ty = type->str;
  if (!std::strcmp(ty, "Sequence")) {
    n->kind = HF_N_SEQ;
    const ml_json* kids = ml_json_get(v, "normalizers");
    if (!ml_json_is(kids, ML_JSON_ARRAY)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.normalizers: expected an array", path);
    if (kids->n > HF_MAX_SEQ_ITEMS) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.normalizers: more than %u", path, HF_MAX_SEQ_ITEMS);
    n->kids = ml_bump_array<hf_norm*>(&t->mem, kids->n ? kids->n : 1);
    if (!n->kids) return hf_nomem(err, path);
    for (size_t i = 0; i < kids->n; i++) {
      char sub[160];
      std::snprintf(sub, sizeof sub, "%s.normalizers[%zu]", path, i);
      ML_TRY(hf_norm_load(t, kids->items[i], &n->kids[n->nkids], sub, depth + 1, err));
      if (n->kids[n->nkids]) n->nkids++;
    }
  } else if (!std::strcmp(ty, "Prepend")) {
    n->kind = HF_N_PREPEND;
    ML_TRY(hf_get_str(v, "prepend", true, &n->a, &t->mem, path, err));
  } else if (!std::strcmp(ty, "Replace")) {
    n->kind = HF_N_REPLACE;
    ML_TRY(hf_get_pattern(t, v, &n->a, &n->re, path, err));
    ML_TRY(hf_get_str(v, "content", true, &n->b, &t->mem, path, err));
  } else if (!std::strcmp(ty, "NFC")) {
    n->kind = HF_N_NFC;
  } else if (!std::strcmp(ty, "NFD")) {
    n->kind = HF_N_NFD;
  } else if (!std::strcmp(ty, "NFKC")) {
    n->kind = HF_N_NFKC;
  } else if (!std::strcmp(ty, "NFKD")) {
    n->kind = HF_N_NFKD;
  } else if (!std::strcmp(ty, "Lowercase")) {
    n->kind = HF_N_LOWER;
  } else if (!std::strcmp(ty, "Strip")) {
    n->kind = HF_N_STRIP;
    ML_TRY(hf_get_bool(v, "strip_left", true, &n->left, path, err));
    ML_TRY(hf_get_bool(v, "strip_right", true, &n->right, path, err));
  } else {
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.type: normalizer '%.64s' is not supported", path, ty);
  }
  *out = n;
  return ML_OK;
}
