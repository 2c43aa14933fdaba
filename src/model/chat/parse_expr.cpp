// The chat-template parser, expressions: jinja2's grammar and precedence (lowest first): the
// conditional expression, or, and, not, comparisons (chained), + -, ~, * / // %, **, unary - +,
// then primaries (names, literals, (tuples), [lists], {dicts}) with their postfixes (.attr, [item],
// [a:b:c], calls) and filters / tests. Unknown filters and tests fail here, naming the line.
#include "model/chat/parser.h"

namespace jj {
namespace {
ml_status unary(parser* P, node** out, bool with_filter);
ml_status primary(parser* P, node** out);
}  // namespace

// Call arguments after '(' up to ')': positional then keyword (name=value).
ml_status call_args(parser* P, node* call) {
  ml_vec<node*> pos, kwv;
  ml_vec<const char*> kw;
  ML_TRY(expect_op(P, "("));
  while (!is_op(cur(P), ")")) {
    if (!pos.empty() || !kw.empty()) ML_TRY(expect_op(P, ","));
    if (is_op(cur(P), ")")) break;  // trailing comma
    if (is_op(cur(P), "*") || is_op(cur(P), "**"))
      return ml_fail(P->err, ML_E_FORMAT, "template line %d: *args and **kwargs in calls are not supported", cur(P).line);
    if (cur(P).k == tk::name && is_op(peek(P), "=")) {
      char* name = ml_bump_strdup(P->b, cur(P).s, cur(P).n);
      if (!name || !kw.push(name)) return nomem(P);
      P->i += 2;
      node* v;
      ML_TRY(expr(P, &v));
      if (!kwv.push(v)) return nomem(P);
    } else {
      if (!kw.empty()) return fail_at(P, cur(P), "positional argument after a keyword argument");
      node* v;
      ML_TRY(expr(P, &v));
      if (!pos.push(v)) return nomem(P);
    }
  }
  ++P->i;
  if (!freeze(P, pos, &call->kids, &call->nkids) || !freeze(P, kw, &call->kw, &call->nkw) ||
      !freeze(P, kwv, &call->kwv, &call->nkw))
    return nomem(P);
  return ML_OK;
}

namespace {

ml_status postfix(parser* P, node** x) {
  for (;;) {
    const token& t = cur(P);
    if (is_op(t, ".")) {
      ++P->i;
      const token& nm = cur(P);
      node* a = mk(P, nk::attr, t.line);
      if (!a) return nomem(P);
      if (nm.k == tk::name) {
        a->s = ml_bump_strdup(P->b, nm.s, nm.n), a->n = nm.n;
        if (!a->s) return nomem(P);
      } else if (nm.k == tk::integer) {  // x.0 is x[0] in jinja2
        a->k = nk::item;
        node* lit = mk(P, nk::lit, nm.line);
        if (!lit) return nomem(P);
        lit->val = v_int(nm.i);
        a->b = lit;
      } else {
        return fail_at(P, nm, "expected an attribute name after '.'");
      }
      ++P->i;
      a->a = *x;
      *x = a;
    } else if (is_op(t, "[")) {
      ++P->i;
      node* parts[3] = {nullptr, nullptr, nullptr};
      int colons = 0;
      for (;;) {
        if (is_op(cur(P), "]")) break;
        if (is_op(cur(P), ":")) {
          if (++colons > 2) return fail_at(P, cur(P), "too many ':' in a slice");
          ++P->i;
          continue;
        }
        if (parts[colons]) return fail_at(P, cur(P), "expected ']'");
        ML_TRY(expr(P, &parts[colons]));
      }
      ++P->i;
      node* a = mk(P, colons ? nk::slice : nk::item, t.line);
      if (!a) return nomem(P);
      a->a = *x;
      if (colons) {
        a->b = parts[0], a->c = parts[1], a->kids = nullptr;
        a->else_kids = nullptr;
        // The step goes in kwv[0] (slices are rare; no dedicated field).
        a->kwv = ml_bump_array<node*>(P->b, 1);
        if (!a->kwv) return nomem(P);
        a->kwv[0] = parts[2];
      } else {
        if (!parts[0]) return fail_at(P, cur(P), "expected an index inside '[]'");
        a->b = parts[0];
      }
      *x = a;
    } else if (is_op(t, "(")) {
      node* c = mk(P, nk::call, t.line);
      if (!c) return nomem(P);
      c->a = *x;
      ML_TRY(call_args(P, c));
      *x = c;
    } else {
      return ML_OK;
    }
  }
}

}  // namespace

// A filter or test name, possibly dotted (jinja2 allows it; none of ours have dots).
ml_status filter_name(parser* P, const char** s, size_t* n) {
  if (cur(P).k != tk::name) return fail_at(P, cur(P), "expected a filter or test name");
  *s = cur(P).s, *n = cur(P).n;
  ++P->i;
  // Dotted names (jinja2 allows them) only ever name filters and tests we do not have.
  if (is_op(cur(P), ".") && peek(P).k == tk::name)
    return ml_fail(P->err, ML_E_FORMAT, "template line %d: filter or test '%.*s.%.*s' is not supported", cur(P).line, (int)*n, *s,
                   (int)peek(P).n, peek(P).s);
  return ML_OK;
}

ml_status filter_expr(parser* P, node** x) {
  for (;;) {
    const token& t = cur(P);
    if (is_op(t, "|")) {
      ++P->i;
      const char* s = nullptr;
      size_t n = 0;
      int line = cur(P).line;
      ML_TRY(filter_name(P, &s, &n));
      int id = find_filter(s, n);
      if (id < 0) return ml_fail(P->err, ML_E_FORMAT, "template line %d: filter '%.*s' is not supported", line, (int)n, s);
      node* f = mk(P, nk::filter, line);
      if (!f) return nomem(P);
      f->builtin = id, f->s = ml_bump_strdup(P->b, s, n), f->n = n, f->a = *x;
      if (!f->s) return nomem(P);
      if (is_op(cur(P), "(")) ML_TRY(call_args(P, f));
      *x = f;
    } else if (is_name(t, "is")) {
      ++P->i;
      bool neg = false;
      if (is_name(cur(P), "not")) neg = true, ++P->i;
      const char* s = nullptr;
      size_t n = 0;
      int line = cur(P).line;
      // none / true / false are names here too.
      ML_TRY(filter_name(P, &s, &n));
      int id = find_test(s, n);
      if (id < 0) return ml_fail(P->err, ML_E_FORMAT, "template line %d: test '%.*s' is not supported", line, (int)n, s);
      node* te = mk(P, nk::test, line);
      if (!te) return nomem(P);
      te->builtin = id, te->negate = neg, te->s = ml_bump_strdup(P->b, s, n), te->n = n, te->a = *x;
      if (!te->s) return nomem(P);
      const token& nx = cur(P);
      if (is_op(nx, "(")) {
        ML_TRY(call_args(P, te));
      } else if ((nx.k == tk::name || nx.k == tk::str || nx.k == tk::integer || nx.k == tk::real || is_op(nx, "[") ||
                  is_op(nx, "{")) &&
                 !is_name(nx, "else") && !is_name(nx, "or") && !is_name(nx, "and") && !is_name(nx, "if") &&
                 !is_name(nx, "is") && !is_name(nx, "in") && !is_name(nx, "not")) {
        // One argument without parentheses: `x is divisibleby 3`, `x is sameas none`.
        node* arg;
        ML_TRY(primary(P, &arg));
        ML_TRY(postfix(P, &arg));
        te->kids = ml_bump_array<node*>(P->b, 1);
        if (!te->kids) return nomem(P);
        te->kids[0] = arg, te->nkids = 1;
      }
      *x = te;
    } else if (is_op(t, "(")) {
      node* c = mk(P, nk::call, t.line);
      if (!c) return nomem(P);
      c->a = *x;
      ML_TRY(call_args(P, c));
      *x = c;
    } else {
      return ML_OK;
    }
  }
}

namespace {

// A parenthesised expression or tuple, a list or a dict literal.
ml_status seq_literal(parser* P, node** out, const char* close, nk kind) {
  int line = cur(P).line;
  ++P->i;
  ml_vec<node*> items, vals;
  bool comma = false;
  while (!is_op(cur(P), close)) {
    if (!items.empty()) {
      ML_TRY(expect_op(P, ","));
      comma = true;
      if (is_op(cur(P), close)) break;
    }
    node* v;
    ML_TRY(expr(P, &v));
    if (!items.push(v)) return nomem(P);
    if (kind == nk::dict) {
      ML_TRY(expect_op(P, ":"));
      node* w;
      ML_TRY(expr(P, &w));
      if (!vals.push(w)) return nomem(P);
    }
  }
  ++P->i;
  if (kind == nk::tuple && items.size() == 1 && !comma) {  // (x) is x
    *out = items[0];
    return ML_OK;
  }
  node* x = mk(P, kind, line);
  if (!x || !freeze(P, items, &x->kids, &x->nkids) || !freeze(P, vals, &x->else_kids, &x->nelse)) return nomem(P);
  *out = x;
  return ML_OK;
}

ml_status primary(parser* P, node** out) {
  depth_guard g(P);
  ML_TRY(check_depth(P));
  const token& t = cur(P);
  if (t.k == tk::name) {
    node* x = mk(P, nk::lit, t.line);
    if (!x) return nomem(P);
    if (is_name(t, "true") || is_name(t, "True")) x->val = v_bool(true);
    else if (is_name(t, "false") || is_name(t, "False")) x->val = v_bool(false);
    else if (is_name(t, "none") || is_name(t, "None")) x->val = v_none();
    else {
      x->k = nk::name;
      x->s = ml_bump_strdup(P->b, t.s, t.n), x->n = t.n;
      if (!x->s) return nomem(P);
    }
    ++P->i;
    *out = x;
    return ML_OK;
  }
  if (t.k == tk::str) {
    // Adjacent string literals concatenate.
    ml_vec<char> s;
    int line = t.line;
    while (cur(P).k == tk::str) {
      if (!s.append(cur(P).s, cur(P).n)) return nomem(P);
      ++P->i;
    }
    node* x = mk(P, nk::lit, line);
    if (!x) return nomem(P);
    char* c = ml_bump_strdup(P->b, s.data() ? s.data() : "", s.size());
    if (!c) return nomem(P);
    x->val = v_str(c, s.size());
    *out = x;
    return ML_OK;
  }
  if (t.k == tk::integer || t.k == tk::real) {
    node* x = mk(P, nk::lit, t.line);
    if (!x) return nomem(P);
    x->val = t.k == tk::integer ? v_int(t.i) : v_real(t.f);
    ++P->i;
    *out = x;
    return ML_OK;
  }
  if (is_op(t, "(")) return seq_literal(P, out, ")", nk::tuple);
  if (is_op(t, "[")) return seq_literal(P, out, "]", nk::list);
  if (is_op(t, "{")) return seq_literal(P, out, "}", nk::dict);
  return fail_at(P, t, "expected an expression");
}

ml_status unary(parser* P, node** out, bool with_filter) {
  depth_guard g(P);
  ML_TRY(check_depth(P));
  const token& t = cur(P);
  node* x;
  if (is_op(t, "-") || is_op(t, "+")) {
    ++P->i;
    node* inner;
    ML_TRY(unary(P, &inner, false));
    x = mk(P, is_op(t, "-") ? nk::neg : nk::pos, t.line);
    if (!x) return nomem(P);
    x->a = inner;
  } else {
    ML_TRY(primary(P, &x));
  }
  ML_TRY(postfix(P, &x));
  if (with_filter) ML_TRY(filter_expr(P, &x));
  *out = x;
  return ML_OK;
}

ml_status binary(parser* P, node** x, op o, node* rhs, int line) {
  node* y = mk(P, nk::bin, line);
  if (!y) return nomem(P);
  y->o = o, y->a = *x, y->b = rhs;
  *x = y;
  return ML_OK;
}

ml_status pow_expr(parser* P, node** out) {
  ML_TRY(unary(P, out, true));
  while (is_op(cur(P), "**")) {
    int line = cur(P).line;
    ++P->i;
    node* r;
    ML_TRY(unary(P, &r, true));
    ML_TRY(binary(P, out, op::pow, r, line));
  }
  return ML_OK;
}
ml_status math2(parser* P, node** out) {
  ML_TRY(pow_expr(P, out));
  for (;;) {
    const token& t = cur(P);
    op o;
    if (is_op(t, "*")) o = op::mul;
    else if (is_op(t, "/")) o = op::div;
    else if (is_op(t, "//")) o = op::floordiv;
    else if (is_op(t, "%")) o = op::mod;
    else return ML_OK;
    ++P->i;
    node* r;
    ML_TRY(pow_expr(P, &r));
    ML_TRY(binary(P, out, o, r, t.line));
  }
}
ml_status concat(parser* P, node** out) {
  ML_TRY(math2(P, out));
  while (is_op(cur(P), "~")) {
    int line = cur(P).line;
    ++P->i;
    node* r;
    ML_TRY(math2(P, &r));
    ML_TRY(binary(P, out, op::concat, r, line));
  }
  return ML_OK;
}
ml_status math1(parser* P, node** out) {
  ML_TRY(concat(P, out));
  for (;;) {
    const token& t = cur(P);
    op o;
    if (is_op(t, "+")) o = op::add;
    else if (is_op(t, "-")) o = op::sub;
    else return ML_OK;
    ++P->i;
    node* r;
    ML_TRY(concat(P, &r));
    ML_TRY(binary(P, out, o, r, t.line));
  }
}
ml_status compare(parser* P, node** out) {
  node* first;
  ML_TRY(math1(P, &first));
  ml_vec<node*> operands;
  ml_vec<op> ops;
  if (!operands.push(first)) return nomem(P);
  int line = cur(P).line;
  for (;;) {
    const token& t = cur(P);
    op o;
    if (is_op(t, "==")) o = op::eq;
    else if (is_op(t, "!=")) o = op::ne;
    else if (is_op(t, "<")) o = op::lt;
    else if (is_op(t, "<=")) o = op::le;
    else if (is_op(t, ">")) o = op::gt;
    else if (is_op(t, ">=")) o = op::ge;
    else if (is_name(t, "in")) o = op::in;
    else if (is_name(t, "not") && is_name(peek(P), "in")) o = op::not_in, ++P->i;
    else break;
    ++P->i;
    node* r;
    ML_TRY(math1(P, &r));
    if (!operands.push(r) || !ops.push(o)) return nomem(P);
  }
  if (ops.empty()) {
    *out = first;
    return ML_OK;
  }
  node* c = mk(P, nk::compare, line);
  size_t nops;
  if (!c || !freeze(P, operands, &c->else_kids, &c->nelse) || !freeze(P, ops, &c->ops, &nops)) return nomem(P);
  *out = c;
  return ML_OK;
}
ml_status not_expr(parser* P, node** out) {
  depth_guard g(P);
  ML_TRY(check_depth(P));
  if (is_name(cur(P), "not")) {
    int line = cur(P).line;
    ++P->i;
    node* inner;
    ML_TRY(not_expr(P, &inner));
    node* x = mk(P, nk::not_, line);
    if (!x) return nomem(P);
    x->a = inner;
    *out = x;
    return ML_OK;
  }
  return compare(P, out);
}
ml_status and_expr(parser* P, node** out) {
  ML_TRY(not_expr(P, out));
  while (is_name(cur(P), "and")) {
    int line = cur(P).line;
    ++P->i;
    node* r;
    ML_TRY(not_expr(P, &r));
    node* x = mk(P, nk::and_, line);
    if (!x) return nomem(P);
    x->a = *out, x->b = r;
    *out = x;
  }
  return ML_OK;
}

}  // namespace

ml_status or_expr(parser* P, node** out) {
  ML_TRY(and_expr(P, out));
  while (is_name(cur(P), "or")) {
    int line = cur(P).line;
    ++P->i;
    node* r;
    ML_TRY(and_expr(P, &r));
    node* x = mk(P, nk::or_, line);
    if (!x) return nomem(P);
    x->a = *out, x->b = r;
    *out = x;
  }
  return ML_OK;
}
ml_status expr(parser* P, node** out) {
  depth_guard g(P);
  ML_TRY(check_depth(P));
  ML_TRY(or_expr(P, out));
  while (is_name(cur(P), "if")) {
    int line = cur(P).line;
    ++P->i;
    node* c;
    ML_TRY(or_expr(P, &c));
    node* x = mk(P, nk::cond, line);
    if (!x) return nomem(P);
    x->a = c, x->b = *out;
    if (is_name(cur(P), "else")) {
      ++P->i;
      ML_TRY(expr(P, &x->c));
    }
    *out = x;
  }
  return ML_OK;
}

// A top-level expression: a bare tuple `a, b` is allowed ({{ 1, 2 }} prints (1, 2)).
ml_status tuple_expr(parser* P, node** out, bool with_cond) {
  int line = cur(P).line;
  node* first;
  ML_TRY(with_cond ? expr(P, &first) : or_expr(P, &first));
  if (!is_op(cur(P), ",")) {
    *out = first;
    return ML_OK;
  }
  ml_vec<node*> items;
  if (!items.push(first)) return nomem(P);
  while (is_op(cur(P), ",")) {
    ++P->i;
    if (cur(P).k == tk::block_end || cur(P).k == tk::var_end || is_name(cur(P), "if")) break;
    node* v;
    ML_TRY(with_cond ? expr(P, &v) : or_expr(P, &v));
    if (!items.push(v)) return nomem(P);
  }
  node* x = mk(P, nk::tuple, line);
  if (!x || !freeze(P, items, &x->kids, &x->nkids)) return nomem(P);
  *out = x;
  return ML_OK;
}

// Assignment targets: a name, or names separated by commas (optionally in parentheses).
ml_status target(parser* P, node** out, bool allow_attr) {
  int line = cur(P).line;
  bool paren = is_op(cur(P), "(");
  if (paren) ++P->i;
  ml_vec<node*> names;
  for (;;) {
    const token& t = cur(P);
    if (t.k != tk::name) return fail_at(P, t, "expected a variable name");
    node* x = mk(P, nk::name, t.line);
    if (!x) return nomem(P);
    x->s = ml_bump_strdup(P->b, t.s, t.n), x->n = t.n;
    if (!x->s) return nomem(P);
    ++P->i;
    if (allow_attr && names.empty() && !paren && is_op(cur(P), ".")) {  // ns.attr
      ++P->i;
      if (cur(P).k != tk::name) return fail_at(P, cur(P), "expected an attribute name after '.'");
      node* a = mk(P, nk::attr, line);
      if (!a) return nomem(P);
      a->a = x, a->s = ml_bump_strdup(P->b, cur(P).s, cur(P).n), a->n = cur(P).n;
      if (!a->s) return nomem(P);
      ++P->i;
      *out = a;
      return ML_OK;
    }
    if (!names.push(x)) return nomem(P);
    if (!is_op(cur(P), ",")) break;
    ++P->i;
  }
  if (paren) ML_TRY(expect_op(P, ")"));
  if (names.size() == 1) {
    *out = names[0];
    return ML_OK;
  }
  node* tup = mk(P, nk::tuple, line);
  if (!tup || !freeze(P, names, &tup->kids, &tup->nkids)) return nomem(P);
  *out = tup;
  return ML_OK;
}

}  // namespace jj
