// The BPE model of tokenizer.json: vocabulary and merges loading with full validation, and the
// tokenization of one pre-tokenized word as the Rust library's BPE::merge_word + Word::merge_all.
//
// A word starts as one symbol per character (with continuing_subword_prefix / end_of_word_suffix
// added for the lookup, <0xNN> byte tokens when the character is missing and byte_fallback is on,
// else the unk token, fused when fuse_unk). Symbols form a doubly linked list; every adjacent pair
// that has a merge sits in a min-heap keyed by (rank, left position). Popping gives the Rust
// choice; entries made stale by an earlier merge are recognised and dropped. O(n log n).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "model/tokenizer/hf_impl.h"

namespace {

uint32_t pair_hash(int32_t a, int32_t b) {
  uint64_t h = (uint64_t)(uint32_t)a * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)b * 0xC2B2AE3D27D4EB4Full;
  return (uint32_t)(h ^ (h >> 29) ^ (h >> 47));
}

const ml_hf_tok::merge_slot* merge_find(const ml_hf_tok* t, int32_t a, int32_t b) {
  if (!t->merge_table) return nullptr;
  for (uint32_t i = pair_hash(a, b) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
    const ml_hf_tok::merge_slot* m = &t->merge_table[i];
    if (m->a < 0) return nullptr;
    if (m->a == a && m->b == b) return m;
  }
}

uint32_t pow2_at_least(uint64_t n) {
  uint32_t p = 16;
  while (p < n) p <<= 1;
  return p;
}

// Splits a merges entry into its two tokens: "a b" (exactly one space) or ["a", "b"].
bool merge_parts(const ml_json* m, hf_strv* a, hf_strv* b) {
  if (ml_json_is(m, ML_JSON_STRING)) {
    const char* sp = static_cast<const char*>(std::memchr(m->str, ' ', m->len));
    if (!sp || std::memchr(sp + 1, ' ', m->len - (sp + 1 - m->str))) return false;
    *a = hf_strv{m->str, (uint32_t)(sp - m->str)};
    *b = hf_strv{sp + 1, (uint32_t)(m->len - (sp + 1 - m->str))};
    return true;
  }
  if (ml_json_is(m, ML_JSON_ARRAY) && m->n == 2 && ml_json_is(m->items[0], ML_JSON_STRING) &&
      ml_json_is(m->items[1], ML_JSON_STRING)) {
    *a = hf_strv{m->items[0]->str, (uint32_t)m->items[0]->len};
    *b = hf_strv{m->items[1]->str, (uint32_t)m->items[1]->len};
    return true;
  }
  return false;
}

}  // namespace

int32_t hf_vocab_find(const ml_hf_tok* t, const char* s, size_t n) {
  if (!t->vocab_table) return -1;
  for (uint32_t i = hf_hash(s, n) & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
    const int32_t id = t->vocab_table[i];
    if (id < 0) return -1;
    if (t->tok[id].n == n && std::memcmp(t->tok[id].s, s, n) == 0) return id;
  }
}

ml_status hf_bpe_load(ml_hf_tok* t, const ml_json* model, ml_error* err) {
  if (!ml_json_is(model, ML_JSON_OBJECT)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model: expected an object");
  const ml_json* type = ml_json_get(model, "type");
  if (type && !(ml_json_is(type, ML_JSON_STRING) && std::strcmp(type->str, "BPE") == 0)) {
    if (ml_json_is(type, ML_JSON_STRING))
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.type: '%s' is not supported (only BPE)", type->str);
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.type: expected a string");
  }
  const ml_json* dropout = ml_json_get(model, "dropout");
  if (dropout && dropout->type != ML_JSON_NULL)
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.dropout: only null is supported (BPE dropout is random)");
  ML_TRY(hf_get_bool(model, "fuse_unk", false, &t->fuse_unk, "model", err));
  ML_TRY(hf_get_bool(model, "byte_fallback", false, &t->byte_fallback, "model", err));
  ML_TRY(hf_get_bool(model, "ignore_merges", false, &t->ignore_merges, "model", err));
  ML_TRY(hf_get_str(model, "unk_token", false, &t->unk_str, &t->mem, "model", err));
  ML_TRY(hf_get_str(model, "continuing_subword_prefix", false, &t->cont_prefix, &t->mem, "model", err));
  ML_TRY(hf_get_str(model, "end_of_word_suffix", false, &t->eow_suffix, &t->mem, "model", err));

  // Vocabulary: {"token": id, ...}, ids unique and below HF_MAX_VOCAB.
  const ml_json* vocab = ml_json_get(model, "vocab");
  if (!ml_json_is(vocab, ML_JSON_OBJECT)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.vocab: expected an object");
  if (vocab->n > HF_MAX_VOCAB) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.vocab: more than %u entries", HF_MAX_VOCAB);
  uint32_t max_id = 0;
  for (size_t i = 0; i < vocab->n; i++) {
    const ml_json_member& m = vocab->members[i];
    if (m.value->type != ML_JSON_NUMBER || !m.value->is_int || m.value->i64 < 0 || m.value->i64 >= HF_MAX_VOCAB)
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.vocab['%.64s']: expected an id in [0, %u)", m.key, HF_MAX_VOCAB);
    if (m.key_len > HF_MAX_TOKEN_BYTES)
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.vocab: a token of %zu bytes (the limit is %u)", m.key_len, HF_MAX_TOKEN_BYTES);
    if ((uint32_t)m.value->i64 + 1 > max_id) max_id = (uint32_t)m.value->i64 + 1;
  }
  t->n_ids = max_id;
  t->n_model = (uint32_t)vocab->n;
  t->tok = ml_bump_array<hf_strv>(&t->mem, max_id ? max_id : 1);
  t->flags = ml_bump_array<uint8_t>(&t->mem, max_id ? max_id : 1);
  t->vocab_mask = pow2_at_least(2 * (uint64_t)vocab->n) - 1;
  t->vocab_table = ml_bump_array<int32_t>(&t->mem, (size_t)t->vocab_mask + 1);
  if (!t->tok || !t->flags || !t->vocab_table) return hf_nomem(err, "model.vocab");
  std::memset(t->vocab_table, 0xff, sizeof(int32_t) * ((size_t)t->vocab_mask + 1));
  for (size_t i = 0; i < vocab->n; i++) {
    const ml_json_member& m = vocab->members[i];
    const int32_t id = (int32_t)m.value->i64;
    if (t->flags[id] & HF_F_MODEL)
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.vocab['%.64s']: id %d is already the id of '%.64s'", m.key, id, t->tok[id].s);
    if (hf_vocab_find(t, m.key, m.key_len) >= 0)
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.vocab: token '%.64s' appears twice", m.key);
    t->tok[id] = hf_strv{m.key, (uint32_t)m.key_len};  // the key lives in the JSON bump: copied below
    char* c = ml_bump_strdup(&t->mem, m.key, m.key_len);
    if (!c) return hf_nomem(err, "model.vocab");
    t->tok[id].s = c;
    t->flags[id] |= HF_F_MODEL;
    uint32_t slot = hf_hash(m.key, m.key_len) & t->vocab_mask;
    while (t->vocab_table[slot] >= 0) slot = (slot + 1) & t->vocab_mask;
    t->vocab_table[slot] = id;
  }
  t->unk = t->unk_str.s ? hf_vocab_find(t, t->unk_str.s, t->unk_str.n) : -1;
  for (int b = 0; b < 256; b++) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_tok[b] = hf_vocab_find(t, name, 6);
  }

  // Merges: rank = position; a later duplicate replaces an earlier one (as a Rust HashMap collect).
  const ml_json* merges = ml_json_get(model, "merges");
  if (!merges || merges->type == ML_JSON_NULL) return ML_OK;
  if (merges->type != ML_JSON_ARRAY) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.merges: expected an array");
  // A token of k bytes can be made by at most k - 1 distinct merges: the vocabulary's total bytes
  // bound the list (Llama 3 has 280,147 merges for 128,000 tokens; several merges make one token).
  uint64_t vocab_bytes = 0;
  for (size_t i = 0; i < vocab->n; i++) vocab_bytes += vocab->members[i].key_len;
  if (merges->n > vocab_bytes)
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.merges: %zu merges, more than the vocabulary's %llu bytes allow", merges->n,
                   (unsigned long long)vocab_bytes);
  if (merges->n == 0) return ML_OK;
  t->merge_mask = pow2_at_least(2 * (uint64_t)merges->n) - 1;
  t->merge_table = ml_bump_array<ml_hf_tok::merge_slot>(&t->mem, (size_t)t->merge_mask + 1);
  if (!t->merge_table) return hf_nomem(err, "model.merges");
  for (size_t i = 0; i <= t->merge_mask; i++) t->merge_table[i] = {-1, -1, -1, -1};
  ml_vec<char> joined;
  for (size_t r = 0; r < merges->n; r++) {
    hf_strv a, b;
    if (!merge_parts(merges->items[r], &a, &b))
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.merges[%zu]: expected \"a b\" (one space) or [\"a\", \"b\"]", r);
    const int32_t ia = hf_vocab_find(t, a.s, a.n), ib = hf_vocab_find(t, b.s, b.n);
    if (ia < 0) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.merges[%zu]: '%.*s' is not in the vocabulary", r, (int)std::min<uint32_t>(a.n, 64), a.s);
    if (ib < 0) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.merges[%zu]: '%.*s' is not in the vocabulary", r, (int)std::min<uint32_t>(b.n, 64), b.s);
    // The merged token: a + b without b's continuing_subword_prefix (as the Rust library slices it).
    const uint32_t cut = t->cont_prefix.n;
    if (b.n < cut || (cut < b.n && ((uint8_t)b.s[cut] & 0xC0) == 0x80))
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.merges[%zu]: '%.*s' is shorter than continuing_subword_prefix", r, (int)std::min<uint32_t>(b.n, 64), b.s);
    joined.clear();
    if (!joined.append(a.s, a.n) || !joined.append(b.s + cut, b.n - cut)) return hf_nomem(err, "model.merges");
    const int32_t id = hf_vocab_find(t, joined.data(), joined.size());
    if (id < 0)
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: model.merges[%zu]: the merged token '%.*s' is not in the vocabulary", r,
                     (int)std::min<size_t>(joined.size(), 64), joined.data());
    uint32_t slot = pair_hash(ia, ib) & t->merge_mask;
    while (t->merge_table[slot].a >= 0 && !(t->merge_table[slot].a == ia && t->merge_table[slot].b == ib)) slot = (slot + 1) & t->merge_mask;
    t->merge_table[slot] = {ia, ib, (int32_t)r, id};
  }
  return ML_OK;
}

namespace {

struct sym {
  int32_t id, prev, next;
  uint32_t len;  // bytes of the word it covers; 0 once merged into its left neighbour
};
struct cand {
  uint64_t key;  // rank << 32 | position: the smallest pops first
  int32_t id;
};
struct cand_greater {
  bool operator()(const cand& x, const cand& y) const { return x.key > y.key; }
};

bool push_sym(ml_vec<sym>* v, int32_t id, uint32_t len) {
  const int32_t i = (int32_t)v->size();
  return v->push(sym{id, i - 1, i + 1, len});
}

// The Rust merge_word + merge_all for s[0,n), appending ids and ends (relative to the word).
ml_status merge_word(const ml_hf_tok* t, const char* s, size_t n, ml_vec<int32_t>* ids, ml_vec<uint32_t>* ends,
                     ml_error* err) {
  ml_vec<sym> syms;
  ml_vec<cand> heap;
  ml_vec<char> buf;
  if (!syms.reserve(n)) return hf_nomem(err, "encode");
  int32_t unk_id = -1;
  uint32_t unk_len = 0;
  bool unk_pending = false;
  for (size_t i = 0; i < n;) {
    const size_t b = i;
    hf_next_cp(s, n, &i);
    const uint32_t clen = (uint32_t)(i - b);
    const char* key = s + b;
    size_t klen = clen;
    if ((b > 0 && t->cont_prefix.n) || (i == n && t->eow_suffix.n)) {
      buf.clear();
      if ((b > 0 && !buf.append(t->cont_prefix.s, t->cont_prefix.n)) || !buf.append(s + b, clen) ||
          (i == n && !buf.append(t->eow_suffix.s, t->eow_suffix.n)))
        return hf_nomem(err, "encode");
      key = buf.data();
      klen = buf.size();
    }
    const int32_t id = hf_vocab_find(t, key, klen);
    if (id >= 0) {
      if (unk_pending && !push_sym(&syms, unk_id, unk_len)) return hf_nomem(err, "encode");
      unk_pending = false;
      if (!push_sym(&syms, id, clen)) return hf_nomem(err, "encode");
      continue;
    }
    if (t->byte_fallback) {
      bool all = true;
      for (size_t k = 0; k < klen; k++) all = all && t->byte_tok[(uint8_t)key[k]] >= 0;
      if (all) {
        for (size_t k = 0; k < klen; k++)
          if (!push_sym(&syms, t->byte_tok[(uint8_t)key[k]], 1)) return hf_nomem(err, "encode");
        continue;
      }
    }
    if (t->unk_str.s) {
      if (t->unk < 0)
        return ml_fail(err, ML_E_ARG, "tokenizer.json: model.unk_token '%.*s' is not in the vocabulary", (int)std::min<uint32_t>(t->unk_str.n, 64), t->unk_str.s);
      if (unk_pending && t->fuse_unk) {
        unk_len += clen;
      } else {
        if (unk_pending && !push_sym(&syms, unk_id, unk_len)) return hf_nomem(err, "encode");
        unk_pending = true, unk_id = t->unk, unk_len = clen;
      }
    }
    // No unk token: the character is dropped, as the Rust library does.
  }
  if (unk_pending && !push_sym(&syms, unk_id, unk_len)) return hf_nomem(err, "encode");
  if (syms.empty()) return ML_OK;
  syms.back().next = -1;

  for (size_t i = 0; i + 1 < syms.size(); i++) {
    const ml_hf_tok::merge_slot* m = merge_find(t, syms[i].id, syms[i + 1].id);
    if (m && !heap.push(cand{(uint64_t)m->rank << 32 | i, m->id})) return hf_nomem(err, "encode");
  }
  std::make_heap(heap.begin(), heap.end(), cand_greater());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cand_greater());
    const cand top = heap.back();
    heap.pop();
    const int32_t pos = (int32_t)(uint32_t)top.key;
    sym& cur = syms[pos];
    if (cur.len == 0 || cur.next < 0) continue;
    const int32_t nx = cur.next;
    const ml_hf_tok::merge_slot* m = merge_find(t, cur.id, syms[nx].id);
    if (!m || m->id != top.id) continue;  // stale: a neighbour changed since this entry was pushed
    cur.id = top.id;
    cur.len += syms[nx].len;
    cur.next = syms[nx].next;
    syms[nx].len = 0;
    if (cur.next >= 0) syms[cur.next].prev = pos;
    if (cur.prev >= 0) {
      const ml_hf_tok::merge_slot* p = merge_find(t, syms[cur.prev].id, cur.id);
      if (p) {
        if (!heap.push(cand{(uint64_t)p->rank << 32 | (uint32_t)cur.prev, p->id})) return hf_nomem(err, "encode");
        std::push_heap(heap.begin(), heap.end(), cand_greater());
      }
    }
    if (cur.next >= 0) {
      const ml_hf_tok::merge_slot* q = merge_find(t, cur.id, syms[cur.next].id);
      if (q) {
        if (!heap.push(cand{(uint64_t)q->rank << 32 | (uint32_t)pos, q->id})) return hf_nomem(err, "encode");
        std::push_heap(heap.begin(), heap.end(), cand_greater());
      }
    }
  }
  uint32_t end = 0;
  for (size_t i = 0; i < syms.size(); i++) {
    if (syms[i].len == 0) continue;
    end += syms[i].len;
    if (!ids->push(syms[i].id) || !ends->push(end)) return hf_nomem(err, "encode");
  }
  return ML_OK;
}

}  // namespace

ml_status hf_bpe_word(const ml_hf_tok* t, const char* s, size_t n, hf_wcache* c, ml_vec<int32_t>* ids,
                      ml_vec<uint32_t>* ends, ml_error* err) {
  if (n == 0) return ML_OK;
  if (t->ignore_merges) {
    const int32_t id = hf_vocab_find(t, s, n);
    if (id >= 0) {
      if (!ids->push(id) || !ends->push((uint32_t)n)) return hf_nomem(err, "encode");
      return ML_OK;
    }
  }
  if (!c || n > HF_CACHE_WORD) return merge_word(t, s, n, ids, ends, err);
  if (c->slots.empty()) {
    if (!c->slots.resize(2 * HF_CACHE_ENTRIES)) return hf_nomem(err, "encode cache");
    std::memset(c->slots.data(), 0xff, c->slots.size() * sizeof(int32_t));
  }
  const uint32_t mask = 2 * HF_CACHE_ENTRIES - 1;
  const uint32_t h = hf_hash(s, n);
  uint32_t slot = h & mask;
  for (;; slot = (slot + 1) & mask) {
    const int32_t e = c->slots[slot];
    if (e < 0) break;
    const hf_wcache::entry& en = c->entries[e];
    if (en.hash == h && en.key_len == n && std::memcmp(c->keys.data() + en.key_off, s, n) == 0) {
      if (!ids->append(c->ids.data() + en.tok_off, en.tok_n) || !ends->append(c->ends.data() + en.tok_off, en.tok_n))
        return hf_nomem(err, "encode");
      return ML_OK;
    }
  }
  const size_t before = ids->size();
  ML_TRY(merge_word(t, s, n, ids, ends, err));
  if (c->entries.size() >= HF_CACHE_ENTRIES) return ML_OK;  // full: no more entries (as the Rust cache)
  const size_t k = ids->size() - before;
  hf_wcache::entry en{h, (uint32_t)c->keys.size(), (uint32_t)n, (uint32_t)c->ids.size(), (uint32_t)k};
  if (c->keys.size() + n > UINT32_MAX / 2 || !c->keys.append(s, n) || !c->ids.append(ids->data() + before, k) ||
      !c->ends.append(ends->data() + before, k) || !c->entries.push(en))
    return hf_nomem(err, "encode cache");
  c->slots[slot] = (int32_t)(c->entries.size() - 1);
  return ML_OK;
}
