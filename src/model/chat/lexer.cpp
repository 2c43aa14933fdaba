// The chat-template lexer: template text -> tokens (text runs, tag delimiters, names, literals,
// operators), with jinja2's whitespace handling as transformers configures it:
// - newlines normalised to \n and one trailing newline dropped (keep_trailing_newline=False);
// - trim_blocks: the first newline after a block or comment tag is removed;
// - lstrip_blocks: spaces and tabs from the start of a line to a block or comment tag are removed;
// - '-' in a delimiter strips all whitespace on that side, '+' disables lstrip_blocks;
// - {% raw %}...{% endraw %} is text; {# ... #} is dropped.
// String literals are decoded here (Python escapes as jinja2's unicode-escape decoding has them).
#include <cstdlib>
#include <cstring>

#include "model/chat/jinja.h"

namespace jj {
namespace {

struct lexer {
  const char* src;
  size_t len;
  size_t pos = 0;
  int line = 1;
  ml_bump* b;
  ml_vec<token>* out;
  ml_error* err;
};

bool push(lexer* L, tk k, const char* s, size_t n, int line) {
  token t{};
  t.k = k, t.s = s, t.n = n, t.line = line;
  return L->out->push(t);
}

int count_lines(const char* s, size_t n) {
  int c = 0;
  for (size_t i = 0; i < n; ++i) c += s[i] == '\n';
  return c;
}

// Whitespace as Python's str.strip() sees it, at s[i] (ASCII fast path).
size_t ws_len(const char* s, size_t n, size_t i) {
  size_t l = 0;
  return is_space_at(s + i, n - i, &l) ? l : 0;
}

// Length of the whitespace run at the start / end of s[0, n).
size_t lead_ws(const char* s, size_t n) {
  size_t i = 0, l;
  while (i < n && (l = ws_len(s, n, i)) > 0) i += l;
  return i;
}
size_t trail_ws(const char* s, size_t n) {
  // Walk forwards, remembering where the last non-space ended (UTF-8 makes walking back awkward).
  size_t i = 0, end = 0;
  while (i < n) {
    size_t l = ws_len(s, n, i);
    if (l) {
      i += l;
    } else {
      i += 1;
      while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) ++i;
      end = i;
    }
  }
  return n - end;
}

// Finds the next tag opening at or after p: '{{', '{%' or '{#'. Returns len when none.
size_t next_open(const lexer* L, size_t p) {
  for (size_t i = p; i + 1 < L->len; ++i)
    if (L->src[i] == '{' && (L->src[i + 1] == '{' || L->src[i + 1] == '%' || L->src[i + 1] == '#')) return i;
  return L->len;
}

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

void put_utf8(ml_vec<char>* o, uint32_t cp, bool* ok) {
  char buf[4];
  size_t n;
  if (cp < 0x80) buf[0] = (char)cp, n = 1;
  else if (cp < 0x800) buf[0] = (char)(0xC0 | (cp >> 6)), buf[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
  else if (cp < 0x10000) buf[0] = (char)(0xE0 | (cp >> 12)), buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), buf[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
  else buf[0] = (char)(0xF0 | (cp >> 18)), buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F)), buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), buf[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
  if (!o->append(buf, n)) *ok = false;
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A quoted string at L->pos; decodes Python escapes.
ml_status lex_string(lexer* L) {
  const char q = L->src[L->pos];
  const int line = L->line;
  size_t i = L->pos + 1;
  ml_vec<char> o;
  bool ok = true;
  for (;;) {
    if (i >= L->len) return ml_fail(L->err, ML_E_FORMAT, "template line %d: unterminated string literal", line);
    char c = L->src[i];
    if (c == q) break;
    if (c == '\n') ++L->line;
    if (c != '\\') {
      if (!o.push(c)) ok = false;
      ++i;
      continue;
    }
    if (i + 1 >= L->len) return ml_fail(L->err, ML_E_FORMAT, "template line %d: unterminated string literal", line);
    char e = L->src[i + 1];
    i += 2;
    char simple = 0;
    switch (e) {
      case 'n': simple = '\n'; break;
      case 't': simple = '\t'; break;
      case 'r': simple = '\r'; break;
      case '\\': simple = '\\'; break;
      case '\'': simple = '\''; break;
      case '"': simple = '"'; break;
      case 'a': simple = '\a'; break;
      case 'b': simple = '\b'; break;
      case 'f': simple = '\f'; break;
      case 'v': simple = '\v'; break;
      case '\n': ++L->line; continue;  // line continuation
      default: break;
    }
    if (simple) {
      if (!o.push(simple)) ok = false;
      continue;
    }
    if (e >= '0' && e <= '7') {  // up to three octal digits
      uint32_t v = (uint32_t)(e - '0');
      for (int k = 0; k < 2 && i < L->len && L->src[i] >= '0' && L->src[i] <= '7'; ++k, ++i) v = v * 8 + (uint32_t)(L->src[i] - '0');
      put_utf8(&o, v, &ok);
      continue;
    }
    if (e == 'x' || e == 'u' || e == 'U') {
      int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        int h = i + (size_t)k < L->len ? hexval(L->src[i + (size_t)k]) : -1;
        if (h < 0) return ml_fail(L->err, ML_E_FORMAT, "template line %d: truncated \\%c escape in a string literal", L->line, e);
        v = v * 16 + (uint32_t)h;
      }
      i += (size_t)digits;
      if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return ml_fail(L->err, ML_E_FORMAT, "template line %d: escape \\%c of an invalid code point in a string literal", L->line, e);
      put_utf8(&o, v, &ok);
      continue;
    }
    if (e == 'N') return ml_fail(L->err, ML_E_FORMAT, "template line %d: \\N{...} escapes are not supported", L->line);
    // Unknown escape: kept as written (Python does the same).
    if (!o.push('\\') || !o.push(e)) ok = false;
    if (e == '\n') ++L->line;
  }
  char* s = ok ? ml_bump_strdup(L->b, o.data() ? o.data() : "", o.size()) : nullptr;
  if (!s) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
  token t{};
  t.k = tk::str, t.s = s, t.n = o.size(), t.line = line;
  if (!L->out->push(t)) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
  L->pos = i + 1;
  return ML_OK;
}

ml_status lex_number(lexer* L) {
  size_t i = L->pos;
  ml_vec<char> digits;
  bool real = false;
  auto run = [&](void) {
    while (i < L->len && ((L->src[i] >= '0' && L->src[i] <= '9') || (L->src[i] == '_' && i > L->pos))) {
      if (L->src[i] != '_' && !digits.push(L->src[i])) return false;
      ++i;
    }
    return true;
  };
  if (!run()) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
  if (i + 1 < L->len && L->src[i] == '.' && L->src[i + 1] >= '0' && L->src[i + 1] <= '9') {
    real = true;
    if (!digits.push('.')) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
    ++i;
    if (!run()) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
  }
  if (i < L->len && (L->src[i] == 'e' || L->src[i] == 'E')) {
    size_t j = i + 1;
    if (j < L->len && (L->src[j] == '+' || L->src[j] == '-')) ++j;
    if (j < L->len && L->src[j] >= '0' && L->src[j] <= '9') {
      real = true;
      for (size_t k = i; k < j; ++k)
        if (!digits.push(L->src[k])) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
      i = j;
      if (!run()) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
    }
  }
  if (!digits.push('\0')) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
  token t{};
  t.line = L->line;
  t.s = L->src + L->pos, t.n = i - L->pos;
  if (real) {
    t.k = tk::real, t.f = strtod(digits.data(), nullptr);
  } else {
    t.k = tk::integer;
    // Decimal digits only; past int64 the literal becomes a float (Python would keep a big int).
    uint64_t v = 0;
    for (const char* p = digits.data(); *p; ++p) {
      if (v > (uint64_t)INT64_MAX / 10 || v * 10 + (uint64_t)(*p - '0') > (uint64_t)INT64_MAX) {
        t.big = true;
        break;
      }
      v = v * 10 + (uint64_t)(*p - '0');
    }
    t.i = (int64_t)v;
    if (t.big) t.k = tk::real, t.f = strtod(digits.data(), nullptr);
  }
  if (!L->out->push(t)) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
  L->pos = i;
  return ML_OK;
}

// Tokens inside {{ }} or {% %} up to the closing delimiter (close is '}' or '%'). Sets *strip_after
// when the delimiter carries '-'.
ml_status lex_tag(lexer* L, char close, bool* strip_after, int* nesting_out) {
  int nesting = 0;  // brackets: a '}' inside {...} is not the end of {{ }}
  for (;;) {
    if (L->pos >= L->len)
      return ml_fail(L->err, ML_E_FORMAT, "template line %d: unexpected end of template inside a %s tag", L->line,
                     close == '}' ? "{{ }}" : "{% %}");
    char c = L->src[L->pos];
    if (c == '\n') {
      ++L->line, ++L->pos;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++L->pos;
      continue;
    }
    // Closing delimiter, with optional '-' or '+'.
    size_t p = L->pos;
    bool minus = false;
    // '-' closes both kinds with stripping; '+' (keep the newline) only block tags.
    if ((c == '-' || (c == '+' && close == '%')) && p + 2 < L->len && L->src[p + 1] == close && L->src[p + 2] == '}' && nesting == 0) {
      minus = c == '-';
      p += 1;
    }
    if (nesting == 0 && p + 1 < L->len && L->src[p] == close && L->src[p + 1] == '}') {
      *strip_after = minus;
      if (!push(L, close == '}' ? tk::var_end : tk::block_end, L->src + L->pos, p + 2 - L->pos, L->line))
        return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
      L->pos = p + 2;
      *nesting_out = nesting;
      return ML_OK;
    }
    if (c == '\'' || c == '"') {
      ML_TRY(lex_string(L));
      continue;
    }
    if (c >= '0' && c <= '9') {
      ML_TRY(lex_number(L));
      continue;
    }
    if (is_name_start(c)) {
      size_t s = L->pos;
      while (L->pos < L->len && is_name_char(L->src[L->pos])) ++L->pos;
      if (!push(L, tk::name, L->src + s, L->pos - s, L->line)) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
      continue;
    }
    static const char* const ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
                                      "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
    size_t oplen = 0;
    const char* opstr = nullptr;
    for (const char* o : ops) {
      size_t ol = strlen(o);
      if (L->pos + ol <= L->len && memcmp(L->src + L->pos, o, ol) == 0) {
        oplen = ol, opstr = o;
        break;
      }
    }
    if (!opstr) {
      unsigned char u = (unsigned char)c;
      if (u >= 0x20 && u < 0x7f)
        return ml_fail(L->err, ML_E_FORMAT, "template line %d: unexpected character '%c'", L->line, c);
      return ml_fail(L->err, ML_E_FORMAT, "template line %d: unexpected byte 0x%02x", L->line, u);
    }
    if (opstr[0] == '(' || opstr[0] == '[' || opstr[0] == '{') ++nesting;
    if ((opstr[0] == ')' || opstr[0] == ']' || opstr[0] == '}') && nesting > 0) --nesting;
    if (!push(L, tk::op, opstr, oplen, L->line)) return ml_fail(L->err, ML_E_NOMEM, "template: out of memory");
    L->pos += oplen;
  }
}

}  // namespace

ml_status lex(const char* text, size_t len, ml_bump* b, ml_vec<token>* out, ml_error* err) {
  // Normalise newlines into a copy; drop one trailing newline.
  char* src = static_cast<char*>(ml_bump_alloc(b, len + 1));
  if (!src) return ml_fail(err, ML_E_NOMEM, "template: out of memory");
  size_t n = 0;
  for (size_t i = 0; i < len; ++i) {
    if (text[i] == '\r') {
      src[n++] = '\n';
      if (i + 1 < len && text[i + 1] == '\n') ++i;
    } else {
      src[n++] = text[i];
    }
  }
  if (n > 0 && src[n - 1] == '\n') --n;
  src[n] = 0;

  lexer L{src, n, 0, 1, b, out, err};
  bool strip_next = false;    // the previous tag ended with '-': strip leading whitespace of the text
  bool trim_newline = false;  // the previous tag was a block or comment: trim_blocks drops one '\n'
  bool line_starting = true;  // the text starts at the beginning of a line
  while (L.pos <= L.len) {
    size_t start = L.pos;
    if (strip_next) {
      size_t w = lead_ws(src + start, n - start);
      line_starting = w > 0 ? src[start + w - 1] == '\n' : line_starting;
      L.line += count_lines(src + start, w);
      start += w;
    } else if (trim_newline && start < n && src[start] == '\n') {
      ++start;
      ++L.line;
      line_starting = true;
    }
    L.pos = start;
    size_t open = next_open(&L, start);
    // The tag's kind and its whitespace marker.
    char kind = open < n ? src[open + 1] : 0;
    char mark = open + 2 < n ? src[open + 2] : 0;
    size_t text_end = open;
    if (open < n && mark == '-') {
      text_end = open - trail_ws(src + start, open - start);
    } else if (open < n && kind != '{' && mark != '+') {
      // lstrip_blocks: whitespace between the line's start and the tag.
      size_t l_pos = start;
      for (size_t i = open; i > start; --i)
        if (src[i - 1] == '\n') {
          l_pos = i;
          break;
        }
      if (l_pos > start || line_starting) {
        size_t w = lead_ws(src + l_pos, open - l_pos);
        bool all = w == open - l_pos;
        for (size_t i = l_pos; i < open && all; ++i) all = src[i] != '\n';
        if (all) text_end = l_pos;
      }
    }
    if (text_end > start && !push(&L, tk::text, src + start, text_end - start, L.line))
      return ml_fail(err, ML_E_NOMEM, "template: out of memory");
    L.line += count_lines(src + start, open - start);
    if (open >= n) break;
    L.pos = open + 2 + ((mark == '-' || mark == '+') ? 1 : 0);
    const int tag_line = L.line;
    if (kind == '#') {
      size_t e = L.pos;
      while (e + 1 < n && !(src[e] == '#' && src[e + 1] == '}')) ++e;
      if (e + 1 >= n) return ml_fail(err, ML_E_FORMAT, "template line %d: unclosed comment", tag_line);
      strip_next = e > L.pos && src[e - 1] == '-';
      trim_newline = !(e > L.pos && src[e - 1] == '+');
      L.line += count_lines(src + L.pos, e - L.pos);
      L.pos = e + 2;
      line_starting = false;
      continue;
    }
    size_t first_tok = out->size();
    if (!push(&L, kind == '{' ? tk::var_begin : tk::block_begin, src + open, 2, tag_line))
      return ml_fail(err, ML_E_NOMEM, "template: out of memory");
    bool minus = false;
    int nesting = 0;
    ML_TRY(lex_tag(&L, kind == '{' ? '}' : '%', &minus, &nesting));
    strip_next = minus;
    trim_newline = kind == '%' && !(L.pos >= 3 && src[L.pos - 3] == '+');
    line_starting = false;
    // {% raw %}: everything up to {% endraw %} is text.
    if (kind == '%' && out->size() == first_tok + 3 && (*out)[first_tok + 1].k == tk::name && (*out)[first_tok + 1].n == 3 &&
        memcmp((*out)[first_tok + 1].s, "raw", 3) == 0) {
      out->resize(first_tok);
      size_t body = L.pos;
      if (strip_next) body += lead_ws(src + body, n - body);
      else if (trim_newline && body < n && src[body] == '\n') ++body;
      size_t e = body;
      for (;; ++e) {
        if (e + 1 >= n) return ml_fail(err, ML_E_FORMAT, "template line %d: {%% raw %%} without {%% endraw %%}", tag_line);
        if (src[e] != '{' || src[e + 1] != '%') continue;
        size_t k = e + 2;
        bool m2 = k < n && src[k] == '-';
        if (k < n && (src[k] == '-' || src[k] == '+')) ++k;
        while (k < n && (src[k] == ' ' || src[k] == '\t' || src[k] == '\n')) ++k;
        if (k + 6 <= n && memcmp(src + k, "endraw", 6) == 0) {
          size_t tend = m2 ? e - trail_ws(src + body, e - body) : e;
          if (tend > body && !push(&L, tk::text, src + body, tend - body, L.line))
            return ml_fail(err, ML_E_NOMEM, "template: out of memory");
          L.line += count_lines(src + L.pos, e - L.pos);
          L.pos = e;
          break;
        }
      }
      // Lex the {% endraw %} tag itself and drop its tokens.
      L.pos += 2;
      if (L.pos < n && (src[L.pos] == '-' || src[L.pos] == '+')) ++L.pos;
      size_t before = out->size();
      ML_TRY(lex_tag(&L, '%', &minus, &nesting));
      out->resize(before);
      strip_next = minus;
      trim_newline = !(L.pos >= 3 && src[L.pos - 3] == '+');
    }
  }
  token t{};
  t.k = tk::eof, t.line = L.line;
  if (!out->push(t)) return ml_fail(err, ML_E_NOMEM, "template: out of memory");
  return ML_OK;
}

}  // namespace jj
