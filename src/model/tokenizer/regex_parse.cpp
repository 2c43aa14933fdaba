// The pre-tokenizer regex engine's parser (regex_impl.h): the pattern into an AST of nodes, its
// character classes into the compiled regex. regex.h gives the syntax.
#include "model/tokenizer/regex_impl.h"

#include "model/tokenizer/unicode.h"
#include "model/tokenizer/unicode_data.h"

namespace ml_rx {

uint32_t fold_next(uint32_t cp) {
  uint32_t lo = 0, hi = ml_fold_orbit_n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (ml_fold_orbit_from[mid] < cp) lo = mid + 1;
    else hi = mid;
  }
  return lo < ml_fold_orbit_n && ml_fold_orbit_from[lo] == cp ? ml_fold_orbit_to[lo] : cp;
}

namespace {

// --- Parser -------------------------------------------------------------------------------------

struct parser {
  const char* p;
  size_t n, i = 0;
  ml_regex* re;
  ml_vec<node>* nodes;
  ml_error* err;

  ml_status fail(size_t at, const char* what) {
    return ml_fail(err, ML_E_FORMAT, "regex offset %zu: %s", at, what);
  }
  ml_status nomem() { return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern"); }

  bool more() const { return i < n; }
  uint32_t peek() const {
    size_t k = i;
    return ml_utf8_next(p, n, &k);
  }
  uint32_t take() { return ml_utf8_next(p, n, &i); }

  ml_status add(const node& nd, uint32_t* id) {
    if (nodes->size() >= kMaxProgram) return fail(i, "pattern too large");
    if (!nodes->push(nd)) return nomem();
    *id = (uint32_t)nodes->size() - 1;
    return ML_OK;
  }

  ml_status hex(size_t start, size_t digits_min, size_t digits_max, char close, uint32_t* out) {
    uint32_t v = 0;
    size_t k = 0;
    while (i < n && k < digits_max) {
      char c = p[i];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) break;
      v = v * 16 + (uint32_t)d;
      ++i, ++k;
      if (v > 0x10FFFF) return fail(start, "code point escape above U+10FFFF");
    }
    if (k < digits_min) return fail(start, "malformed hexadecimal escape");
    if (close) {
      if (i >= n || p[i] != close) return fail(start, "malformed \\x{...} escape");
      ++i;
    }
    if (v >= 0xD800 && v <= 0xDFFF) return fail(start, "surrogate code point escape");
    *out = v;
    return ML_OK;
  }

  // \p{..} / \P{..} (i is after the letter): a category mask.
  ml_status property(size_t at, bool* neg, uint32_t* mask) {
    if (i >= n || p[i] != '{') {
      // Oniguruma also accepts no one-letter form; refuse.
      return fail(at, "\\p needs braces: \\p{L}");
    }
    ++i;
    if (i < n && p[i] == '^') *neg = !*neg, ++i;
    char name[40];
    size_t k = 0;
    while (i < n && p[i] != '}') {
      char c = p[i++];
      if (c == ' ' || c == '_' || c == '-') continue;
      if (k + 1 >= sizeof name) return fail(at, "unknown property name");
      name[k++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    if (i >= n) return fail(at, "unterminated \\p{...}");
    ++i;
    name[k] = 0;
    static const char* const kCats[30] = {"cn", "lu", "ll", "lt", "lm", "lo", "mn", "mc", "me", "nd",
                                          "nl", "no", "pc", "pd", "ps", "pe", "pi", "pf", "po", "sm",
                                          "sc", "sk", "so", "zs", "zl", "zp", "cc", "cf", "cs", "co"};
    static const char* const kLong[30] = {
        "unassigned", "uppercaseletter", "lowercaseletter", "titlecaseletter", "modifierletter", "otherletter",
        "nonspacingmark", "spacingmark", "enclosingmark", "decimalnumber", "letternumber", "othernumber",
        "connectorpunctuation", "dashpunctuation", "openpunctuation", "closepunctuation", "initialpunctuation",
        "finalpunctuation", "otherpunctuation", "mathsymbol", "currencysymbol", "modifiersymbol", "othersymbol",
        "spaceseparator", "lineseparator", "paragraphseparator", "control", "format", "surrogate", "privateuse"};
    auto eq = [&](const char* s) {
      for (size_t j = 0;; ++j) {
        if (s[j] != name[j]) return false;
        if (!s[j]) return true;
      }
    };
    for (int c = 0; c < 30; ++c)
      if (eq(kCats[c]) || eq(kLong[c])) {
        *mask = 1u << c;
        return ML_OK;
      }
    // One-letter groups: the categories starting with that letter.
    static const char* const kGroups[7][2] = {{"l", "letter"}, {"m", "mark"}, {"n", "number"}, {"p", "punctuation"},
                                              {"s", "symbol"}, {"z", "separator"}, {"c", "other"}};
    for (int g = 0; g < 7; ++g)
      if (eq(kGroups[g][0]) || eq(kGroups[g][1])) {
        uint32_t m = 0;
        for (int c = 0; c < 30; ++c)
          if (kCats[c][0] == kGroups[g][0][0]) m |= 1u << c;
        *mask = m;
        return ML_OK;
      }
    if (eq("lc") || eq("l&") || eq("casedletter")) {
      *mask = 1u << ML_UCAT_Lu | 1u << ML_UCAT_Ll | 1u << ML_UCAT_Lt;
      return ML_OK;
    }
    if (eq("any")) {
      *mask = (1u << 30) - 1;
      return ML_OK;
    }
    return fail(at, "unknown or unsupported property in \\p{...} (general categories only)");
  }

  // A class-like escape (\s \S \d \D \w \W \p \P) at i (after the backslash): *is = false if not one.
  ml_status class_escape(size_t at, char c, bool* is, citem* it) {
    *is = true;
    it->lo = it->hi = 0;
    switch (c) {
      case 's': *it = {CI_WS, false, 0, 0}; return ML_OK;
      case 'S': *it = {CI_WS, true, 0, 0}; return ML_OK;
      case 'd': *it = {CI_CATS, false, 1u << ML_UCAT_Nd, 0}; return ML_OK;
      case 'D': *it = {CI_CATS, true, 1u << ML_UCAT_Nd, 0}; return ML_OK;
      case 'w':
      case 'W': {
        uint32_t m = 1u << ML_UCAT_Lu | 1u << ML_UCAT_Ll | 1u << ML_UCAT_Lt | 1u << ML_UCAT_Lm | 1u << ML_UCAT_Lo |
                     1u << ML_UCAT_Mn | 1u << ML_UCAT_Mc | 1u << ML_UCAT_Me | 1u << ML_UCAT_Nd | 1u << ML_UCAT_Nl |
                     1u << ML_UCAT_No | 1u << ML_UCAT_Pc;
        *it = {CI_CATS, c == 'W', m, 0};
        return ML_OK;
      }
      case 'p':
      case 'P': {
        bool neg = c == 'P';
        uint32_t mask = 0;
        ML_TRY(property(at, &neg, &mask));
        *it = {CI_CATS, neg, mask, 0};
        return ML_OK;
      }
      default: *is = false; return ML_OK;
    }
  }

  // A single-character escape (i is after the letter c): the code point, or an error for what is
  // refused. at: offset of the backslash.
  ml_status char_escape(size_t at, uint32_t c, bool in_class, uint32_t* cp) {
    switch (c) {
      case 't': *cp = '\t'; return ML_OK;
      case 'n': *cp = '\n'; return ML_OK;
      case 'r': *cp = '\r'; return ML_OK;
      case 'f': *cp = '\f'; return ML_OK;
      case 'v': *cp = '\v'; return ML_OK;
      case 'a': *cp = 7; return ML_OK;
      case 'e': *cp = 27; return ML_OK;
      case '0': {
        uint32_t v = 0;
        for (int k = 0; k < 2 && i < n && p[i] >= '0' && p[i] <= '7'; ++k) v = v * 8 + (uint32_t)(p[i++] - '0');
        *cp = v;
        return ML_OK;
      }
      case 'x':
        if (i < n && p[i] == '{') {
          ++i;
          return hex(at, 1, 8, '}', cp);
        }
        return hex(at, 1, 2, 0, cp);
      case 'u': return hex(at, 4, 4, 0, cp);
      default: break;
    }
    if (c >= '1' && c <= '9') {
      char msg[64];
      snprintf_backref(msg, sizeof msg, c);
      return fail(at, msg);
    }
    if (c == 'b' || c == 'B') return fail(at, in_class ? "\\b in a class is not supported" : "word boundary \\b / \\B is not supported");
    if (c == 'k') return fail(at, "named backreference \\k is not supported");
    if (c == 'g') return fail(at, "subexpression call \\g is not supported");
    if (c == 'K') return fail(at, "\\K (keep) is not supported");
    if (c == 'G') return fail(at, "\\G is not supported");
    if (c == 'h' || c == 'H') return fail(at, "\\h / \\H (Oniguruma hex digit) is not supported");
    if (c == 'R' || c == 'X' || c == 'N' || c == 'O' || c == 'y' || c == 'Y')
      return fail(at, "this escape (\\R \\X \\N \\O \\y \\Y) is not supported");
    if (c == 'A' || c == 'z' || c == 'Z') return fail(at, "anchor escape inside a class");
    if (c < 0x80 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return fail(at, "unknown escape");
    *cp = c;  // escaped punctuation, or any non-ASCII character: itself
    return ML_OK;
  }

  static void snprintf_backref(char* msg, size_t cap, uint32_t digit) {
    const char* a = "backreference \\";
    size_t k = 0;
    while (*a && k + 1 < cap) msg[k++] = *a++;
    if (k + 1 < cap) msg[k++] = (char)digit;
    const char* b = " is not supported";
    while (*b && k + 1 < cap) msg[k++] = *b++;
    msg[k] = 0;
  }

  ml_status add_item(const citem& it) {
    if (!re->items.push(it)) return nomem();
    return ML_OK;
  }

  // [...] (i is after '['): fills at as an A_CLASS atom.
  ml_status parse_class(size_t at, bool icase, atom* out) {
    cclass cl{(uint32_t)re->items.size(), 0, false};
    if (i < n && p[i] == '^') cl.neg = true, ++i;
    if (i < n && p[i] == ']') return fail(i, "']' at the start of a class (escape it as \\])");
    for (;;) {
      if (i >= n) return fail(at, "unterminated character class");
      size_t here = i;
      char c = p[i];
      if (c == ']') {
        ++i;
        break;
      }
      if (c == '[') return fail(here, "nested class or POSIX bracket [:...:] is not supported");
      if (c == '&' && i + 1 < n && p[i + 1] == '&') return fail(here, "class intersection && is not supported");
      uint32_t lo;
      if (c == '\\') {
        ++i;
        if (i >= n) return fail(here, "trailing backslash");
        uint32_t e = take();
        bool is = false;
        citem it;
        if (e < 0x80) ML_TRY(class_escape(here, (char)e, &is, &it));
        if (is) {
          ML_TRY(add_item(it));
          if (i < n && p[i] == '-' && i + 1 < n && p[i + 1] != ']') return fail(here, "range from a class escape");
          continue;
        }
        ML_TRY(char_escape(here, e, true, &lo));
      } else {
        lo = take();
      }
      uint32_t hi = lo;
      if (i + 1 < n && p[i] == '-' && p[i + 1] != ']') {
        size_t dash = i;
        ++i;
        if (p[i] == '\\') {
          ++i;
          if (i >= n) return fail(here, "trailing backslash");
          uint32_t e = take();
          if (e == 's' || e == 'S' || e == 'd' || e == 'D' || e == 'w' || e == 'W' || e == 'p' || e == 'P')
            return fail(dash, "range to a class escape");
          ML_TRY(char_escape(dash + 1, e, true, &hi));
        } else if (p[i] == '[') {
          return fail(i, "nested class is not supported");
        } else {
          hi = take();
        }
        if (hi < lo) return fail(here, "empty range in class (end before start)");
      }
      ML_TRY(add_item({CI_RANGE, false, lo, hi}));
    }
    cl.count = (uint32_t)re->items.size() - cl.first;
    if (!re->classes.push(cl)) return nomem();
    *out = atom{};
    out->kind = A_CLASS;
    out->icase = icase;
    out->cls = (uint32_t)re->classes.size() - 1;
    return ML_OK;
  }

  void char_atom(uint32_t cp, bool icase, atom* out) {
    *out = atom{};
    out->kind = A_CHAR;
    out->cps[0] = cp;
    out->ncp = 1;
    if (icase)
      for (uint32_t c = fold_next(cp); c != cp && out->ncp < 4; c = fold_next(c)) out->cps[out->ncp++] = c;
  }

  // Parses a quantifier at i ({ n , m } forms); *ok false (i unchanged) when the text is not one,
  // in which case '{' is a literal as in Oniguruma.
  bool brace_quant(uint32_t* mn, uint32_t* mx) {
    size_t k = i + 1;
    auto num = [&](uint32_t* v) {
      size_t s = k;
      uint64_t x = 0;
      while (k < n && p[k] >= '0' && p[k] <= '9') {
        x = x * 10 + (uint64_t)(p[k] - '0');
        if (x > 100000000) x = 100000000;
        ++k;
      }
      *v = (uint32_t)x;
      return k > s;
    };
    uint32_t a = 0, b = 0;
    bool has_a = num(&a);
    if (k < n && p[k] == '}') {
      if (!has_a) return false;
      *mn = *mx = a;
    } else if (k < n && p[k] == ',') {
      ++k;
      bool has_b = num(&b);
      if (!has_a && !has_b) return false;
      if (k >= n || p[k] != '}') return false;
      *mn = has_a ? a : 0;
      *mx = has_b ? b : kInf;
    } else {
      return false;
    }
    i = k + 1;
    return true;
  }

  ml_status parse_alt(int depth, bool icase, uint32_t* out);

  ml_status parse_atom(int depth, bool* icase, uint32_t* out, bool* quantifiable, bool* got) {
    *got = true;
    *quantifiable = true;
    size_t at = i;
    uint32_t c = take();
    node nd{};
    nd.next = kInf;
    switch (c) {
      case '(': {
        if (depth >= kMaxDepth) return fail(at, "groups nested too deeply");
        bool inner_icase = *icase;
        if (i < n && p[i] == '?') {
          ++i;
          if (i >= n) return fail(at, "unterminated group");
          char k = p[i];
          if (k == ':') {
            ++i;
          } else if (k == '=' || k == '!') {
            ++i;
            uint32_t kid;
            ML_TRY(parse_alt(depth + 1, inner_icase, &kid));
            if (i >= n || p[i] != ')') return fail(at, "unterminated lookahead");
            ++i;
            nd.kind = N_LOOK;
            nd.flag = k == '!';
            nd.kid = kid;
            *quantifiable = false;
            return add(nd, out);
          } else if (k == '<') {
            if (i + 1 < n && (p[i + 1] == '=' || p[i + 1] == '!')) return fail(at, "lookbehind (?<= / (?<! is not supported");
            return fail(at, "named group (?<name>...) is not supported");
          } else if (k == 'P' || k == '\'') {
            return fail(at, "named group is not supported");
          } else if (k == '>') {
            return fail(at, "atomic group (?>...) is not supported");
          } else if (k == '#') {
            return fail(at, "comment group (?#...) is not supported");
          } else if (k == 'i' || k == '-') {
            bool on = true;
            while (i < n && (p[i] == 'i' || p[i] == '-')) {
              if (p[i] == '-') on = false;
              else inner_icase = on;
              ++i;
            }
            if (i < n && p[i] == ')') {
              // (?i) / (?-i): applies to the rest of the enclosing group.
              ++i;
              *icase = inner_icase;
              *got = false;
              return ML_OK;
            }
            if (i >= n || p[i] != ':') return fail(at, "inline option other than i is not supported");
            ++i;
          } else if ((k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z')) {
            return fail(at, "inline option other than i is not supported");
          } else {
            return fail(at, "this group construct (?...) is not supported");
          }
        }
        uint32_t kid;
        ML_TRY(parse_alt(depth + 1, inner_icase, &kid));
        if (i >= n || p[i] != ')') return fail(at, "missing ')'");
        ++i;
        *out = kid;
        return ML_OK;
      }
      case ')': return fail(at, "unmatched ')'");
      case '*':
      case '+':
      case '?': return fail(at, "quantifier without a target");
      case '[':
        nd.kind = N_ATOM;
        ML_TRY(parse_class(at, *icase, &nd.at));
        return add(nd, out);
      case '.':
        nd.kind = N_ATOM;
        nd.at.kind = A_ANY;
        return add(nd, out);
      case '^': nd.kind = N_BOL, *quantifiable = false; return add(nd, out);
      case '$': nd.kind = N_EOL, *quantifiable = false; return add(nd, out);
      case '\\': {
        if (i >= n) return fail(at, "trailing backslash");
        uint32_t e = take();
        if (e == 'A' || e == 'z' || e == 'Z') {
          nd.kind = e == 'A' ? N_BOS : e == 'z' ? N_EOS : N_EOSNL;
          *quantifiable = false;
          return add(nd, out);
        }
        bool is = false;
        citem it;
        if (e < 0x80) ML_TRY(class_escape(at, (char)e, &is, &it));
        if (is) {
          cclass cl{(uint32_t)re->items.size(), 1, false};
          ML_TRY(add_item(it));
          if (!re->classes.push(cl)) return nomem();
          nd.kind = N_ATOM;
          nd.at.kind = A_CLASS;
          nd.at.icase = *icase;
          nd.at.cls = (uint32_t)re->classes.size() - 1;
          return add(nd, out);
        }
        uint32_t cp;
        ML_TRY(char_escape(at, e, false, &cp));
        nd.kind = N_ATOM;
        char_atom(cp, *icase, &nd.at);
        return add(nd, out);
      }
      case '{': {
        size_t save = i;
        i = at;
        uint32_t a, b;
        if (brace_quant(&a, &b)) return fail(at, "quantifier without a target");
        i = save;
        break;
      }
      default: break;
    }
    nd.kind = N_ATOM;
    char_atom(c, *icase, &nd.at);
    return add(nd, out);
  }

  ml_status parse_concat(int depth, bool* icase, uint32_t* out) {
    uint32_t head = kInf, tail = kInf;
    while (i < n && p[i] != '|' && p[i] != ')') {
      uint32_t a;
      bool quantifiable, got;
      ML_TRY(parse_atom(depth, icase, &a, &quantifiable, &got));
      if (!got) continue;
      // Quantifiers.
      if (i < n && (p[i] == '*' || p[i] == '+' || p[i] == '?' || p[i] == '{')) {
        size_t qat = i;
        uint32_t mn = 0, mx = kInf;
        bool is = true;
        if (p[i] == '*') mn = 0, ++i;
        else if (p[i] == '+') mn = 1, ++i;
        else if (p[i] == '?') mx = 1, ++i;
        else is = brace_quant(&mn, &mx);
        if (is) {
          if (!quantifiable) return fail(qat, "quantifier on an anchor or lookahead is not supported");
          if (mn > kMaxRepeat || (mx != kInf && mx > kMaxRepeat))
            return fail(qat, "repeat count above the limit of 1000");
          if (mx < mn) return fail(qat, "repeat range {n,m} with m < n");
          bool brace = p[qat] == '{', greedy = true, optional = false, lazy_optional = false;
          if (i < n && p[i] == '?') {
            // Oniguruma: x{n}? is (?:x{n})? (a fixed interval is greedy only); x{n,m}? is lazy.
            if (brace && mn == mx) optional = true;
            else greedy = false;
            ++i;
            if (optional && i < n && p[i] == '?') lazy_optional = true, ++i;
          } else if (i < n && p[i] == '+') {
            return fail(i, brace ? "nested quantifier is not supported" : "possessive quantifier is not supported");
          }
          if (i < n && (p[i] == '*' || p[i] == '+' || p[i] == '?')) return fail(i, "nested quantifier is not supported");
          if (i < n && p[i] == '{') {
            size_t save = i;
            uint32_t x, y;
            if (brace_quant(&x, &y)) return fail(save, "nested quantifier is not supported");
          }
          node r{};
          r.kind = N_REPEAT;
          r.flag = greedy;
          r.min = mn;
          r.max = mx;
          r.kid = a;
          r.next = kInf;
          ML_TRY(add(r, &a));
          if (optional) {
            r.flag = !lazy_optional;
            r.min = 0;
            r.max = 1;
            r.kid = a;
            ML_TRY(add(r, &a));
          }
        }
      }
      if (head == kInf) head = a;
      else (*nodes)[tail].next = a;
      tail = a;
      while ((*nodes)[tail].next != kInf) tail = (*nodes)[tail].next;  // never: atoms are fresh
    }
    node c{};
    c.next = kInf;
    if (head == kInf) {
      c.kind = N_EMPTY;
    } else {
      c.kind = N_CAT;
      c.kid = head;
    }
    return add(c, out);
  }
};

ml_status parser::parse_alt(int depth, bool icase, uint32_t* out) {
  uint32_t head = kInf, tail = kInf;
  for (;;) {
    uint32_t c = 0;
    ML_TRY(parse_concat(depth, &icase, &c));
    if (head == kInf) head = c;
    else (*nodes)[tail].next = c;
    tail = c;
    if (i < n && p[i] == '|') {
      ++i;
      continue;
    }
    break;
  }
  if ((*nodes)[head].next == kInf) {
    *out = head;
    return ML_OK;
  }
  node a{};
  a.kind = N_ALT;
  a.kid = head;
  a.next = kInf;
  return add(a, out);
}

}  // namespace

ml_status parse(const char* pattern, size_t len, ml_regex* re, ml_vec<node>* nodes, uint32_t* root, ml_error* err) {
  parser ps{pattern, len, 0, re, nodes, err};
  ML_TRY(ps.parse_alt(0, false, root));
  if (ps.i < len) return ps.fail(ps.i, "unmatched ')'");
  return ML_OK;
}

}  // namespace ml_rx
