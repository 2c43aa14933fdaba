// tokenizer.json decoders: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence, and
// the null decoder (tokens joined by a space). Each step maps a list of strings to a list of
// strings, as the Rust Decoder::decode_chain does; the result is their concatenation.
//
// Piece mode (streaming, ml_hf_tok_piece) runs the same chain on one token: ByteLevel and
// ByteFallback give raw bytes (no U+FFFD: the caller joins the bytes of a character), and the
// steps that look at the token's position (Metaspace, Strip) see it as the first token, or as a
// later one, or — after a fusing step — as the start of the fused text or its middle.
#include <cstdio>
#include <cstring>

#include "model/tokenizer/hf_impl.h"
#include "model/tokenizer/unicode.h"

namespace {

// The GPT-2 byte <-> unicode table: printable Latin-1 bytes map to themselves, the other 68 to
// U+0100.. in byte order.
// Built at compile time: this file is compiled with the ISA's flags, where a dynamic initialiser
// would run before main_guard checks the CPU (DESIGN.md, "ISA guard").
struct byte_maps {
  uint32_t to_cp[256]{};
  int16_t from_cp[324]{};
  constexpr byte_maps() {
    for (int i = 0; i < 324; i++) from_cp[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
      const bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = keep ? (uint32_t)b : 256u + extra++;
      from_cp[to_cp[b]] = (int16_t)b;
    }
  }
};
constexpr byte_maps kMaps{};

// Lists of strings: buf with the end of each.
struct toklist {
  ml_vec<char> buf;
  ml_vec<uint32_t> ends;
  size_t size() const { return ends.size(); }
  const char* at(size_t i, size_t* n) const {
    const uint32_t b = i ? ends[i - 1] : 0;
    *n = ends[i] - b;
    return buf.data() + b;
  }
  bool close() { return ends.push((uint32_t)buf.size()); }
  void clear() { buf.clear(), ends.clear(); }
};

// A tolerant UTF-8 step (piece mode may carry partial characters): an invalid byte is returned as
// 0x110000 + byte, one byte long.
uint32_t next_any(const char* s, size_t n, size_t* i) {
  const uint8_t c = (uint8_t)s[*i];
  if (c < 0x80) return (*i)++, c;
  const int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  if (len && *i + len <= n) {
    size_t j = *i;
    if (ml_utf8_check(s + j, len, nullptr)) return ml_utf8_next(s, n, i);
  }
  (*i)++;
  return 0x110000u + c;
}
bool put_any(ml_vec<char>* out, uint32_t cp) {
  if (cp >= 0x110000u) return out->push((char)(cp - 0x110000u));
  char u[4];
  return out->append(u, hf_put_cp(cp, u));
}

// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes U+FFFD.
bool append_lossy(ml_vec<char>* out, const char* s, size_t n) {
  static const char kRep[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
  for (size_t i = 0; i < n;) {
    const uint8_t c = (uint8_t)s[i];
    if (c < 0x80) {
      if (!out->push((char)c)) return false;
      i++;
      continue;
    }
    int need = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    size_t j = i + 1;
    int got = 0;
    while (got < need && j < n) {
      const uint8_t d = (uint8_t)s[j];
      if (d < (got == 0 ? lo : 0x80) || d > (got == 0 ? hi : 0xBF)) break;
      j++, got++;
    }
    if (need && got == need) {
      if (!out->append(s + i, j - i)) return false;
    } else if (!out->append(kRep, 3)) {
      return false;
    }
    i = need ? j : i + 1;
  }
  return true;
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
// "<0xNN>" -> the byte (u8::from_str_radix accepts a '+' and either case), else -1.
int byte_token(const char* s, size_t n) {
  if (n != 6 || std::memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  if (s[3] == '+') return hexval(s[4]);
  const int a = hexval(s[3]), b = hexval(s[4]);
  return a < 0 || b < 0 ? -1 : a * 16 + b;
}

struct chain_state {
  bool piece;   // streaming one token
  bool first;   // piece: the token is the first of the sequence
  bool fused;   // piece: an earlier step joined the tokens into one text
};

ml_status step(const hf_dec* d, toklist* in, toklist* out, chain_state* st, ml_error* err);

ml_status run(const hf_dec* d, toklist* x, toklist* tmp, chain_state* st, ml_error* err) {
  if (d->kind == HF_D_SEQ) {
    for (uint32_t i = 0; i < d->nkids; i++) ML_TRY(run(d->kids[i], x, tmp, st, err));
    return ML_OK;
  }
  ML_TRY(step(d, x, tmp, st, err));
  toklist t;
  t.buf = static_cast<ml_vec<char>&&>(x->buf), t.ends = static_cast<ml_vec<uint32_t>&&>(x->ends);
  x->buf = static_cast<ml_vec<char>&&>(tmp->buf), x->ends = static_cast<ml_vec<uint32_t>&&>(tmp->ends);
  tmp->buf = static_cast<ml_vec<char>&&>(t.buf), tmp->ends = static_cast<ml_vec<uint32_t>&&>(t.ends);
  return ML_OK;
}

ml_status step(const hf_dec* d, toklist* in, toklist* out, chain_state* st, ml_error* err) {
  out->clear();
  const size_t n = in->size();
  switch (d->kind) {
    case HF_D_BYTELEVEL: {
      ml_vec<char> raw;
      for (size_t i = 0; i < n; i++) {
        size_t len;
        const char* s = in->at(i, &len);
        const size_t mark = raw.size();
        bool all = true;
        for (size_t k = 0; k < len && all;) {
          const uint32_t cp = next_any(s, len, &k);
          const int b = cp < 324 ? kMaps.from_cp[cp] : -1;
          if (b < 0) all = false;
          else if (!raw.push((char)b)) return hf_nomem(err, "decode");
        }
        if (!all) {
          raw.resize(mark);
          if (!raw.append(s, len)) return hf_nomem(err, "decode");
        }
      }
      if (st->piece ? !out->buf.append(raw.data(), raw.size()) : !append_lossy(&out->buf, raw.data(), raw.size()))
        return hf_nomem(err, "decode");
      if (!out->close()) return hf_nomem(err, "decode");
      st->fused = true;
      return ML_OK;
    }
    case HF_D_FUSE:
      if (!out->buf.append(in->buf.data(), in->buf.size()) || !out->close()) return hf_nomem(err, "decode");
      st->fused = true;
      return ML_OK;
    case HF_D_BYTEFALLBACK: {
      ml_vec<char> bytes;
      auto flush = [&]() -> bool {
        if (bytes.empty()) return true;
        bool ok;
        if (st->piece || ml_utf8_check(bytes.data(), bytes.size(), nullptr)) {
          ok = out->buf.append(bytes.data(), bytes.size()) && out->close();
        } else {
          ok = true;
          for (size_t k = 0; k < bytes.size() && ok; k++) ok = out->buf.append("\xEF\xBF\xBD", 3) && out->close();
        }
        bytes.clear();
        return ok;
      };
      for (size_t i = 0; i < n; i++) {
        size_t len;
        const char* s = in->at(i, &len);
        const int b = byte_token(s, len);
        if (b >= 0) {
          if (!bytes.push((char)b)) return hf_nomem(err, "decode");
          continue;
        }
        if (!flush() || !out->buf.append(s, len) || !out->close()) return hf_nomem(err, "decode");
      }
      if (!flush()) return hf_nomem(err, "decode");
      return ML_OK;
    }
    default:
      break;
  }
  // Per-token steps.
  ml_vec<uint32_t> m;
  for (size_t i = 0; i < n; i++) {
    size_t len;
    const char* s = in->at(i, &len);
    // Whether this token is the sequence's first (index 0), and whether it starts the text.
    const bool index0 = st->piece ? (st->fused || st->first) : i == 0;
    const bool at_start = st->piece ? st->first : true;
    switch (d->kind) {
      case HF_D_METASPACE:
        for (size_t k = 0; k < len;) {
          const uint32_t cp = next_any(s, len, &k);
          if (cp == d->rep) {
            if (index0 && d->prepend != HF_PREPEND_NEVER) continue;
            if (!out->buf.push(' ')) return hf_nomem(err, "decode");
          } else if (!put_any(&out->buf, cp)) {
            return hf_nomem(err, "decode");
          }
        }
        break;
      case HF_D_REPLACE: {
        ML_TRY(hf_find_all(&d->a, d->re, s, len, &m, err));
        size_t at = 0;
        for (size_t k = 0; k < m.size(); k += 2) {
          if (!out->buf.append(s + at, m[k] - at) || !out->buf.append(d->b.s, d->b.n)) return hf_nomem(err, "decode");
          at = m[k + 1];
        }
        if (!out->buf.append(s + at, len - at)) return hf_nomem(err, "decode");
        break;
      }
      case HF_D_STRIP: {
        size_t b = 0, e = len;
        if (!st->piece || !st->fused || at_start)
          for (uint32_t c = 0; c < d->start && b < e; c++) {
            size_t k = b;
            if (next_any(s, len, &k) != d->rep) break;
            b = k;
          }
        if (!st->piece || !st->fused)
          for (uint32_t c = 0; c < d->stop && e > b; c++) {
            size_t k = e - 1;
            while (k > b && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
            size_t j = k;
            if (next_any(s, len, &j) != d->rep || j != e) break;
            e = k;
          }
        if (!out->buf.append(s + b, e - b)) return hf_nomem(err, "decode");
        break;
      }
      default:
        return ml_fail(err, ML_E_ARG, "decoder: internal: unknown step %d", (int)d->kind);
    }
    if (!out->close()) return hf_nomem(err, "decode");
  }
  return ML_OK;
}

}  // namespace

uint32_t hf_byte_to_cp(uint8_t b) { return kMaps.to_cp[b]; }
int hf_cp_to_byte(uint32_t cp) { return cp < 324 ? kMaps.from_cp[cp] : -1; }

ml_status hf_decode_tokens(const ml_hf_tok* t, const hf_strv* toks, size_t n, bool piece, bool first, ml_vec<char>* out,
                           ml_error* err) {
  if (!t->dec) {
    // The null decoder joins the tokens with a space; a piece after the first carries it.
    for (size_t i = 0; i < n; i++) {
      if ((piece ? !first : i > 0) && !out->push(' ')) return hf_nomem(err, "decode");
      if (!out->append(toks[i].s, toks[i].n)) return hf_nomem(err, "decode");
    }
    return ML_OK;
  }
  toklist x, tmp;
  for (size_t i = 0; i < n; i++)
    if (!x.buf.append(toks[i].s, toks[i].n) || !x.close()) return hf_nomem(err, "decode");
  chain_state st{piece, first, false};
  ML_TRY(run(t->dec, &x, &tmp, &st, err));
  if (!out->append(x.buf.data(), x.buf.size())) return hf_nomem(err, "decode");
  return ML_OK;
}

ml_status hf_dec_load(ml_hf_tok* t, const ml_json* v, hf_dec** out, const char* path, int depth, ml_error* err) {
  *out = nullptr;
  if (!v || v->type == ML_JSON_NULL) return ML_OK;
  if (depth > HF_MAX_NEST) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: nested deeper than %d", path, HF_MAX_NEST);
  if (v->type != ML_JSON_OBJECT) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s: expected an object", path);
  const ml_json* type = ml_json_get(v, "type");
  if (!ml_json_is(type, ML_JSON_STRING)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.type: expected a string", path);
  hf_dec* d = ml_bump_new<hf_dec>(&t->mem);
  if (!d) return hf_nomem(err, path);
  const char* ty = type->str;
  if (!std::strcmp(ty, "Sequence")) {
    d->kind = HF_D_SEQ;
    const ml_json* kids = ml_json_get(v, "decoders");
    if (!ml_json_is(kids, ML_JSON_ARRAY)) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.decoders: expected an array", path);
    if (kids->n > HF_MAX_SEQ_ITEMS) return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.decoders: more than %u", path, HF_MAX_SEQ_ITEMS);
    d->kids = ml_bump_array<hf_dec*>(&t->mem, kids->n ? kids->n : 1);
    if (!d->kids) return hf_nomem(err, path);
    for (size_t i = 0; i < kids->n; i++) {
      char sub[160];
      std::snprintf(sub, sizeof sub, "%s.decoders[%zu]", path, i);
      ML_TRY(hf_dec_load(t, kids->items[i], &d->kids[d->nkids], sub, depth + 1, err));
      if (d->kids[d->nkids]) d->nkids++;
    }
  } else if (!std::strcmp(ty, "ByteLevel")) {
    d->kind = HF_D_BYTELEVEL;
  } else if (!std::strcmp(ty, "Metaspace")) {
    d->kind = HF_D_METASPACE;
    if (!hf_json_char(ml_json_get(v, "replacement"), &d->rep))
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.replacement: expected a one-character string", path);
    ML_TRY(hf_prepend_scheme(v, &d->prepend, path, err));
  } else if (!std::strcmp(ty, "Replace")) {
    d->kind = HF_D_REPLACE;
    ML_TRY(hf_get_pattern(t, v, &d->a, &d->re, path, err));
    ML_TRY(hf_get_str(v, "content", true, &d->b, &t->mem, path, err));
  } else if (!std::strcmp(ty, "ByteFallback")) {
    d->kind = HF_D_BYTEFALLBACK;
  } else if (!std::strcmp(ty, "Fuse")) {
    d->kind = HF_D_FUSE;
  } else if (!std::strcmp(ty, "Strip")) {
    d->kind = HF_D_STRIP;
    if (!hf_json_char(ml_json_get(v, "content"), &d->rep))
      return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.content: expected a one-character string", path);
    ML_TRY(hf_get_uint(v, "start", 0, 1u << 20, &d->start, path, err));
    ML_TRY(hf_get_uint(v, "stop", 0, 1u << 20, &d->stop, path, err));
  } else {
    return ml_fail(err, ML_E_FORMAT, "tokenizer.json: %s.type: decoder '%.64s' is not supported", path, ty);
  }
  *out = d;
  return ML_OK;
}
