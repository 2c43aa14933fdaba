// The chat-template built-ins: jinja2's filters and tests, and the Python str / dict methods a
// template may call ('x'.strip(), d.items(), ...), with transformers' tojson (json.dumps with
// ensure_ascii=False, no HTML escaping, keys in insertion order). transformers renders in jinja2's
// ImmutableSandboxedEnvironment, so list and dict mutators (append, pop, update, ...) fail.
// Letter case maps ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic letters (one to one).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/chat/eval.h"

namespace jj {
namespace {

// ---- tables -------------------------------------------------------------------------------------

enum filter_id {
  F_ABS, F_ATTR, F_CAPITALIZE, F_CENTER, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE, F_FIRST, F_FLOAT,
  F_FORCEESCAPE, F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT,
  F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND, F_SAFE, F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE,
  F_TOJSON, F_TRIM, F_UNIQUE, F_UPPER, F_WORDCOUNT, F_COUNT_
};
const char* const filter_names[] = {
  "abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "first", "float",
  "forceescape", "indent", "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject",
  "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "sort", "string", "sum", "title",
  "tojson", "trim", "unique", "upper", "wordcount"};
static_assert(sizeof filter_names / sizeof filter_names[0] == F_COUNT_, "filter table");

enum test_id {
  T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_EQUALTO, T_ESCAPED, T_EVEN, T_FALSE, T_FLOAT, T_GE, T_GT,
  T_GREATERTHAN, T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LESSTHAN, T_LOWER, T_LT, T_MAPPING, T_NE, T_NONE, T_NUMBER, T_ODD,
  T_SAMEAS, T_SEQUENCE, T_STRING, T_TRUE, T_UNDEFINED, T_UPPER, T_COUNT_
};
const char* const test_names[] = {
  "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false", "float", "ge", "gt",
  "greaterthan", "in", "integer", "iterable", "le", "lessthan", "lower", "lt", "mapping", "ne", "none", "number", "odd",
  "sameas", "sequence", "string", "true", "undefined", "upper"};
static_assert(sizeof test_names / sizeof test_names[0] == T_COUNT_, "test table");

int find_in(const char* const* names, int count, const char* s, size_t n) {
  for (int i = 0; i < count; ++i)
    if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) return i;
  return -1;
}

// ---- arguments ----------------------------------------------------------------------------------

struct argv {
  rt* r;
  const node* at;
  const char* what;  // filter / method name for messages
  const jv* args;
  size_t nargs;
  const char* const* kw;
  const jv* kwv;
  size_t nkw;
};

// Argument `pos` (0-based, after the filtered value) or keyword `name`; dflt when absent.
jv arg(const argv& a, size_t pos, const char* name, jv dflt) {
  if (pos < a.nargs) return a.args[pos];
  for (size_t i = 0; i < a.nkw; ++i)
    if (strcmp(a.kw[i], name) == 0) return a.kwv[i];
  return dflt;
}

ml_status check_args(const argv& a, size_t max_pos, const char* const* names, size_t nnames) {
  if (a.nargs > max_pos) return rt_fail(a.r, a.at, ML_E_ARG, "%s takes at most %zu argument(s), got %zu", a.what, max_pos, a.nargs);
  for (size_t i = 0; i < a.nkw; ++i) {
    bool ok = false;
    for (size_t k = 0; k < nnames && !ok; ++k) ok = strcmp(a.kw[i], names[k]) == 0;
    if (!ok) return rt_fail(a.r, a.at, ML_E_ARG, "%s got an unexpected keyword argument '%s'", a.what, a.kw[i]);
  }
  return ML_OK;
}

ml_status need_str(const argv& a, const jv& v, const char* role) {
  if (v.k == vk::str) return ML_OK;
  return rt_fail(a.r, a.at, ML_E_ARG, "%s: %s must be a string, not %s", a.what, role, type_name(v));
}

ml_status int_arg(const argv& a, const jv& v, const char* role, int64_t* out) {
  if (v.k == vk::integer) *out = v.i;
  else if (v.k == vk::boolean) *out = v.b;
  else return rt_fail(a.r, a.at, ML_E_ARG, "%s: %s must be an integer, not %s", a.what, role, type_name(v));
  return ML_OK;
}

ml_status make_str(rt* r, const ml_vec<char>& t, jv* out) {
  if (t.size() > ML_TEMPLATE_MAX_OUTPUT) return rt_fail(r, nullptr, ML_E_ARG, "string past the %zu-byte limit", ML_TEMPLATE_MAX_OUTPUT);
  if (!new_str(rt_bump(r), t.data() ? t.data() : "", t.size(), out)) return rt_nomem(r);
  return ML_OK;
}
ml_status make_list(rt* r, const ml_vec<jv>& t, jv* out) {
  if (!new_list(rt_bump(r), t.data(), t.size(), out)) return rt_nomem(r);
  return ML_OK;
}

// ---- string helpers -----------------------------------------------------------------------------

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || ((unsigned char)c >= 0x80); }
bool is_word(char c) { return is_alpha(c) || (c >= '0' && c <= '9') || c == '_'; }

// Simple (one code point to one) case mappings of ASCII, Latin-1, Latin Extended-A, Greek,
// Cyrillic and the fullwidth Latin letters; other code points are kept (Python would also map
// e.g. Armenian, and expand ß to SS).
uint32_t to_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & ~1u;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c : c - 1;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return c;
}
uint32_t to_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c | 1u;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}
bool cased(uint32_t c) { return to_upper(c) != c || to_lower(c) != c || c == 0x3C2 || c == 0xDF; }

uint32_t decode_at(const char* s, size_t n, size_t i, size_t* len) {
  const unsigned char* u = (const unsigned char*)s + i;
  size_t l = u[0] < 0x80 ? 1 : u[0] < 0xE0 ? 2 : u[0] < 0xF0 ? 3 : 4;
  if (i + l > n || (u[0] >= 0x80 && u[0] < 0xC0)) l = 1;
  *len = l;
  if (l == 1) return u[0];
  if (l == 2) return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
  if (l == 3) return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
  return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
}
bool put_cp(ml_vec<char>* o, uint32_t cp) {
  char b[4];
  size_t n;
  if (cp < 0x80) b[0] = (char)cp, n = 1;
  else if (cp < 0x800) b[0] = (char)(0xC0 | (cp >> 6)), b[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
  else if (cp < 0x10000) b[0] = (char)(0xE0 | (cp >> 12)), b[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
  else b[0] = (char)(0xF0 | (cp >> 18)), b[1] = (char)(0x80 | ((cp >> 12) & 0x3F)), b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
  return o->append(b, n);
}

enum class casing { upper, lower, py_title, jinja_title, capitalize };

// upper / lower; str.title (a cased letter after an uncased character starts a word);
// jinja2's title filter (words start after runs of '-', whitespace, '(', '{', '[', '<');
// capitalize (the first character upper-cased, the rest lower-cased).
ml_status recase(rt* r, const jv& v, casing how, jv* out) {
  ml_vec<char> t;
  if (!t.reserve(v.n)) return rt_nomem(r);
  bool start = true;
  for (size_t i = 0; i < v.n;) {
    size_t l;
    uint32_t c = decode_at(v.s, v.n, i, &l);
    uint32_t m = c;
    switch (how) {
      case casing::upper: m = to_upper(c); break;
      case casing::lower: m = to_lower(c); break;
      case casing::capitalize: m = i == 0 ? to_upper(c) : to_lower(c); break;
      case casing::py_title:
        m = start ? to_upper(c) : to_lower(c);
        start = !cased(c);
        break;
      case casing::jinja_title: {
        size_t sl;
        bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space_at(v.s + i, v.n - i, &sl);
        m = sep ? c : start ? to_upper(c) : to_lower(c);
        start = sep;
        break;
      }
    }
    if (m == c ? !t.append(v.s + i, l) : !put_cp(&t, m)) return rt_nomem(r);
    i += l;
  }
  return make_str(r, t, out);
}

// Does s[i..] start with one of the code points of chars (a set)? Returns its byte length.
size_t in_set(const char* s, size_t n, size_t i, const jv& chars) {
  size_t l = 1;
  while (i + l < n && ((unsigned char)s[i + l] & 0xC0) == 0x80) ++l;
  for (size_t k = 0; k < chars.n;) {
    size_t m = 1;
    while (k + m < chars.n && ((unsigned char)chars.s[k + m] & 0xC0) == 0x80) ++m;
    if (m == l && memcmp(chars.s + k, s + i, l) == 0) return l;
    k += m;
  }
  return 0;
}

// Python's str.strip / lstrip / rstrip (chars none: whitespace).
jv strip(const jv& v, const jv* chars, bool left, bool right) {
  size_t a = 0, b = v.n;
  auto match = [&](size_t i) -> size_t {
    if (chars) return in_set(v.s, v.n, i, *chars);
    size_t l;
    return is_space_at(v.s + i, v.n - i, &l) ? l : 0;
  };
  if (left)
    while (a < b) {
      size_t l = match(a);
      if (!l) break;
      a += l;
    }
  if (right) {
    // Find the end of the last code point that does not match, walking forward from a.
    size_t end = a;
    for (size_t i = a; i < b;) {
      size_t l = match(i);
      if (l) {
        i += l;
      } else {
        size_t m = 1;
        while (i + m < b && ((unsigned char)v.s[i + m] & 0xC0) == 0x80) ++m;
        i += m;
        end = i;
      }
    }
    b = end;
  }
  return v_str(v.s + a, b - a);
}

ml_status do_strip(const argv& a, const jv& v, bool left, bool right, jv* out) {
  jv chars = arg(a, 0, "chars", v_none());
  if (chars.k == vk::undef) chars = v_none();
  if (chars.k != vk::none) ML_TRY(need_str(a, chars, "chars"));
  *out = strip(v, chars.k == vk::none ? nullptr : &chars, left, right);
  return ML_OK;
}

size_t find(const char* h, size_t hn, const char* n, size_t nn, size_t from) {
  if (nn == 0) return from <= hn ? from : (size_t)-1;
  for (size_t i = from; i + nn <= hn; ++i)
    if (memcmp(h + i, n, nn) == 0) return i;
  return (size_t)-1;
}

ml_status do_split(const argv& a, const jv& v, bool from_right, jv* out) {
  jv sep = arg(a, 0, "sep", v_none());
  jv maxv = arg(a, 1, "maxsplit", v_int(-1));
  int64_t maxsplit = -1;
  ML_TRY(int_arg(a, maxv, "maxsplit", &maxsplit));
  ml_vec<jv> parts;
  if (sep.k == vk::none || sep.k == vk::undef) {
    // Runs of whitespace separate; no empty strings.
    size_t i = 0, l;
    ml_vec<size_t> bounds;  // start, end pairs
    while (i < v.n) {
      while (i < v.n && is_space_at(v.s + i, v.n - i, &l)) i += l;
      if (i >= v.n) break;
      size_t s0 = i;
      while (i < v.n && !is_space_at(v.s + i, v.n - i, &l)) ++i;
      if (!bounds.push(s0) || !bounds.push(i)) return rt_nomem(a.r);
    }
    size_t count = bounds.size() / 2;
    if (maxsplit >= 0 && (size_t)maxsplit + 1 < count) {
      // Merge the words beyond maxsplit into the last (first, for rsplit) part.
      size_t keep = (size_t)maxsplit;
      if (!from_right) {
        for (size_t k = 0; k < keep; ++k)
          if (!parts.push(v_str(v.s + bounds[2 * k], bounds[2 * k + 1] - bounds[2 * k]))) return rt_nomem(a.r);
        size_t s0 = bounds[2 * keep];  // the rest keeps its trailing whitespace, as in Python
        if (!parts.push(v_str(v.s + s0, v.n - s0))) return rt_nomem(a.r);
      } else {
        size_t first = count - keep;
        if (!parts.push(v_str(v.s, bounds[2 * first - 1]))) return rt_nomem(a.r);
        for (size_t k = first; k < count; ++k)
          if (!parts.push(v_str(v.s + bounds[2 * k], bounds[2 * k + 1] - bounds[2 * k]))) return rt_nomem(a.r);
      }
    } else {
      for (size_t k = 0; k < count; ++k)
        if (!parts.push(v_str(v.s + bounds[2 * k], bounds[2 * k + 1] - bounds[2 * k]))) return rt_nomem(a.r);
    }
    return make_list(a.r, parts, out);
  }
  ML_TRY(need_str(a, sep, "sep"));
  if (sep.n == 0) return rt_fail(a.r, a.at, ML_E_ARG, "%s: empty separator", a.what);
  if (!from_right) {
    size_t i = 0;
    int64_t splits = 0;
    for (;;) {
      size_t j = (maxsplit >= 0 && splits >= maxsplit) ? (size_t)-1 : find(v.s, v.n, sep.s, sep.n, i);
      if (j == (size_t)-1) {
        if (!parts.push(v_str(v.s + i, v.n - i))) return rt_nomem(a.r);
        break;
      }
      if (!parts.push(v_str(v.s + i, j - i))) return rt_nomem(a.r);
      i = j + sep.n, ++splits;
    }
  } else {
    // Collect all separator positions, keep the last maxsplit.
    ml_vec<size_t> pos;
    for (size_t i = 0;;) {
      size_t j = find(v.s, v.n, sep.s, sep.n, i);
      if (j == (size_t)-1) break;
      if (!pos.push(j)) return rt_nomem(a.r);
      i = j + sep.n;
    }
    size_t first = maxsplit >= 0 && (size_t)maxsplit < pos.size() ? pos.size() - (size_t)maxsplit : 0;
    size_t start = 0;
    for (size_t k = first; k < pos.size(); ++k) {
      if (!parts.push(v_str(v.s + start, pos[k] - start))) return rt_nomem(a.r);
      start = pos[k] + sep.n;
    }
    if (!parts.push(v_str(v.s + start, v.n - start))) return rt_nomem(a.r);
  }
  return make_list(a.r, parts, out);
}

ml_status do_replace(const argv& a, const jv& v, jv* out, size_t first_arg) {
  jv old = arg(a, first_arg, "old", v_undef()), nw = arg(a, first_arg + 1, "new", v_undef());
  jv cnt = arg(a, first_arg + 2, "count", v_int(-1));
  if (cnt.k == vk::none) cnt = v_int(-1);
  ML_TRY(need_str(a, old, "old"));
  ML_TRY(to_str(a.r, nw, &nw));
  int64_t count = -1;
  ML_TRY(int_arg(a, cnt, "count", &count));
  ml_vec<char> t;
  size_t i = 0;
  int64_t done = 0;
  if (old.n == 0) {
    // Python inserts `new` between every character (and at both ends).
    for (size_t k = 0; k <= v.n; ++k) {
      bool at_cp = k == v.n || ((unsigned char)v.s[k] & 0xC0) != 0x80;
      if (at_cp && (count < 0 || done < count)) {
        if (!t.append(nw.s, nw.n)) return rt_nomem(a.r);
        ++done;
      }
      if (k < v.n && !t.push(v.s[k])) return rt_nomem(a.r);
      if (t.size() > ML_TEMPLATE_MAX_OUTPUT) break;
    }
    return make_str(a.r, t, out);
  }
  for (;;) {
    size_t j = (count >= 0 && done >= count) ? (size_t)-1 : find(v.s, v.n, old.s, old.n, i);
    if (j == (size_t)-1) {
      if (!t.append(v.s + i, v.n - i)) return rt_nomem(a.r);
      break;
    }
    if (!t.append(v.s + i, j - i) || !t.append(nw.s, nw.n)) return rt_nomem(a.r);
    if (t.size() > ML_TEMPLATE_MAX_OUTPUT) break;
    i = j + old.n, ++done;
  }
  return make_str(a.r, t, out);
}

ml_status center(const argv& a, const jv& v, int64_t width, const jv& fill, jv* out) {
  size_t len = utf8_len(v.s, v.n);
  if (width <= (int64_t)len) {
    *out = v;
    return ML_OK;
  }
  if (width > (int64_t)ML_TEMPLATE_MAX_OUTPUT) return rt_fail(a.r, a.at, ML_E_ARG, "center: width past the output limit");
  size_t marg = (size_t)width - len;
  size_t left = marg / 2 + (marg & (size_t)width & 1);  // CPython's pad(): left = marg/2 + (marg & width & 1)
  ml_vec<char> t;
  for (size_t i = 0; i < left; ++i)
    if (!t.append(fill.s, fill.n)) return rt_nomem(a.r);
  if (!t.append(v.s, v.n)) return rt_nomem(a.r);
  for (size_t i = 0; i < marg - left; ++i)
    if (!t.append(fill.s, fill.n)) return rt_nomem(a.r);
  return make_str(a.r, t, out);
}

ml_status html_escape(rt* r, const jv& v, jv* out) {
  jv s;
  ML_TRY(to_str(r, v, &s));
  ml_vec<char> t;
  for (size_t i = 0; i < s.n; ++i) {
    const char* e = nullptr;
    switch (s.s[i]) {
      case '&': e = "&amp;"; break;
      case '<': e = "&lt;"; break;
      case '>': e = "&gt;"; break;
      case '"': e = "&#34;"; break;
      case '\'': e = "&#39;"; break;
      default: break;
    }
    if (e ? !t.append(e, strlen(e)) : !t.push(s.s[i])) return rt_nomem(r);
  }
  return make_str(r, t, out);
}

// str.format with {} / {0} / {name} fields (no format specs or conversions).
ml_status py_format(const argv& a, const jv& v, jv* out) {
  ml_vec<char> t;
  size_t auto_idx = 0;
  for (size_t i = 0; i < v.n; ++i) {
    char c = v.s[i];
    if ((c == '{' || c == '}') && i + 1 < v.n && v.s[i + 1] == c) {
      if (!t.push(c)) return rt_nomem(a.r);
      ++i;
      continue;
    }
    if (c == '}') return rt_fail(a.r, a.at, ML_E_ARG, "format: single '}' encountered in format string");
    if (c != '{') {
      if (!t.push(c)) return rt_nomem(a.r);
      continue;
    }
    size_t j = i + 1;
    while (j < v.n && v.s[j] != '}') ++j;
    if (j >= v.n) return rt_fail(a.r, a.at, ML_E_ARG, "format: single '{' encountered in format string");
    const char* f = v.s + i + 1;
    size_t fn_ = j - i - 1;
    for (size_t k = 0; k < fn_; ++k)
      if (f[k] == ':' || f[k] == '!' || f[k] == '.' || f[k] == '[')
        return rt_fail(a.r, a.at, ML_E_ARG, "format: format specs and conversions are not supported");
    jv val;
    if (fn_ == 0) {
      if (auto_idx >= a.nargs) return rt_fail(a.r, a.at, ML_E_ARG, "format: replacement index %zu out of range", auto_idx);
      val = a.args[auto_idx++];
    } else if (f[0] >= '0' && f[0] <= '9') {
      size_t idx = (size_t)strtoul(f, nullptr, 10);
      if (idx >= a.nargs) return rt_fail(a.r, a.at, ML_E_ARG, "format: replacement index %zu out of range", idx);
      val = a.args[idx];
    } else {
      bool found = false;
      for (size_t k = 0; k < a.nkw && !found; ++k)
        if (strlen(a.kw[k]) == fn_ && memcmp(a.kw[k], f, fn_) == 0) val = a.kwv[k], found = true;
      if (!found) return rt_fail(a.r, a.at, ML_E_ARG, "format: no argument named '%.*s'", (int)fn_, f);
    }
    if (!append_str(&t, val)) return rt_nomem(a.r);
    i = j;
  }
  return make_str(a.r, t, out);
}

// ---- filters over sequences ---------------------------------------------------------------------

// The attribute path "a.b.0" of v (jinja2's make_attrgetter).
ml_status attr_path(rt* r, const node* at, const jv& v, const jv& path, jv* out) {
  if (path.k == vk::integer) return get_item(r, at, v, path, out);
  if (path.k != vk::str) return rt_fail(r, at, ML_E_ARG, "attribute must be a string, not %s", type_name(path));
  jv cur = v;
  size_t i = 0;
  for (;;) {
    size_t j = i;
    while (j < path.n && path.s[j] != '.') ++j;
    jv key = v_str(path.s + i, j - i);
    bool digits = j > i;
    for (size_t k = i; k < j && digits; ++k) digits = path.s[k] >= '0' && path.s[k] <= '9';
    if (digits) key = v_int(strtoll(path.s + i, nullptr, 10));
    ML_TRY(get_item(r, at, cur, key, &cur));
    if (j >= path.n) break;
    i = j + 1;
  }
  *out = cur;
  return ML_OK;
}

// Comparison key for sort / unique / min / max / dictsort: lower-cased strings unless case_sensitive.
ml_status sort_key(rt* r, const jv& v, bool case_sensitive, jv* out) {
  if (v.k == vk::str && !case_sensitive) return recase(r, v, casing::lower, out);
  *out = v;
  return ML_OK;
}

ml_status stable_sort(rt* r, const node* at, ml_vec<jv>* items, ml_vec<jv>* keys, bool reverse) {
  // Merge sort (stable), comparing keys; Python's sort with reverse=True keeps equal items in order.
  size_t n = items->size();
  ml_vec<size_t> idx, tmp;
  if (!idx.resize(n) || !tmp.resize(n)) return rt_nomem(r);
  for (size_t i = 0; i < n; ++i) idx[i] = i;
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        int c;
        if (!order((*keys)[idx[j]], (*keys)[idx[i]], &c))
          return rt_fail(r, at, ML_E_ARG, "'<' not supported between instances of '%s' and '%s'", type_name((*keys)[idx[j]]),
                         type_name((*keys)[idx[i]]));
        bool take_right = reverse ? (c == 2 ? false : c > 0) : (c == 2 ? false : c < 0);
        tmp[k++] = take_right ? idx[j++] : idx[i++];
      }
      while (i < mid) tmp[k++] = idx[i++];
      while (j < hi) tmp[k++] = idx[j++];
    }
    for (size_t i = 0; i < n; ++i) idx[i] = tmp[i];
  }
  ml_vec<jv> sorted;
  if (!sorted.reserve(n)) return rt_nomem(r);
  for (size_t i = 0; i < n; ++i) sorted.push((*items)[idx[i]]);
  *items = static_cast<ml_vec<jv>&&>(sorted);
  return ML_OK;
}

// select / reject / selectattr / rejectattr.
ml_status select_filter(const argv& a, const jv& v, bool by_attr, bool keep, jv* out) {
  ml_vec<jv> items, kept;
  ML_TRY(iterate(a.r, a.at, v, &items));
  size_t first = 0;
  jv attr;
  if (by_attr) {
    if (a.nargs < 1) return rt_fail(a.r, a.at, ML_E_ARG, "%s needs an attribute name", a.what);
    attr = a.args[0];
    first = 1;
  }
  int test = -1;
  if (a.nargs > first) {
    ML_TRY(need_str(a, a.args[first], "the test name"));
    test = find_test(a.args[first].s, a.args[first].n);
    if (test < 0) return rt_fail(a.r, a.at, ML_E_ARG, "%s: test '%.*s' is not supported", a.what, (int)a.args[first].n, a.args[first].s);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    jv x = items[i];
    if (by_attr) ML_TRY(attr_path(a.r, a.at, items[i], attr, &x));
    bool pass;
    if (test < 0) pass = truthy(x);
    else ML_TRY(apply_test(a.r, a.at, test, x, a.args + first + 1, a.nargs - first - 1, &pass));
    if (pass == keep && !kept.push(items[i])) return rt_nomem(a.r);
  }
  return make_list(a.r, kept, out);
}

ml_status map_filter(const argv& a, const jv& v, jv* out) {
  ml_vec<jv> items, res;
  ML_TRY(iterate(a.r, a.at, v, &items));
  jv attr = arg(a, (size_t)-1, "attribute", v_undef());
  if (attr.k != vk::undef) {
    jv dflt = arg(a, (size_t)-1, "default", v_undef());
    for (size_t i = 0; i < items.size(); ++i) {
      jv x;
      ML_TRY(attr_path(a.r, a.at, items[i], attr, &x));
      if (x.k == vk::undef && dflt.k != vk::undef) x = dflt;
      if (!res.push(x)) return rt_nomem(a.r);
    }
    return make_list(a.r, res, out);
  }
  if (a.nargs < 1) return rt_fail(a.r, a.at, ML_E_ARG, "map needs a filter name or attribute=");
  ML_TRY(need_str(a, a.args[0], "the filter name"));
  int f = find_filter(a.args[0].s, a.args[0].n);
  if (f < 0) return rt_fail(a.r, a.at, ML_E_ARG, "map: filter '%.*s' is not supported", (int)a.args[0].n, a.args[0].s);
  for (size_t i = 0; i < items.size(); ++i) {
    jv x;
    ML_TRY(apply_filter(a.r, a.at, f, items[i], a.args + 1, a.nargs - 1, a.kw, a.kwv, a.nkw, &x));
    if (!res.push(x)) return rt_nomem(a.r);
  }
  return make_list(a.r, res, out);
}

ml_status to_int(const argv& a, const jv& v, jv* out) {
  jv dflt = arg(a, 0, "default", v_int(0));
  jv basev = arg(a, 1, "base", v_int(10));
  int64_t base = 10;
  ML_TRY(int_arg(a, basev, "base", &base));
  switch (v.k) {
    case vk::integer: *out = v; return ML_OK;
    case vk::boolean: *out = v_int(v.b); return ML_OK;
    case vk::real:
      if (std::isnan(v.f) || std::fabs(v.f) >= 9.2e18) {
        *out = dflt;
        return ML_OK;
      }
      *out = v_int((int64_t)v.f);
      return ML_OK;
    case vk::str: {
      char buf[64];
      jv s = strip(v, nullptr, true, true);
      if (s.n == 0 || s.n >= sizeof buf) {
        *out = dflt;
        return ML_OK;
      }
      size_t k = 0;
      for (size_t i = 0; i < s.n; ++i)
        if (s.s[i] != '_') buf[k++] = s.s[i];
      buf[k] = 0;
      char* end;
      errno = 0;
      long long x = strtoll(buf, &end, (int)base);
      if (*end == 0 && errno == 0 && end != buf) {
        *out = v_int(x);
        return ML_OK;
      }
      double f = strtod(buf, &end);  // int(float(value))
      if (*end == 0 && end != buf && std::isfinite(f) && std::fabs(f) < 9.2e18) {
        *out = v_int((int64_t)f);
        return ML_OK;
      }
      *out = dflt;
      return ML_OK;
    }
    default: *out = dflt; return ML_OK;
  }
}

ml_status to_float(const argv& a, const jv& v, jv* out) {
  jv dflt = arg(a, 0, "default", v_real(0.0));
  if (is_number(v)) {
    *out = v_real(num(v));
    return ML_OK;
  }
  if (v.k == vk::str) {
    jv s = strip(v, nullptr, true, true);
    char buf[64];
    if (s.n > 0 && s.n < sizeof buf) {
      memcpy(buf, s.s, s.n);
      buf[s.n] = 0;
      char* end;
      double f = strtod(buf, &end);
      bool hex = strchr(buf, 'x') || strchr(buf, 'X');
      if (*end == 0 && !hex) {
        *out = v_real(f);
        return ML_OK;
      }
    }
  }
  *out = dflt;
  return ML_OK;
}

ml_status do_round(const argv& a, const jv& v, jv* out) {
  jv pv = arg(a, 0, "precision", v_int(0));
  jv mv = arg(a, 1, "method", v_str("common", 6));
  int64_t prec = 0;
  ML_TRY(int_arg(a, pv, "precision", &prec));
  ML_TRY(need_str(a, mv, "method"));
  if (!is_number(v)) return rt_fail(a.r, a.at, ML_E_ARG, "round: a number is needed, not %s", type_name(v));
  if (prec < -300 || prec > 300) return rt_fail(a.r, a.at, ML_E_ARG, "round: precision out of range");
  bool common = mv.n == 6 && memcmp(mv.s, "common", 6) == 0;
  bool ceil_ = mv.n == 4 && memcmp(mv.s, "ceil", 4) == 0;
  bool floor_ = mv.n == 5 && memcmp(mv.s, "floor", 5) == 0;
  if (!common && !ceil_ && !floor_) return rt_fail(a.r, a.at, ML_E_ARG, "round: method must be common, ceil or floor");
  if (common) {
    if (v.k != vk::real) {  // Python: round(int, n) is an int
      *out = v.k == vk::boolean ? v_int(v.b) : v;
      return ML_OK;
    }
    if (!std::isfinite(v.f)) {
      *out = v;
      return ML_OK;
    }
    if (prec >= 0) {
      // printf rounds the exact binary value, ties to even: Python's round() does the same.
      char buf[400];
      snprintf(buf, sizeof buf, "%.*f", (int)prec, v.f);
      *out = v_real(strtod(buf, nullptr));
    } else {
      double p = std::pow(10.0, (double)-prec);
      *out = v_real(std::nearbyint(v.f / p) * p);
    }
    return ML_OK;
  }
  double p = std::pow(10.0, (double)prec);
  double x = num(v) * p;
  *out = v_real((ceil_ ? std::ceil(x) : std::floor(x)) / p);
  return ML_OK;
}

ml_status do_indent(const argv& a, const jv& v, jv* out) {
  jv wv = arg(a, 0, "width", v_int(4));
  bool first = truthy(arg(a, 1, "first", v_bool(false)));
  bool blank = truthy(arg(a, 2, "blank", v_bool(false)));
  jv ind;
  if (wv.k == vk::str) {
    ind = wv;
  } else {
    int64_t w = 0;
    ML_TRY(int_arg(a, wv, "width", &w));
    if (w < 0) w = 0;
    if (w > 4096) return rt_fail(a.r, a.at, ML_E_ARG, "indent: width too large");
    ml_vec<char> sp;
    if (!sp.resize((size_t)w)) return rt_nomem(a.r);
    for (size_t i = 0; i < sp.size(); ++i) sp[i] = ' ';
    ML_TRY(make_str(a.r, sp, &ind));
  }
  jv s;
  ML_TRY(to_str(a.r, v, &s));
  // Lines as str.splitlines() of s + "\n" (line breaks: \n, \r\n, \r).
  ml_vec<jv> lines;
  for (size_t i = 0; i < s.n;) {
    size_t j = i;
    while (j < s.n && s.s[j] != '\n' && s.s[j] != '\r') ++j;
    if (!lines.push(v_str(s.s + i, j - i))) return rt_nomem(a.r);
    if (j >= s.n) break;
    j += (s.s[j] == '\r' && j + 1 < s.n && s.s[j + 1] == '\n') ? 2 : 1;
    i = j;
  }
  if (lines.empty() && !lines.push(v_str("", 0))) return rt_nomem(a.r);
  ml_vec<char> t;
  if (first && !t.append(ind.s, ind.n)) return rt_nomem(a.r);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      if (!t.push('\n')) return rt_nomem(a.r);
      if ((blank || lines[i].n > 0) && !t.append(ind.s, ind.n)) return rt_nomem(a.r);
    }
    if (!t.append(lines[i].s, lines[i].n)) return rt_nomem(a.r);
    if (t.size() > ML_TEMPLATE_MAX_OUTPUT) break;
  }
  return make_str(a.r, t, out);
}

}  // namespace

int find_filter(const char* s, size_t n) { return find_in(filter_names, F_COUNT_, s, n); }
int find_test(const char* s, size_t n) { return find_in(test_names, T_COUNT_, s, n); }

// Each filter's parameters after the value, in order (jinja2's signatures; transformers' tojson).
// A trailing "*" takes any further positional arguments (select, map, ...).
const char* const filter_params[] = {
  "", "name", "", "width", "", "default_value,boolean", "default_value,boolean", "case_sensitive,by,reverse", "", "",
  "", "default", "", "width,first,blank", "default,base", "", "d,attribute", "", "", "", "", "*,attribute,default",
  "case_sensitive,attribute", "case_sensitive,attribute", "*", "*", "old,new,count", "", "precision,method", "", "*", "*",
  "reverse,case_sensitive,attribute", "", "attribute,start", "", "indent,ensure_ascii,sort_keys,separators", "chars",
  "case_sensitive,attribute", "", ""};
static_assert(sizeof filter_params / sizeof filter_params[0] == F_COUNT_, "filter parameter table");

ml_status check_filter_args(const argv& a, int id) {
  const char* p = filter_params[id];
  size_t npos = 0;
  bool star = p[0] == '*';
  for (const char* q = p; *q; ++q) npos += *q == ',';
  if (*p) ++npos;
  if (star) --npos;
  if (!star && a.nargs > npos)
    return rt_fail(a.r, a.at, ML_E_ARG, "filter '%s' takes at most %zu argument(s), got %zu", a.what, npos, a.nargs);
  for (size_t i = 0; i < a.nkw; ++i) {
    size_t kl = strlen(a.kw[i]);
    bool ok = false;
    for (const char* q = p; *q && !ok;) {
      const char* e = strchr(q, ',');
      size_t l = e ? (size_t)(e - q) : strlen(q);
      ok = l == kl && memcmp(q, a.kw[i], l) == 0;
      q += l + (e ? 1 : 0);
    }
    if (!ok) return rt_fail(a.r, a.at, ML_E_ARG, "filter '%s' got an unexpected keyword argument '%s'", a.what, a.kw[i]);
  }
  return ML_OK;
}

ml_status apply_filter(rt* r, const node* at, int id, const jv& v, const jv* args, size_t nargs, const char* const* kw,
                       const jv* kwv, size_t nkw, jv* out) {
  argv a{r, at, filter_names[id], args, nargs, kw, kwv, nkw};
  ML_TRY(check_filter_args(a, id));
  switch ((filter_id)id) {
    case F_D: case F_DEFAULT: {
      jv dflt = arg(a, 0, "default_value", v_str("", 0));
      bool boolean = truthy(arg(a, 1, "boolean", v_bool(false)));
      *out = (v.k == vk::undef || (boolean && !truthy(v))) ? dflt : v;
      return ML_OK;
    }
    case F_LENGTH: case F_COUNT:
      switch (v.k) {
        case vk::str: *out = v_int((int64_t)utf8_len(v.s, v.n)); return ML_OK;
        case vk::list: *out = v_int((int64_t)v.l->n); return ML_OK;
        case vk::dict: case vk::ns: *out = v_int((int64_t)v.d->n); return ML_OK;
        case vk::undef: *out = v_int(0); return ML_OK;
        default: return rt_fail(r, at, ML_E_ARG, "object of type '%s' has no len()", type_name(v));
      }
    case F_SAFE: *out = v; return ML_OK;
    case F_STRING: return to_str(r, v, out);
    case F_E: case F_ESCAPE: case F_FORCEESCAPE: return html_escape(r, v, out);
    case F_UPPER: case F_LOWER: case F_TITLE: case F_CAPITALIZE: case F_TRIM: case F_CENTER: case F_WORDCOUNT: {
      jv s;
      ML_TRY(to_str(r, v, &s));
      if (id == F_UPPER) return recase(r, s, casing::upper, out);
      if (id == F_LOWER) return recase(r, s, casing::lower, out);
      if (id == F_TITLE) return recase(r, s, casing::jinja_title, out);
      if (id == F_CAPITALIZE) return recase(r, s, casing::capitalize, out);
      if (id == F_TRIM) return do_strip(a, s, true, true, out);
      if (id == F_CENTER) {
        int64_t w = 0;
        ML_TRY(int_arg(a, arg(a, 0, "width", v_int(80)), "width", &w));
        return center(a, s, w, v_str(" ", 1), out);
      }
      int64_t words = 0;  // runs of word characters (\w+)
      for (size_t i = 0; i < s.n;) {
        if (!is_word(s.s[i])) {
          ++i;
          continue;
        }
        ++words;
        while (i < s.n && is_word(s.s[i])) ++i;
      }
      *out = v_int(words);
      return ML_OK;
    }
    case F_REPLACE: {
      jv s;
      ML_TRY(to_str(r, v, &s));
      return do_replace(a, s, out, 0);
    }
    case F_TOJSON: {
      static const char* const names[] = {"indent", "ensure_ascii", "sort_keys", "separators"};
      ML_TRY(check_args(a, 1, names, 4));
      jv ind = arg(a, 0, "indent", v_none());
      if (ind.k == vk::undef) ind = v_none();
      if (truthy(arg(a, (size_t)-1, "ensure_ascii", v_bool(false))))
        return rt_fail(r, at, ML_E_ARG, "tojson: ensure_ascii=True is not supported");
      if (arg(a, (size_t)-1, "separators", v_none()).k != vk::none)
        return rt_fail(r, at, ML_E_ARG, "tojson: separators= is not supported");
      int64_t indent = -1;
      if (ind.k != vk::none) ML_TRY(int_arg(a, ind, "indent", &indent));
      if (indent > 64) return rt_fail(r, at, ML_E_ARG, "tojson: indent too large");
      if (indent < 0) indent = ind.k == vk::none ? -1 : 0;
      ml_vec<char> t;
      ML_TRY(append_json(r, at, &t, v, (int)indent, truthy(arg(a, (size_t)-1, "sort_keys", v_bool(false))), 0));
      return make_str(r, t, out);
    }
    case F_FIRST: case F_LAST: {
      if (v.k == vk::list) {
        *out = v.l->n ? v.l->items[id == F_FIRST ? 0 : v.l->n - 1] : v_undef();
        return ML_OK;
      }
      ml_vec<jv> items;
      ML_TRY(iterate(r, at, v, &items));
      *out = items.empty() ? v_undef() : items[id == F_FIRST ? 0 : items.size() - 1];
      return ML_OK;
    }
    case F_LIST: {
      if (v.k == vk::list && !v.tuple) {
        *out = v;
        return ML_OK;
      }
      ml_vec<jv> items;
      ML_TRY(iterate(r, at, v, &items));
      return make_list(r, items, out);
    }
    case F_ITEMS: {
      if (v.k == vk::undef) return make_list(r, ml_vec<jv>(), out);
      if (v.k != vk::dict && v.k != vk::ns) return rt_fail(r, at, ML_E_ARG, "items: a mapping is needed, not %s", type_name(v));
      ml_vec<jv> items;
      for (size_t i = 0; i < v.d->n; ++i) {
        jv pair[2] = {v.d->keys[i], v.d->vals[i]}, p;
        if (!new_list(rt_bump(r), pair, 2, &p) || !items.push(p)) return rt_nomem(r);
        items.back().tuple = true;
      }
      return make_list(r, items, out);
    }
    case F_DICTSORT: {
      if (v.k != vk::dict) return rt_fail(r, at, ML_E_ARG, "dictsort: a dict is needed, not %s", type_name(v));
      bool cs = truthy(arg(a, 0, "case_sensitive", v_bool(false)));
      jv by = arg(a, 1, "by", v_str("key", 3));
      bool rev = truthy(arg(a, 2, "reverse", v_bool(false)));
      bool by_value = by.k == vk::str && by.n == 5 && memcmp(by.s, "value", 5) == 0;
      ml_vec<jv> items, keys;
      for (size_t i = 0; i < v.d->n; ++i) {
        jv pair[2] = {v.d->keys[i], v.d->vals[i]}, p, k;
        if (!new_list(rt_bump(r), pair, 2, &p)) return rt_nomem(r);
        p.tuple = true;
        ML_TRY(sort_key(r, by_value ? v.d->vals[i] : v.d->keys[i], cs, &k));
        if (!items.push(p) || !keys.push(k)) return rt_nomem(r);
      }
      ML_TRY(stable_sort(r, at, &items, &keys, rev));
      return make_list(r, items, out);
    }
    case F_JOIN: {
      jv sep = arg(a, 0, "d", v_str("", 0));
      jv attr = arg(a, 1, "attribute", v_none());
      ML_TRY(to_str(r, sep, &sep));
      ml_vec<jv> items;
      ML_TRY(iterate(r, at, v, &items));
      ml_vec<char> t;
      for (size_t i = 0; i < items.size(); ++i) {
        jv x = items[i];
        if (attr.k != vk::none) ML_TRY(attr_path(r, at, x, attr, &x));
        if ((i && !t.append(sep.s, sep.n)) || !append_str(&t, x)) return rt_nomem(r);
        if (t.size() > ML_TEMPLATE_MAX_OUTPUT) break;
      }
      return make_str(r, t, out);
    }
    case F_REVERSE: {
      if (v.k == vk::str) {
        ml_vec<char> t;
        if (!t.resize(v.n)) return rt_nomem(r);
        size_t w = v.n;
        for (size_t i = 0; i < v.n;) {
          size_t l = 1;
          while (i + l < v.n && ((unsigned char)v.s[i + l] & 0xC0) == 0x80) ++l;
          w -= l;
          memcpy(t.data() + w, v.s + i, l);
          i += l;
        }
        return make_str(r, t, out);
      }
      ml_vec<jv> items, rev;
      ML_TRY(iterate(r, at, v, &items));
      for (size_t i = items.size(); i-- > 0;)
        if (!rev.push(items[i])) return rt_nomem(r);
      return make_list(r, rev, out);
    }
    case F_SORT: case F_UNIQUE: case F_MIN: case F_MAX: {
      bool rev = id == F_SORT && truthy(arg(a, 0, "reverse", v_bool(false)));
      bool cs = truthy(arg(a, id == F_SORT ? 1 : 0, "case_sensitive", v_bool(false)));
      jv attr = arg(a, id == F_SORT ? 2 : 1, "attribute", v_none());
      ml_vec<jv> items, keys;
      ML_TRY(iterate(r, at, v, &items));
      for (size_t i = 0; i < items.size(); ++i) {
        jv k = items[i];
        if (attr.k != vk::none) ML_TRY(attr_path(r, at, k, attr, &k));
        ML_TRY(sort_key(r, k, cs, &k));
        if (!keys.push(k)) return rt_nomem(r);
      }
      if (id == F_SORT) {
        ML_TRY(stable_sort(r, at, &items, &keys, rev));
        return make_list(r, items, out);
      }
      if (id == F_UNIQUE) {
        ml_vec<jv> kept, seen;
        for (size_t i = 0; i < items.size(); ++i) {
          bool dup = false;
          for (size_t k = 0; k < seen.size() && !dup; ++k) dup = equal(seen[k], keys[i]);
          if (!dup && (!seen.push(keys[i]) || !kept.push(items[i]))) return rt_nomem(r);
        }
        return make_list(r, kept, out);
      }
      if (items.empty()) {
        *out = v_undef();
        return ML_OK;
      }
      size_t best = 0;
      for (size_t i = 1; i < items.size(); ++i) {
        int c;
        if (!order(keys[i], keys[best], &c)) return rt_fail(r, at, ML_E_ARG, "%s: values cannot be compared", a.what);
        if ((id == F_MIN && c == -1) || (id == F_MAX && c == 1)) best = i;
      }
      *out = items[best];
      return ML_OK;
    }
    case F_SELECT: return select_filter(a, v, false, true, out);
    case F_REJECT: return select_filter(a, v, false, false, out);
    case F_SELECTATTR: return select_filter(a, v, true, true, out);
    case F_REJECTATTR: return select_filter(a, v, true, false, out);
    case F_MAP: return map_filter(a, v, out);
    case F_ATTR: {  // getattr only: a dict's members are not attributes
      jv name = arg(a, 0, "name", v_undef());
      ML_TRY(need_str(a, name, "name"));
      bool nomem = false;
      if (v.k == vk::ns) {
        const jv* m = dict_get_str(v.d, name.s, name.n);
        *out = m ? *m : v_undef();
      } else if (!lookup_method(r, v, name.s, name.n, out, &nomem)) {
        if (nomem) return rt_nomem(r);
        *out = v_undef();
      }
      return ML_OK;
    }
    case F_SUM: {
      jv attr = arg(a, 0, "attribute", v_none());
      jv acc = arg(a, 1, "start", v_int(0));
      ml_vec<jv> items;
      ML_TRY(iterate(r, at, v, &items));
      for (size_t i = 0; i < items.size(); ++i) {
        jv x = items[i];
        if (attr.k != vk::none) ML_TRY(attr_path(r, at, x, attr, &x));
        if (!is_number(x) || !is_number(acc)) return rt_fail(r, at, ML_E_ARG, "sum: numbers are needed, not %s", type_name(x));
        if (acc.k != vk::real && x.k != vk::real) {
          int64_t z;
          if (__builtin_add_overflow(acc.k == vk::integer ? acc.i : acc.b, x.k == vk::integer ? x.i : x.b, &z))
            return rt_fail(r, at, ML_E_ARG, "sum: integer overflow");
          acc = v_int(z);
        } else {
          acc = v_real(num(acc) + num(x));
        }
      }
      *out = acc;
      return ML_OK;
    }
    case F_ABS:
      if (v.k == vk::integer) {
        if (v.i == INT64_MIN) return rt_fail(r, at, ML_E_ARG, "abs: integer overflow");
        *out = v_int(v.i < 0 ? -v.i : v.i);
      } else if (v.k == vk::real) {
        *out = v_real(std::fabs(v.f));
      } else if (v.k == vk::boolean) {
        *out = v_int(v.b);
      } else {
        return rt_fail(r, at, ML_E_ARG, "bad operand type for abs(): '%s'", type_name(v));
      }
      return ML_OK;
    case F_INT: return to_int(a, v, out);
    case F_FLOAT: return to_float(a, v, out);
    case F_ROUND: return do_round(a, v, out);
    case F_INDENT: return do_indent(a, v, out);
    case F_COUNT_: break;
  }
  return rt_fail(r, at, ML_E_ARG, "filter not implemented");
}

ml_status apply_test(rt* r, const node* at, int id, const jv& v, const jv* args, size_t nargs, bool* out) {
  argv a{r, at, test_names[id], args, nargs, nullptr, nullptr, 0};
  const bool takes_arg = id == T_DIVISIBLEBY || id == T_EQ || id == T_EQUALTO || id == T_NE || id == T_LT || id == T_LESSTHAN ||
                         id == T_LE || id == T_GT || id == T_GREATERTHAN || id == T_GE || id == T_IN || id == T_SAMEAS;
  if (nargs > (takes_arg ? 1u : 0u))
    return rt_fail(r, at, ML_E_ARG, "test '%s' takes %d argument(s), got %zu", test_names[id], takes_arg ? 1 : 0, nargs);
  auto need1 = [&]() -> ml_status {
    if (nargs < 1) return rt_fail(r, at, ML_E_ARG, "test '%s' needs an argument", test_names[id]);
    return ML_OK;
  };
  switch ((test_id)id) {
    case T_DEFINED: *out = v.k != vk::undef; return ML_OK;
    case T_UNDEFINED: *out = v.k == vk::undef; return ML_OK;
    case T_NONE: *out = v.k == vk::none; return ML_OK;
    case T_BOOLEAN: *out = v.k == vk::boolean; return ML_OK;
    case T_TRUE: *out = v.k == vk::boolean && v.b; return ML_OK;
    case T_FALSE: *out = v.k == vk::boolean && !v.b; return ML_OK;
    case T_STRING: *out = v.k == vk::str; return ML_OK;
    case T_NUMBER: *out = is_number(v); return ML_OK;
    case T_INTEGER: *out = v.k == vk::integer; return ML_OK;
    case T_FLOAT: *out = v.k == vk::real; return ML_OK;
    case T_MAPPING: *out = v.k == vk::dict; return ML_OK;
    // jinja2: Undefined is iterable (it iterates as empty) and a sequence (it has len and __getitem__).
    case T_ITERABLE: *out = v.k == vk::str || v.k == vk::list || v.k == vk::dict || v.k == vk::ns || v.k == vk::undef; return ML_OK;
    case T_SEQUENCE: *out = v.k == vk::str || v.k == vk::list || v.k == vk::dict || v.k == vk::undef; return ML_OK;
    case T_CALLABLE: *out = v.k == vk::macro || v.k == vk::func || v.k == vk::method; return ML_OK;
    case T_ESCAPED: *out = false; return ML_OK;
    case T_LOWER: case T_UPPER: {
      if (v.k != vk::str) return rt_fail(r, at, ML_E_ARG, "test '%s' needs a string", test_names[id]);
      bool cased = false, ok = true;
      for (size_t i = 0; i < v.n && ok; ++i) {
        char c = v.s[i];
        if (id == T_LOWER ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z')) ok = false;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) cased = true;
      }
      *out = ok && cased;
      return ML_OK;
    }
    case T_ODD: case T_EVEN: case T_DIVISIBLEBY: {
      int64_t d = 2;
      if (id == T_DIVISIBLEBY) {
        ML_TRY(need1());
        ML_TRY(int_arg(a, args[0], "the divisor", &d));
        if (d == 0) return rt_fail(r, at, ML_E_ARG, "divisibleby: division by zero");
      }
      if (v.k == vk::integer || v.k == vk::boolean) {
        int64_t x = v.k == vk::integer ? v.i : v.b;
        int64_t m = d == -1 ? 0 : x % d;
        *out = id == T_ODD ? m != 0 : m == 0;
      } else if (v.k == vk::real) {
        double m = std::fmod(v.f, (double)d);
        *out = id == T_ODD ? m != 0 : m == 0;
      } else {
        return rt_fail(r, at, ML_E_ARG, "test '%s' needs a number, not %s", test_names[id], type_name(v));
      }
      return ML_OK;
    }
    case T_EQ: case T_EQUALTO: case T_NE: case T_LT: case T_LESSTHAN: case T_LE: case T_GT: case T_GREATERTHAN: case T_GE: {
      ML_TRY(need1());
      op o = id == T_EQ || id == T_EQUALTO ? op::eq : id == T_NE ? op::ne : id == T_LT || id == T_LESSTHAN ? op::lt
           : id == T_LE ? op::le : id == T_GT || id == T_GREATERTHAN ? op::gt : op::ge;
      return compare_values(r, at, o, v, args[0], out);
    }
    case T_IN: ML_TRY(need1()); return contains(r, at, args[0], v, out);
    case T_SAMEAS:
      ML_TRY(need1());
      // Identity: meaningful for None, True, False (and the same container).
      if (v.k != args[0].k) *out = false;
      else if (v.k == vk::none || v.k == vk::undef) *out = true;
      else if (v.k == vk::boolean) *out = v.b == args[0].b;
      else if (v.k == vk::list) *out = v.l == args[0].l;
      else if (v.k == vk::dict || v.k == vk::ns) *out = v.d == args[0].d;
      else *out = equal(v, args[0]);
      return ML_OK;
    case T_COUNT_: break;
  }
  return rt_fail(r, at, ML_E_ARG, "test not implemented");
}

// ---- methods ------------------------------------------------------------------------------------

namespace {
const char* const str_methods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper", "lower",
                                   "title", "capitalize", "replace", "find", "rfind", "count", "join", "format", "splitlines",
                                   "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper", "center", "index"};
const char* const dict_methods[] = {"items", "keys", "values", "get"};
// Mutators the sandbox refuses (reported when called).
const char* const unsafe_methods[] = {"append", "pop", "insert", "extend", "remove", "sort", "reverse", "clear", "update",
                                      "setdefault", "popitem", "add", "discard"};

bool in_list(const char* const* names, size_t count, const char* s, size_t n, const char** out) {
  for (size_t i = 0; i < count; ++i)
    if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) {
      *out = names[i];
      return true;
    }
  return false;
}
}  // namespace

bool lookup_method(rt* r, const jv& v, const char* name, size_t n, jv* out, bool* nomem) {
  const char* found = nullptr;
  bool ok = false;
  if (v.k == vk::str) ok = in_list(str_methods, sizeof str_methods / sizeof *str_methods, name, n, &found);
  else if (v.k == vk::dict) ok = in_list(dict_methods, sizeof dict_methods / sizeof *dict_methods, name, n, &found);
  else if (v.k == vk::ns && v.tuple) ok = n == 5 && memcmp(name, "cycle", 5) == 0 && (found = "cycle");  // loop.cycle
  if (!ok && (v.k == vk::list || v.k == vk::dict))
    ok = in_list(unsafe_methods, sizeof unsafe_methods / sizeof *unsafe_methods, name, n, &found);
  if (!ok) return false;
  jv* recv = ml_bump_new<jv>(rt_bump(r), v);
  if (!recv) {
    *nomem = true;
    return false;
  }
  jv m;
  m.k = vk::method, m.recv = recv, m.name = found;
  *out = m;
  return true;
}

ml_status call_method(rt* r, const node* at, const jv& m, const jv* args, size_t nargs, const char* const* kw,
                      const jv* kwv, size_t nkw, jv* out) {
  const jv& v = *m.recv;
  const char* name = m.name;
  argv a{r, at, name, args, nargs, kw, kwv, nkw};
  auto is = [&](const char* s) { return strcmp(name, s) == 0; };
  for (const char* u : unsafe_methods)
    if (is(u) && (v.k == vk::list || v.k == vk::dict) && !(v.k == vk::dict && false))
      return rt_fail(r, at, ML_E_ARG, "access to attribute '%s' of '%s' object is unsafe", name, type_name(v));
  if (v.k == vk::ns && is("cycle")) {
    if (nargs == 0) return rt_fail(r, at, ML_E_ARG, "loop.cycle needs at least one argument");
    const jv* idx = dict_get_str(v.d, "index0", 6);
    *out = args[idx ? (size_t)idx->i % nargs : 0];
    return ML_OK;
  }
  if (v.k == vk::dict) {
    if (is("get")) {
      if (nargs < 1) return rt_fail(r, at, ML_E_ARG, "get expected at least 1 argument");
      const jv* x = dict_get(v.d, args[0]);
      *out = x ? *x : nargs > 1 ? args[1] : v_none();
      return ML_OK;
    }
    ml_vec<jv> items;
    for (size_t i = 0; i < v.d->n; ++i) {
      jv x;
      if (is("items")) {
        jv pair[2] = {v.d->keys[i], v.d->vals[i]};
        if (!new_list(rt_bump(r), pair, 2, &x)) return rt_nomem(r);
        x.tuple = true;
      } else {
        x = is("keys") ? v.d->keys[i] : v.d->vals[i];
      }
      if (!items.push(x)) return rt_nomem(r);
    }
    return make_list(r, items, out);
  }
  // str methods
  if (is("strip")) return do_strip(a, v, true, true, out);
  if (is("lstrip")) return do_strip(a, v, true, false, out);
  if (is("rstrip")) return do_strip(a, v, false, true, out);
  if (is("split")) return do_split(a, v, false, out);
  if (is("rsplit")) return do_split(a, v, true, out);
  if (is("upper")) return recase(r, v, casing::upper, out);
  if (is("lower")) return recase(r, v, casing::lower, out);
  if (is("title")) return recase(r, v, casing::py_title, out);
  if (is("capitalize")) return recase(r, v, casing::capitalize, out);
  if (is("replace")) return do_replace(a, v, out, 0);
  if (is("format")) return py_format(a, v, out);
  if (is("startswith") || is("endswith")) {
    if (nargs != 1) return rt_fail(r, at, ML_E_ARG, "%s takes exactly one argument (start/end are not supported)", name);
    const jv& p = args[0];
    ml_vec<jv> cands;
    if (p.k == vk::str) {
      if (!cands.push(p)) return rt_nomem(r);
    } else if (p.k == vk::list && p.tuple) {
      for (size_t i = 0; i < p.l->n; ++i) {
        ML_TRY(need_str(a, p.l->items[i], "each prefix"));
        if (!cands.push(p.l->items[i])) return rt_nomem(r);
      }
    } else {
      return rt_fail(r, at, ML_E_ARG, "%s arg must be str or a tuple of str, not %s", name, type_name(p));
    }
    bool hit = false;
    for (size_t i = 0; i < cands.size() && !hit; ++i) {
      const jv& c = cands[i];
      if (c.n > v.n) continue;
      hit = memcmp(is("startswith") ? v.s : v.s + v.n - c.n, c.s, c.n) == 0;
    }
    *out = v_bool(hit);
    return ML_OK;
  }
  if (is("find") || is("rfind") || is("index") || is("count")) {
    if (nargs != 1) return rt_fail(r, at, ML_E_ARG, "%s takes exactly one argument here", name);
    ML_TRY(need_str(a, args[0], "the substring"));
    const jv& s = args[0];
    if (is("count")) {
      int64_t c = 0;
      if (s.n == 0) c = (int64_t)utf8_len(v.s, v.n) + 1;
      else
        for (size_t i = 0; (i = find(v.s, v.n, s.s, s.n, i)) != (size_t)-1; i += s.n) ++c;
      *out = v_int(c);
      return ML_OK;
    }
    size_t pos = (size_t)-1;
    if (is("rfind")) {
      for (size_t i = 0; (i = find(v.s, v.n, s.s, s.n, i)) != (size_t)-1; ++i) {
        pos = i;
        if (i >= v.n) break;
      }
    } else {
      pos = find(v.s, v.n, s.s, s.n, 0);
    }
    if (pos == (size_t)-1 && is("index")) return rt_fail(r, at, ML_E_ARG, "substring not found");
    *out = v_int(pos == (size_t)-1 ? -1 : (int64_t)utf8_len(v.s, pos));
    return ML_OK;
  }
  if (is("join")) {
    if (nargs != 1) return rt_fail(r, at, ML_E_ARG, "join takes exactly one argument");
    ml_vec<jv> items;
    ML_TRY(iterate(r, at, args[0], &items));
    ml_vec<char> t;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].k != vk::str)
        return rt_fail(r, at, ML_E_ARG, "sequence item %zu: expected str instance, %s found", i, type_name(items[i]));
      if ((i && !t.append(v.s, v.n)) || !t.append(items[i].s, items[i].n)) return rt_nomem(r);
      if (t.size() > ML_TEMPLATE_MAX_OUTPUT) break;
    }
    return make_str(r, t, out);
  }
  if (is("splitlines")) {
    ml_vec<jv> lines;
    for (size_t i = 0; i < v.n;) {
      size_t j = i;
      while (j < v.n && v.s[j] != '\n' && v.s[j] != '\r') ++j;
      if (!lines.push(v_str(v.s + i, j - i))) return rt_nomem(r);
      if (j >= v.n) break;
      i = j + ((v.s[j] == '\r' && j + 1 < v.n && v.s[j + 1] == '\n') ? 2 : 1);
    }
    return make_list(r, lines, out);
  }
  if (is("center")) {
    int64_t w = 0;
    ML_TRY(int_arg(a, arg(a, 0, "width", v_undef()), "width", &w));
    jv fill = arg(a, 1, "fillchar", v_str(" ", 1));
    ML_TRY(need_str(a, fill, "fillchar"));
    return center(a, v, w, fill, out);
  }
  // is* predicates (ASCII classes; non-ASCII letters count as alphabetic).
  bool any = v.n > 0, all = v.n > 0, cased = false;
  for (size_t i = 0; i < v.n; ++i) {
    char c = v.s[i];
    bool ok;
    size_t l;
    if (is("isdigit")) ok = c >= '0' && c <= '9';
    else if (is("isalpha")) ok = is_alpha(c);
    else if (is("isalnum")) ok = is_alpha(c) || (c >= '0' && c <= '9');
    else if (is("isspace")) ok = is_space_at(v.s + i, v.n - i, &l);
    else if (is("islower")) ok = !(c >= 'A' && c <= 'Z');
    else ok = !(c >= 'a' && c <= 'z');
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) cased = true;
    all = all && ok;
  }
  if (is("islower") || is("isupper")) all = all && cased;
  (void)any;
  *out = v_bool(all);
  return ML_OK;
}

}  // namespace jj
