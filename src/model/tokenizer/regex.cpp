// The pre-tokenizer regex engine: a parser into an AST, a compiler into a small instruction list,
// and a backtracking matcher with an explicit stack (no recursion over the input; recursion only
// over lookahead nesting, which the pattern bounds). See regex.h for the syntax and contract.
//
// Oniguruma semantics kept (its default Ruby syntax, as Hugging Face's tokenizers use it):
// - \s is the White_Space property; \d is Nd; \w is L, M, N and Pc (Unicode-aware by default).
// - . matches anything but \n; ^ and $ are line anchors (after / before \n, or the text's ends).
// - An iteration of a * or + loop that matches the empty string ends the loop.
// - (?i) compares by simple case folding (CaseFolding.txt C and S): a character matches when any
//   code point of its case-fold orbit does. Multi-character folds (ß ~ ss) are not done.
// Speed: single-character atoms under a quantifier (\p{L}+, \s*, [^\r\n]{1,3}) run as one counted
// instruction with one backtrack entry, so runs of 10,000 letters or spaces stay linear; category
// lookups are memoized on the last run table interval hit.
#include "model/tokenizer/regex.h"

#include <new>

#include "core/vec.h"
#include "model/tokenizer/unicode.h"
#include "model/tokenizer/unicode_data.h"

namespace {

constexpr size_t kMaxPattern = 16384;       // bytes of pattern
constexpr int kMaxDepth = 64;               // group nesting
constexpr uint32_t kMaxRepeat = 1000;       // n and m of {n,m}
constexpr size_t kMaxProgram = 100000;      // instructions after expanding counted repeats
constexpr uint64_t kStepBase = 1u << 22;    // step budget of one find: base + per code point
constexpr uint64_t kStepsPerCp = 1024;
constexpr size_t kStackBase = 1u << 20;     // backtrack entries of one find: base + per code point
constexpr size_t kStackPerCp = 4;
constexpr uint32_t kInf = 0xFFFFFFFFu;

// Class items: a range, a set of general categories, White_Space; each possibly complemented.
enum : uint8_t { CI_RANGE, CI_CATS, CI_WS };
struct citem {
  uint8_t kind;
  bool neg;
  uint32_t lo, hi;  // CI_RANGE: [lo, hi]; CI_CATS: lo = category bit mask
};
struct cclass {
  uint32_t first, count;  // items
  bool neg;
};

// Atoms: what one code point is tested against.
enum : uint8_t { A_CHAR, A_CLASS, A_ANY };
struct atom {
  uint8_t kind;
  uint8_t ncp;      // A_CHAR: 1..4 code points (the case-fold orbit under (?i))
  bool icase;       // A_CLASS under (?i)
  uint32_t cps[4];  // A_CHAR
  uint32_t cls;     // A_CLASS
  bool fast;        // A_CLASS: ascii[] holds the answer for code points below 128
  uint64_t ascii[2];
};

// AST.
enum : uint8_t { N_EMPTY, N_ATOM, N_CAT, N_ALT, N_REPEAT, N_LOOK, N_BOL, N_EOL, N_BOS, N_EOS, N_EOSNL };
struct node {
  uint8_t kind;
  bool flag;           // N_REPEAT: greedy; N_LOOK: negative
  atom at;             // N_ATOM
  uint32_t min, max;   // N_REPEAT
  uint32_t kid;        // N_REPEAT, N_LOOK: child; N_CAT, N_ALT: first child
  uint32_t next;       // next sibling in a N_CAT / N_ALT list (kInf: none)
};

// Instructions.
enum : uint8_t { I_ATOM, I_REPEAT, I_SPLIT, I_JMP, I_MARK, I_PROGRESS, I_LOOK, I_MATCH, I_BOL, I_EOL, I_BOS, I_EOS, I_EOSNL };
struct inst {
  uint8_t op;
  bool flag;       // I_SPLIT: unused; I_REPEAT: greedy; I_LOOK: negative
  atom at;         // I_ATOM, I_REPEAT
  uint32_t x, y;   // I_SPLIT: first, second; I_JMP: x; I_MARK/I_PROGRESS: register x, exit y; I_LOOK: end y
  uint32_t min, max;
};

// Backtrack entries.
enum : uint8_t { B_BRANCH, B_GREEDY, B_LAZY, B_REG };
struct bt {
  uint8_t kind;
  uint32_t pc;
  size_t pos;    // B_BRANCH: position; B_GREEDY/B_LAZY: start of the run; B_REG: old value
  uint32_t count;  // B_GREEDY/B_LAZY: the count now taken; B_REG: register
};

}  // namespace

struct ml_regex {
  ml_vec<inst> prog;
  ml_vec<cclass> classes;
  ml_vec<citem> items;
  ml_vec<atom> guards;  // I_SPLIT guards: the branch is tried only when one of these matches
  uint32_t nregs = 0;
};

namespace {

uint32_t fold_next(uint32_t cp) {
  uint32_t lo = 0, hi = ml_fold_orbit_n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (ml_fold_orbit_from[mid] < cp) lo = mid + 1;
    else hi = mid;
  }
  return lo < ml_fold_orbit_n && ml_fold_orbit_from[lo] == cp ? ml_fold_orbit_to[lo] : cp;
}

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

// --- Compiler -----------------------------------------------------------------------------------

struct compiler {
  const ml_vec<node>* nodes;
  ml_regex* re;
  ml_error* err;

  ml_status emit(const inst& in, uint32_t* at) {
    if (re->prog.size() >= kMaxProgram) return ml_fail(err, ML_E_FORMAT, "regex: pattern too large after expanding repeats (limit %zu instructions)", kMaxProgram);
    if (!re->prog.push(in)) return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern");
    if (at) *at = (uint32_t)re->prog.size() - 1;
    return ML_OK;
  }
  uint32_t here() const { return (uint32_t)re->prog.size(); }

  bool nullable(uint32_t id) const {
    const node& nd = (*nodes)[id];
    switch (nd.kind) {
      case N_ATOM: return false;
      case N_CAT:
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next)
          if (!nullable(k)) return false;
        return true;
      case N_ALT:
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next)
          if (nullable(k)) return true;
        return false;
      case N_REPEAT: return nd.min == 0 || nullable(nd.kid);
      default: return true;
    }
  }

  // The atoms one of which must match the first code point of any match of node id (at most 4);
  // false when unknown (nullable, anchors, lookahead, too many).
  bool first_set(uint32_t id, atom* g, uint32_t* ng) const {
    const node& nd = (*nodes)[id];
    switch (nd.kind) {
      case N_ATOM: {
        for (uint32_t q = 0; q < *ng; ++q)  // the same atom twice ('s|'t): once
          if (g[q].kind == nd.at.kind && g[q].ncp == nd.at.ncp && g[q].icase == nd.at.icase && g[q].cls == nd.at.cls &&
              g[q].cps[0] == nd.at.cps[0] && g[q].cps[1] == nd.at.cps[1] && g[q].cps[2] == nd.at.cps[2] &&
              g[q].cps[3] == nd.at.cps[3])
            return true;
        if (*ng >= 4) return false;
        g[(*ng)++] = nd.at;
        return true;
      }
      case N_REPEAT: return nd.min >= 1 && first_set(nd.kid, g, ng);
      case N_ALT:
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next)
          if (!first_set(k, g, ng)) return false;
        return true;
      case N_CAT:
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next) {
          const node& c = (*nodes)[k];
          if (c.kind == N_REPEAT && c.min == 0) {  // optional: its first characters, then what follows
            if (!first_set(c.kid, g, ng)) return false;
            continue;
          }
          return first_set(k, g, ng);
        }
        return false;
      default: return false;
    }
  }

  ml_status gen(uint32_t id) {
    const node& nd = (*nodes)[id];
    inst in{};
    switch (nd.kind) {
      case N_EMPTY: return ML_OK;
      case N_ATOM: in.op = I_ATOM, in.at = nd.at; return emit(in, nullptr);
      case N_BOL: in.op = I_BOL; return emit(in, nullptr);
      case N_EOL: in.op = I_EOL; return emit(in, nullptr);
      case N_BOS: in.op = I_BOS; return emit(in, nullptr);
      case N_EOS: in.op = I_EOS; return emit(in, nullptr);
      case N_EOSNL: in.op = I_EOSNL; return emit(in, nullptr);
      case N_CAT:
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next) ML_TRY(gen(k));
        return ML_OK;
      case N_ALT: {
        // SPLIT a, next; a: X; JMP end; next: SPLIT b, next2 ...; last: Z; end:
        ml_vec<uint32_t> jumps;
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next) {
          uint32_t split = kInf;
          if ((*nodes)[k].next != kInf) {
            in = inst{};
            in.op = I_SPLIT;
            atom g[4];
            uint32_t ng = 0;
            if (first_set(k, g, &ng)) {
              in.min = (uint32_t)re->guards.size();
              in.max = ng;
              for (uint32_t q = 0; q < ng; ++q)
                if (!re->guards.push(g[q])) return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern");
            }
            ML_TRY(emit(in, &split));
            re->prog[split].x = here();
          }
          ML_TRY(gen(k));
          if (split != kInf) {
            uint32_t j = 0;
            in = inst{};
            in.op = I_JMP;
            ML_TRY(emit(in, &j));
            if (!jumps.push(j)) return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern");
            re->prog[split].y = here();
          }
        }
        for (uint32_t j : jumps) re->prog[j].x = here();
        return ML_OK;
      }
      case N_LOOK: {
        uint32_t at = 0;
        in.op = I_LOOK;
        in.flag = nd.flag;
        ML_TRY(emit(in, &at));
        ML_TRY(gen(nd.kid));
        inst m{};
        m.op = I_MATCH;
        ML_TRY(emit(m, nullptr));
        re->prog[at].y = here();
        return ML_OK;
      }
      case N_REPEAT: {
        const node& kid = (*nodes)[nd.kid];
        if (kid.kind == N_ATOM) {
          in.op = I_REPEAT;
          in.flag = nd.flag;
          in.at = kid.at;
          in.min = nd.min;
          in.max = nd.max;
          return emit(in, nullptr);
        }
        for (uint32_t k = 0; k < nd.min; ++k) ML_TRY(gen(nd.kid));
        if (nd.max == kInf) {
          // L: SPLIT body, exit; body: [MARK r] X [PROGRESS r] JMP L; exit:
          bool guard = nullable(nd.kid);
          uint32_t reg = re->nregs;
          if (guard) ++re->nregs;
          uint32_t loop = 0;
          in.op = I_SPLIT;
          ML_TRY(emit(in, &loop));
          uint32_t body = here();
          if (guard) {
            inst m{};
            m.op = I_MARK;
            m.x = reg;
            ML_TRY(emit(m, nullptr));
          }
          ML_TRY(gen(nd.kid));
          uint32_t prog_at = kInf;
          if (guard) {
            inst m{};
            m.op = I_PROGRESS;
            m.x = reg;
            ML_TRY(emit(m, &prog_at));
          }
          inst j{};
          j.op = I_JMP;
          j.x = loop;
          ML_TRY(emit(j, nullptr));
          uint32_t exit = here();
          re->prog[loop].x = nd.flag ? body : exit;
          re->prog[loop].y = nd.flag ? exit : body;
          if (guard) re->prog[prog_at].y = exit;
          return ML_OK;
        }
        // Optional copies: SPLIT body, end; body: X; SPLIT body2, end; ... end:
        ml_vec<uint32_t> splits;
        for (uint32_t k = nd.min; k < nd.max; ++k) {
          uint32_t s = 0;
          in = inst{};
          in.op = I_SPLIT;
          ML_TRY(emit(in, &s));
          if (!splits.push(s)) return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern");
          uint32_t body = here();
          re->prog[s].x = body;  // patched below for laziness
          ML_TRY(gen(nd.kid));
        }
        uint32_t end = here();
        for (uint32_t s : splits) {
          uint32_t body = s + 1;
          re->prog[s].x = nd.flag ? body : end;
          re->prog[s].y = nd.flag ? end : body;
        }
        return ML_OK;
      }
      default: return ML_OK;
    }
  }
};

// --- Matcher ------------------------------------------------------------------------------------

struct matcher {
  const ml_regex* re = nullptr;
  const uint32_t* cps = nullptr;
  size_t n = 0;
  uint64_t steps = 0, budget = 0;
  ml_vec<bt> stack;
  ml_vec<size_t> regs;
  ml_error* err = nullptr;
  bool out_of_steps = false, oom = false, stack_full = false;
  size_t stack_limit = 0;
  // Memo of the last category run table interval.
  uint32_t lo = 1, hi = 0;
  uint8_t val = 0;

  uint8_t props(uint32_t cp) {
    if (cp < 256) return ml_ucat_latin1[cp];
    if (cp >= lo && cp <= hi) return val;
    if (cp > 0x10FFFF) return 0;
    uint32_t a = 0, b = ml_ucat_runs;
    while (b - a > 1) {
      uint32_t mid = (a + b) / 2;
      if (ml_ucat_starts[mid] <= cp) a = mid;
      else b = mid;
    }
    lo = ml_ucat_starts[a];
    hi = a + 1 < ml_ucat_runs ? ml_ucat_starts[a + 1] - 1 : 0x10FFFF;
    val = ml_ucat_vals[a];
    return val;
  }

  bool class_has(const cclass& cl, uint32_t c) {
    bool in = false;
    for (uint32_t k = 0; k < cl.count && !in; ++k) {
      const citem& it = re->items[cl.first + k];
      bool m;
      if (it.kind == CI_RANGE) m = c >= it.lo && c <= it.hi;
      else if (it.kind == CI_CATS) m = (it.lo >> (props(c) & 31)) & 1;
      else m = props(c) & 32;
      in = m != it.neg;
    }
    return in != cl.neg;
  }

  __attribute__((always_inline)) bool atom_match(const atom& a, uint32_t c) {
    switch (a.kind) {
      case A_CHAR:
        for (int k = 0; k < a.ncp; ++k)
          if (a.cps[k] == c) return true;
        return false;
      case A_ANY: return c != '\n';
      default: {
        if (c < 128 && a.fast) return (a.ascii[c >> 6] >> (c & 63)) & 1;
        const cclass& cl = re->classes[a.cls];
        if (class_has(cl, c)) return true;
        if (a.icase)
          for (uint32_t f = fold_next(c); f != c; f = fold_next(f))
            if (class_has(cl, f)) return true;
        return false;
      }
    }
  }

  bool push(const bt& b) {
    if (stack.size() >= stack_limit) {
      stack_full = true;
      return false;
    }
    if (!stack.push(b)) {
      oom = true;
      return false;
    }
    return true;
  }

  // Runs from pc at pos until I_MATCH; *end = the match's end. False: no match (or a failure:
  // out_of_steps / oom set).
  bool run(uint32_t pc, size_t pos, size_t* end) {
    size_t base = stack.size();
    const inst* prog = re->prog.data();
    for (;;) {
      if (++steps > budget) {
        out_of_steps = true;
        return false;
      }
      const inst& in = prog[pc];
      bool ok = true;
      switch (in.op) {
        case I_ATOM:
          if (pos < n && atom_match(in.at, cps[pos])) ++pos, ++pc;
          else ok = false;
          break;
        case I_REPEAT: {
          if (in.flag) {
            size_t k = 0;
            while (k < in.max && pos + k < n && atom_match(in.at, cps[pos + k])) ++k;
            steps += k / 8;
            if (k < in.min) {
              ok = false;
              break;
            }
            if (k > in.min && !push({B_GREEDY, pc, pos, (uint32_t)k})) return false;
            pos += k, ++pc;
          } else {
            size_t k = 0;
            while (k < in.min && pos + k < n && atom_match(in.at, cps[pos + k])) ++k;
            if (k < in.min) {
              ok = false;
              break;
            }
            if (k < in.max && !push({B_LAZY, pc, pos, (uint32_t)k})) return false;
            pos += k, ++pc;
          }
          break;
        }
        case I_SPLIT:
          if (in.max) {  // a guarded alternative: skipped unless its first character can match
            bool may = false;
            if (pos < n)
              for (uint32_t g = 0; g < in.max && !may; ++g) may = atom_match(re->guards[in.min + g], cps[pos]);
            if (!may) {
              pc = in.y;
              break;
            }
          }
          if (!push({B_BRANCH, in.y, pos, 0})) return false;
          pc = in.x;
          break;
        case I_JMP: pc = in.x; break;
        case I_MARK:
          if (!push({B_REG, 0, regs[in.x], in.x})) return false;
          regs[in.x] = pos;
          ++pc;
          break;
        case I_PROGRESS: pc = regs[in.x] == pos ? in.y : pc + 1; break;
        case I_LOOK: {
          size_t e;
          size_t mark = stack.size();
          bool m = run(pc + 1, pos, &e);  // depth bounded by the pattern's lookahead nesting
          if (out_of_steps || oom || stack_full) return false;
          // Lookahead is atomic: its backtrack entries are dropped (restoring registers).
          while (stack.size() > mark) {
            bt b = stack.back();
            stack.pop();
            if (b.kind == B_REG) regs[b.count] = b.pos;
          }
          if (m != in.flag) pc = in.y;
          else ok = false;
          break;
        }
        case I_MATCH: *end = pos; return true;
        case I_BOL: ok = pos == 0 || cps[pos - 1] == '\n', ++pc; break;
        case I_EOL: ok = pos == n || cps[pos] == '\n', ++pc; break;
        case I_BOS: ok = pos == 0, ++pc; break;
        case I_EOS: ok = pos == n, ++pc; break;
        case I_EOSNL: ok = pos == n || (pos + 1 == n && cps[pos] == '\n'), ++pc; break;
        default: ok = false;
      }
      if (ok) continue;
      // Backtrack.
      for (;;) {
        if (stack.size() == base) return false;
        bt b = stack.back();
        stack.pop();
        if (b.kind == B_BRANCH) {
          pc = b.pc, pos = b.pos;
          break;
        }
        if (b.kind == B_REG) {
          regs[b.count] = b.pos;
          continue;
        }
        const inst& r = prog[b.pc];
        if (b.kind == B_GREEDY) {
          uint32_t k = b.count - 1;
          if (k > r.min && !push({B_GREEDY, b.pc, b.pos, k})) return false;
          pos = b.pos + k, pc = b.pc + 1;
          break;
        }
        // B_LAZY: one more.
        size_t at = b.pos + b.count;
        if (at < n && atom_match(r.at, cps[at])) {
          uint32_t k = b.count + 1;
          if (k < r.max && !push({B_LAZY, b.pc, b.pos, k})) return false;
          pos = at + 1, pc = b.pc + 1;
          break;
        }
      }
    }
  }
};

}  // namespace

ml_status ml_regex_compile(const char* pattern, size_t len, ml_regex** out, ml_error* err) {
  *out = nullptr;
  if (len > kMaxPattern) return ml_fail(err, ML_E_FORMAT, "regex: pattern of %zu bytes is over the limit of %zu", len, kMaxPattern);
  size_t bad = 0;
  if (!ml_utf8_check(pattern, len, &bad)) return ml_fail(err, ML_E_FORMAT, "regex offset %zu: invalid UTF-8 in the pattern", bad);
  ml_regex* re = new (std::nothrow) ml_regex;
  if (!re) return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern");
  ml_vec<node> nodes;
  parser ps{pattern, len, 0, re, &nodes, err};
  uint32_t root;
  ml_status s = ps.parse_alt(0, false, &root);
  if (s == ML_OK && ps.i < len) s = ps.fail(ps.i, "unmatched ')'");
  if (s == ML_OK) {
    compiler cg{&nodes, re, err};
    s = cg.gen(root);
    inst m{};
    m.op = I_MATCH;
    if (s == ML_OK) s = cg.emit(m, nullptr);
  }
  if (s != ML_OK) {
    delete re;
    return s;
  }
  // ASCII bitmaps of the class atoms (computed by the general matcher, folds included).
  matcher mm;
  mm.re = re;
  auto fill = [&](atom& a) {
    if (a.kind != A_CLASS) return;
    a.fast = false;
    a.ascii[0] = a.ascii[1] = 0;
    for (uint32_t c = 0; c < 128; ++c)
      if (mm.atom_match(a, c)) a.ascii[c >> 6] |= 1ull << (c & 63);
    a.fast = true;
  };
  for (inst& in : re->prog) fill(in.at);
  for (atom& a : re->guards) fill(a);
  *out = re;
  return ML_OK;
}

void ml_regex_free(ml_regex* re) { delete re; }

ml_status ml_regex_find(const ml_regex* re, const uint32_t* cps, size_t n, size_t from, bool* found, size_t* start,
                        size_t* end, ml_error* err) {
  *found = false;
  *start = *end = 0;
  if (from > n) return ml_fail(err, ML_E_ARG, "regex: search start %zu is past the end %zu", from, n);
  if (n > 0xFFFFFFFFu) return ml_fail(err, ML_E_ARG, "regex: text of %zu code points is over the limit of 2^32 - 1", n);
  matcher m;
  m.re = re, m.cps = cps, m.n = n;
  m.err = err;
  m.budget = kStepBase + kStepsPerCp * (uint64_t)(n - from);
  m.stack_limit = kStackBase + kStackPerCp * (n - from);
  if (!m.regs.resize(re->nregs)) return ml_fail(err, ML_E_NOMEM, "regex: out of memory matching");
  for (size_t s = from; s <= n; ++s) {
    size_t e;
    m.stack.clear();
    if (m.run(0, s, &e)) {
      *found = true;
      *start = s;
      *end = e;
      return ML_OK;
    }
    if (m.oom) return ml_fail(err, ML_E_NOMEM, "regex: out of memory matching (backtrack stack)");
    if (m.stack_full)
      return ml_fail(err, ML_E_ARG, "regex: backtrack stack limit reached (%zu entries: %zu + %zu per code point searched)",
                     m.stack_limit, kStackBase, kStackPerCp);
    if (m.out_of_steps)
      return ml_fail(err, ML_E_ARG, "regex: match step budget exhausted (limit %llu steps: %llu + %llu per code point searched)",
                     (unsigned long long)m.budget, (unsigned long long)kStepBase, (unsigned long long)kStepsPerCp);
  }
  return ML_OK;
}
