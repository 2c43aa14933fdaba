// The chat-template public interface (model/chat/template.h): parse = lex + parse into the
// template's own ml_bump; render = convert the JSON context to template values in a per-render
// ml_bump, run the evaluator into a scratch buffer, and append it to the caller's buffer only on
// success (a failed rendering leaves *out as it was).
#include <cstdlib>
#include <cstring>
#include <new>

#include "model/chat/eval.h"

struct ml_template {
  ml_bump b;
  jj::node* root = nullptr;
};

ml_status ml_template_parse(const char* text, size_t len, ml_template** out, ml_error* err) {
  if (!out || (!text && len)) return ml_fail(err, ML_E_ARG, "template: null argument");
  *out = nullptr;
  if (len > ML_TEMPLATE_MAX_TEXT)
    return ml_fail(err, ML_E_ARG, "template: %zu bytes, past the %zu-byte limit", len, ML_TEMPLATE_MAX_TEXT);
  ml_template* t = new (std::nothrow) ml_template();
  if (!t) return ml_fail(err, ML_E_NOMEM, "template: out of memory");
  ml_vec<jj::token> toks;
  ml_status s = jj::lex(text ? text : "", len, &t->b, &toks, err);
  if (s == ML_OK) s = jj::parse(toks.data(), toks.size(), &t->b, &t->root, err);
  if (s != ML_OK) {
    delete t;
    return s;
  }
  *out = t;
  return ML_OK;
}

void ml_template_free(ml_template* t) { delete t; }

ml_status ml_template_render(const ml_template* t, const ml_json* context, ml_vec<char>* out, ml_error* err) {
  if (!t || !out) return ml_fail(err, ML_E_ARG, "template: null argument");
  if (!ml_json_is(context, ML_JSON_OBJECT)) return ml_fail(err, ML_E_ARG, "template: the context must be a JSON object");
  ml_bump b;
  jj::jv ctx;
  if (!jj::from_json(&b, context, &ctx, 0)) {
    if (b.used_total > ML_TEMPLATE_MAX_MEMORY / 2)
      return ml_fail(err, ML_E_ARG, "template: the context needs more than the %zu-byte memory limit", ML_TEMPLATE_MAX_MEMORY);
    return ml_fail(err, ML_E_NOMEM, "template: out of memory");
  }
  jj::rt r{&b, err, ctx.d, nullptr};
  const jj::jv* fixed = jj::dict_get_str(ctx.d, "strftime_now_fixed", 18);
  if (fixed && fixed->k == jj::vk::str) r.fixed_time = fixed;
  jj::scope root;
  ml_vec<char> buf;
  ML_TRY(jj::exec_body(&r, t->root->kids, t->root->nkids, &root, &buf));
  if (buf.size() && !out->append(buf.data(), buf.size())) return ml_fail(err, ML_E_NOMEM, "template: out of memory");
  return ML_OK;
}
