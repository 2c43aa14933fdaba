// The chat-template parser: tokens -> syntax tree (jj::node, in the template's ml_bump), with
// jinja2's grammar and operator precedence (lowest first): conditional expression, or, and, not,
// comparisons, + -, ~, * / // %, **, unary - +, then primaries with their postfixes (.attr, [item],
// [a:b:c], call) and filters / tests. Unknown tags, filters and tests fail here, naming the line.
#include <cstdio>
#include <cstring>

#include "model/chat/jinja.h"

namespace jj {
namespace {

struct parser {
  const token* t;
  size_t n = 0;
  size_t i = 0;
  ml_bump* b;
  ml_error* err;
  int depth = 0;
};

const token& cur(parser* P) { return P->t[P->i]; }
const token& peek(parser* P, size_t k = 1) { return P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }

bool is_op(const token& t, const char* s) { return t.k == tk::op && t.n == strlen(s) && memcmp(t.s, s, t.n) == 0; }
bool is_name(const token& t, const char* s) { return t.k == tk::name && t.n == strlen(s) && memcmp(t.s, s, t.n) == 0; }

const char* describe(const token& t) {
  switch (t.k) {
    case tk::text: return "text";
    case tk::var_begin: return "'{{'";
    case tk::var_end: return "'}}'";
    case tk::block_begin: return "'{%'";
    case tk::block_end: return "'%}'";
    case tk::name: return "a name";
    case tk::str: return "a string";
    case tk::integer: case tk::real: return "a number";
    case tk::op: return "an operator";
    case tk::eof: return "the end of the template";
  }
  return "?";
}

ml_status fail_at(parser* P, const token& t, const char* what) {
  if (t.k == tk::name || t.k == tk::op)
    return ml_fail(P->err, ML_E_FORMAT, "template line %d: %s, found '%.*s'", t.line, what, (int)(t.n > 40 ? 40 : t.n), t.s);
  return ml_fail(P->err, ML_E_FORMAT, "template line %d: %s, found %s", t.line, what, describe(t));
}
ml_status nomem(parser* P) { return ml_fail(P->err, ML_E_NOMEM, "template: out of memory"); }

node* mk(parser* P, nk k, int line) {
  node* x = ml_bump_new<node>(P->b);
  if (x) x->k = k, x->line = line;
  return x;
}

template <class T>
bool freeze(parser* P, ml_vec<T>& v, T** out, size_t* n) {
  *n = v.size();
  *out = ml_bump_array<T>(P->b, v.size());
  if (!*out) return false;
  for (size_t i = 0; i < v.size(); ++i) (*out)[i] = v[i];
  return true;
}

ml_status expect_op(parser* P, const char* s) {
  if (!is_op(cur(P), s)) {
    char what[48];
    snprintf(what, sizeof what, "expected '%s'", s);
    return fail_at(P, cur(P), what);
  }
  ++P->i;
  return ML_OK;
}
ml_status expect_block_end(parser* P, const char* tag) {
  if (cur(P).k != tk::block_end) {
    char what[64];
    snprintf(what, sizeof what, "expected '%%}' to end the '%s' tag", tag);
    return fail_at(P, cur(P), what);
  }
  ++P->i;
  return ML_OK;
}

struct depth_guard {
  parser* P;
  explicit depth_guard(parser* p) : P(p) { ++P->depth; }
  ~depth_guard() { --P->depth; }
};
ml_status check_depth(parser* P) {
  if (P->depth > ML_TEMPLATE_MAX_NESTING)
    return ml_fail(P->err, ML_E_FORMAT, "template line %d: nesting deeper than %d", cur(P).line, ML_TEMPLATE_MAX_NESTING);
  return ML_OK;
}

ml_status expr(parser* P, node** out);          // conditional expression
ml_status or_expr(parser* P, node** out);       // no conditional (for-loop iterables)
ml_status unary(parser* P, node** out, bool with_filter);
ml_status primary(parser* P, node** out);

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

// ---- statements ----

ml_status body(parser* P, const char* const* ends, size_t nends, ml_vec<node*>* out, size_t* which);

ml_status block_name(parser* P, const char** s, size_t* n) {
  if (cur(P).k != tk::name) return fail_at(P, cur(P), "expected a tag name after '{%'");
  *s = cur(P).s, *n = cur(P).n;
  return ML_OK;
}

ml_status stmt_if(parser* P, node** out) {
  int line = cur(P).line;
  ++P->i;  // 'if' or 'elif'
  node* x = mk(P, nk::if_, line);
  if (!x) return nomem(P);
  ML_TRY(tuple_expr(P, &x->a, true));
  ML_TRY(expect_block_end(P, "if"));
  static const char* const ends[] = {"elif", "else", "endif"};
  ml_vec<node*> kids;
  size_t which;
  ML_TRY(body(P, ends, 3, &kids, &which));
  if (!freeze(P, kids, &x->kids, &x->nkids)) return nomem(P);
  if (which == 0) {  // elif: a nested if in the else branch
    node* e;
    ML_TRY(stmt_if(P, &e));
    x->else_kids = ml_bump_array<node*>(P->b, 1);
    if (!x->else_kids) return nomem(P);
    x->else_kids[0] = e, x->nelse = 1;
    *out = x;
    return ML_OK;  // the nested if consumed endif
  }
  if (which == 1) {
    ++P->i;
    ML_TRY(expect_block_end(P, "else"));
    static const char* const end2[] = {"endif"};
    ml_vec<node*> els;
    ML_TRY(body(P, end2, 1, &els, &which));
    if (!freeze(P, els, &x->else_kids, &x->nelse)) return nomem(P);
  }
  ++P->i;  // endif
  ML_TRY(expect_block_end(P, "endif"));
  *out = x;
  return ML_OK;
}

// Does the subtree mention the name `loop`? (A for loop whose body never does needs no loop object.)
bool mentions_loop(const node* x) {
  if (!x) return false;
  if (x->k == nk::name && x->n == 4 && memcmp(x->s, "loop", 4) == 0) return true;
  if (mentions_loop(x->a) || mentions_loop(x->b) || mentions_loop(x->c)) return true;
  for (size_t i = 0; i < x->nkids; ++i)
    if (mentions_loop(x->kids[i])) return true;
  for (size_t i = 0; i < x->nelse; ++i)
    if (mentions_loop(x->else_kids[i])) return true;
  if (x->k == nk::slice) return mentions_loop(x->kwv[0]);
  if (x->k != nk::compare)
    for (size_t i = 0; i < x->nkw; ++i)
      if (x->kwv && mentions_loop(x->kwv[i])) return true;
  return false;
}

ml_status stmt_for(parser* P, node** out) {
  int line = cur(P).line;
  ++P->i;
  node* x = mk(P, nk::for_, line);
  if (!x) return nomem(P);
  ML_TRY(target(P, &x->a, false));
  if (!is_name(cur(P), "in")) return fail_at(P, cur(P), "expected 'in' in a for loop");
  ++P->i;
  ML_TRY(tuple_expr(P, &x->b, false));
  if (is_name(cur(P), "if")) {
    ++P->i;
    ML_TRY(expr(P, &x->c));
  }
  if (is_name(cur(P), "recursive"))
    return ml_fail(P->err, ML_E_FORMAT, "template line %d: recursive for loops are not supported", cur(P).line);
  ML_TRY(expect_block_end(P, "for"));
  static const char* const ends[] = {"else", "endfor"};
  ml_vec<node*> kids;
  size_t which;
  ML_TRY(body(P, ends, 2, &kids, &which));
  if (!freeze(P, kids, &x->kids, &x->nkids)) return nomem(P);
  if (which == 0) {
    ++P->i;
    ML_TRY(expect_block_end(P, "else"));
    static const char* const end2[] = {"endfor"};
    ml_vec<node*> els;
    ML_TRY(body(P, end2, 1, &els, &which));
    if (!freeze(P, els, &x->else_kids, &x->nelse)) return nomem(P);
  }
  ++P->i;
  ML_TRY(expect_block_end(P, "endfor"));
  for (size_t i = 0; i < x->nkids && !x->negate; ++i) x->negate = mentions_loop(x->kids[i]);  // negate: uses `loop`
  *out = x;
  return ML_OK;
}

ml_status stmt_set(parser* P, node** out) {
  int line = cur(P).line;
  ++P->i;
  node* tgt;
  ML_TRY(target(P, &tgt, true));
  if (is_op(cur(P), "=")) {
    ++P->i;
    node* x = mk(P, tgt->k == nk::attr ? nk::set_attr : nk::set, line);
    if (!x) return nomem(P);
    x->a = tgt;
    ML_TRY(tuple_expr(P, &x->b, true));
    ML_TRY(expect_block_end(P, "set"));
    *out = x;
    return ML_OK;
  }
  // {% set x %}...{% endset %}, optionally with filters: {% set x | trim %}
  if (tgt->k != nk::name) return fail_at(P, cur(P), "expected '=' in a set tag");
  node* x = mk(P, nk::set_block, line);
  if (!x) return nomem(P);
  x->a = tgt;
  node* holder = mk(P, nk::lit, line);  // filters apply to this placeholder, replaced by the body's text
  if (!holder) return nomem(P);
  node* f = holder;
  ML_TRY(filter_expr(P, &f));
  x->b = f == holder ? nullptr : f;
  x->c = holder;
  ML_TRY(expect_block_end(P, "set"));
  static const char* const ends[] = {"endset"};
  ml_vec<node*> kids;
  size_t which;
  ML_TRY(body(P, ends, 1, &kids, &which));
  if (!freeze(P, kids, &x->kids, &x->nkids)) return nomem(P);
  ++P->i;
  ML_TRY(expect_block_end(P, "endset"));
  *out = x;
  return ML_OK;
}

// Macro parameters: (a, b=default, ...).
ml_status params(parser* P, node* x) {
  ml_vec<const char*> names;
  ml_vec<node*> defs;
  ML_TRY(expect_op(P, "("));
  while (!is_op(cur(P), ")")) {
    if (!names.empty()) ML_TRY(expect_op(P, ","));
    if (is_op(cur(P), ")")) break;
    if (cur(P).k != tk::name) return fail_at(P, cur(P), "expected a parameter name");
    char* nm = ml_bump_strdup(P->b, cur(P).s, cur(P).n);
    if (!nm || !names.push(nm)) return nomem(P);
    ++P->i;
    node* d = nullptr;
    if (is_op(cur(P), "=")) {
      ++P->i;
      ML_TRY(expr(P, &d));
    }
    if (!defs.push(d)) return nomem(P);
  }
  ++P->i;
  if (!freeze(P, names, &x->kw, &x->nkw) || !freeze(P, defs, &x->kwv, &x->nkw)) return nomem(P);
  return ML_OK;
}

ml_status stmt_macro(parser* P, node** out) {
  int line = cur(P).line;
  ++P->i;
  if (cur(P).k != tk::name) return fail_at(P, cur(P), "expected a macro name");
  node* x = mk(P, nk::macro, line);
  if (!x) return nomem(P);
  x->s = ml_bump_strdup(P->b, cur(P).s, cur(P).n), x->n = cur(P).n;
  if (!x->s) return nomem(P);
  ++P->i;
  ML_TRY(params(P, x));
  ML_TRY(expect_block_end(P, "macro"));
  static const char* const ends[] = {"endmacro"};
  ml_vec<node*> kids;
  size_t which;
  ML_TRY(body(P, ends, 1, &kids, &which));
  if (!freeze(P, kids, &x->kids, &x->nkids)) return nomem(P);
  ++P->i;
  if (cur(P).k == tk::name) ++P->i;  // {% endmacro name %}
  ML_TRY(expect_block_end(P, "endmacro"));
  *out = x;
  return ML_OK;
}

ml_status stmt_call(parser* P, node** out) {
  int line = cur(P).line;
  ++P->i;
  node* x = mk(P, nk::call_block, line);
  if (!x) return nomem(P);
  x->s = "caller", x->n = 6;
  if (is_op(cur(P), "(")) ML_TRY(params(P, x));  // {% call(args) m() %}: caller's parameters
  node* c;
  ML_TRY(expr(P, &c));
  if (c->k != nk::call) return ml_fail(P->err, ML_E_FORMAT, "template line %d: expected a call in a call tag", line);
  x->a = c;
  ML_TRY(expect_block_end(P, "call"));
  static const char* const ends[] = {"endcall"};
  ml_vec<node*> kids;
  size_t which;
  ML_TRY(body(P, ends, 1, &kids, &which));
  if (!freeze(P, kids, &x->kids, &x->nkids)) return nomem(P);
  ++P->i;
  ML_TRY(expect_block_end(P, "endcall"));
  *out = x;
  return ML_OK;
}

ml_status stmt_filter(parser* P, node** out) {
  int line = cur(P).line;
  ++P->i;
  node* x = mk(P, nk::filter_block, line);
  node* holder = mk(P, nk::lit, line);
  if (!x || !holder) return nomem(P);
  // Filters chained on a placeholder: `{% filter upper | trim %}`.
  node* f = holder;
  for (bool first = true; first || is_op(cur(P), "|"); first = false) {
    if (!first) ++P->i;
    const char* s = nullptr;
    size_t n = 0;
    int fl = cur(P).line;
    ML_TRY(filter_name(P, &s, &n));
    int id = find_filter(s, n);
    if (id < 0) return ml_fail(P->err, ML_E_FORMAT, "template line %d: filter '%.*s' is not supported", fl, (int)n, s);
    node* g = mk(P, nk::filter, fl);
    if (!g) return nomem(P);
    g->builtin = id, g->s = ml_bump_strdup(P->b, s, n), g->n = n, g->a = f;
    if (!g->s) return nomem(P);
    if (is_op(cur(P), "(")) ML_TRY(call_args(P, g));
    f = g;
  }
  x->b = f, x->c = holder;
  ML_TRY(expect_block_end(P, "filter"));
  static const char* const ends[] = {"endfilter"};
  ml_vec<node*> kids;
  size_t which;
  ML_TRY(body(P, ends, 1, &kids, &which));
  if (!freeze(P, kids, &x->kids, &x->nkids)) return nomem(P);
  ++P->i;
  ML_TRY(expect_block_end(P, "endfilter"));
  *out = x;
  return ML_OK;
}

// {% with a = 1, b = 2 %}...{% endwith %}
ml_status stmt_with(parser* P, node** out) {
  int line = cur(P).line;
  ++P->i;
  node* x = mk(P, nk::with_, line);
  if (!x) return nomem(P);
  ml_vec<const char*> names;
  ml_vec<node*> vals;
  while (cur(P).k != tk::block_end) {
    if (!names.empty()) ML_TRY(expect_op(P, ","));
    if (cur(P).k != tk::name) return fail_at(P, cur(P), "expected a variable name in a with tag");
    char* nm = ml_bump_strdup(P->b, cur(P).s, cur(P).n);
    if (!nm || !names.push(nm)) return nomem(P);
    ++P->i;
    ML_TRY(expect_op(P, "="));
    node* v;
    ML_TRY(expr(P, &v));
    if (!vals.push(v)) return nomem(P);
  }
  ++P->i;
  if (!freeze(P, names, &x->kw, &x->nkw) || !freeze(P, vals, &x->kwv, &x->nkw)) return nomem(P);
  static const char* const ends[] = {"endwith"};
  ml_vec<node*> kids;
  size_t which;
  ML_TRY(body(P, ends, 1, &kids, &which));
  if (!freeze(P, kids, &x->kids, &x->nkids)) return nomem(P);
  ++P->i;
  ML_TRY(expect_block_end(P, "endwith"));
  *out = x;
  return ML_OK;
}

// {% generation %}...{% endgeneration %} (transformers' assistant-mask extension): its body, as is.
ml_status stmt_generation(parser* P, node** out) {
  int line = cur(P).line;
  ++P->i;
  ML_TRY(expect_block_end(P, "generation"));
  node* x = mk(P, nk::body, line);
  if (!x) return nomem(P);
  static const char* const ends[] = {"endgeneration"};
  ml_vec<node*> kids;
  size_t which;
  ML_TRY(body(P, ends, 1, &kids, &which));
  if (!freeze(P, kids, &x->kids, &x->nkids)) return nomem(P);
  ++P->i;
  ML_TRY(expect_block_end(P, "endgeneration"));
  *out = x;
  return ML_OK;
}

ml_status statement(parser* P, node** out) {
  const char* s = nullptr;
  size_t n = 0;
  ML_TRY(block_name(P, &s, &n));
  const token& t = cur(P);
  if (is_name(t, "if")) return stmt_if(P, out);
  if (is_name(t, "for")) return stmt_for(P, out);
  if (is_name(t, "set")) return stmt_set(P, out);
  if (is_name(t, "macro")) return stmt_macro(P, out);
  if (is_name(t, "call")) return stmt_call(P, out);
  if (is_name(t, "filter")) return stmt_filter(P, out);
  if (is_name(t, "with")) return stmt_with(P, out);
  if (is_name(t, "generation")) return stmt_generation(P, out);
  if (is_name(t, "break") || is_name(t, "continue")) {
    node* x = mk(P, is_name(t, "break") ? nk::break_ : nk::continue_, t.line);
    if (!x) return nomem(P);
    ++P->i;
    ML_TRY(expect_block_end(P, x->k == nk::break_ ? "break" : "continue"));
    *out = x;
    return ML_OK;
  }
  return ml_fail(P->err, ML_E_FORMAT, "template line %d: tag '%.*s' is not supported%s", t.line, (int)(n > 40 ? 40 : n), s,
                 (n > 3 && memcmp(s, "end", 3) == 0) || is_name(t, "else") || is_name(t, "elif") ? " here (no block to close)" : "");
}

// Statements up to one of the block tags in ends (left unconsumed at its name; *which says which).
// With no ends, runs to the end of the template.
ml_status body(parser* P, const char* const* ends, size_t nends, ml_vec<node*>* out, size_t* which) {
  depth_guard g(P);
  ML_TRY(check_depth(P));
  const int open_line = P->i > 0 ? P->t[P->i - 1].line : 1;
  for (;;) {
    const token& t = cur(P);
    if (t.k == tk::eof) {
      if (nends == 0) return ML_OK;
      return ml_fail(P->err, ML_E_FORMAT, "template line %d: unexpected end of template, expected '%s' (the block opened near line %d is not closed)",
                     t.line, ends[nends - 1], open_line);
    }
    if (t.k == tk::text) {
      node* x = mk(P, nk::text, t.line);
      if (!x || !out->push(x)) return nomem(P);
      x->s = t.s, x->n = t.n;
      ++P->i;
      continue;
    }
    if (t.k == tk::var_begin) {
      ++P->i;
      node* x = mk(P, nk::output, t.line);
      if (!x) return nomem(P);
      ML_TRY(tuple_expr(P, &x->a, true));
      if (cur(P).k != tk::var_end) return fail_at(P, cur(P), "expected '}}'");
      ++P->i;
      if (!out->push(x)) return nomem(P);
      continue;
    }
    if (t.k == tk::block_begin) {
      ++P->i;
      const token& nm = cur(P);
      for (size_t e = 0; e < nends; ++e)
        if (is_name(nm, ends[e])) {
          *which = e;
          return ML_OK;
        }
      node* x;
      ML_TRY(statement(P, &x));
      if (!out->push(x)) return nomem(P);
      continue;
    }
    return fail_at(P, t, "unexpected token");
  }
}

}  // namespace

ml_status parse(const token* toks, size_t ntoks, ml_bump* b, node** root, ml_error* err) {
  parser P{toks, ntoks, 0, b, err, 0};
  ml_vec<node*> kids;
  size_t which = 0;
  ML_TRY(body(&P, nullptr, 0, &kids, &which));
  node* x = mk(&P, nk::body, 1);
  if (!x || !freeze(&P, kids, &x->kids, &x->nkids)) return nomem(&P);
  *root = x;
  return ML_OK;
}

}  // namespace jj
