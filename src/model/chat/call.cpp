// The chat-template calls (rt_call): macros, with jinja2's argument binding and caller() for a
// {% call %} block, the global functions (range, dict, namespace, raise_exception, strftime_now)
// and, through methods.cpp, the methods of values. Macro depth and list sizes are bounded
// (ML_E_ARG past them).
#include <cstring>
#include <ctime>

#include "core/posix_compat.h"  // localtime_r on Windows
#include "model/chat/eval.h"

namespace jj {

ml_status call_macro(rt* r, const node* at, const jv& m, const jv* args, size_t nargs, const char* const* kw, const jv* kwv,
                     size_t nkw, jv* out) {
  const node* def = m.m;
  if (r->depth >= ML_TEMPLATE_MAX_CALL_DEPTH)
    return rt_fail(r, at, ML_E_ARG, "macro calls nested deeper than %d (infinite recursion?)", ML_TEMPLATE_MAX_CALL_DEPTH);
  call_depth_guard g(r);
  scope local;
  local.parent = m.env;
  if (nargs > def->nkw)
    return rt_fail(r, at, ML_E_ARG, "macro '%s' takes not more than %zu argument(s)", def->s, def->nkw);
  for (size_t i = 0; i < def->nkw; ++i) {
    jv v = v_undef(def->kw[i]);
    bool set = false;
    if (i < nargs) v = args[i], set = true;
    for (size_t k = 0; k < nkw; ++k)
      if (strcmp(kw[k], def->kw[i]) == 0) {
        if (set) return rt_fail(r, at, ML_E_ARG, "macro '%s' got multiple values for argument '%s'", def->s, def->kw[i]);
        v = kwv[k], set = true;
      }
    if (!set && def->kwv[i]) ML_TRY(eval(r, def->kwv[i], &local, &v));
    if (!scope_set(r, &local, def->kw[i], strlen(def->kw[i]), v)) return rt_nomem(r);
  }
  for (size_t k = 0; k < nkw; ++k) {
    bool known = false;
    for (size_t i = 0; i < def->nkw && !known; ++i) known = strcmp(kw[k], def->kw[i]) == 0;
    if (!known) return rt_fail(r, at, ML_E_ARG, "macro '%s' has no parameter named '%s'", def->s, kw[k]);
  }
  if (m.caller) {
    // caller(): the {% call %} block's body, called like a macro, closing over the block's scope.
    jv c;
    c.k = vk::macro, c.m = m.caller, c.env = m.recv->env;
    if (!scope_set(r, &local, "caller", 6, c)) return rt_nomem(r);
  }
  ml_vec<char> buf;
  ml_status st = exec_body(r, def->kids, def->nkids, &local, &buf);
  if (st == ML_OK && r->flow != flow_kind::none) r->flow = flow_kind::none;
  ML_TRY(st);
  if (!new_str(r->b, buf.data() ? buf.data() : "", buf.size(), out)) return rt_nomem(r);
  return ML_OK;
}

namespace {

// The global functions: range, dict, namespace, raise_exception, strftime_now.
ml_status call_func(rt* r, const node* at, const jv& f, const jv* args, size_t nargs, const char* const* kw, const jv* kwv,
                    size_t nkw, jv* out) {
  switch (f.f_id) {
    case fn::raise_exception: {
      jv msg = nargs ? args[0] : v_str("", 0);
      ML_TRY(to_str(r, msg, &msg));
      return ml_fail(r->err, ML_E_ARG, "template line %d: raise_exception: %.*s", at ? at->line : 0, (int)(msg.n > 300 ? 300 : msg.n), msg.s);
    }
    case fn::strftime_now: {
      if (r->fixed_time) {
        *out = *r->fixed_time;
        return ML_OK;
      }
      if (nargs != 1 || args[0].k != vk::str) return rt_fail(r, at, ML_E_ARG, "strftime_now expects one format string");
      char fmt[256];
      if (args[0].n >= sizeof fmt) return rt_fail(r, at, ML_E_ARG, "strftime_now: format too long");
      memcpy(fmt, args[0].s, args[0].n);
      fmt[args[0].n] = 0;
      time_t now = time(nullptr);
      struct tm tmv;
      localtime_r(&now, &tmv);
      char buf[512];
      size_t n = strftime(buf, sizeof buf, fmt, &tmv);
      if (!new_str(r->b, buf, n, out)) return rt_nomem(r);
      return ML_OK;
    }
    case fn::range: {
      if (nkw) return rt_fail(r, at, ML_E_ARG, "range() takes no keyword arguments");
      int64_t a[3] = {0, 0, 1};
      if (nargs < 1 || nargs > 3) return rt_fail(r, at, ML_E_ARG, "range expected 1 to 3 arguments, got %zu", nargs);
      for (size_t i = 0; i < nargs; ++i) {
        if (args[i].k != vk::integer && args[i].k != vk::boolean)
          return rt_fail(r, at, ML_E_ARG, "'%s' object cannot be interpreted as an integer", type_name(args[i]));
      }
      if (nargs == 1) a[1] = args[0].k == vk::integer ? args[0].i : args[0].b;
      else
        for (size_t i = 0; i < nargs; ++i) a[i] = args[i].k == vk::integer ? args[i].i : args[i].b;
      if (a[2] == 0) return rt_fail(r, at, ML_E_ARG, "range() arg 3 must not be zero");
      // Count without overflow.
      long double span = a[2] > 0 ? (long double)a[1] - a[0] : (long double)a[0] - a[1];
      long double step = a[2] > 0 ? (long double)a[2] : -(long double)a[2];
      long double cnt = span <= 0 ? 0 : (span + step - 1) / step;
      if (cnt > (long double)ML_TEMPLATE_MAX_ITERATIONS)
        return rt_fail(r, at, ML_E_ARG, "range of %.0Lf items past the %llu-iteration limit", cnt,
                       (unsigned long long)ML_TEMPLATE_MAX_ITERATIONS);
      size_t n = (size_t)cnt;
      ml_vec<jv> items;
      if (!items.reserve(n)) return rt_nomem(r);
      for (size_t i = 0; i < n; ++i) items.push(v_int(a[0] + (int64_t)i * a[2]));
      if (!new_list(r->b, items.data(), n, out)) return rt_nomem(r);
      return ML_OK;
    }
    case fn::dict: case fn::namespace_: {
      if (!new_dict(r->b, nkw + 4, out)) return rt_nomem(r);
      for (size_t i = 0; i < nargs; ++i) {  // dict(mapping) / namespace(mapping)
        if (args[i].k != vk::dict && args[i].k != vk::ns)
          return rt_fail(r, at, ML_E_ARG, "%s() positional arguments must be mappings", f.f_id == fn::dict ? "dict" : "namespace");
        for (size_t k = 0; k < args[i].d->n; ++k)
          if (!dict_set(r->b, out->d, args[i].d->keys[k], args[i].d->vals[k])) return rt_nomem(r);
      }
      for (size_t i = 0; i < nkw; ++i) {
        jv key;
        if (!new_str(r->b, kw[i], strlen(kw[i]), &key) || !dict_set(r->b, out->d, key, kwv[i])) return rt_nomem(r);
      }
      if (f.f_id == fn::namespace_) out->k = vk::ns;
      return ML_OK;
    }
    case fn::caller: case fn::cycle_: break;
  }
  return rt_fail(r, at, ML_E_ARG, "this function cannot be called");
}

}  // namespace

ml_status rt_call(rt* r, const node* at, const jv& callee, const jv* args, size_t nargs, const char* const* kw, const jv* kwv,
                  size_t nkw, jv* out) {
  switch (callee.k) {
    case vk::macro: return call_macro(r, at, callee, args, nargs, kw, kwv, nkw, out);
    case vk::func: return call_func(r, at, callee, args, nargs, kw, kwv, nkw, out);
    case vk::method: return call_method(r, at, callee, args, nargs, kw, kwv, nkw, out);
    case vk::undef:
      if (callee.s) return rt_fail(r, at, ML_E_ARG, "'%s' is undefined", callee.s);
      return rt_fail(r, at, ML_E_ARG, "an undefined value is not callable");
    default: return rt_fail(r, at, ML_E_ARG, "'%s' object is not callable", type_name(callee));
  }
}

}  // namespace jj
