// Helpers shared by the chat-template built-ins (filters*.cpp, tests.cpp, methods.cpp, strings.cpp):
// argument access by position or keyword (as Python binds them) and Python's str operations.
// Private to src/model/chat.
#pragma once
#include "model/chat/eval.h"

namespace jj {

struct argv {
  rt* r;
  const node* at;
  const char* what;  // filter / method name for messages
  const jv* args;
  size_t nargs;
  const char* const* kw;
  const jv* kwv;
  size_t nkw;
};

// Argument `pos` (0-based, after the filtered value) or keyword `name`; dflt when absent.
inline jv arg(const argv& a, size_t pos, const char* name, jv dflt) {
  if (pos < a.nargs) return a.args[pos];
  for (size_t i = 0; i < a.nkw; ++i)
    if (strcmp(a.kw[i], name) == 0) return a.kwv[i];
  return dflt;
}

inline ml_status check_args(const argv& a, size_t max_pos, const char* const* names, size_t nnames) {
  if (a.nargs > max_pos) return rt_fail(a.r, a.at, ML_E_ARG, "%s takes at most %zu argument(s), got %zu", a.what, max_pos, a.nargs);
  for (size_t i = 0; i < a.nkw; ++i) {
    bool ok = false;
    for (size_t k = 0; k < nnames && !ok; ++k) ok = strcmp(a.kw[i], names[k]) == 0;
    if (!ok) return rt_fail(a.r, a.at, ML_E_ARG, "%s got an unexpected keyword argument '%s'", a.what, a.kw[i]);
  }
  return ML_OK;
}

inline ml_status need_str(const argv& a, const jv& v, const char* role) {
  if (v.k == vk::str) return ML_OK;
  return rt_fail(a.r, a.at, ML_E_ARG, "%s: %s must be a string, not %s", a.what, role, type_name(v));
}

inline ml_status int_arg(const argv& a, const jv& v, const char* role, int64_t* out) {
  if (v.k == vk::integer) *out = v.i;
  else if (v.k == vk::boolean) *out = v.b;
  else return rt_fail(a.r, a.at, ML_E_ARG, "%s: %s must be an integer, not %s", a.what, role, type_name(v));
  return ML_OK;
}

inline ml_status make_str(rt* r, const ml_vec<char>& t, jv* out) {
  if (t.size() > ML_TEMPLATE_MAX_OUTPUT) return rt_fail(r, nullptr, ML_E_ARG, "string past the %zu-byte limit", ML_TEMPLATE_MAX_OUTPUT);
  if (!new_str(rt_bump(r), t.data() ? t.data() : "", t.size(), out)) return rt_nomem(r);
  return ML_OK;
}
inline ml_status make_list(rt* r, const ml_vec<jv>& t, jv* out) {
  if (!new_list(rt_bump(r), t.data(), t.size(), out)) return rt_nomem(r);
  return ML_OK;
}

// ---- the filters on numbers (filters_number.cpp) ----

ml_status int_filter(const argv& a, const jv& v, jv* out);    // int(default=0, base=10)
ml_status float_filter(const argv& a, const jv& v, jv* out);  // float(default=0.0)
ml_status round_filter(const argv& a, const jv& v, jv* out);  // round(precision=0, method='common')

// ---- Python str operations (strings.cpp) ----

bool is_alpha(char c);  // ASCII letters and any non-ASCII byte
bool is_word(char c);   // is_alpha, digits, '_' (regex \w, approximately)
enum class casing { upper, lower, py_title, jinja_title, capitalize };
ml_status recase(rt* r, const jv& v, casing how, jv* out);
// str.strip / lstrip / rstrip: chars null strips whitespace.
jv strip(const jv& v, const jv* chars, bool left, bool right);
ml_status do_strip(const argv& a, const jv& v, bool left, bool right, jv* out);
size_t find(const char* h, size_t hn, const char* n, size_t nn, size_t from);  // (size_t)-1: absent
ml_status do_split(const argv& a, const jv& v, bool from_right, jv* out);
ml_status do_replace(const argv& a, const jv& v, jv* out, size_t first_arg);
ml_status center(const argv& a, const jv& v, int64_t width, const jv& fill, jv* out);
ml_status html_escape(rt* r, const jv& v, jv* out);
ml_status py_format(const argv& a, const jv& v, jv* out);

}  // namespace jj
