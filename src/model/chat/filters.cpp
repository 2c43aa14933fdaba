// The chat-template filters: jinja2's built-in filters that chat templates use (and the common
// rest; int, float and round are in filters_number.cpp), with jinja2's parameter names and defaults, and transformers' tojson (json.dumps with
// ensure_ascii=False, no HTML escaping, keys in insertion order unless sort_keys).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/chat/builtin_util.h"

namespace jj {
namespace {

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

}  // namespace

int find_in(const char* const* names, int count, const char* s, size_t n) {
  for (int i = 0; i < count; ++i)
    if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) return i;
  return -1;
}
int find_filter(const char* s, size_t n) { return find_in(filter_names, F_COUNT_, s, n); }

namespace {

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

}  // namespace

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
      const bool ascii = truthy(arg(a, (size_t)-1, "ensure_ascii", v_bool(false)));
      if (arg(a, (size_t)-1, "separators", v_none()).k != vk::none)
        return rt_fail(r, at, ML_E_ARG, "tojson: separators= is not supported");
      int64_t indent = -1;
      if (ind.k != vk::none) ML_TRY(int_arg(a, ind, "indent", &indent));
      if (indent > 64) return rt_fail(r, at, ML_E_ARG, "tojson: indent too large");
      if (indent < 0) indent = ind.k == vk::none ? -1 : 0;
      ml_vec<char> t;
      ML_TRY(append_json(r, at, &t, v, (int)indent, truthy(arg(a, (size_t)-1, "sort_keys", v_bool(false))), 0));
      if (ascii) {  // json.dumps(ensure_ascii=True): non-ASCII as \uXXXX (UTF-16, surrogate pairs)
        ml_vec<char> e;
        for (size_t i = 0; i < t.size();) {
          unsigned char c = (unsigned char)t[i];
          if (c < 0x80) {
            if (!e.push((char)c)) return rt_nomem(r);
            ++i;
            continue;
          }
          size_t l = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
          uint32_t cp = l == 2 ? (c & 0x1Fu) : l == 3 ? (c & 0x0Fu) : (c & 0x07u);
          for (size_t k = 1; k < l && i + k < t.size(); ++k) cp = (cp << 6) | ((unsigned char)t[i + k] & 0x3Fu);
          char buf[16];
          if (cp >= 0x10000) {
            cp -= 0x10000;
            snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
          } else {
            snprintf(buf, sizeof buf, "\\u%04x", cp);
          }
          if (!e.append(buf, strlen(buf))) return rt_nomem(r);
          i += l;
        }
        t = static_cast<ml_vec<char>&&>(e);
      }
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
    case F_INT: return int_filter(a, v, out);
    case F_FLOAT: return float_filter(a, v, out);
    case F_ROUND: return round_filter(a, v, out);
    case F_INDENT: return do_indent(a, v, out);
    case F_COUNT_: break;
  }
  return rt_fail(r, at, ML_E_ARG, "filter not implemented");
}
}  // namespace jj
