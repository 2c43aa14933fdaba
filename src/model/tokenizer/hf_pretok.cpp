// tokenizer.json pre-tokenizers: ByteLevel (prefix space, the GPT-2 split, the byte-to-unicode
// map), Split (String or Regex pattern, the five behaviours, invert), Digits, Metaspace,
// Whitespace, WhitespaceSplit, Punctuation, Sequence.
//
// They work on hf_pts: a text buffer with per-byte spans and a list of splits. Splitting only
// rewrites the split list; ByteLevel and Metaspace, which change the text, rebuild the buffer.
// Splits that are added tokens pass through untouched; empty splits are dropped (as the Rust
// PreTokenizedString::split does).
#include <cstdio>
#include <cstring>

#include "model/tokenizer/hf_impl.h"

namespace {

// One piece of a split as Pattern::find_matches gives it: a byte range and whether it matched.
struct piece {
  uint32_t b, e;
  bool match;
};

bool push_split(ml_vec<hf_split>* sp, uint32_t off, uint32_t len, int32_t id) {
  return len == 0 || sp->push(hf_split{off, len, id});
}

// Pieces (matches and the gaps between them) from match pairs m over [0, n).
bool pieces_from_matches(const ml_vec<uint32_t>& m, uint32_t n, bool invert, ml_vec<piece>* out) {
  out->clear();
  uint32_t prev = 0;
  for (size_t k = 0; k < m.size(); k += 2) {
    if (prev != m[k] && !out->push(piece{prev, m[k], invert})) return false;
    if (!out->push(piece{m[k], m[k + 1], !invert})) return false;
    prev = m[k + 1];
  }
  return prev == n || out->push(piece{prev, n, invert});
}

// Pieces for a character predicate: each matching character is its own match.
template <class F>
bool pieces_from_chars(const char* s, uint32_t n, F pred, ml_vec<piece>* out) {
  out->clear();
  uint32_t last = 0;
  for (size_t i = 0; i < n;) {
    const size_t b = i;
    const uint32_t cp = hf_next_cp(s, n, &i);
    if (!pred(cp)) continue;
    if (last < b && !out->push(piece{last, (uint32_t)b, false})) return false;
    if (!out->push(piece{(uint32_t)b, (uint32_t)i, true})) return false;
    last = (uint32_t)i;
  }
  return last == n || out->push(piece{last, n, false});
}

// NormalizedString::split: the behaviour decides what becomes of matches; appends the resulting
// splits (relative to base) to out.
bool apply_behavior(const ml_vec<piece>& ps, hf_split_behavior bh, uint32_t base, ml_vec<hf_split>* out) {
  const size_t first = out->size();
  bool prev_match = false;
  switch (bh) {
    case HF_REMOVED:
      for (const piece& p : ps)
        if (!p.match && !out->push(hf_split{base + p.b, p.e - p.b, -1})) return false;
      break;
    case HF_ISOLATED:
      for (const piece& p : ps)
        if (!out->push(hf_split{base + p.b, p.e - p.b, -1})) return false;
      break;
    case HF_CONTIGUOUS:
      for (const piece& p : ps) {
        if (p.match == prev_match && out->size() > first)
          out->back().len = base + p.e - out->back().off;
        else if (!out->push(hf_split{base + p.b, p.e - p.b, -1}))
          return false;
        prev_match = p.match;
      }
      break;
    case HF_MERGED_PREV:
      for (const piece& p : ps) {
        if (p.match && !prev_match && out->size() > first)
          out->back().len = base + p.e - out->back().off;
        else if (!out->push(hf_split{base + p.b, p.e - p.b, -1}))
          return false;
        prev_match = p.match;
      }
      break;
    case HF_MERGED_NEXT: {
      // Walk backwards: a match joins the piece after it.
      for (size_t k = ps.size(); k-- > 0;) {
        const piece& p = ps[k];
        if (p.match && !prev_match && out->size() > first) {
          hf_split& nx = out->back();
          nx.len += nx.off - (base + p.b);
          nx.off = base + p.b;
        } else if (!out->push(hf_split{base + p.b, p.e - p.b, -1})) {
          return false;
        }
        prev_match = p.match;
      }
      for (size_t a = first, b = out->size(); a + 1 < b; a++, b--) {
        const hf_split t = (*out)[a];
        (*out)[a] = (*out)[b - 1];
        (*out)[b - 1] = t;
      }
      break;
    }
  }
  // Drop the empty ones.
  size_t w = first;
  for (size_t r = first; r < out->size(); r++)
    if ((*out)[r].len) (*out)[w++] = (*out)[r];
  out->resize(w);
  return true;
}

// The GPT-2 pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// hand-compiled: the end of the match that starts at s[i] (every position starts one).
inline uint32_t cp_at(const char* s, size_t n, size_t i, size_t* next) {
  const uint8_t c = (uint8_t)s[i];
  if (c < 0x80) {
    *next = i + 1;
    return c;
  }
  *next = i;
  return hf_next_cp(s, n, next);
}
enum cls : uint8_t { C_L, C_N, C_WS, C_OTHER };
inline cls class_of(uint32_t cp) {
  if (hf_is_letter(cp)) return C_L;
  if (hf_is_number(cp)) return C_N;
  if (hf_is_ws(cp)) return C_WS;
  return C_OTHER;
}
size_t gpt2_match(const char* s, size_t n, size_t i) {
  size_t j;
  const uint32_t c = cp_at(s, n, i, &j);
  if (c == '\'' && j < n) {
    const char a = s[j], b = j + 1 < n ? s[j + 1] : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return j + 1;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return j + 2;
  }
  // ` ?X+` for X in L, N, other: the optional space, then a run of one class.
  size_t k = i;
  if (c == ' ' && j < n) k = j;
  size_t after;
  const cls first = class_of(cp_at(s, n, k, &after));
  if (first != C_WS) {
    size_t e = after;
    while (e < n) {
      size_t nx;
      if (class_of(cp_at(s, n, e, &nx)) != first) break;
      e = nx;
    }
    return e;
  }
  // Whitespace: \s+(?!\S) leaves the last space to the next word; else \s+ takes one.
  size_t e = j, last = i;
  uint32_t count = 1;
  while (e < n) {
    size_t nx;
    if (!hf_is_ws(cp_at(s, n, e, &nx))) break;
    last = e, e = nx, count++;
  }
  if (e == n) return n;
  return count >= 2 ? last : j;
}

// Copies one split's bytes into out, mapping each byte through the GPT-2 byte-to-unicode table.
// The UTF-8 of each byte's GPT-2 character, computed once.
struct byte_utf8 {
  char u[256][2];
  uint8_t n[256];
  byte_utf8() {
    for (int b = 0; b < 256; b++) {
      char t[4];
      n[b] = (uint8_t)hf_put_cp(hf_byte_to_cp((uint8_t)b), t);
      u[b][0] = t[0], u[b][1] = t[1];
    }
  }
};

bool bytelevel_map(const char* s, const ml_tok_span* al, uint32_t n, hf_pts* out) {
  static const byte_utf8 kUtf8;
  size_t w = out->s.size();
  if (!out->s.resize(w + 2 * (size_t)n) || !out->al.resize(w + 2 * (size_t)n)) return false;
  char* d = out->s.data();
  ml_tok_span* da = out->al.data();
  for (uint32_t k = 0; k < n; k++) {
    const uint8_t b = (uint8_t)s[k];
    d[w] = kUtf8.u[b][0], da[w++] = al[k];
    if (kUtf8.n[b] == 2) d[w] = kUtf8.u[b][1], da[w++] = al[k];
  }
  out->s.resize(w);
  out->al.resize(w);
  return true;
}

void swap_pts(hf_pts* a, hf_pts* b) {
  ml_vec<char> s = static_cast<ml_vec<char>&&>(a->s);
  ml_vec<ml_tok_span> al = static_cast<ml_vec<ml_tok_span>&&>(a->al);
  ml_vec<hf_split> sp = static_cast<ml_vec<hf_split>&&>(a->sp);
  a->s = static_cast<ml_vec<char>&&>(b->s), a->al = static_cast<ml_vec<ml_tok_span>&&>(b->al), a->sp = static_cast<ml_vec<hf_split>&&>(b->sp);
  b->s = static_cast<ml_vec<char>&&>(s), b->al = static_cast<ml_vec<ml_tok_span>&&>(al), b->sp = static_cast<ml_vec<hf_split>&&>(sp);
}

bool copy_split(const hf_pts* x, const hf_split& sp, hf_pts* out) {
  const uint32_t off = (uint32_t)out->s.size();
  return out->s.append(x->s.data() + sp.off, sp.len) && out->al.append(x->al.data() + sp.off, sp.len) &&
         out->sp.push(hf_split{off, sp.len, sp.id});
}

ml_status bytelevel(const hf_pre* p, hf_pts* x, hf_pts* out, ml_error* err) {
  out->s.clear(), out->al.clear(), out->sp.clear();
  if (!out->s.reserve(x->s.size() * 2 + 16) || !out->al.reserve(x->s.size() * 2 + 16)) return hf_nomem(err, "pre-tokenizer");
  ml_vec<char> pre;
  ml_vec<ml_tok_span> pal;
  for (const hf_split& sp : x->sp) {
    if (sp.id >= 0) {
      if (!copy_split(x, sp, out)) return hf_nomem(err, "pre-tokenizer");
      continue;
    }
    const char* s = x->s.data() + sp.off;
    const ml_tok_span* al = x->al.data() + sp.off;
    uint32_t n = sp.len;
    if (p->flag1 && s[0] != ' ') {
      pre.clear(), pal.clear();
      if (!pre.push(' ') || !pre.append(s, n) || !pal.push(al[0]) || !pal.append(al, n)) return hf_nomem(err, "pre-tokenizer");
      s = pre.data(), al = pal.data(), n++;
    }
    for (size_t i = 0; i < n;) {
      const size_t e = p->flag2 ? gpt2_match(s, n, i) : n;
      const uint32_t off = (uint32_t)out->s.size();
      if (!bytelevel_map(s + i, al + i, (uint32_t)(e - i), out) ||
          !push_split(&out->sp, off, (uint32_t)out->s.size() - off, -1))
        return hf_nomem(err, "pre-tokenizer");
      i = e;
    }
  }
  swap_pts(x, out);
  return ML_OK;
}

ml_status metaspace(const hf_pre* p, hf_pts* x, hf_pts* out, ml_error* err) {
  out->s.clear(), out->al.clear(), out->sp.clear();
  char rep[4];
  const int rn = hf_put_cp(p->rep, rep);
  ml_vec<piece> ps;
  for (const hf_split& sp : x->sp) {
    if (sp.id >= 0) {
      if (!copy_split(x, sp, out)) return hf_nomem(err, "pre-tokenizer");
      continue;
    }
    const uint32_t off = (uint32_t)out->s.size();
    const char* s = x->s.data() + sp.off;
    const ml_tok_span* al = x->al.data() + sp.off;
    // The replaced text starts with the replacement when s starts with a space or with it.
    const bool starts = s[0] == ' ' || (sp.len >= (uint32_t)rn && std::memcmp(s, rep, rn) == 0);
    const bool prepend = !starts && (p->prepend == HF_PREPEND_ALWAYS || (p->prepend == HF_PREPEND_FIRST && al[0].begin == 0));
    if (prepend) {
      if (!out->s.append(rep, rn)) return hf_nomem(err, "pre-tokenizer");
      for (int q = 0; q < rn; q++)
        if (!out->al.push(al[0])) return hf_nomem(err, "pre-tokenizer");
    }
    for (uint32_t k = 0; k < sp.len; k++) {
      if (s[k] == ' ') {
        if (!out->s.append(rep, rn)) return hf_nomem(err, "pre-tokenizer");
        for (int q = 0; q < rn; q++)
          if (!out->al.push(al[k])) return hf_nomem(err, "pre-tokenizer");
      } else if (!out->s.push(s[k]) || !out->al.push(al[k])) {
        return hf_nomem(err, "pre-tokenizer");
      }
    }
    const uint32_t len = (uint32_t)out->s.size() - off;
    if (!p->flag1) {
      if (!push_split(&out->sp, off, len, -1)) return hf_nomem(err, "pre-tokenizer");
      continue;
    }
    const uint32_t r = p->rep;
    if (!pieces_from_chars(out->s.data() + off, len, [r](uint32_t c) { return c == r; }, &ps) ||
        !apply_behavior(ps, HF_MERGED_NEXT, off, &out->sp))
      return hf_nomem(err, "pre-tokenizer");
  }
  swap_pts(x, out);
  return ML_OK;
}

// Whitespace: the matches of \w+|[^\w\s]+ are the splits.
bool whitespace_pieces(const char* s, uint32_t n, ml_vec<piece>* out) {
  out->clear();
  for (size_t i = 0; i < n;) {
    size_t j = i;
    const uint32_t c = hf_next_cp(s, n, &j);
    if (hf_is_ws(c)) {
      i = j;
      continue;
    }
    const bool w = hf_is_word(c);
    size_t e = j;
    while (e < n) {
      size_t nx = e;
      const uint32_t d = hf_next_cp(s, n, &nx);
      if (hf_is_ws(d) || hf_is_word(d) != w) break;
      e = nx;
    }
    if (!out->push(piece{(uint32_t)i, (uint32_t)e, false})) return false;
    i = e;
  }
  return true;
}

// Split-only pre-tokenizers: each split becomes pieces, the behaviour makes them splits.
ml_status split_only(const hf_pre* p, hf_pts* x, hf_pts* out, ml_error* err) {
  out->sp.clear();
  ml_vec<piece> ps;
  ml_vec<uint32_t> m;
  for (const hf_split& sp : x->sp) {
    if (sp.id >= 0) {
      if (!out->sp.push(sp)) return hf_nomem(err, "pre-tokenizer");
      continue;
    }
    const char* s = x->s.data() + sp.off;
    bool ok = true;
    hf_split_behavior bh = p->behavior;
    switch (p->kind) {
      case HF_P_SPLIT:
        ML_TRY(hf_find_all(&p->lit, p->re, s, sp.len, &m, err));
        ok = pieces_from_matches(m, sp.len, p->flag1, &ps);
        break;
      case HF_P_DIGITS:
        ok = pieces_from_chars(s, sp.len, hf_is_number, &ps);
        bh = p->flag1 ? HF_ISOLATED : HF_CONTIGUOUS;
        break;
      case HF_P_PUNCT:
        ok = pieces_from_chars(s, sp.len, hf_is_punct, &ps);
        break;
      case HF_P_WSSPLIT:
        ok = pieces_from_chars(s, sp.len, hf_is_ws, &ps);
        bh = HF_REMOVED;
        break;
      default:  // HF_P_WHITESPACE
        ok = whitespace_pieces(s, sp.len, &ps);
        bh = HF_ISOLATED;
        break;
    }
    if (!ok || !apply_behavior(ps, bh, sp.off, &out->sp)) return hf_nomem(err, "pre-tokenizer");
  }
  ml_vec<hf_split> t = static_cast<ml_vec<hf_split>&&>(x->sp);
  x->sp = static_cast<ml_vec<hf_split>&&>(out->sp);
  out->sp = static_cast<ml_vec<hf_split>&&>(t);
  return ML_OK;
}

ml_status parse_behavior(const ml_json* v, hf_split_behavior dflt, hf_split_behavior* out, const char* path, ml_error* err) {
  const ml_json* b = ml_json_get(v, "behavior");
  *out = dflt;
  if (!b || b->type == ML_JSON_NULL) return ML_OK;
  if (b->type != ML_JSON_STRING) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.behavior: expected a string", path);
  static const char* const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
  for (int i = 0; i < 5; i++)
    if (!std::strcmp(b->str, names[i])) {
      *out = (hf_split_behavior)i;
      return ML_OK;
    }
  return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.behavior: '%.64s' is not a split behavior", path, b->str);
}

}  // namespace

ml_status hf_prepend_scheme(const ml_json* v, hf_prepend* out, const char* path, ml_error* err) {
  const ml_json* ps = ml_json_get(v, "prepend_scheme");
  if (!ps || ps->type == ML_JSON_NULL) {
    // Older files: add_prefix_space true means "always".
    bool aps = true;
    ML_TRY(hf_get_bool(v, "add_prefix_space", true, &aps, path, err));
    *out = aps ? HF_PREPEND_ALWAYS : HF_PREPEND_NEVER;
    return ML_OK;
  }
  if (ps->type == ML_JSON_STRING && !std::strcmp(ps->str, "always")) *out = HF_PREPEND_ALWAYS;
  else if (ps->type == ML_JSON_STRING && !std::strcmp(ps->str, "first")) *out = HF_PREPEND_FIRST;
  else if (ps->type == ML_JSON_STRING && !std::strcmp(ps->str, "never")) *out = HF_PREPEND_NEVER;
  else return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.prepend_scheme: expected \"always\", \"first\" or \"never\"", path);
  return ML_OK;
}

ml_status hf_pre_apply(const hf_pre* p, hf_pts* x, hf_pts* tmp, ml_error* err) {
  switch (p->kind) {
    case HF_P_SEQ:
      for (uint32_t i = 0; i < p->nkids; i++) ML_TRY(hf_pre_apply(p->kids[i], x, tmp, err));
      return ML_OK;
    case HF_P_BYTELEVEL:
      return bytelevel(p, x, tmp, err);
    case HF_P_METASPACE:
      return metaspace(p, x, tmp, err);
    default:
      return split_only(p, x, tmp, err);
  }
}

ml_status hf_pre_load(ml_hf_tok* t, const ml_json* v, hf_pre** out, const char* path, int depth, ml_error* err) {
  *out = nullptr;
  if (!v || v->type == ML_JSON_NULL) return ML_OK;
  if (depth > HF_MAX_NEST) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: nested deeper than %d", path, HF_MAX_NEST);
  if (v->type != ML_JSON_OBJECT) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: expected an object", path);
  const ml_json* type = ml_json_get(v, "type");
  if (!ml_json_is(type, ML_JSON_STRING)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.type: expected a string", path);
  hf_pre* p = ml_bump_new<hf_pre>(&t->mem);
  if (!p) return hf_nomem(err, path);
  const char* ty = type->str;
  if (!std::strcmp(ty, "Sequence")) {
    p->kind = HF_P_SEQ;
    const ml_json* kids = ml_json_get(v, "pretokenizers");
    if (!ml_json_is(kids, ML_JSON_ARRAY)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.pretokenizers: expected an array", path);
    if (kids->n > HF_MAX_SEQ_ITEMS) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.pretokenizers: more than %u", path, HF_MAX_SEQ_ITEMS);
    p->kids = ml_bump_array<hf_pre*>(&t->mem, kids->n ? kids->n : 1);
    if (!p->kids) return hf_nomem(err, path);
    for (size_t i = 0; i < kids->n; i++) {
      char sub[160];
      std::snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", path, i);
      ML_TRY(hf_pre_load(t, kids->items[i], &p->kids[p->nkids], sub, depth + 1, err));
      if (p->kids[p->nkids]) p->nkids++;
    }
  } else if (!std::strcmp(ty, "ByteLevel")) {
    p->kind = HF_P_BYTELEVEL;
    ML_TRY(hf_get_bool(v, "add_prefix_space", true, &p->flag1, path, err));
    ML_TRY(hf_get_bool(v, "use_regex", true, &p->flag2, path, err));
  } else if (!std::strcmp(ty, "Split")) {
    p->kind = HF_P_SPLIT;
    ML_TRY(hf_get_pattern(t, v, &p->lit, &p->re, path, err));
    ML_TRY(parse_behavior(v, HF_ISOLATED, &p->behavior, path, err));
    if (!ml_json_get(v, "behavior")) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.behavior: missing", path);
    ML_TRY(hf_get_bool(v, "invert", false, &p->flag1, path, err));
  } else if (!std::strcmp(ty, "Digits")) {
    p->kind = HF_P_DIGITS;
    ML_TRY(hf_get_bool(v, "individual_digits", false, &p->flag1, path, err));
  } else if (!std::strcmp(ty, "Metaspace")) {
    p->kind = HF_P_METASPACE;
    if (!hf_json_char(ml_json_get(v, "replacement"), &p->rep))
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.replacement: expected a one-character string", path);
    ML_TRY(hf_prepend_scheme(v, &p->prepend, path, err));
    ML_TRY(hf_get_bool(v, "split", true, &p->flag1, path, err));
  } else if (!std::strcmp(ty, "Whitespace")) {
    p->kind = HF_P_WHITESPACE;
  } else if (!std::strcmp(ty, "WhitespaceSplit")) {
    p->kind = HF_P_WSSPLIT;
  } else if (!std::strcmp(ty, "Punctuation")) {
    p->kind = HF_P_PUNCT;
    ML_TRY(parse_behavior(v, HF_ISOLATED, &p->behavior, path, err));
  } else {
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.type: pre-tokenizer '%.64s' is not supported", path, ty);
  }
  *out = p;
  return ML_OK;
}
