// The chat-template evaluator: walks the syntax tree with jinja2's semantics (scopes: the template
// level, one per for-loop iteration, macro calls; the operators themselves are in ops.cpp, the
// calls of macros and the global functions in call.cpp), and writes into an output buffer. Loop iterations, macro depth, output size and memory are bounded
// (ML_E_ARG past them).
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "model/chat/eval.h"

namespace jj {

ml_bump* rt_bump(rt* r) { return r->b; }

ml_status rt_fail(rt* r, const node* at, ml_status s, const char* fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (at) return ml_fail(r->err, s, "template line %d: %s", at->line, msg);
  return ml_fail(r->err, s, "template: %s", msg);
}

ml_status rt_nomem(rt* r) {
  if (r->b->used_total > ML_TEMPLATE_MAX_MEMORY / 2)
    return ml_fail(r->err, ML_E_ARG, "template: the rendering needs more than the %zu-byte memory limit", ML_TEMPLATE_MAX_MEMORY);
  return ml_fail(r->err, ML_E_NOMEM, "template: out of memory");
}

// ---- scopes ----

bool scope_set(rt* r, scope* s, const char* name, size_t n, const jv& v) {
  for (size_t i = 0; i < s->vars.size(); ++i)
    if (s->vars[i].n == n && memcmp(s->vars[i].name, name, n) == 0) {
      s->vars[i].v = v;
      return true;
    }
  (void)r;
  return s->vars.push(var{name, n, v});
}

namespace {

const jv* scope_get(const scope* s, const char* name, size_t n) {
  for (; s; s = s->parent)
    for (size_t i = s->vars.size(); i-- > 0;)
      if (s->vars[i].n == n && memcmp(s->vars[i].name, name, n) == 0) return &s->vars[i].v;
  return nullptr;
}

bool name_is(const char* s, size_t n, const char* lit) { return strlen(lit) == n && memcmp(s, lit, n) == 0; }

jv func(fn id) {
  jv v;
  v.k = vk::func, v.f_id = id;
  return v;
}

ml_status lookup(rt* r, const node* x, scope* s, jv* out) {
  if (const jv* v = scope_get(s, x->s, x->n)) {
    *out = *v;
    return ML_OK;
  }
  if (const jv* v = r->ctx ? dict_get_str(r->ctx, x->s, x->n) : nullptr) {
    *out = *v;
    return ML_OK;
  }
  if (name_is(x->s, x->n, "range")) *out = func(fn::range);
  else if (name_is(x->s, x->n, "dict")) *out = func(fn::dict);
  else if (name_is(x->s, x->n, "namespace")) *out = func(fn::namespace_);
  else if (name_is(x->s, x->n, "raise_exception")) *out = func(fn::raise_exception);
  else if (name_is(x->s, x->n, "strftime_now")) *out = func(fn::strftime_now);
  else *out = v_undef(x->s);
  return ML_OK;
}

// ---- output ----

ml_status emit(rt* r, const node* at, ml_vec<char>* o, const char* s, size_t n) {
  if (n > ML_TEMPLATE_MAX_OUTPUT || o->size() > ML_TEMPLATE_MAX_OUTPUT - n)
    return rt_fail(r, at, ML_E_ARG, "output past the %zu-byte limit", ML_TEMPLATE_MAX_OUTPUT);
  if (!o->append(s, n)) return rt_nomem(r);
  return ML_OK;
}

ml_status emit_value(rt* r, const node* at, ml_vec<char>* o, const jv& v) {
  if (v.k == vk::str) return emit(r, at, o, v.s, v.n);
  ml_vec<char> t;
  if (!append_str(&t, v)) return rt_nomem(r);
  return emit(r, at, o, t.data(), t.size());
}


}  // namespace

namespace {

ml_status assign(rt* r, const node* at, scope* s, const node* tgt, const jv& v) {
  if (tgt->k == nk::name) {
    if (!scope_set(r, s, tgt->s, tgt->n, v)) return rt_nomem(r);
    return ML_OK;
  }
  // Unpacking: a, b = v
  ml_vec<jv> items;
  if (v.k == vk::list || v.k == vk::str) {
    ML_TRY(iterate(r, at, v, &items));
  } else if (v.k == vk::dict) {
    ML_TRY(iterate(r, at, v, &items));
  } else {
    return rt_fail(r, at, ML_E_ARG, "cannot unpack non-iterable %s object", type_name(v));
  }
  if (items.size() != tgt->nkids)
    return rt_fail(r, at, ML_E_ARG, "%s values to unpack (expected %zu, got %zu)", items.size() > tgt->nkids ? "too many" : "not enough",
                   tgt->nkids, items.size());
  for (size_t i = 0; i < tgt->nkids; ++i)
    if (!scope_set(r, s, tgt->kids[i]->s, tgt->kids[i]->n, items[i])) return rt_nomem(r);
  return ML_OK;
}

}  // namespace

// ---- expressions ----

ml_status eval_args(rt* r, const node* x, scope* s, ml_vec<jv>* args, ml_vec<jv>* kwv) {
  if (!args->reserve(x->nkids) || !kwv->reserve(x->nkw)) return rt_nomem(r);
  for (size_t i = 0; i < x->nkids; ++i) {
    jv v;
    ML_TRY(eval(r, x->kids[i], s, &v));
    args->push(v);
  }
  for (size_t i = 0; i < x->nkw; ++i) {
    jv v;
    ML_TRY(eval(r, x->kwv[i], s, &v));
    kwv->push(v);
  }
  return ML_OK;
}

ml_status eval(rt* r, const node* x, scope* s, jv* out) {
  switch (x->k) {
    case nk::lit: *out = x->val; return ML_OK;
    case nk::name: return lookup(r, x, s, out);
    case nk::attr: {
      jv v;
      ML_TRY(eval(r, x->a, s, &v));
      return get_attr(r, x, v, x->s, x->n, out);
    }
    case nk::item: {
      jv v, k;
      ML_TRY(eval(r, x->a, s, &v));
      ML_TRY(eval(r, x->b, s, &k));
      return get_item(r, x, v, k, out);
    }
    case nk::slice: {
      jv v, a = v_none(), b = v_none(), c = v_none();
      ML_TRY(eval(r, x->a, s, &v));
      if (x->b) ML_TRY(eval(r, x->b, s, &a));
      if (x->c) ML_TRY(eval(r, x->c, s, &b));
      if (x->kwv[0]) ML_TRY(eval(r, x->kwv[0], s, &c));
      return slice_value(r, x, v, a, b, c, out);
    }
    case nk::call: {
      jv callee;
      ML_TRY(eval(r, x->a, s, &callee));
      ml_vec<jv> args, kwv;
      ML_TRY(eval_args(r, x, s, &args, &kwv));
      return rt_call(r, x, callee, args.data(), args.size(), x->kw, kwv.data(), kwv.size(), out);
    }
    case nk::filter: {
      jv v;
      ML_TRY(eval(r, x->a, s, &v));
      ml_vec<jv> args, kwv;
      ML_TRY(eval_args(r, x, s, &args, &kwv));
      return apply_filter(r, x, x->builtin, v, args.data(), args.size(), x->kw, kwv.data(), kwv.size(), out);
    }
    case nk::test: {
      jv v;
      ML_TRY(eval(r, x->a, s, &v));
      ml_vec<jv> args, kwv;
      ML_TRY(eval_args(r, x, s, &args, &kwv));
      bool b;
      ML_TRY(apply_test(r, x, x->builtin, v, args.data(), args.size(), &b));
      *out = v_bool(b != x->negate);
      return ML_OK;
    }
    case nk::neg: case nk::pos: {
      jv v;
      ML_TRY(eval(r, x->a, s, &v));
      if (v.k == vk::undef) return undefined_error(r, x, v);
      if (!is_number(v)) return rt_fail(r, x, ML_E_ARG, "bad operand type for unary %s: '%s'", x->k == nk::neg ? "-" : "+", type_name(v));
      if (x->k == nk::pos) {
        *out = v.k == vk::boolean ? v_int(v.b) : v;
      } else if (v.k == vk::real) {
        *out = v_real(-v.f);
      } else {
        int64_t i = v.k == vk::integer ? v.i : v.b;
        if (i == INT64_MIN) return rt_fail(r, x, ML_E_ARG, "integer overflow in unary -");
        *out = v_int(-i);
      }
      return ML_OK;
    }
    case nk::not_: {
      jv v;
      ML_TRY(eval(r, x->a, s, &v));
      *out = v_bool(!truthy(v));
      return ML_OK;
    }
    case nk::and_: case nk::or_: {
      jv v;
      ML_TRY(eval(r, x->a, s, &v));
      if (truthy(v) == (x->k == nk::or_)) {
        *out = v;
        return ML_OK;
      }
      return eval(r, x->b, s, out);
    }
    case nk::bin: {
      jv a, b;
      ML_TRY(eval(r, x->a, s, &a));
      ML_TRY(eval(r, x->b, s, &b));
      return arith(r, x, x->o, a, b, out);
    }
    case nk::compare: {
      jv a;
      ML_TRY(eval(r, x->else_kids[0], s, &a));
      for (size_t i = 0; i + 1 < x->nelse; ++i) {
        jv b;
        ML_TRY(eval(r, x->else_kids[i + 1], s, &b));
        bool ok;
        ML_TRY(compare_values(r, x, x->ops[i], a, b, &ok));
        if (!ok) {
          *out = v_bool(false);
          return ML_OK;
        }
        a = b;
      }
      *out = v_bool(true);
      return ML_OK;
    }
    case nk::cond: {
      jv c;
      ML_TRY(eval(r, x->a, s, &c));
      if (truthy(c)) return eval(r, x->b, s, out);
      if (x->c) return eval(r, x->c, s, out);
      *out = v_undef(nullptr);
      return ML_OK;
    }
    case nk::list: case nk::tuple: {
      ml_vec<jv> items;
      if (!items.reserve(x->nkids)) return rt_nomem(r);
      for (size_t i = 0; i < x->nkids; ++i) {
        jv v;
        ML_TRY(eval(r, x->kids[i], s, &v));
        items.push(v);
      }
      if (!new_list(r->b, items.data(), items.size(), out)) return rt_nomem(r);
      out->tuple = x->k == nk::tuple;
      return ML_OK;
    }
    case nk::dict: {
      if (!new_dict(r->b, x->nkids, out)) return rt_nomem(r);
      for (size_t i = 0; i < x->nkids; ++i) {
        jv k, v;
        ML_TRY(eval(r, x->kids[i], s, &k));
        ML_TRY(eval(r, x->else_kids[i], s, &v));
        if (k.k == vk::list && !k.tuple) return rt_fail(r, x, ML_E_ARG, "unhashable type: 'list'");
        if (k.k == vk::dict) return rt_fail(r, x, ML_E_ARG, "unhashable type: 'dict'");
        if (!dict_set(r->b, out->d, k, v)) return rt_nomem(r);
      }
      return ML_OK;
    }
    default: break;
  }
  return rt_fail(r, x, ML_E_FORMAT, "statement used as an expression");
}

// ---- statements ----

namespace {

ml_status count_iteration(rt* r, const node* at) {
  if (++r->iterations > ML_TEMPLATE_MAX_ITERATIONS)
    return rt_fail(r, at, ML_E_ARG, "more than %llu loop iterations", (unsigned long long)ML_TEMPLATE_MAX_ITERATIONS);
  return ML_OK;
}

ml_status exec_for(rt* r, const node* x, scope* s, ml_vec<char>* o) {
  jv seq;
  ML_TRY(eval(r, x->b, s, &seq));
  ml_vec<jv> all;
  ML_TRY(iterate(r, x, seq, &all));
  // The loop filter runs first: loop.length and loop.index count the items it keeps.
  ml_vec<jv> items;
  if (x->c) {
    for (size_t i = 0; i < all.size(); ++i) {
      ML_TRY(count_iteration(r, x));
      scope fs;
      fs.parent = s;
      ML_TRY(assign(r, x, &fs, x->a, all[i]));
      jv c;
      ML_TRY(eval(r, x->c, &fs, &c));
      if (truthy(c) && !items.push(all[i])) return rt_nomem(r);
    }
  } else {
    items = static_cast<ml_vec<jv>&&>(all);
  }
  const size_t n = items.size();
  if (n == 0) return x->nelse ? exec_body(r, x->else_kids, x->nelse, s, o) : ML_OK;
  // One loop object per loop, updated in place at each iteration (a loop must not allocate per
  // iteration: the iteration limit, not the memory limit, is what bounds a long loop).
  static const char* const keys[] = {"index", "index0", "revindex", "revindex0", "first", "last", "length", "previtem", "nextitem", "depth", "depth0"};
  const bool uses_loop = x->negate;
  jv lp;
  if (uses_loop) {
    if (!new_dict(r->b, 11, &lp)) return rt_nomem(r);
    for (int k = 0; k < 11; ++k)
      if (!dict_set(r->b, lp.d, v_str(keys[k], strlen(keys[k])), v_none())) return rt_nomem(r);
    lp.k = vk::ns;     // attribute access only
    lp.tuple = true;   // marks a loop object (loop.cycle)
  }
  for (size_t i = 0; i < n; ++i) {
    ML_TRY(count_iteration(r, x));
    scope it;
    it.parent = s;
    ML_TRY(assign(r, x, &it, x->a, items[i]));
    const jv vals[11] = {v_int((int64_t)i + 1), v_int((int64_t)i), v_int((int64_t)(n - i)), v_int((int64_t)(n - i - 1)),
                         v_bool(i == 0), v_bool(i + 1 == n), v_int((int64_t)n), i > 0 ? items[i - 1] : v_undef(nullptr),
                         i + 1 < n ? items[i + 1] : v_undef(nullptr), v_int(1), v_int(0)};
    if (uses_loop) {
      for (int k = 0; k < 11; ++k) lp.d->vals[k] = vals[k];
      if (!scope_set(r, &it, "loop", 4, lp)) return rt_nomem(r);
    }
    ML_TRY(exec_body(r, x->kids, x->nkids, &it, o));
    if (r->flow == flow_kind::brk) {
      r->flow = flow_kind::none;
      break;
    }
    if (r->flow == flow_kind::cont) r->flow = flow_kind::none;
  }
  return ML_OK;
}

ml_status exec_if(rt* r, const node* x, scope* s, ml_vec<char>* o) {
  jv c;
  ML_TRY(eval(r, x->a, s, &c));
  if (truthy(c)) return exec_body(r, x->kids, x->nkids, s, o);
  return exec_body(r, x->else_kids, x->nelse, s, o);
}

// Renders kids into a fresh string, then applies the filter chain f (whose innermost operand is
// the placeholder holder).
ml_status capture(rt* r, const node* x, scope* s, jv* out) {
  ml_vec<char> buf;
  ML_TRY(exec_body(r, x->kids, x->nkids, s, &buf));
  if (!new_str(r->b, buf.data() ? buf.data() : "", buf.size(), out)) return rt_nomem(r);
  if (!x->b) return ML_OK;
  // Walk the chain from the placeholder outwards.
  ml_vec<const node*> chain;
  for (const node* f = x->b; f != x->c; f = f->a)
    if (!chain.push(f)) return rt_nomem(r);
  for (size_t i = chain.size(); i-- > 0;) {
    const node* f = chain[i];
    ml_vec<jv> args, kwv;
    ML_TRY(eval_args(r, f, s, &args, &kwv));
    ML_TRY(apply_filter(r, f, f->builtin, *out, args.data(), args.size(), f->kw, kwv.data(), kwv.size(), out));
  }
  return ML_OK;
}

}  // namespace

namespace {
bool holds_macro(const jv& v, int depth) {
  if (v.k == vk::macro) return true;
  if (depth > ML_TEMPLATE_MAX_NESTING) return true;  // too deep to tell: refuse
  if (v.k == vk::list)
    for (size_t i = 0; i < v.l->n; ++i)
      if (holds_macro(v.l->items[i], depth + 1)) return true;
  if (v.k == vk::dict || v.k == vk::ns)
    for (size_t i = 0; i < v.d->n; ++i)
      if (holds_macro(v.d->vals[i], depth + 1)) return true;
  return false;
}
}  // namespace

ml_status exec(rt* r, const node* x, scope* s, ml_vec<char>* o) {
  switch (x->k) {
    case nk::text: return emit(r, x, o, x->s, x->n);
    case nk::output: {
      jv v;
      ML_TRY(eval(r, x->a, s, &v));
      return emit_value(r, x, o, v);
    }
    case nk::if_: return exec_if(r, x, s, o);
    case nk::for_: return exec_for(r, x, s, o);
    case nk::set: {
      jv v;
      ML_TRY(eval(r, x->b, s, &v));
      return assign(r, x, s, x->a, v);
    }
    case nk::set_attr: {
      jv target, v;
      ML_TRY(eval(r, x->a->a, s, &target));
      ML_TRY(eval(r, x->b, s, &v));
      if (target.k != vk::ns) return rt_fail(r, x, ML_E_ARG, "cannot assign attribute on non-namespace object");
      // A macro closes over the scope it was defined in, which may end before the namespace does.
      if (holds_macro(v, 0)) return rt_fail(r, x, ML_E_ARG, "storing a macro in a namespace is not supported");
      jv key;
      if (!new_str(r->b, x->a->s, x->a->n, &key) || !dict_set(r->b, target.d, key, v)) return rt_nomem(r);
      return ML_OK;
    }
    case nk::set_block: {
      jv v;
      ML_TRY(capture(r, x, s, &v));
      return assign(r, x, s, x->a, v);
    }
    case nk::filter_block: {
      jv v;
      ML_TRY(capture(r, x, s, &v));
      return emit_value(r, x, o, v);
    }
    case nk::macro: {
      jv m;
      m.k = vk::macro, m.m = x, m.env = s;
      if (!scope_set(r, s, x->s, x->n, m)) return rt_nomem(r);
      return ML_OK;
    }
    case nk::call_block: {
      const node* c = x->a;
      jv callee;
      ML_TRY(eval(r, c->a, s, &callee));
      ml_vec<jv> args, kwv;
      ML_TRY(eval_args(r, c, s, &args, &kwv));
      if (callee.k != vk::macro) return rt_fail(r, x, ML_E_ARG, "a call block needs a macro");
      // caller(): a macro whose body is the call block's, closing over this scope.
      jv holder;
      holder.k = vk::macro, holder.env = s;
      jv* hp = ml_bump_new<jv>(r->b, holder);
      if (!hp) return rt_nomem(r);
      jv m = callee;
      m.caller = x, m.recv = hp;
      jv v;
      ML_TRY(call_macro(r, x, m, args.data(), args.size(), c->kw, kwv.data(), kwv.size(), &v));
      return emit_value(r, x, o, v);
    }
    case nk::with_: {
      scope w;
      w.parent = s;
      for (size_t i = 0; i < x->nkw; ++i) {
        jv v;
        ML_TRY(eval(r, x->kwv[i], s, &v));
        if (!scope_set(r, &w, x->kw[i], strlen(x->kw[i]), v)) return rt_nomem(r);
      }
      return exec_body(r, x->kids, x->nkids, &w, o);
    }
    case nk::body: return exec_body(r, x->kids, x->nkids, s, o);
    case nk::break_: r->flow = flow_kind::brk; return ML_OK;
    case nk::continue_: r->flow = flow_kind::cont; return ML_OK;
    default: return rt_fail(r, x, ML_E_FORMAT, "expression used as a statement");
  }
}

ml_status exec_body(rt* r, node* const* kids, size_t n, scope* s, ml_vec<char>* o) {
  for (size_t i = 0; i < n; ++i) {
    ML_TRY(exec(r, kids[i], s, o));
    if (r->flow != flow_kind::none) return ML_OK;
  }
  return ML_OK;
}

}  // namespace jj
