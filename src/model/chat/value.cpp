// Template values: allocation, truthiness, equality and ordering, and their text as Python writes
// it (str(), repr(), json.dumps(ensure_ascii=False)), which is what jinja2 prints. UTF-8 helpers.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/chat/jinja.h"

namespace jj {

// ---- UTF-8 --------------------------------------------------------------------------------------

static size_t cp_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

static uint32_t decode(const char* s, size_t n, size_t* len) {
  const unsigned char* u = (const unsigned char*)s;
  size_t l = cp_len(u[0]);
  if (l > n || u[0] >= 0xF8 || (u[0] >= 0x80 && u[0] < 0xC0)) {
    *len = 1;
    return u[0];
  }
  *len = l;
  if (l == 1) return u[0];
  if (l == 2) return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
  if (l == 3) return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
  return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
}

size_t utf8_len(const char* s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) c += ((unsigned char)s[i] & 0xC0) != 0x80;
  return c;
}

size_t utf8_offset(const char* s, size_t n, size_t cp) {
  size_t i = 0;
  while (cp > 0 && i < n) {
    ++i;
    while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) ++i;
    --cp;
  }
  return i;
}

// Python's str.isspace: the Unicode White_Space characters plus the ASCII separators 0x1C-0x1F.
bool is_space_at(const char* s, size_t n, size_t* len) {
  if (n == 0) return false;
  unsigned char c = (unsigned char)s[0];
  if (c < 0x80) {
    *len = 1;
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  }
  uint32_t cp = decode(s, n, len);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// ---- allocation ---------------------------------------------------------------------------------

static void* alloc(ml_bump* b, size_t n) {
  if (n > ML_TEMPLATE_MAX_MEMORY || b->used_total > ML_TEMPLATE_MAX_MEMORY - n) return nullptr;
  return ml_bump_alloc(b, n);
}

bool new_str(ml_bump* b, const char* s, size_t n, jv* out) {
  char* p = static_cast<char*>(alloc(b, n + 1));
  if (!p) return false;
  if (n) memcpy(p, s, n);
  p[n] = 0;
  *out = v_str(p, n);
  return true;
}

bool new_list(ml_bump* b, const jv* items, size_t n, jv* out) {
  if (n > ML_TEMPLATE_MAX_MEMORY / sizeof(jv)) return false;
  jlist* l = static_cast<jlist*>(alloc(b, sizeof(jlist)));
  jv* it = static_cast<jv*>(alloc(b, n * sizeof(jv)));
  if (!l || !it) return false;
  for (size_t i = 0; i < n; ++i) new (it + i) jv(items[i]);
  l->items = it, l->n = n;
  jv v;
  v.k = vk::list, v.l = l;
  *out = v;
  return true;
}

bool new_dict(ml_bump* b, size_t cap, jv* out) {
  if (cap > ML_TEMPLATE_MAX_MEMORY / sizeof(jv)) return false;
  jdict* d = static_cast<jdict*>(alloc(b, sizeof(jdict)));
  jv* k = static_cast<jv*>(alloc(b, cap * sizeof(jv)));
  jv* v = static_cast<jv*>(alloc(b, cap * sizeof(jv)));
  if (!d || !k || !v) return false;
  d->keys = k, d->vals = v, d->n = 0, d->cap = cap;
  jv r;
  r.k = vk::dict, r.d = d;
  *out = r;
  return true;
}

const jv* dict_get(const jdict* d, const jv& key) {
  for (size_t i = d->n; i-- > 0;)
    if (equal(d->keys[i], key)) return &d->vals[i];
  return nullptr;
}

const jv* dict_get_str(const jdict* d, const char* s, size_t n) {
  for (size_t i = d->n; i-- > 0;)
    if (d->keys[i].k == vk::str && d->keys[i].n == n && memcmp(d->keys[i].s, s, n) == 0) return &d->vals[i];
  return nullptr;
}

bool dict_set(ml_bump* b, jdict* d, const jv& key, const jv& val) {
  for (size_t i = 0; i < d->n; ++i)
    if (equal(d->keys[i], key)) {
      d->vals[i] = val;
      return true;
    }
  if (d->n == d->cap) {
    size_t cap = d->cap < 4 ? 8 : d->cap * 2;
    jv* k = static_cast<jv*>(alloc(b, cap * sizeof(jv)));
    jv* v = static_cast<jv*>(alloc(b, cap * sizeof(jv)));
    if (!k || !v) return false;
    for (size_t i = 0; i < d->n; ++i) new (k + i) jv(d->keys[i]), new (v + i) jv(d->vals[i]);
    d->keys = k, d->vals = v, d->cap = cap;
  }
  new (d->keys + d->n) jv(key);
  new (d->vals + d->n) jv(val);
  ++d->n;
  return true;
}

// ---- semantics ----------------------------------------------------------------------------------

bool truthy(const jv& v) {
  switch (v.k) {
    case vk::undef: case vk::none: return false;
    case vk::boolean: return v.b;
    case vk::integer: return v.i != 0;
    case vk::real: return v.f != 0;
    case vk::str: return v.n != 0;
    case vk::list: return v.l->n != 0;
    case vk::dict: return v.d->n != 0;
    default: return true;
  }
}

bool is_number(const jv& v) { return v.k == vk::integer || v.k == vk::real || v.k == vk::boolean; }
double num(const jv& v) { return v.k == vk::integer ? (double)v.i : v.k == vk::real ? v.f : v.b ? 1.0 : 0.0; }

bool equal(const jv& a, const jv& b) {
  if (is_number(a) && is_number(b)) {
    if (a.k != vk::real && b.k != vk::real) return (a.k == vk::integer ? a.i : a.b) == (b.k == vk::integer ? b.i : b.b);
    return num(a) == num(b);
  }
  if (a.k != b.k) return false;
  switch (a.k) {
    case vk::undef: case vk::none: return true;
    case vk::str: return a.n == b.n && memcmp(a.s, b.s, a.n) == 0;
    case vk::list:
      if (a.l->n != b.l->n || a.tuple != b.tuple) return false;
      for (size_t i = 0; i < a.l->n; ++i)
        if (!equal(a.l->items[i], b.l->items[i])) return false;
      return true;
    case vk::dict:
      if (a.d->n != b.d->n) return false;
      for (size_t i = 0; i < a.d->n; ++i) {
        const jv* o = dict_get(b.d, a.d->keys[i]);
        if (!o || !equal(a.d->vals[i], *o)) return false;
      }
      return true;
    case vk::ns: return a.d == b.d;
    case vk::macro: return a.m == b.m;
    case vk::func: return a.f_id == b.f_id;
    default: return false;
  }
}

bool order(const jv& a, const jv& b, int* cmp) {
  if (is_number(a) && is_number(b)) {
    if (a.k == vk::integer && b.k == vk::integer) {
      *cmp = a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
      return true;
    }
    double x = num(a), y = num(b);
    if (std::isnan(x) || std::isnan(y)) {
      *cmp = 2;  // every comparison with NaN is false
      return true;
    }
    *cmp = x < y ? -1 : x > y ? 1 : 0;
    return true;
  }
  if (a.k == vk::str && b.k == vk::str) {  // UTF-8 byte order is code point order
    size_t m = a.n < b.n ? a.n : b.n;
    int c = m ? memcmp(a.s, b.s, m) : 0;
    *cmp = c < 0 ? -1 : c > 0 ? 1 : a.n < b.n ? -1 : a.n > b.n ? 1 : 0;
    return true;
  }
  if (a.k == vk::list && b.k == vk::list && a.tuple == b.tuple) {
    size_t m = a.l->n < b.l->n ? a.l->n : b.l->n;
    for (size_t i = 0; i < m; ++i) {
      if (equal(a.l->items[i], b.l->items[i])) continue;
      return order(a.l->items[i], b.l->items[i], cmp);
    }
    *cmp = a.l->n < b.l->n ? -1 : a.l->n > b.l->n ? 1 : 0;
    return true;
  }
  return false;
}

const char* type_name(const jv& v) {
  switch (v.k) {
    case vk::undef: return "Undefined";
    case vk::none: return "NoneType";
    case vk::boolean: return "bool";
    case vk::integer: return "int";
    case vk::real: return "float";
    case vk::str: return "str";
    case vk::list: return v.tuple ? "tuple" : "list";
    case vk::dict: return "dict";
    case vk::ns: return "Namespace";
    case vk::macro: return "Macro";
    case vk::func: return "function";
    case vk::method: return "builtin_function_or_method";
  }
  return "object";
}

// ---- text ---------------------------------------------------------------------------------------

static bool put(ml_vec<char>* o, const char* s) { return o->append(s, strlen(s)); }

// repr(float): the shortest digits that read back to the same double, in Python's layout
// (fixed notation for exponents -4..15, else d.ddde+XX; always a '.0' or exponent).
static bool put_float(ml_vec<char>* o, double f) {
  if (std::isnan(f)) return put(o, "nan");
  if (std::isinf(f)) return put(o, f < 0 ? "-inf" : "inf");
  char buf[40];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
    if (strtod(buf, nullptr) == f) break;
  }
  // buf: [-]d[.ddd]e[+-]XX
  const char* p = buf;
  bool neg = *p == '-';
  if (neg) ++p;
  char digits[24];
  int nd = 0;
  for (; *p && *p != 'e'; ++p)
    if (*p != '.') digits[nd++] = *p;
  int exp = atoi(p + 1);
  while (nd > 1 && digits[nd - 1] == '0') --nd;
  ml_vec<char>& out = *o;
  if (neg && !out.push('-')) return false;
  if (exp >= -5 + 1 && exp < 16) {  // Python: -4 <= exp < 16
    if (exp >= 0) {
      for (int i = 0; i <= exp; ++i)
        if (!out.push(i < nd ? digits[i] : '0')) return false;
      if (!out.push('.')) return false;
      if (nd > exp + 1) {
        if (!out.append(digits + exp + 1, (size_t)(nd - exp - 1))) return false;
      } else if (!out.push('0')) {
        return false;
      }
    } else {
      if (!put(o, "0.")) return false;
      for (int i = 0; i < -exp - 1; ++i)
        if (!out.push('0')) return false;
      if (!out.append(digits, (size_t)nd)) return false;
    }
    return true;
  }
  if (!out.push(digits[0])) return false;
  if (nd > 1 && (!out.push('.') || !out.append(digits + 1, (size_t)(nd - 1)))) return false;
  snprintf(buf, sizeof buf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return put(o, buf);
}

static bool put_int(ml_vec<char>* o, int64_t i) {
  char buf[24];
  snprintf(buf, sizeof buf, "%lld", (long long)i);
  return put(o, buf);
}

// Python's str.isprintable for a code point (approximate: the Unicode categories a chat template
// plausibly meets; unassigned code points count as printable here).
static bool printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x2064) ||
      (cp >= 0x2066 && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) ||
      (cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xF0000 || (cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD ||
      cp == 0x70F || cp == 0x180E)
    return false;
  return true;
}

static bool put_str_repr(ml_vec<char>* o, const char* s, size_t n) {
  bool has_sq = memchr(s, '\'', n) != nullptr, has_dq = memchr(s, '"', n) != nullptr;
  char q = has_sq && !has_dq ? '"' : '\'';
  if (!o->push(q)) return false;
  for (size_t i = 0; i < n;) {
    size_t l;
    uint32_t cp = decode(s + i, n - i, &l);
    char buf[16];
    const char* e = nullptr;
    if (cp == (uint32_t)q) e = q == '\'' ? "\\'" : "\\\"";
    else if (cp == '\\') e = "\\\\";
    else if (cp == '\n') e = "\\n";
    else if (cp == '\r') e = "\\r";
    else if (cp == '\t') e = "\\t";
    else if (!printable(cp)) {
      if (cp < 0x100) snprintf(buf, sizeof buf, "\\x%02x", cp);
      else if (cp < 0x10000) snprintf(buf, sizeof buf, "\\u%04x", cp);
      else snprintf(buf, sizeof buf, "\\U%08x", cp);
      e = buf;
    }
    if (e ? !put(o, e) : !o->append(s + i, l)) return false;
    i += l;
  }
  return o->push(q);
}

bool append_repr(ml_vec<char>* out, const jv& v) {
  switch (v.k) {
    case vk::str: return put_str_repr(out, v.s, v.n);
    case vk::undef: return put(out, "Undefined");  // repr(Undefined), inside a list or dict
    case vk::list: {
      if (!out->push(v.tuple ? '(' : '[')) return false;
      for (size_t i = 0; i < v.l->n; ++i) {
        if (i && !put(out, ", ")) return false;
        if (!append_repr(out, v.l->items[i])) return false;
      }
      if (v.tuple && v.l->n == 1 && !out->push(',')) return false;
      return out->push(v.tuple ? ')' : ']');
    }
    case vk::dict: {
      if (!out->push('{')) return false;
      for (size_t i = 0; i < v.d->n; ++i) {
        if (i && !put(out, ", ")) return false;
        if (!append_repr(out, v.d->keys[i]) || !put(out, ": ") || !append_repr(out, v.d->vals[i])) return false;
      }
      return out->push('}');
    }
    default: return append_str(out, v);
  }
}

bool append_str(ml_vec<char>* out, const jv& v) {
  switch (v.k) {
    case vk::undef: return true;
    case vk::none: return put(out, "None");
    case vk::boolean: return put(out, v.b ? "True" : "False");
    case vk::integer: return put_int(out, v.i);
    case vk::real: return put_float(out, v.f);
    case vk::str: return out->append(v.s, v.n);
    case vk::list: case vk::dict: return append_repr(out, v);
    case vk::ns: {
      if (!put(out, "<Namespace {")) return false;
      for (size_t i = 0; i < v.d->n; ++i) {
        if (i && !put(out, ", ")) return false;
        if (!append_repr(out, v.d->keys[i]) || !put(out, ": ") || !append_repr(out, v.d->vals[i])) return false;
      }
      return put(out, "}>");
    }
    case vk::macro: return put(out, "<Macro>");
    case vk::func: return put(out, "<built-in function>");
    case vk::method: return put(out, "<built-in method>");
  }
  return true;
}

ml_status to_str(rt* r, const jv& v, jv* out) {
  if (v.k == vk::str) {
    *out = v;
    return ML_OK;
  }
  ml_vec<char> tmp;
  if (!append_str(&tmp, v) || !new_str(rt_bump(r), tmp.data() ? tmp.data() : "", tmp.size(), out)) return rt_nomem(r);
  return ML_OK;
}

static bool newline_indent(ml_vec<char>* o, int indent, int level) {
  if (!o->push('\n')) return false;
  for (int i = 0; i < indent * level; ++i)
    if (!o->push(' ')) return false;
  return true;
}

ml_status append_json(rt* r, const node* at, ml_vec<char>* o, const jv& v, int indent, bool sort_keys, int depth) {
  if (depth > ML_TEMPLATE_MAX_NESTING) return rt_fail(r, at, ML_E_ARG, "tojson: nesting deeper than %d", ML_TEMPLATE_MAX_NESTING);
  bool ok = true;
  switch (v.k) {
    case vk::none: ok = put(o, "null"); break;
    case vk::boolean: ok = put(o, v.b ? "true" : "false"); break;
    case vk::integer: ok = put_int(o, v.i); break;
    case vk::real:
      if (std::isnan(v.f)) ok = put(o, "NaN");
      else if (std::isinf(v.f)) ok = put(o, v.f < 0 ? "-Infinity" : "Infinity");
      else ok = put_float(o, v.f);
      break;
    case vk::str: ok = ml_json_quote(o, v.s, v.n); break;
    case vk::list: {
      if (v.l->n == 0) {
        ok = put(o, "[]");
        break;
      }
      if (!o->push('[')) return rt_nomem(r);
      for (size_t i = 0; i < v.l->n; ++i) {
        if (i && !(indent >= 0 ? o->push(',') : put(o, ", "))) return rt_nomem(r);
        if (indent >= 0 && !newline_indent(o, indent, depth + 1)) return rt_nomem(r);
        ML_TRY(append_json(r, at, o, v.l->items[i], indent, sort_keys, depth + 1));
      }
      if (indent >= 0 && !newline_indent(o, indent, depth)) return rt_nomem(r);
      ok = o->push(']');
      break;
    }
    case vk::dict: case vk::ns: {
      const jdict* d = v.d;
      if (d->n == 0) {
        ok = put(o, "{}");
        break;
      }
      // Member order: as inserted, or sorted by key (keys must then be strings).
      ml_vec<size_t> idx;
      if (!idx.resize(d->n)) return rt_nomem(r);
      for (size_t i = 0; i < d->n; ++i) idx[i] = i;
      if (sort_keys)
        for (size_t i = 1; i < d->n; ++i)  // insertion sort: member counts are small
          for (size_t j = i; j > 0; --j) {
            int c = 0;
            if (!order(d->keys[idx[j - 1]], d->keys[idx[j]], &c)) return rt_fail(r, at, ML_E_ARG, "tojson: keys cannot be sorted");
            if (c <= 0) break;
            size_t t = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = t;
          }
      if (!o->push('{')) return rt_nomem(r);
      for (size_t ii = 0; ii < d->n; ++ii) {
        size_t i = idx[ii];
        if (ii && !(indent >= 0 ? o->push(',') : put(o, ", "))) return rt_nomem(r);
        if (indent >= 0 && !newline_indent(o, indent, depth + 1)) return rt_nomem(r);
        const jv& k = d->keys[i];
        if (k.k == vk::str) {
          ok = ml_json_quote(o, k.s, k.n);
        } else if (k.k == vk::integer || k.k == vk::real || k.k == vk::boolean || k.k == vk::none) {
          ml_vec<char> t;
          if (k.k == vk::none) ok = put(&t, "null");
          else if (k.k == vk::boolean) ok = put(&t, k.b ? "true" : "false");
          else ok = k.k == vk::integer ? put_int(&t, k.i) : put_float(&t, k.f);
          ok = ok && ml_json_quote(o, t.data(), t.size());
        } else {
          return rt_fail(r, at, ML_E_ARG, "tojson: keys must be str, int, float, bool or None, not %s", type_name(k));
        }
        if (!ok || !put(o, ": ")) return rt_nomem(r);
        ML_TRY(append_json(r, at, o, d->vals[i], indent, sort_keys, depth + 1));
      }
      if (indent >= 0 && !newline_indent(o, indent, depth)) return rt_nomem(r);
      ok = o->push('}');
      break;
    }
    default:
      return rt_fail(r, at, ML_E_ARG, "tojson: Object of type %s is not JSON serializable", type_name(v));
  }
  if (!ok) return rt_nomem(r);
  if (o->size() > ML_TEMPLATE_MAX_OUTPUT)
    return rt_fail(r, at, ML_E_ARG, "tojson: output past the %zu-byte limit", ML_TEMPLATE_MAX_OUTPUT);
  return ML_OK;
}

bool from_json(ml_bump* b, const ml_json* j, jv* out, int depth) {
  if (depth > ML_JSON_MAX_DEPTH + 1) return false;
  switch (j->type) {
    case ML_JSON_NULL: *out = v_none(); return true;
    case ML_JSON_FALSE: *out = v_bool(false); return true;
    case ML_JSON_TRUE: *out = v_bool(true); return true;
    case ML_JSON_NUMBER: *out = j->is_int ? v_int(j->i64) : v_real(j->num); return true;
    case ML_JSON_STRING: *out = v_str(j->str, j->len); return true;
    case ML_JSON_ARRAY: {
      jv tmp;
      if (!new_list(b, nullptr, 0, &tmp)) return false;
      jv* items = static_cast<jv*>(j->n ? alloc(b, j->n * sizeof(jv)) : nullptr);
      if (j->n && !items) return false;
      for (size_t i = 0; i < j->n; ++i) {
        new (items + i) jv();
        if (!from_json(b, j->items[i], &items[i], depth + 1)) return false;
      }
      tmp.l->items = items, tmp.l->n = j->n;
      *out = tmp;
      return true;
    }
    case ML_JSON_OBJECT: {
      if (!new_dict(b, j->n, out)) return false;
      for (size_t i = 0; i < j->n; ++i) {
        jv v;
        if (!from_json(b, j->members[i].value, &v, depth + 1)) return false;
        // Duplicate keys: the last wins, in the first one's place (as Python's dict does).
        if (!dict_set(b, out->d, v_str(j->members[i].key, j->members[i].key_len), v)) return false;
      }
      return true;
    }
  }
  return false;
}

}  // namespace jj
