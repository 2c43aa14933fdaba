// ml_hf_tok_encode / ml_hf_tok_decode / ml_hf_tok_piece: the pipeline of the Rust Tokenizer's
// encode and decode.
//
// Encode: added tokens that match the raw text are cut out; every other piece is normalized and
// the added tokens that match normalized text are cut out of it (AddedVocabulary's
// extract_and_normalize); the pre-tokenizer splits what remains; the BPE model tokenizes each
// split; with add_special the post-processor's ids go around the result. Spans come from the
// per-byte alignments to the original text.
#include <cstring>

#include "model/tokenizer/hf_impl.h"
#include "model/tokenizer/unicode.h"

namespace {

// Appends orig[b, e) to x with each byte spanning its character.
bool push_original(hf_text* x, const char* s, uint32_t b, uint32_t e) {
  if (!x->s.append(s + b, e - b) || !x->al.reserve(x->al.size() + (e - b))) return false;
  for (size_t i = b; i < e;) {
    const size_t c = i;
    const uint8_t lead = (uint8_t)s[i];
    i += lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    for (size_t k = c; k < i; k++) x->al.push(ml_tok_span{(uint32_t)c, (uint32_t)i});
  }
  return true;
}

bool push_piece(hf_pts* p, const char* s, const ml_tok_span* al, uint32_t n, int32_t id) {
  if (n == 0) return true;
  const uint32_t off = (uint32_t)p->s.size();
  return p->s.append(s, n) && p->al.append(al, n) && p->sp.push(hf_split{off, n, id});
}

ml_tok_span span_of(const hf_pts& p, uint32_t b, uint32_t e) {
  if (e <= b) return ml_tok_span{0, 0};
  uint32_t lo = p.al[b].begin, hi = p.al[b].end;
  // Spans are monotone but a replaced range may cover several characters: take the union.
  for (uint32_t i : {b, e - 1}) {
    if (p.al[i].begin < lo) lo = p.al[i].begin;
    if (p.al[i].end > hi) hi = p.al[i].end;
  }
  return ml_tok_span{lo, hi};
}

// Leading and trailing spaces ('Ġ' or White_Space) of each token leave its span; a single leading
// one of the first token stays when the processor adds a prefix space.
void trim_spans(const ml_hf_tok* t, const int32_t* ids, ml_tok_span* spans, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const hf_strv s = t->dtok[ids[i]];
    ml_tok_span& o = spans[i];
    uint32_t lead = 0, trail = 0;
    size_t k = 0;
    while (k < s.n) {
      size_t j = k;
      const uint32_t c = hf_next_cp(s.s, s.n, &j);
      if (c != 0x120 && !hf_is_ws(c)) break;
      lead++, k = j;
    }
    if (k < s.n) {
      for (size_t e = s.n; e > k;) {
        size_t b = e - 1;
        while (b > k && ((uint8_t)s.s[b] & 0xC0) == 0x80) b--;
        size_t j = b;
        const uint32_t c = hf_next_cp(s.s, s.n, &j);
        if (c != 0x120 && !hf_is_ws(c)) break;
        trail++, e = b;
      }
    } else {
      trail = lead;  // all spaces: the Rust loop counts them from both ends
    }
    if (lead == 0 && trail == 0) continue;
    if (lead > 0) {
      if ((i == 0 || o.begin == 0) && t->post_trim_prefix && lead == 1) lead = 0;
      o.begin = o.begin + lead < o.end ? o.begin + lead : o.end;
    }
    if (trail > 0 && o.end >= trail) o.end = o.end - trail > o.begin ? o.end - trail : o.begin;
  }
}

}  // namespace

ml_status ml_hf_tok_encode(const ml_hf_tok* t, const char* text, size_t len, bool add_special, ml_vec<int32_t>* ids,
                           ml_vec<ml_tok_span>* spans, ml_error* err) {
  if (len > HF_MAX_TEXT) return ml_fail(err, ML_E_ARG, "encode: text of %zu bytes (the limit is %zu)", len, HF_MAX_TEXT);
  size_t bad = 0;
  if (!ml_utf8_check(text, len, &bad)) return ml_fail(err, ML_E_ARG, "encode: invalid UTF-8 at byte offset %zu", bad);
  const size_t pre = add_special ? t->post_before.size() : 0;
  const size_t id0 = ids->size() + pre, sp0 = spans ? spans->size() + pre : 0;
  if (add_special)
    for (int32_t id : t->post_before)
      if (!ids->push(id) || (spans && !spans->push(ml_tok_span{0, 0}))) return hf_nomem(err, "encode");

  // 1. Added tokens on the raw text, normalization, added tokens on the normalized text.
  hf_pts pts, tmp;
  hf_text x, xt;
  ml_vec<hf_cut> cuts, ncuts;
  if (!pts.s.reserve(len + 16) || !pts.al.reserve(len + 16)) return hf_nomem(err, "encode");
  ML_TRY(hf_added_cut(t, &t->trie_raw, text, len, &cuts, err));
  for (const hf_cut& c : cuts) {
    x.s.clear(), x.al.clear();
    if (!push_original(&x, text, c.begin, c.end)) return hf_nomem(err, "encode");
    if (c.added >= 0) {
      if (!push_piece(&pts, x.s.data(), x.al.data(), (uint32_t)x.s.size(), t->added[c.added].id)) return hf_nomem(err, "encode");
      continue;
    }
    if (t->norm) ML_TRY(hf_norm_apply(t->norm, &x, &xt, err));
    ncuts.clear();
    ML_TRY(hf_added_cut(t, &t->trie_norm, x.s.data(), x.s.size(), &ncuts, err));
    for (const hf_cut& d : ncuts)
      if (!push_piece(&pts, x.s.data() + d.begin, x.al.data() + d.begin, d.end - d.begin, d.added >= 0 ? t->added[d.added].id : -1))
        return hf_nomem(err, "encode");
  }
  // 2. Pre-tokenization.
  if (t->pre) ML_TRY(hf_pre_apply(t->pre, &pts, &tmp, err));
  // 3. The model, word by word.
  hf_wcache cache;
  ml_vec<int32_t> wids;
  ml_vec<uint32_t> wends;
  for (const hf_split& sp : pts.sp) {
    if (sp.id >= 0) {
      if (!ids->push(sp.id) || (spans && !spans->push(span_of(pts, sp.off, sp.off + sp.len)))) return hf_nomem(err, "encode");
      continue;
    }
    wids.clear(), wends.clear();
    ML_TRY(hf_bpe_word(t, pts.s.data() + sp.off, sp.len, &cache, &wids, &wends, err));
    if (!ids->append(wids.data(), wids.size())) return hf_nomem(err, "encode");
    if (!spans) continue;
    uint32_t b = 0;
    for (size_t k = 0; k < wids.size(); k++) {
      if (!spans->push(span_of(pts, sp.off + b, sp.off + wends[k]))) return hf_nomem(err, "encode");
      b = wends[k];
    }
  }
  // 4. The post-processor: ByteLevel's offset trimming (ByteLevel::process_offsets), then the ids.
  if (spans && t->post_trim_bytelevel) trim_spans(t, ids->data() + id0, spans->data() + sp0, ids->size() - id0);
  if (add_special)
    for (int32_t id : t->post_after)
      if (!ids->push(id) || (spans && !spans->push(ml_tok_span{0, 0}))) return hf_nomem(err, "encode");
  return ML_OK;
}

ml_status ml_hf_tok_decode(const ml_hf_tok* t, const int32_t* ids, size_t n, bool skip_special, ml_vec<char>* out,
                           ml_error* err) {
  ml_vec<hf_strv> toks;
  if (!toks.reserve(n)) return hf_nomem(err, "decode");
  for (size_t i = 0; i < n; i++) {
    const int32_t id = ids[i];
    if (id < 0 || (uint32_t)id >= t->n_ids) return ml_fail(err, ML_E_ARG, "decode: id %d at index %zu is out of range (vocabulary %u)", id, i, t->n_ids);
    if (!t->dtok[id].s) continue;  // a hole in the ids: the Rust library skips it too
    if (skip_special && (t->flags[id] & HF_F_SKIP)) continue;
    toks.push(t->dtok[id]);
  }
  return hf_decode_tokens(t, toks.data(), toks.size(), false, false, out, err);
}

ml_status ml_hf_tok_piece(const ml_hf_tok* t, int32_t id, bool first, ml_vec<char>* out, ml_error* err) {
  if (id < 0 || (uint32_t)id >= t->n_ids) return ml_fail(err, ML_E_ARG, "piece: id %d is out of range (vocabulary %u)", id, t->n_ids);
  if (!t->dtok[id].s) return ML_OK;
  return hf_decode_tokens(t, &t->dtok[id], 1, true, first, out, err);
}
