// Python's str operations for the chat-template built-ins: strip, split, replace, case mapping
// (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic, one code point to one), center, str.format
// ({} / {0} / {name} fields only), HTML escaping. Strings are UTF-8; positions count code points
// where Python's do.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/chat/builtin_util.h"

namespace jj {
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || ((unsigned char)c >= 0x80); }
bool is_word(char c) { return is_alpha(c) || (c >= '0' && c <= '9') || c == '_'; }

namespace {

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

}  // namespace

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
    const bool start_before = start;
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
    if (c == 0xDF && m == c && how != casing::lower && (how == casing::upper || (how != casing::capitalize ? start_before : i == 0))) {
      // ß has no one-letter upper case: Python writes SS (upper) or Ss (title case).
      if (!t.append(how == casing::upper || how == casing::jinja_title ? "SS" : "Ss", 2)) return rt_nomem(r);
      i += l;
      continue;
    }
    if (m == c ? !t.append(v.s + i, l) : !put_cp(&t, m)) return rt_nomem(r);
    i += l;
  }
  return make_str(r, t, out);
}

namespace {
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

}  // namespace

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

}  // namespace jj
