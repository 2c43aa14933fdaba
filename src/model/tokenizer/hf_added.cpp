// Added tokens (tokenizer.json "added_tokens"): loading with the Rust library's id rule checked,
// the two matchers (contents of non-normalized tokens; normalized contents of normalized tokens),
// and the cutting of a text into added-token matches and the rest, as AddedVocabulary's
// find_matches: leftmost-longest matches, then single_word / lstrip / rstrip.
#include <cstdio>
#include <cstring>

#include "model/tokenizer/hf_impl.h"

namespace {

ml_status grow_ids(ml_hf_tok* t, uint32_t n, ml_error* err) {
  if (n <= t->n_ids) return ML_OK;
  hf_strv* tok = ml_bump_array<hf_strv>(&t->mem, n);
  uint8_t* flags = ml_bump_array<uint8_t>(&t->mem, n);
  if (!tok || !flags) return hf_nomem(err, "added_tokens");
  if (t->n_ids) {
    std::memcpy(tok, t->tok, sizeof(hf_strv) * t->n_ids);
    std::memcpy(flags, t->flags, t->n_ids);
  }
  t->tok = tok, t->flags = flags, t->n_ids = n;
  return ML_OK;
}

ml_status trie_add(hf_trie* tr, const char* s, size_t n, int32_t added, ml_error* err) {
  if (tr->nodes.empty()) {
    if (!tr->nodes.push(hf_trie_node{-1, -1, -1, 0})) return hf_nomem(err, "added_tokens");
    for (int i = 0; i < 256; i++) tr->root_child[i] = -1;
  }
  int32_t cur = 0;
  for (size_t i = 0; i < n; i++) {
    const uint8_t b = (uint8_t)s[i];
    int32_t c = cur == 0 ? tr->root_child[b] : tr->nodes[cur].first_child;
    if (cur != 0)
      while (c >= 0 && tr->nodes[c].byte != b) c = tr->nodes[c].next_sibling;
    if (c < 0) {
      c = (int32_t)tr->nodes.size();
      if (!tr->nodes.push(hf_trie_node{-1, cur == 0 ? -1 : tr->nodes[cur].first_child, -1, b})) return hf_nomem(err, "added_tokens");
      if (cur == 0)
        tr->root_child[b] = c;
      else
        tr->nodes[cur].first_child = c;
    }
    cur = c;
  }
  if (tr->nodes[cur].added < 0) tr->nodes[cur].added = added;  // equal patterns: the first wins
  return ML_OK;
}

// The longest pattern starting at s[i]: its end, or 0 with *added = -1.
size_t trie_longest(const hf_trie* tr, const char* s, size_t n, size_t i, int32_t* added) {
  *added = -1;
  size_t best = 0;
  int32_t c = tr->root_child[(uint8_t)s[i]];
  for (size_t j = i; c >= 0;) {
    if (tr->nodes[c].added >= 0) *added = tr->nodes[c].added, best = j + 1;
    if (++j >= n) break;
    const uint8_t b = (uint8_t)s[j];
    for (c = tr->nodes[c].first_child; c >= 0 && tr->nodes[c].byte != b;) c = tr->nodes[c].next_sibling;
  }
  return best;
}

// The code point ending at s[i] (i > 0), for the single_word check.
uint32_t cp_before(const char* s, size_t i) {
  size_t b = i - 1;
  while (b > 0 && ((uint8_t)s[b] & 0xC0) == 0x80) b--;
  return hf_next_cp(s, i, &b);
}

}  // namespace

ml_status hf_added_load(ml_hf_tok* t, const ml_json* arr, ml_error* err) {
  if (!arr || arr->type == ML_JSON_NULL) return ML_OK;
  if (arr->type != ML_JSON_ARRAY) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: added_tokens: expected an array");
  if (arr->n > HF_MAX_ADDED) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: added_tokens: more than %u entries", HF_MAX_ADDED);
  t->added = ml_bump_array<hf_added>(&t->mem, arr->n ? arr->n : 1);
  if (!t->added) return hf_nomem(err, "added_tokens");
  // The id tables grow once, to the largest id the entries name (growing them entry by entry
  // would copy them each time: Llama 3's 256 special tokens after 128,000 tokens held 600 MB).
  uint32_t top = 0;
  for (size_t i = 0; i < arr->n; i++) {
    const ml_json* id = ml_json_get(arr->items[i], "id");
    const ml_json* content = ml_json_get(arr->items[i], "content");
    if (ml_json_is(id, ML_JSON_NUMBER) && id->is_int && id->i64 >= 0 && id->i64 < HF_MAX_VOCAB &&
        ml_json_is(content, ML_JSON_STRING) && content->len > 0 && (uint32_t)id->i64 + 1 > top)
      top = (uint32_t)id->i64 + 1;
  }
  ML_TRY(grow_ids(t, top, err));
  // The Rust rule (AddedVocabulary::add_tokens): a content already known keeps its id, else the id
  // after the largest added id (or the model's vocabulary size). The file's ids must agree.
  int64_t max_added = -1;
  for (size_t i = 0; i < arr->n; i++) {
    const ml_json* a = arr->items[i];
    char path[48];
    std::snprintf(path, sizeof path, "added_tokens[%zu]", i);
    if (!ml_json_is(a, ML_JSON_OBJECT)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: expected an object", path);
    hf_added& x = t->added[t->n_added];
    ML_TRY(hf_get_str(a, "content", true, &x.content, &t->mem, path, err));
    uint32_t id = 0;
    if (!ml_json_get(a, "id")) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.id: missing", path);
    ML_TRY(hf_get_uint(a, "id", 0, HF_MAX_VOCAB - 1, &id, path, err));
    ML_TRY(hf_get_bool(a, "special", false, &x.special, path, err));
    ML_TRY(hf_get_bool(a, "lstrip", false, &x.lstrip, path, err));
    ML_TRY(hf_get_bool(a, "rstrip", false, &x.rstrip, path, err));
    ML_TRY(hf_get_bool(a, "single_word", false, &x.single_word, path, err));
    ML_TRY(hf_get_bool(a, "normalized", !x.special, &x.normalized, path, err));
    if (x.content.n == 0) continue;  // ignored by the Rust library
    int64_t want = -1;
    for (uint32_t k = 0; k < t->n_added; k++)
      if (t->added[k].content.n == x.content.n && std::memcmp(t->added[k].content.s, x.content.s, x.content.n) == 0)
        return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: '%.64s' is already added_tokens' id %d", path, x.content.s, t->added[k].id);
    want = hf_vocab_find(t, x.content.s, x.content.n);
    if (want < 0) want = max_added < 0 ? t->n_model : (max_added >= t->n_model || t->n_model == 0 ? max_added + 1 : t->n_model);
    if (want != id)
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.id: %u, but '%.64s' gets id %lld (its vocabulary id, or the next free one)", path, id,
                     x.content.s, (long long)want);
    if (id >= HF_MAX_VOCAB) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.id: out of range", path);
    x.id = (int32_t)id;
    if (id > max_added) max_added = id;
    ML_TRY(grow_ids(t, id + 1, err));
    t->flags[id] |= HF_F_ADDED | (x.special ? HF_F_SPECIAL : 0);
    t->n_added++;
  }
  return ML_OK;
}

ml_status hf_added_build(ml_hf_tok* t, ml_error* err) {
  t->dtok = ml_bump_array<hf_strv>(&t->mem, t->n_ids ? t->n_ids : 1);
  if (!t->dtok) return hf_nomem(err, "added_tokens");
  for (uint32_t i = 0; i < t->n_ids; i++) t->dtok[i] = t->tok[i];
  for (uint32_t i = 0; i < t->n_added; i++) t->dtok[t->added[i].id] = t->added[i].content;
  hf_text x, tmp;
  // Special tokens first, then the others (the Rust order; it only matters for equal patterns).
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < t->n_added; i++) {
      const hf_added& a = t->added[i];
      if (a.special != (pass == 0)) continue;
      if (!a.normalized) {
        ML_TRY(trie_add(&t->trie_raw, a.content.s, a.content.n, (int32_t)i, err));
        continue;
      }
      x.s.clear(), x.al.clear();
      if (!hf_text_push(&x, a.content.s, a.content.n, ml_tok_span{0, 0})) return hf_nomem(err, "added_tokens");
      if (t->norm) ML_TRY(hf_norm_apply(t->norm, &x, &tmp, err));
      if (x.s.size()) ML_TRY(trie_add(&t->trie_norm, x.s.data(), x.s.size(), (int32_t)i, err));
      // Decoding reads the normalized content (the Rust library's normalized cache).
      if (t->norm) {
        char* c = ml_bump_strdup(&t->mem, x.s.data(), x.s.size());
        if (!c) return hf_nomem(err, "added_tokens");
        t->dtok[a.id] = hf_strv{c, (uint32_t)x.s.size()};
      }
    }
  }
  // decode(skip_special) drops the ids whose decode string is a special token's content: a hash
  // set of those contents.
  uint32_t mask = 15;
  while (mask / 2 < t->n_added) mask = mask * 2 + 1;
  ml_vec<int32_t> set;
  if (!set.resize((size_t)mask + 1)) return hf_nomem(err, "added_tokens");
  for (int32_t& v : set) v = -1;
  for (uint32_t k = 0; k < t->n_added; k++) {
    if (!t->added[k].special) continue;
    uint32_t h = hf_hash(t->added[k].content.s, t->added[k].content.n) & mask;
    while (set[h] >= 0) h = (h + 1) & mask;
    set[h] = (int32_t)k;
  }
  for (uint32_t i = 0; i < t->n_added; i++) {
    const hf_strv d = t->dtok[t->added[i].id];
    for (uint32_t h = hf_hash(d.s, d.n) & mask; set[h] >= 0; h = (h + 1) & mask) {
      const hf_strv c = t->added[set[h]].content;
      if (c.n == d.n && std::memcmp(c.s, d.s, d.n) == 0) {
        t->flags[t->added[i].id] |= HF_F_SKIP;
        break;
      }
    }
  }
  return ML_OK;
}

ml_status hf_added_cut(const ml_hf_tok* t, const hf_trie* tr, const char* s, size_t n, ml_vec<hf_cut>* out,
                       ml_error* err) {
  size_t start_offset = 0;
  if (!tr->nodes.empty()) {
    for (size_t i = 0; i < n;) {
      int32_t ai;
      const size_t e = trie_longest(tr, s, n, i, &ai);
      if (ai < 0) {
        i++;
        continue;
      }
      const hf_added& a = t->added[ai];
      size_t start = i, stop = e;
      i = e;
      if (a.single_word) {
        const bool left_ok = start == 0 || !hf_is_word(cp_before(s, start));
        size_t j = stop;
        const bool right_ok = stop == n || !hf_is_word(hf_next_cp(s, n, &j));
        if (!left_ok || !right_ok) continue;
      }
      if (a.lstrip) {
        // The spaces before it, but not what an earlier match took.
        size_t ns = start;
        while (ns > 0) {
          size_t b = ns - 1;
          while (b > 0 && ((uint8_t)s[b] & 0xC0) == 0x80) b--;
          size_t j = b;
          if (!hf_is_ws(hf_next_cp(s, n, &j))) break;
          ns = b;
        }
        start = ns > start_offset ? ns : start_offset;
      }
      if (a.rstrip) {
        while (stop < n) {
          size_t j = stop;
          if (!hf_is_ws(hf_next_cp(s, n, &j))) break;
          stop = j;
        }
      }
      // The search goes on from the match's end, not from what rstrip took: a later match may
      // start inside the stripped spaces and overlap (the Rust library keeps both).
      if (start_offset < start && !out->push(hf_cut{(uint32_t)start_offset, (uint32_t)start, -1})) return hf_nomem(err, "encode");
      if (!out->push(hf_cut{(uint32_t)start, (uint32_t)stop, ai})) return hf_nomem(err, "encode");
      start_offset = stop;
    }
  }
  if (start_offset < n && !out->push(hf_cut{(uint32_t)start_offset, (uint32_t)n, -1})) return hf_nomem(err, "encode");
  return ML_OK;
}
