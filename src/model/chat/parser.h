// The chat-template parser's shared state and helpers (parse_expr.cpp, parse_stmt.cpp); private to
// src/model/chat.
#pragma once
#include <cstdio>
#include <cstring>

#include "model/chat/jinja.h"

namespace jj {

struct parser {
  const token* t;
  size_t n = 0;
  size_t i = 0;
  ml_bump* b;
  ml_error* err;
  int depth = 0;
};

inline const token& cur(parser* P) { return P->t[P->i]; }
inline const token& peek(parser* P, size_t k = 1) { return P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }

inline bool is_op(const token& t, const char* s) { return t.k == tk::op && t.n == strlen(s) && memcmp(t.s, s, t.n) == 0; }
inline bool is_name(const token& t, const char* s) { return t.k == tk::name && t.n == strlen(s) && memcmp(t.s, s, t.n) == 0; }

inline const char* describe(const token& t) {
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

inline ml_status fail_at(parser* P, const token& t, const char* what) {
  if (t.k == tk::name || t.k == tk::op)
    return ml_fail(P->err, ML_E_FORMAT, "template line %d: %s, found '%.*s'", t.line, what, (int)(t.n > 40 ? 40 : t.n), t.s);
  return ml_fail(P->err, ML_E_FORMAT, "template line %d: %s, found %s", t.line, what, describe(t));
}
inline ml_status nomem(parser* P) { return ml_fail(P->err, ML_E_NOMEM, "template: out of memory"); }

inline node* mk(parser* P, nk k, int line) {
  node* x = ml_bump_new<node>(P->b);
  if (x) x->k = k, x->line = line;
  return x;
}

template <class T>
inline bool freeze(parser* P, ml_vec<T>& v, T** out, size_t* n) {
  *n = v.size();
  *out = ml_bump_array<T>(P->b, v.size());
  if (!*out) return false;
  for (size_t i = 0; i < v.size(); ++i) (*out)[i] = v[i];
  return true;
}

inline ml_status expect_op(parser* P, const char* s) {
  if (!is_op(cur(P), s)) {
    char what[48];
    snprintf(what, sizeof what, "expected '%s'", s);
    return fail_at(P, cur(P), what);
  }
  ++P->i;
  return ML_OK;
}
inline ml_status expect_block_end(parser* P, const char* tag) {
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
inline ml_status check_depth(parser* P) {
  if (P->depth > ML_TEMPLATE_MAX_NESTING)
    return ml_fail(P->err, ML_E_FORMAT, "template line %d: nesting deeper than %d", cur(P).line, ML_TEMPLATE_MAX_NESTING);
  return ML_OK;
}

// Expressions (parse_expr.cpp).
ml_status expr(parser* P, node** out);     // conditional expression (x if c else y)
ml_status or_expr(parser* P, node** out);  // without the conditional (for-loop iterables)
ml_status call_args(parser* P, node* call);
ml_status filter_name(parser* P, const char** s, size_t* n);
// A top-level expression, where a bare tuple `a, b` is allowed.
ml_status tuple_expr(parser* P, node** out, bool with_cond);
// Filters and tests applied to *x (`x | f(...)`, `x is t`).
ml_status filter_expr(parser* P, node** x);
// Assignment targets: a name, names separated by commas, or (allow_attr) ns.attr.
ml_status target(parser* P, node** out, bool allow_attr);

}  // namespace jj
