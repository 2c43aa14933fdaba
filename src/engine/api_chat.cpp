// ml_chat_apply (krafla.h, "Chat templates"): the template's variables assembled as one JSON
// object -- messages, add_generation_prompt, bos_token, eos_token, then the caller's extra members,
// which win over the defaults because a repeated key reads as its last value -- and rendered by
// the model's chat template (model/chat/template.h) or the caller's.
#include <cstdlib>
#include <cstring>

#include "core/bump.h"
#include "core/json.h"
#include "core/vec.h"
#include "krafla.h"
#include "model/chat/template.h"
#include "model/tokenizer/tokenizer.h"

namespace {

bool put(ml_vec<char>* v, const char* s) { return v->append(s, std::strlen(s)); }

// The members of a JSON object's text without its braces ("" for {}), checked to be an object.
ml_status object_members(const char* text, size_t len, const char** begin, size_t* n, ml_error* err) {
  ml_bump b;
  ml_json* v = nullptr;
  ML_TRY(ml_json_parse(text, len, &b, &v, err));
  if (v->type != ML_JSON_OBJECT) return ml_fail(err, ML_E_ARG, "chat: the extra variables are a %s, not a JSON object", ml_json_type_name(v->type));
  const char* open = static_cast<const char*>(std::memchr(text, '{', len));
  const char* close = text + len;
  while (close > open && close[-1] != '}') --close;
  *begin = open + 1;
  *n = v->n ? (size_t)(close - 1 - (open + 1)) : 0;
  return ML_OK;
}

ml_status build_context(const ml_tokenizer* t, const ml_chat_params* p, ml_vec<char>* ctx, ml_error* err) {
  if (!p->messages) return ml_fail(err, ML_E_ARG, "chat: no messages");
  {
    ml_bump b;
    ml_json* m = nullptr;
    const ml_status s = ml_json_parse(p->messages, p->messages_len, &b, &m, err);
    if (s != ML_OK) return ml_fail(err, ML_E_ARG, "chat: messages: %s", err ? err->msg : "");
    if (m->type != ML_JSON_ARRAY) return ml_fail(err, ML_E_ARG, "chat: messages is a %s, not a JSON array", ml_json_type_name(m->type));
  }
  const char* extra = nullptr;
  size_t extra_n = 0;
  if (p->extra) {
    const ml_status s = object_members(p->extra, p->extra_len, &extra, &extra_n, err);
    if (s != ML_OK) return ml_fail(err, ML_E_ARG, "chat: extra variables: %s", err ? err->msg : "");
  }
  const char* bos = ml_tokenizer_bos_text(t);
  const char* eos = ml_tokenizer_eos_text(t);
  bool ok = put(ctx, "{\"messages\":") && ctx->append(p->messages, p->messages_len) &&
            put(ctx, p->add_generation_prompt ? ",\"add_generation_prompt\":true" : ",\"add_generation_prompt\":false") &&
            put(ctx, ",\"bos_token\":") && ml_json_quote(ctx, bos, std::strlen(bos)) && put(ctx, ",\"eos_token\":") &&
            ml_json_quote(ctx, eos, std::strlen(eos));
  if (ok && extra_n) ok = put(ctx, ",") && ctx->append(extra, extra_n);
  if (!ok || !put(ctx, "}")) return ml_fail(err, ML_E_NOMEM, "chat: out of memory");
  return ML_OK;
}

}  // namespace

extern "C" {

int ml_tokenizer_has_chat_template(const ml_tokenizer* t) { return t && ml_tokenizer_chat_template(t) ? 1 : 0; }

void ml_free(void* p) { std::free(p); }

ml_status ml_chat_apply(const ml_tokenizer* t, const ml_chat_params* p, char** out, size_t* len, ml_error* err) {
  *out = nullptr;
  *len = 0;
  if (!t) return ml_fail(err, ML_E_ARG, "chat: the model has no tokenizer");
  ml_template* own = nullptr;
  const ml_template* tmpl = ml_tokenizer_chat_template(t);
  if (p->chat_template) {
    const ml_status s = ml_template_parse(p->chat_template, p->chat_template_len, &own, err);
    if (s != ML_OK) return ml_fail(err, s, "chat template: %s", err ? err->msg : "");
    tmpl = own;
  }
  if (!tmpl) return ml_fail(err, ML_E_ARG, "chat: the tokenizer has no chat template (give one with --chat-template)");
  ml_vec<char> ctx, text;
  ml_bump b;
  ml_json* c = nullptr;
  ml_status s = build_context(t, p, &ctx, err);
  if (s == ML_OK) s = ml_json_parse(ctx.data(), ctx.size(), &b, &c, err);
  if (s == ML_OK) s = ml_template_render(tmpl, c, &text, err);
  if (s == ML_OK && !text.push('\0')) s = ml_fail(err, ML_E_NOMEM, "chat: out of memory");
  if (own) ml_template_free(own);
  if (s != ML_OK) return s;
  *out = static_cast<char*>(std::malloc(text.size()));
  if (!*out) return ml_fail(err, ML_E_NOMEM, "chat: cannot allocate %zu bytes", text.size());
  std::memcpy(*out, text.data(), text.size());
  *len = text.size() - 1;
  return ML_OK;
}

}  // extern "C"
