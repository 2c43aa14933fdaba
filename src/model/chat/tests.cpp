// The chat-template tests (`x is defined`, `n is divisibleby 3`, ...): jinja2's built-in tests, with
// jinja2's view of Undefined (iterable and a sequence: it iterates as empty).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/chat/builtin_util.h"

namespace jj {
namespace {

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
}  // namespace

int find_in(const char* const* names, int count, const char* s, size_t n);
int find_test(const char* s, size_t n) { return find_in(test_names, T_COUNT_, s, n); }


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

}  // namespace jj
