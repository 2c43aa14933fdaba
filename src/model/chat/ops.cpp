// Python's semantics for the chat-template evaluator's operations on values: attribute and item
// access (jinja2's getattr / getitem: `.` tries the attribute first, `[]` the item), slicing,
// arithmetic (int64 with overflow checks, floats, str and list + and *), comparisons, `in`, and
// what a for loop iterates (list items, dict keys, string characters).
#include <cmath>
#include <cstring>

#include "model/chat/eval.h"

namespace jj {

// ---- attribute and item access ----

// v.name: a method, else a dict member (jinja2's getattr: attribute first, then item).
ml_status get_attr(rt* r, const node* at, const jv& v, const char* name, size_t n, jv* out) {
  if (v.k == vk::undef) return undefined_error(r, at, v);
  bool nomem = false;
  if (lookup_method(r, v, name, n, out, &nomem)) return ML_OK;
  if (v.k == vk::ns) {
    const jv* m = dict_get_str(v.d, name, n);
    *out = m ? *m : v_undef(nullptr);
    return ML_OK;
  }
  if (nomem) return rt_nomem(r);
  if (v.k == vk::dict) {
    const jv* m = dict_get_str(v.d, name, n);
    *out = m ? *m : v_undef(nullptr);
    return ML_OK;
  }
  *out = v_undef(nullptr);
  return ML_OK;
}

// Python index normalisation; false when out of range.
static bool norm_index(int64_t i, size_t n, size_t* out) {
  if (i < 0) i += (int64_t)n;
  if (i < 0 || (uint64_t)i >= n) return false;
  *out = (size_t)i;
  return true;
}

// v[key]: an item, else an attribute (jinja2's getitem).
ml_status get_item(rt* r, const node* at, const jv& v, const jv& key, jv* out) {
  if (v.k == vk::undef) return undefined_error(r, at, v);
  if (v.k == vk::dict || v.k == vk::ns) {
    const jv* m = dict_get(v.d, key);
    if (m) {
      *out = *m;
      return ML_OK;
    }
    if (key.k == vk::str && v.k == vk::dict) {
      bool nomem = false;
      if (lookup_method(r, v, key.s, key.n, out, &nomem)) return ML_OK;
      if (nomem) return rt_nomem(r);
    }
    *out = v_undef(nullptr);
    return ML_OK;
  }
  if ((v.k == vk::list || v.k == vk::str) && (key.k == vk::integer || key.k == vk::boolean)) {
    int64_t i = key.k == vk::integer ? key.i : key.b;
    if (v.k == vk::list) {
      size_t k;
      *out = norm_index(i, v.l->n, &k) ? v.l->items[k] : v_undef(nullptr);
      return ML_OK;
    }
    size_t len = utf8_len(v.s, v.n), k;
    if (!norm_index(i, len, &k)) {
      *out = v_undef(nullptr);
      return ML_OK;
    }
    size_t a = utf8_offset(v.s, v.n, k), b = utf8_offset(v.s, v.n, k + 1);
    *out = v_str(v.s + a, b - a);
    return ML_OK;
  }
  if (key.k == vk::str) return get_attr(r, at, v, key.s, key.n, out);
  *out = v_undef(nullptr);
  return ML_OK;
}

ml_status undefined_error(rt* r, const node* at, const jv& v) {
  if (v.s) return rt_fail(r, at, ML_E_ARG, "'%s' is undefined", v.s);
  return rt_fail(r, at, ML_E_ARG, "a value is undefined");
}

namespace {

// Python's slice.indices.
void slice_indices(int64_t len, const jv& a, const jv& b, const jv& c, int64_t* start, int64_t* stop, int64_t* step) {
  *step = c.k == vk::integer ? c.i : 1;
  bool neg = *step < 0;
  auto clamp = [&](const jv& v, int64_t dflt) {
    if (v.k != vk::integer) return dflt;
    int64_t i = v.i;
    if (i < 0) {
      i += len;
      if (i < 0) i = neg ? -1 : 0;
    } else if (i >= len) {
      i = neg ? len - 1 : len;
    }
    return i;
  };
  *start = clamp(a, neg ? len - 1 : 0);
  *stop = clamp(b, neg ? -1 : len);
}

}  // namespace

ml_status slice_value(rt* r, const node* at, const jv& v, const jv& a, const jv& b, const jv& c, jv* out) {
  for (const jv* p : {&a, &b, &c})
    if (p->k != vk::integer && p->k != vk::none && p->k != vk::undef)
      return rt_fail(r, at, ML_E_ARG, "slice indices must be integers or None, not %s", type_name(*p));
  if (c.k == vk::integer && c.i == 0) return rt_fail(r, at, ML_E_ARG, "slice step cannot be zero");
  if (v.k == vk::undef) return undefined_error(r, at, v);
  if (v.k != vk::list && v.k != vk::str) {  // jinja2's getitem: what cannot be sliced gives Undefined
    *out = v_undef(nullptr);
    return ML_OK;
  }
  bool ascii = true;
  if (v.k == vk::str)
    for (size_t i = 0; i < v.n && ascii; ++i) ascii = (unsigned char)v.s[i] < 0x80;
  int64_t len = v.k == vk::list ? (int64_t)v.l->n : ascii ? (int64_t)v.n : (int64_t)utf8_len(v.s, v.n);
  int64_t start, stop, step;
  slice_indices(len, a, b, c, &start, &stop, &step);
  if (v.k == vk::str && step == 1) {
    if (stop < start) stop = start;
    size_t s0 = ascii ? (size_t)start : utf8_offset(v.s, v.n, (size_t)start);
    size_t s1 = ascii ? (size_t)stop : utf8_offset(v.s, v.n, (size_t)stop);
    *out = v_str(v.s + s0, s1 - s0);
    return ML_OK;
  }
  ml_vec<jv> items;
  ml_vec<char> chars;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (v.k == vk::list) {
      if (!items.push(v.l->items[i])) return rt_nomem(r);
    } else {
      size_t s0 = ascii ? (size_t)i : utf8_offset(v.s, v.n, (size_t)i);
      size_t s1 = ascii ? (size_t)i + 1 : utf8_offset(v.s, v.n, (size_t)i + 1);
      if (!chars.append(v.s + s0, s1 - s0)) return rt_nomem(r);
    }
  }
  bool ok = v.k == vk::list ? new_list(r->b, items.data(), items.size(), out)
                            : new_str(r->b, chars.data() ? chars.data() : "", chars.size(), out);
  if (!ok) return rt_nomem(r);
  out->tuple = v.tuple;
  return ML_OK;
}

// ---- operators ----

namespace {

bool mul_overflow(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

ml_status repeat(rt* r, const node* at, const jv& seq, int64_t times, jv* out) {
  if (times < 0) times = 0;
  size_t unit = seq.k == vk::str ? seq.n : seq.l->n * sizeof(jv);
  if (unit && (uint64_t)times > ML_TEMPLATE_MAX_OUTPUT / unit)
    return rt_fail(r, at, ML_E_ARG, "repetition past the %zu-byte limit", ML_TEMPLATE_MAX_OUTPUT);
  if (seq.k == vk::str) {
    ml_vec<char> t;
    for (int64_t i = 0; i < times; ++i)
      if (!t.append(seq.s, seq.n)) return rt_nomem(r);
    if (!new_str(r->b, t.data() ? t.data() : "", t.size(), out)) return rt_nomem(r);
    return ML_OK;
  }
  ml_vec<jv> t;
  for (int64_t i = 0; i < times; ++i)
    for (size_t k = 0; k < seq.l->n; ++k)
      if (!t.push(seq.l->items[k])) return rt_nomem(r);
  if (!new_list(r->b, t.data(), t.size(), out)) return rt_nomem(r);
  out->tuple = seq.tuple;
  return ML_OK;
}

const char* op_sym(op o) {
  switch (o) {
    case op::add: return "+";
    case op::sub: return "-";
    case op::mul: return "*";
    case op::div: return "/";
    case op::floordiv: return "//";
    case op::mod: return "%";
    case op::pow: return "**";
    case op::concat: return "~";
    case op::eq: return "==";
    case op::ne: return "!=";
    case op::lt: return "<";
    case op::le: return "<=";
    case op::gt: return ">";
    case op::ge: return ">=";
    case op::in: return "in";
    case op::not_in: return "not in";
  }
  return "?";
}

}  // namespace

ml_status arith(rt* r, const node* at, op o, const jv& a, const jv& b, jv* out) {
  if (o == op::concat) {
    ml_vec<char> t;
    if (!append_str(&t, a) || !append_str(&t, b)) return rt_nomem(r);
    if (t.size() > ML_TEMPLATE_MAX_OUTPUT) return rt_fail(r, at, ML_E_ARG, "string past the %zu-byte limit", ML_TEMPLATE_MAX_OUTPUT);
    if (!new_str(r->b, t.data() ? t.data() : "", t.size(), out)) return rt_nomem(r);
    return ML_OK;
  }
  if (a.k == vk::undef) return undefined_error(r, at, a);
  if (b.k == vk::undef) return undefined_error(r, at, b);
  if (o == op::add && a.k == vk::str && b.k == vk::str) {
    if (a.n + b.n > ML_TEMPLATE_MAX_OUTPUT) return rt_fail(r, at, ML_E_ARG, "string past the %zu-byte limit", ML_TEMPLATE_MAX_OUTPUT);
    char* p = static_cast<char*>(ml_bump_alloc(r->b, a.n + b.n + 1));
    if (!p || r->b->used_total > ML_TEMPLATE_MAX_MEMORY) return rt_nomem(r);
    if (a.n) memcpy(p, a.s, a.n);
    if (b.n) memcpy(p + a.n, b.s, b.n);
    p[a.n + b.n] = 0;
    *out = v_str(p, a.n + b.n);
    return ML_OK;
  }
  if (o == op::add && a.k == vk::list && b.k == vk::list && a.tuple == b.tuple) {
    ml_vec<jv> t;
    if (!t.reserve(a.l->n + b.l->n)) return rt_nomem(r);
    for (size_t i = 0; i < a.l->n; ++i) t.push(a.l->items[i]);
    for (size_t i = 0; i < b.l->n; ++i) t.push(b.l->items[i]);
    if (!new_list(r->b, t.data(), t.size(), out)) return rt_nomem(r);
    out->tuple = a.tuple;
    return ML_OK;
  }
  if (o == op::mul && (a.k == vk::str || a.k == vk::list) && (b.k == vk::integer || b.k == vk::boolean))
    return repeat(r, at, a, b.k == vk::integer ? b.i : b.b, out);
  if (o == op::mul && (b.k == vk::str || b.k == vk::list) && (a.k == vk::integer || a.k == vk::boolean))
    return repeat(r, at, b, a.k == vk::integer ? a.i : a.b, out);
  if (o == op::mod && a.k == vk::str)
    return rt_fail(r, at, ML_E_ARG, "printf-style string formatting ('...' %% x) is not supported");
  if (!is_number(a) || !is_number(b))
    return rt_fail(r, at, ML_E_ARG, "unsupported operand type(s) for %s: '%s' and '%s'", op_sym(o), type_name(a), type_name(b));
  bool ints = a.k != vk::real && b.k != vk::real;
  int64_t x = a.k == vk::integer ? a.i : a.b, y = b.k == vk::integer ? b.i : b.b;
  double fx = num(a), fy = num(b);
  switch (o) {
    case op::add:
      if (ints) {
        int64_t z;
        if (__builtin_add_overflow(x, y, &z)) return rt_fail(r, at, ML_E_ARG, "integer overflow in +");
        *out = v_int(z);
      } else {
        *out = v_real(fx + fy);
      }
      return ML_OK;
    case op::sub:
      if (ints) {
        int64_t z;
        if (__builtin_sub_overflow(x, y, &z)) return rt_fail(r, at, ML_E_ARG, "integer overflow in -");
        *out = v_int(z);
      } else {
        *out = v_real(fx - fy);
      }
      return ML_OK;
    case op::mul:
      if (ints) {
        int64_t z;
        if (mul_overflow(x, y, &z)) return rt_fail(r, at, ML_E_ARG, "integer overflow in *");
        *out = v_int(z);
      } else {
        *out = v_real(fx * fy);
      }
      return ML_OK;
    case op::div:
      if (fy == 0) return rt_fail(r, at, ML_E_ARG, "division by zero");
      *out = v_real(fx / fy);
      return ML_OK;
    case op::floordiv:
    case op::mod:
      if (ints) {
        if (y == 0) return rt_fail(r, at, ML_E_ARG, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return rt_fail(r, at, ML_E_ARG, "integer overflow in %s", op_sym(o));
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
        *out = v_int(o == op::floordiv ? q : m);
      } else {
        if (fy == 0) return rt_fail(r, at, ML_E_ARG, "float division or modulo by zero");
        double m = std::fmod(fx, fy);
        if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
        *out = o == op::floordiv ? v_real(std::floor(fx / fy)) : v_real(m);
      }
      return ML_OK;
    case op::pow:
      if (ints && y >= 0) {
        int64_t z = 1, base = x;
        for (int64_t e = y; e > 0; e >>= 1) {
          if ((e & 1) && mul_overflow(z, base, &z)) return rt_fail(r, at, ML_E_ARG, "integer overflow in **");
          if (e > 1 && mul_overflow(base, base, &base)) return rt_fail(r, at, ML_E_ARG, "integer overflow in **");
        }
        *out = v_int(z);
      } else {
        if (fx == 0 && fy < 0) return rt_fail(r, at, ML_E_ARG, "0.0 cannot be raised to a negative power");
        *out = v_real(std::pow(fx, fy));
      }
      return ML_OK;
    default: break;
  }
  return rt_fail(r, at, ML_E_ARG, "bad operator");
}


ml_status contains(rt* r, const node* at, const jv& hay, const jv& needle, bool* out) {
  switch (hay.k) {
    case vk::str:
      if (needle.k != vk::str)
        return rt_fail(r, at, ML_E_ARG, "'in <string>' requires string as left operand, not %s", type_name(needle));
      if (needle.n == 0) {
        *out = true;
        return ML_OK;
      }
      *out = false;
      for (size_t i = 0; i + needle.n <= hay.n; ++i)
        if (memcmp(hay.s + i, needle.s, needle.n) == 0) {
          *out = true;
          break;
        }
      return ML_OK;
    case vk::list:
      *out = false;
      for (size_t i = 0; i < hay.l->n; ++i)
        if (equal(hay.l->items[i], needle)) {
          *out = true;
          break;
        }
      return ML_OK;
    case vk::dict: case vk::ns:
      *out = dict_get(hay.d, needle) != nullptr;
      return ML_OK;
    case vk::undef:
      *out = false;  // Undefined iterates as empty
      return ML_OK;
    default:
      return rt_fail(r, at, ML_E_ARG, "argument of type '%s' is not iterable", type_name(hay));
  }
}

ml_status compare_values(rt* r, const node* at, op o, const jv& a, const jv& b, bool* out) {
  switch (o) {
    case op::eq: *out = equal(a, b); return ML_OK;
    case op::ne: *out = !equal(a, b); return ML_OK;
    case op::in: return contains(r, at, b, a, out);
    case op::not_in: ML_TRY(contains(r, at, b, a, out)); *out = !*out; return ML_OK;
    default: break;
  }
  if (a.k == vk::undef) return undefined_error(r, at, a);
  if (b.k == vk::undef) return undefined_error(r, at, b);
  int c;
  if (!order(a, b, &c))
    return rt_fail(r, at, ML_E_ARG, "'%s' not supported between instances of '%s' and '%s'", op_sym(o), type_name(a), type_name(b));
  if (c == 2) {
    *out = false;
    return ML_OK;
  }
  *out = o == op::lt ? c < 0 : o == op::le ? c <= 0 : o == op::gt ? c > 0 : c >= 0;
  return ML_OK;
}

// ---- iteration ----

// The items a for loop (or a filter) walks: list items, dict keys, string characters.
ml_status iterate(rt* r, const node* at, const jv& v, ml_vec<jv>* out) {
  switch (v.k) {
    case vk::undef: return ML_OK;
    case vk::list:
      if (!out->reserve(v.l->n)) return rt_nomem(r);
      for (size_t i = 0; i < v.l->n; ++i) out->push(v.l->items[i]);
      return ML_OK;
    case vk::dict: case vk::ns:
      if (!out->reserve(v.d->n)) return rt_nomem(r);
      for (size_t i = 0; i < v.d->n; ++i) out->push(v.d->keys[i]);
      return ML_OK;
    case vk::str:
      for (size_t i = 0; i < v.n;) {
        size_t l = 1;
        while (i + l < v.n && ((unsigned char)v.s[i + l] & 0xC0) == 0x80) ++l;
        if (!out->push(v_str(v.s + i, l))) return rt_nomem(r);
        i += l;
      }
      return ML_OK;
    default:
      return rt_fail(r, at, ML_E_ARG, "'%s' object is not iterable", type_name(v));
  }
}

}  // namespace jj
