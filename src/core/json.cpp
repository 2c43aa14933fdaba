// The strict JSON reader (core/json.h): one forward pass over the text without recursion. Open
// containers sit on a fixed stack of ML_JSON_MAX_DEPTH small frames; the items and members of
// every open container grow in two scratch ml_vecs (amortised O(1) per element) and are copied
// into the bump, exactly sized, when their container closes.
//
// Strings: a first scan finds the closing quote and notes escapes and non-ASCII bytes; plain
// ASCII is copied as is, anything else is decoded and validated into a buffer of the raw length
// (a decoded string is never longer than its escaped form).
//
// Numbers: the grammar is checked here; integers fitting int64 are exact (is_int/i64). num is the
// correctly rounded double: Clinger's fast path when the digits fit 2^53 and the power of ten is
// exact, else strtod on the literal. strtod reads the locale's decimal point (our programs run in
// the C locale); when a '.' literal is not read whole, it is retried with the locale's decimal
// point, so the result does not depend on LC_NUMERIC. Out-of-range literals are accepted: 1e400
// gives num = inf (as Python does; serde_json refuses), 1e-400 gives 0.
#include "core/json.h"

#include <cerrno>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/vec.h"

namespace {

// A number literal longer than this is refused (no real file has one; it bounds the copy used
// for the locale retry).
constexpr size_t kMaxNumberLen = 4096;

struct frame {
  ml_json* v;      // the open array or object
  size_t start;    // where its items / members begin in the scratch vector
};

struct parser {
  const unsigned char* s;  // the text
  size_t n;                // its length
  size_t i;                // the position
  ml_bump* b;
  ml_error* err;
  ml_vec<ml_json*> items;
  ml_vec<ml_json_member> members;
};

ml_status fail_at(parser* P, size_t at, const char* what) {
  return ml_fail(P->err, ML_E_FORMAT, "json: byte %zu: %s", at, what);
}

ml_status nomem(parser* P) { return ml_fail(P->err, ML_E_NOMEM, "json: byte %zu: out of memory", P->i); }

inline void skip_ws(parser* P) {
  const unsigned char* s = P->s;
  size_t i = P->i;
  while (i < P->n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  P->i = i;
}

inline int hexval(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c |= 0x20;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Four hex digits at s[i..i+4) (bounds checked by the caller), or -1.
inline int32_t hex4(const unsigned char* s) {
  int32_t v = 0;
  for (int k = 0; k < 4; ++k) {
    const int h = hexval(s[k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// Length of the valid UTF-8 sequence at s[0..avail) led by a byte >= 0x80 (RFC 3629: no
// overlongs, no surrogates, nothing past U+10FFFF), or 0 when it is invalid.
inline size_t utf8_len(const unsigned char* s, size_t avail) {
  const unsigned char c = s[0];
  unsigned char lo = 0x80, hi = 0xBF;
  size_t len;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (avail < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if (s[k] < 0x80 || s[k] > 0xBF) return 0;
  return len;
}

inline size_t put_utf8(char* o, uint32_t cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

// The string whose opening quote is at P->i: decoded into the bump (*out, *out_len), P->i past
// the closing quote.
ml_status parse_string(parser* P, const char** out, size_t* out_len) {
  const unsigned char* s = P->s;
  const size_t n = P->n;
  const size_t open = P->i;
  size_t i = open + 1;
  bool plain = true;  // no escape, no byte >= 0x80
  for (;;) {
    // Skips the common bytes quickly: printable ASCII other than '"' and '\\'.
    while (i < n && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\') ++i;
    if (i >= n) return fail_at(P, open, "unterminated string");
    const unsigned char c = s[i];
    if (c == '"') break;
    if (c == '\\') {
      plain = false;
      i += 2;  // the escape's first byte cannot be a quote that ends the string
      continue;
    }
    if (c < 0x20) return fail_at(P, i, "control character in string (must be escaped)");
    plain = false;  // c >= 0x80
    ++i;
  }
  const size_t close = i;  // s[close] == '"'
  const size_t raw = close - open - 1;
  char* o = static_cast<char*>(ml_bump_alloc(P->b, raw + 1));
  if (!o) return nomem(P);
  if (plain) {
    std::memcpy(o, s + open + 1, raw);
    o[raw] = 0;
    *out = o;
    *out_len = raw;
    P->i = close + 1;
    return ML_OK;
  }
  size_t w = 0;
  for (i = open + 1; i < close;) {
    const unsigned char c = s[i];
    if (c == '\\') {
      if (i + 1 >= close) return fail_at(P, i, "unterminated escape");
      const unsigned char e = s[i + 1];
      switch (e) {
        case '"': o[w++] = '"'; i += 2; continue;
        case '\\': o[w++] = '\\'; i += 2; continue;
        case '/': o[w++] = '/'; i += 2; continue;
        case 'b': o[w++] = '\b'; i += 2; continue;
        case 'f': o[w++] = '\f'; i += 2; continue;
        case 'n': o[w++] = '\n'; i += 2; continue;
        case 'r': o[w++] = '\r'; i += 2; continue;
        case 't': o[w++] = '\t'; i += 2; continue;
        case 'u': break;
        default: return fail_at(P, i, "invalid escape (expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
      }
      if (close - i < 6) return fail_at(P, i, "truncated \\u escape (expected 4 hex digits)");
      int32_t cp = hex4(s + i + 2);
      if (cp < 0) return fail_at(P, i, "invalid \\u escape (expected 4 hex digits)");
      if (cp >= 0xDC00 && cp <= 0xDFFF) return fail_at(P, i, "lone low surrogate in \\u escape");
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        // A high surrogate must be followed by a \u escape of a low one.
        if (close - i < 12 || s[i + 6] != '\\' || s[i + 7] != 'u')
          return fail_at(P, i, "lone high surrogate in \\u escape (expected a \\u low surrogate after it)");
        const int32_t lo = hex4(s + i + 8);
        if (lo < 0xDC00 || lo > 0xDFFF)
          return fail_at(P, i + 6, "expected a \\u low surrogate (DC00-DFFF) after a high surrogate");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        i += 12;
      } else {
        i += 6;
      }
      w += put_utf8(o + w, (uint32_t)cp);
    } else if (c < 0x80) {
      o[w++] = (char)c;  // pass 1 refused control bytes
      ++i;
    } else {
      const size_t len = utf8_len(s + i, close - i);
      if (!len) return fail_at(P, i, "invalid UTF-8 in string");
      std::memcpy(o + w, s + i, len);
      w += len;
      i += len;
    }
  }
  o[w] = 0;
  *out = o;
  *out_len = w;
  P->i = close + 1;
  return ML_OK;
}

// Exact powers of ten as doubles (10^22 is the last one that is).
constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// strtod on lit[0, len) (NUL-terminated), independent of LC_NUMERIC.
double to_double(const char* lit, size_t len) {
  char* end = nullptr;
  double d = std::strtod(lit, &end);
  if (end == lit + len) return d;
  // A locale whose decimal point is not '.': retry with its own.
  const char* dp = std::localeconv()->decimal_point;
  const size_t dpl = dp ? std::strlen(dp) : 0;
  char buf[kMaxNumberLen + 8];
  size_t w = 0;
  for (size_t k = 0; k < len && w + dpl < sizeof buf - 1; ++k) {
    if (lit[k] == '.' && dpl) {
      std::memcpy(buf + w, dp, dpl);
      w += dpl;
    } else {
      buf[w++] = lit[k];
    }
  }
  buf[w] = 0;
  return std::strtod(buf, nullptr);
}

// The number starting at P->i into v.
ml_status parse_number(parser* P, ml_json* v) {
  const unsigned char* s = P->s;
  const size_t n = P->n;
  const size_t start = P->i;
  size_t i = start;
  const bool neg = s[i] == '-';
  if (neg) ++i;
  if (i >= n || s[i] < '0' || s[i] > '9') return fail_at(P, i, "expected a digit in number");
  uint64_t mant = 0;  // the digits without the point, while they fit 2^53 (for the fast path)
  int digits = 0;      // significant digits counted in mant (leading zeros skipped)
  bool mant_ok = true;
  auto digit = [&](unsigned char c) {
    if (!mant_ok) return;
    if (mant == 0 && c == '0') return;
    mant = mant * 10 + (c - '0');
    if (++digits > 15) mant_ok = false;  // 15 digits < 2^53 for sure
  };
  if (s[i] == '0') {
    ++i;
    if (i < n && s[i] >= '0' && s[i] <= '9') return fail_at(P, i, "leading zero in number");
  } else {
    while (i < n && s[i] >= '0' && s[i] <= '9') digit(s[i++]);
  }
  const size_t int_end = i;
  long frac_digits = 0;  // digits after the point (the literal is at most kMaxNumberLen long)
  bool is_int = true;
  if (i < n && s[i] == '.') {
    is_int = false;
    ++i;
    if (i >= n || s[i] < '0' || s[i] > '9') return fail_at(P, i, "expected a digit after the decimal point");
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      digit(s[i++]);
      ++frac_digits;
    }
  }
  long exp10 = 0;
  bool exp_ok = true;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    is_int = false;
    ++i;
    bool eneg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
    if (i >= n || s[i] < '0' || s[i] > '9') return fail_at(P, i, "expected a digit in the exponent");
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      if (exp10 < 100000) exp10 = exp10 * 10 + (s[i] - '0');
      else exp_ok = false;
      ++i;
    }
    if (eneg) exp10 = -exp10;
  }
  const size_t len = i - start;
  if (len > kMaxNumberLen) return fail_at(P, start, "number literal too long");
  char* lit = ml_bump_strdup(P->b, reinterpret_cast<const char*>(s + start), len);
  if (!lit) return nomem(P);
  v->type = ML_JSON_NUMBER;
  v->str = lit;
  v->len = len;
  if (is_int) {
    // Exact int64 when it fits: accumulate the magnitude as uint64 with overflow checks.
    uint64_t m = 0;
    bool fits = true;
    for (size_t k = start + (neg ? 1 : 0); k < int_end; ++k) {
      const uint64_t d = s[k] - '0';
      if (m > (UINT64_MAX - d) / 10) {
        fits = false;
        break;
      }
      m = m * 10 + d;
    }
    const uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (fits && m <= lim) {
      v->is_int = true;
      v->i64 = neg ? (int64_t)(0 - m) : (int64_t)m;
      if (m <= (1ull << 53)) {
        v->num = neg ? -(double)m : (double)m;  // "-0" gives -0.0, as strtod does
        P->i = i;
        return ML_OK;
      }
    }
  } else if (mant_ok && exp_ok) {
    // Clinger's fast path: both operands exact, one correctly rounded operation.
    const long e = exp10 - frac_digits;
    if (e >= -22 && e <= 22) {
      double d = (double)mant;
      d = e < 0 ? d / kPow10[-e] : d * kPow10[e];
      v->num = neg ? -d : d;
      P->i = i;
      return ML_OK;
    }
  }
  v->num = to_double(lit, len);
  P->i = i;
  return ML_OK;
}

// The literal word (true, false, null) at P->i.
ml_status parse_word(parser* P, const char* word, size_t wl, ml_json_type t, ml_json* v) {
  if (P->n - P->i < wl || std::memcmp(P->s + P->i, word, wl) != 0) return fail_at(P, P->i, "invalid literal (expected a value)");
  v->type = t;
  P->i += wl;
  return ML_OK;
}

ml_json* new_node(parser* P) {
  void* p = ml_bump_alloc(P->b, sizeof(ml_json));
  if (!p) return nullptr;
  std::memset(p, 0, sizeof(ml_json));
  ml_json* v = static_cast<ml_json*>(p);
  v->offset = P->i;
  return v;
}

// After '{' and whitespace, or after ',' in an object: a key, ':', and the member pushed with no
// value yet.
ml_status parse_key(parser* P) {
  skip_ws(P);
  if (P->i >= P->n || P->s[P->i] != '"') return fail_at(P, P->i, "expected a string key in object");
  ml_json_member m{};
  ML_TRY(parse_string(P, &m.key, &m.key_len));
  skip_ws(P);
  if (P->i >= P->n || P->s[P->i] != ':') return fail_at(P, P->i, "expected ':' after object key");
  ++P->i;
  if (!P->members.push(m)) return nomem(P);
  return ML_OK;
}

// Closes the container of f: copies its scratch elements into the bump.
ml_status close_container(parser* P, const frame& f) {
  ml_json* v = f.v;
  if (v->type == ML_JSON_ARRAY) {
    const size_t cnt = P->items.size() - f.start;
    void* p = ml_bump_alloc(P->b, cnt * sizeof(ml_json*));
    if (!p) return nomem(P);
    if (cnt) std::memcpy(p, P->items.data() + f.start, cnt * sizeof(ml_json*));
    v->items = static_cast<ml_json**>(p);
    v->n = cnt;
    P->items.resize(f.start);
  } else {
    const size_t cnt = P->members.size() - f.start;
    void* p = ml_bump_alloc(P->b, cnt * sizeof(ml_json_member));
    if (!p) return nomem(P);
    if (cnt) std::memcpy(p, P->members.data() + f.start, cnt * sizeof(ml_json_member));
    v->members = static_cast<ml_json_member*>(p);
    v->n = cnt;
    P->members.resize(f.start);
  }
  return ML_OK;
}

}  // namespace

ml_status ml_json_parse(const char* text, size_t len, ml_bump* b, ml_json** out, ml_error* err) {
  *out = nullptr;
  if (!text && len) return ml_fail(err, ML_E_ARG, "json: null text");
  static const char kEmpty = 0;
  parser P{reinterpret_cast<const unsigned char*>(text ? text : &kEmpty), len, 0, b, err, {}, {}};
  frame stack[ML_JSON_MAX_DEPTH];
  int depth = 0;
  ml_json* v = nullptr;
  for (;;) {
    // A value (or the opening of a container) at P.i.
    skip_ws(&P);
    if (P.i >= P.n) return fail_at(&P, P.i, depth ? "unexpected end of input (expected a value)" : "expected a value, found the end of input");
    v = new_node(&P);
    if (!v) return nomem(&P);
    const unsigned char c = P.s[P.i];
    bool opened = false;
    switch (c) {
      case '[':
      case '{':
        if (depth == ML_JSON_MAX_DEPTH) return fail_at(&P, P.i, "nesting deeper than ML_JSON_MAX_DEPTH (512)");
        v->type = c == '[' ? ML_JSON_ARRAY : ML_JSON_OBJECT;
        stack[depth++] = frame{v, c == '[' ? P.items.size() : P.members.size()};
        ++P.i;
        skip_ws(&P);
        if (P.i < P.n && P.s[P.i] == (c == '[' ? ']' : '}')) {
          ++P.i;
          ML_TRY(close_container(&P, stack[--depth]));
        } else {
          if (c == '{') ML_TRY(parse_key(&P));
          opened = true;
        }
        break;
      case '"':
        v->type = ML_JSON_STRING;
        ML_TRY(parse_string(&P, &v->str, &v->len));
        break;
      case 't': ML_TRY(parse_word(&P, "true", 4, ML_JSON_TRUE, v)); break;
      case 'f': ML_TRY(parse_word(&P, "false", 5, ML_JSON_FALSE, v)); break;
      case 'n': ML_TRY(parse_word(&P, "null", 4, ML_JSON_NULL, v)); break;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          ML_TRY(parse_number(&P, v));
        } else {
          return fail_at(&P, P.i, "unexpected character (expected a value)");
        }
    }
    if (opened) continue;
    // v is complete: hand it to the open container, then read ',' or that container's end
    // (closing containers as long as they end).
    for (;;) {
      if (depth == 0) {
        skip_ws(&P);
        if (P.i != P.n) return fail_at(&P, P.i, "unexpected data after the value");
        *out = v;
        return ML_OK;
      }
      const frame& f = stack[depth - 1];
      const bool arr = f.v->type == ML_JSON_ARRAY;
      if (arr) {
        if (!P.items.push(v)) return nomem(&P);
      } else {
        P.members.back().value = v;
      }
      skip_ws(&P);
      if (P.i >= P.n) return fail_at(&P, P.i, arr ? "unexpected end of input (expected ',' or ']')" : "unexpected end of input (expected ',' or '}')");
      const unsigned char d = P.s[P.i];
      if (d == ',') {
        ++P.i;
        if (!arr) ML_TRY(parse_key(&P));
        break;  // the next value
      }
      if (d != (arr ? ']' : '}')) return fail_at(&P, P.i, arr ? "expected ',' or ']' in array" : "expected ',' or '}' in object");
      ++P.i;
      ML_TRY(close_container(&P, f));
      v = f.v;
      --depth;
    }
  }
}

const ml_json* ml_json_get(const ml_json* v, const char* key) {
  if (!v || v->type != ML_JSON_OBJECT || !key) return nullptr;
  const size_t kl = std::strlen(key);
  for (size_t k = v->n; k-- > 0;) {
    const ml_json_member& m = v->members[k];
    if (m.key_len == kl && std::memcmp(m.key, key, kl) == 0) return m.value;
  }
  return nullptr;
}

const char* ml_json_type_name(ml_json_type t) {
  switch (t) {
    case ML_JSON_NULL: return "null";
    case ML_JSON_FALSE:
    case ML_JSON_TRUE: return "boolean";
    case ML_JSON_NUMBER: return "number";
    case ML_JSON_STRING: return "string";
    case ML_JSON_ARRAY: return "array";
    case ML_JSON_OBJECT: return "object";
  }
  return "unknown";
}

bool ml_json_quote(ml_vec<char>* out, const char* s, size_t n) {
  static const char kHex[] = "0123456789abcdef";  // Python writes \u001f in lower case
  if (!out->push('"')) return false;
  size_t run = 0;  // start of the bytes copied as they are
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    if (!out->append(s + run, i - run)) return false;
    char esc[6] = {'\\', 0, 0, 0, 0, 0};
    size_t el = 2;
    switch (c) {
      case '"': esc[1] = '"'; break;
      case '\\': esc[1] = '\\'; break;
      case '\n': esc[1] = 'n'; break;
      case '\r': esc[1] = 'r'; break;
      case '\t': esc[1] = 't'; break;
      case '\b': esc[1] = 'b'; break;
      case '\f': esc[1] = 'f'; break;
      default:
        esc[1] = 'u', esc[2] = '0', esc[3] = '0', esc[4] = kHex[c >> 4], esc[5] = kHex[c & 15];
        el = 6;
    }
    if (!out->append(esc, el)) return false;
    run = i + 1;
  }
  return out->append(s + run, n - run) && out->push('"');
}
