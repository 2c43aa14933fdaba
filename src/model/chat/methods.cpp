// The Python methods a chat template may call: str (strip, split, startswith, replace, format, ...)
// and dict (items, keys, values, get), and loop.cycle. transformers renders in jinja2's
// ImmutableSandboxedEnvironment, so list and dict mutators (append, pop, update, ...) fail.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/chat/builtin_util.h"

namespace jj {
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
