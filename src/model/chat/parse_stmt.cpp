// The chat-template parser, statements: the tags (if/elif/else, for with else and a loop filter,
// set (also ns.attr and {% set x %}...{% endset %}), macro, call, filter, with, break, continue,
// {% generation %}), text and {{ output }}, into a syntax tree in the template's ml_bump. Unknown
// tags fail here, naming the line; so does a block left open.
#include "model/chat/parser.h"

namespace jj {
namespace {

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
