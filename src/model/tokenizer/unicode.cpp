// The Unicode layer: strict UTF-8, property lookups over the generated run tables, normalization
// (UAX #15: full decomposition, canonical ordering, canonical composition) with byte alignment, and
// the simple lowercase mapping. See unicode.h for the contract.
#include "model/tokenizer/unicode.h"

#include "model/tokenizer/unicode_data.h"

namespace {

// Hangul syllable constants (Unicode chapter 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// Index of the run holding cp: the last k with starts[k] <= cp (starts[0] == 0).
uint32_t run_index(const uint32_t* starts, uint32_t n, uint32_t cp) {
  uint32_t lo = 0, hi = n;  // starts[lo] <= cp < starts[hi] (hi == n: past the end)
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    if (starts[mid] <= cp) lo = mid;
    else hi = mid;
  }
  return lo;
}

// A run table lookup that remembers the last run found: text tends to stay in one script.
struct run_cache {
  const uint32_t* starts;
  const uint8_t* vals;
  uint32_t n;
  uint32_t lo = 1, hi = 0;  // empty
  uint8_t val = 0;
  run_cache(const uint32_t* s, const uint8_t* v, uint32_t count) : starts(s), vals(v), n(count) {}
  uint8_t get(uint32_t cp) {
    if (cp >= lo && cp <= hi) return val;
    uint32_t k = run_index(starts, n, cp);
    lo = starts[k];
    hi = k + 1 < n ? starts[k + 1] - 1 : 0x10FFFF;
    val = vals[k];
    return val;
  }
};

// Binary search in a sorted key array; -1 when absent.
long find_key(const uint32_t* keys, uint32_t n, uint32_t cp) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (keys[mid] < cp) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && keys[lo] == cp ? (long)lo : -1;
}

uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a - kLBase < kLCount && b - kVBase < kVCount) return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a - kSBase < kSCount && (a - kSBase) % kTCount == 0 && b - kTBase - 1 < kTCount - 1) return a + (b - kTBase);
  uint64_t key = (uint64_t)a << 21 | b;
  uint32_t lo = 0, hi = ml_comp_n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (ml_comp_key[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo < ml_comp_n && ml_comp_key[lo] == key ? ml_comp_to[lo] : 0;
}

struct ucp {
  uint32_t cp;
  uint32_t src;  // offset of the first byte of the input character
  uint8_t ccc;
  // Hugging Face's alignment change tag (unicode-normalization-alignments, which the Rust
  // tokenizers' NormalizedString replays): 0 for the first code point of a character's
  // decomposition, +1 for the others; a composition gives starter + mark - 1.
  int32_t tag = 0;
};

// The normalizer's state for one call.
struct normalizer {
  bool compose, compat;
  ml_vec<char>* out;
  ml_vec<uint32_t>* align;
  ml_vec<ucp> seg;      // the pending segment (decomposed), from its last boundary
  ml_vec<ucp> scratch;  // counting sort of long non-starter runs
  run_cache flags{ml_unflags_starts, ml_unflags_vals, ml_unflags_runs};
  run_cache ccc{ml_ccc_starts, ml_ccc_vals, ml_ccc_runs};

  bool emit(uint32_t cp, uint32_t src) {
    char b[4];
    int k = ml_utf8_put(cp, b);
    if (!out->append(b, (size_t)k)) return false;
    if (align)
      for (int i = 0; i < k; ++i)
        if (!align->push(src)) return false;
    return true;
  }

  bool push_decomposed(uint32_t cp, uint32_t src, uint8_t fl) {
    if (cp - kSBase < kSCount) {
      uint32_t s = cp - kSBase;
      if (!seg.push({kLBase + s / kNCount, src, 0, 0}) || !seg.push({kVBase + (s % kNCount) / kTCount, src, 0, 1}))
        return false;
      if (s % kTCount && !seg.push({kTBase + s % kTCount, src, 0, 1})) return false;
      return true;
    }
    long k = -1;
    uint32_t ref = 0;
    if (compat && (fl & ML_UN_COMPAT) && (k = find_key(ml_decomp_compat_cp, ml_decomp_compat_n, cp)) >= 0)
      ref = ml_decomp_compat_ref[k];
    else if ((fl & ML_UN_CANON) && (k = find_key(ml_decomp_canon_cp, ml_decomp_canon_n, cp)) >= 0)
      ref = ml_decomp_canon_ref[k];
    if (k < 0) return seg.push({cp, src, (fl & ML_UN_NONSTARTER) ? ccc.get(cp) : (uint8_t)0, 0});
    for (uint32_t i = 0; i < (ref & 0xFF); ++i) {
      uint32_t d = ml_decomp_pool[(ref >> 8) + i];
      if (!seg.push({d, src, ccc.get(d), i == 0 ? 0 : 1})) return false;
    }
    return true;
  }

  // Canonical ordering of seg: a stable sort of each run of non-starters by ccc.
  bool reorder() {
    size_t n = seg.size();
    for (size_t i = 0; i < n;) {
      if (seg[i].ccc == 0) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < n && seg[j].ccc != 0) ++j;
      if (j - i <= 32) {
        for (size_t a = i + 1; a < j; ++a) {
          ucp x = seg[a];
          size_t b = a;
          while (b > i && seg[b - 1].ccc > x.ccc) seg[b] = seg[b - 1], --b;
          seg[b] = x;
        }
      } else {  // long runs (many marks on one base): a counting sort keeps this linear
        uint32_t count[257] = {};
        for (size_t a = i; a < j; ++a) ++count[seg[a].ccc + 1];
        for (int c = 1; c < 257; ++c) count[c] += count[c - 1];
        if (!scratch.resize(j - i)) return false;
        for (size_t a = i; a < j; ++a) scratch[count[seg[a].ccc]++] = seg[a];
        for (size_t a = i; a < j; ++a) seg[a] = scratch[a - i];
      }
      i = j;
    }
    return true;
  }

  // Canonical composition of seg in place (UAX #15 section 3.3 / D117).
  void recompose() {
    size_t n = seg.size(), w = 0;
    long starter = -1;  // index (in the written prefix) of the last starter
    int last_ccc = -1;  // ccc of the last written character after the starter (-1: none)
    for (size_t i = 0; i < n; ++i) {
      ucp c = seg[i];
      // c is blocked from the starter when a character between them has a ccc >= its own.
      if (starter >= 0 && (last_ccc == -1 || last_ccc < (int)c.ccc)) {
        uint32_t comp = compose_pair(seg[(size_t)starter].cp, c.cp);
        if (comp) {
          seg[(size_t)starter].cp = comp;  // keeps the starter's source offset
          seg[(size_t)starter].tag += c.tag - 1;
          continue;
        }
      }
      if (c.ccc == 0) {
        starter = (long)w;
        last_ccc = -1;
      } else {
        last_ccc = c.ccc;
      }
      seg[w++] = c;
    }
    seg.resize(w);
  }

  // The input characters of the pending segment, in order (before reordering moves them).
  ml_vec<uint32_t> chars;
  uint32_t last_src = 0;  // the last input character of the text flushed so far

  bool flush() {
    if (seg.empty()) return true;
    chars.clear();
    for (const ucp& c : seg)
      if ((chars.empty() || chars.back() != c.src) && !chars.push(c.src)) return false;
    if (!reorder()) return false;
    if (compose) recompose();
    // Alignment as Hugging Face computes it: the change tags replayed in output order against the
    // input characters in input order, so a character that canonical ordering moved points at the
    // input position it now occupies, and an inserted one (tag > 0) at the character before.
    size_t cur = 0;
    for (const ucp& c : seg) {
      uint32_t src;
      if (c.tag > 0) {
        src = cur > 0 ? chars[cur - 1] : last_src;
      } else {
        src = chars[cur < chars.size() ? cur : chars.size() - 1];
        cur += (size_t)(1 - c.tag);
      }
      if (!emit(c.cp, src)) return false;
    }
    last_src = chars.back();
    seg.clear();
    return true;
  }
};

ml_status nomem(ml_error* err) { return ml_fail(err, ML_E_NOMEM, "unicode: out of memory normalizing text"); }

bool is_ascii(const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if ((unsigned char)s[i] >= 0x80) return false;
  return true;
}

bool copy_identity(const char* s, size_t n, ml_vec<char>* out, ml_vec<uint32_t>* align) {
  if (!out->append(s, n)) return false;
  if (align) {
    if (!align->resize(n)) return false;
    for (size_t i = 0; i < n; ++i) (*align)[i] = (uint32_t)i;
  }
  return true;
}

}  // namespace

bool ml_utf8_check(const char* s, size_t n, size_t* bad_offset) {
  const unsigned char* u = (const unsigned char*)s;
  size_t i = 0;
  while (i < n) {
    unsigned c = u[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
    else goto bad;
    if (n - i < len) goto bad;
    for (size_t k = 1; k < len; ++k) {
      if ((u[i + k] & 0xC0) != 0x80) goto bad;
      cp = cp << 6 | (u[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto bad;
    i += len;
  }
  return true;
bad:
  if (bad_offset) *bad_offset = i;
  return false;
}

uint32_t ml_utf8_next(const char* s, size_t n, size_t* i) {
  const unsigned char* u = (const unsigned char*)s;
  size_t k = *i;
  unsigned c = u[k];
  if (c < 0x80) {
    *i = k + 1;
    return c;
  }
  size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  if (len > n - k) len = n - k;  // only on invalid input: never read past the end
  uint32_t cp = c & (0x7F >> len);
  for (size_t j = 1; j < len; ++j) cp = cp << 6 | (u[k + j] & 0x3F);
  *i = k + len;
  return cp;
}

int ml_utf8_put(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12);
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18);
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

ml_ucat ml_unicode_category(uint32_t cp) {
  if (cp < 256) return (ml_ucat)(ml_ucat_latin1[cp] & 31);
  if (cp > 0x10FFFF) return ML_UCAT_Cn;
  return (ml_ucat)(ml_ucat_vals[run_index(ml_ucat_starts, ml_ucat_runs, cp)] & 31);
}

bool ml_unicode_is_white_space(uint32_t cp) {
  if (cp < 256) return ml_ucat_latin1[cp] & 32;
  if (cp > 0x10FFFF) return false;
  return ml_ucat_vals[run_index(ml_ucat_starts, ml_ucat_runs, cp)] & 32;
}

uint8_t ml_unicode_ccc(uint32_t cp) {
  if (cp < 0x300 || cp > 0x10FFFF) return 0;
  return ml_ccc_vals[run_index(ml_ccc_starts, ml_ccc_runs, cp)];
}

uint32_t ml_unicode_simple_lower(uint32_t cp) {
  if (cp < 0x80) return cp - 'A' < 26 ? cp + 32 : cp;
  long k = find_key(ml_lower_from, ml_lower_n, cp);
  return k < 0 ? cp : ml_lower_to[k];
}

uint32_t ml_unicode_simple_upper(uint32_t cp) {
  if (cp < 0x80) return cp - 'a' < 26 ? cp - 32 : cp;
  long k = find_key(ml_upper_from, ml_upper_n, cp);
  return k < 0 ? cp : ml_upper_to[k];
}

ml_status ml_unicode_normalize(ml_unorm form, const char* s, size_t n, ml_vec<char>* out, ml_vec<uint32_t>* align,
                               ml_error* err) {
  out->clear();
  if (align) align->clear();
  if (n > 0xFFFFFFFFu) return ml_fail(err, ML_E_ARG, "unicode: text of %zu bytes is over the 4 GiB limit", n);
  if (is_ascii(s, n)) return copy_identity(s, n, out, align) ? ML_OK : nomem(err);
  size_t bad = 0;
  if (!ml_utf8_check(s, n, &bad)) return ml_fail(err, ML_E_FORMAT, "unicode: invalid UTF-8 at byte offset %zu", bad);
  if (!out->reserve(n + n / 8 + 16) || (align && !align->reserve(n + n / 8 + 16))) return nomem(err);

  normalizer nz;
  nz.compose = form == ML_NFC || form == ML_NFKC;
  nz.compat = form == ML_NFKC || form == ML_NFKD;
  nz.out = out;
  nz.align = align;
  uint8_t decomp_mask = nz.compat ? (ML_UN_CANON | ML_UN_COMPAT) : ML_UN_CANON;
  uint8_t active = decomp_mask | ML_UN_NONSTARTER | (nz.compose ? (ML_UN_SECOND | ML_UN_FIRST) : 0);
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80 && (i + 1 == n || (unsigned char)s[i + 1] < 0x80)) {
      // An ASCII starter followed by ASCII (or the end): a boundary on both sides, copied as is
      // (no composition has an ASCII second, and ASCII is never first of a pair with ASCII).
      if (!nz.flush()) return nomem(err);
      size_t j = i + 1;
      while (j + 1 < n && (unsigned char)s[j] < 0x80 && (unsigned char)s[j + 1] < 0x80) ++j;
      if (!out->append(s + i, j - i)) return nomem(err);
      if (align)
        for (size_t k = i; k < j; ++k)
          if (!align->push((uint32_t)k)) return nomem(err);
      nz.last_src = (uint32_t)(j - 1);
      i = j;
      continue;
    }
    size_t at = i;
    uint32_t cp = ml_utf8_next(s, n, &i);
    if (nz.compose && cp - kSBase < kSCount) {
      // A Hangul syllable is already composed; only an LV syllable followed by a T jamo joins.
      size_t k = i;
      uint32_t next = i < n ? ml_utf8_next(s, n, &k) : 0;
      if ((cp - kSBase) % kTCount != 0 || next - kTBase - 1 >= kTCount - 1) {
        if (!nz.flush() || !nz.emit(cp, (uint32_t)at)) return nomem(err);
        nz.last_src = (uint32_t)at;
        continue;
      }
    }
    uint8_t fl = cp < 0x800 ? ml_unflags_low[cp] : nz.flags.get(cp);
    if ((fl & active) == 0) {
      // Inert: no decomposition, a starter that composes with nothing: copied as is.
      if (!nz.flush() || !nz.emit(cp, (uint32_t)at)) return nomem(err);
      nz.last_src = (uint32_t)at;
      continue;
    }
    if (!(fl & decomp_mask)) {
      // A boundary before a starter, unless composition may join it to what precedes.
      if (!(fl & ML_UN_NONSTARTER) && !(nz.compose && (fl & ML_UN_SECOND)) && !nz.flush()) return nomem(err);
      if (!nz.seg.push({cp, (uint32_t)at, (fl & ML_UN_NONSTARTER) ? nz.ccc.get(cp) : (uint8_t)0, 0})) return nomem(err);
      continue;
    }
    // A decomposing character: flush first when its decomposition starts with a starter that
    // cannot join what precedes.
    size_t before = nz.seg.size();
    if (!nz.push_decomposed(cp, (uint32_t)at, fl)) return nomem(err);
    ucp first = nz.seg[before];
    if (before > 0 && first.ccc == 0 && !(nz.compose && (nz.flags.get(first.cp) & ML_UN_SECOND))) {
      // Move the new characters into a fresh segment.
      size_t added = nz.seg.size() - before;
      ucp tmp[32];
      if (added <= 32) {
        for (size_t k = 0; k < added; ++k) tmp[k] = nz.seg[before + k];
        nz.seg.resize(before);
        if (!nz.flush()) return nomem(err);
        for (size_t k = 0; k < added; ++k)
          if (!nz.seg.push(tmp[k])) return nomem(err);
      }
    }
  }
  if (!nz.flush()) return nomem(err);
  return ML_OK;
}

ml_status ml_unicode_lowercase(const char* s, size_t n, ml_vec<char>* out, ml_vec<uint32_t>* align, ml_error* err) {
  out->clear();
  if (align) align->clear();
  if (n > 0xFFFFFFFFu) return ml_fail(err, ML_E_ARG, "unicode: text of %zu bytes is over the 4 GiB limit", n);
  size_t bad = 0;
  if (!ml_utf8_check(s, n, &bad)) return ml_fail(err, ML_E_FORMAT, "unicode: invalid UTF-8 at byte offset %zu", bad);
  if (!out->reserve(n) || (align && !align->reserve(n))) return nomem(err);
  size_t i = 0;
  while (i < n) {
    size_t at = i;
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) {
      char b = (char)((unsigned)c - 'A' < 26u ? c + 32 : c);
      if (!out->push(b) || (align && !align->push((uint32_t)at))) return nomem(err);
      ++i;
      continue;
    }
    uint32_t cp = ml_unicode_simple_lower(ml_utf8_next(s, n, &i));
    char b[4];
    int k = ml_utf8_put(cp, b);
    if (!out->append(b, (size_t)k)) return nomem(err);
    if (align)
      for (int j = 0; j < k; ++j)
        if (!align->push((uint32_t)at)) return nomem(err);
  }
  return ML_OK;
}
