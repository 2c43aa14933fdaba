// The chat-template evaluator's state and entry points, shared by eval.cpp, call.cpp, ops.cpp, the built-ins
// (filters.cpp, tests.cpp, methods.cpp) and template.cpp (private to src/model/chat).
#pragma once
#include "model/chat/jinja.h"

namespace jj {

struct var {
  const char* name;
  size_t n;
  jv v;
};

// A variable scope: the template level, a for-loop iteration, a macro call, a with block.
struct scope {
  scope* parent = nullptr;
  ml_vec<var> vars;
};

enum class flow_kind : uint8_t { none, brk, cont };

struct rt {
  ml_bump* b;
  ml_error* err;
  const jdict* ctx;          // the context's members (the template's variables)
  const jv* fixed_time;      // strftime_now's fixed answer, when the context gives one
  uint64_t iterations = 0;
  int depth = 0;             // macro calls in progress
  flow_kind flow = flow_kind::none;
};

// Counts a macro call in progress (rt::depth) for the life of the guard.
struct call_depth_guard {
  rt* r;
  explicit call_depth_guard(rt* q) : r(q) { ++r->depth; }
  ~call_depth_guard() { --r->depth; }
};

// Sets name (n bytes, not copied: it must outlive s) in scope s, replacing its value there if set.
// false when out of memory.
bool scope_set(rt* r, scope* s, const char* name, size_t n, const jv& v);

// Calls macro m (a vk::macro value, call.cpp) with jinja2's argument binding: its output as a string.
ml_status call_macro(rt* r, const node* at, const jv& m, const jv* args, size_t nargs, const char* const* kw,
                     const jv* kwv, size_t nkw, jv* out);

ml_status eval(rt* r, const node* x, scope* s, jv* out);
ml_status exec(rt* r, const node* x, scope* s, ml_vec<char>* o);
ml_status exec_body(rt* r, node* const* kids, size_t n, scope* s, ml_vec<char>* o);
ml_status get_attr(rt* r, const node* at, const jv& v, const char* name, size_t n, jv* out);
ml_status get_item(rt* r, const node* at, const jv& v, const jv& key, jv* out);
ml_status iterate(rt* r, const node* at, const jv& v, ml_vec<jv>* out);
ml_status slice_value(rt* r, const node* at, const jv& v, const jv& a, const jv& b, const jv& c, jv* out);
ml_status arith(rt* r, const node* at, op o, const jv& a, const jv& b, jv* out);
ml_status undefined_error(rt* r, const node* at, const jv& v);  // "'name' is undefined"
ml_status contains(rt* r, const node* at, const jv& hay, const jv& needle, bool* out);
ml_status compare_values(rt* r, const node* at, op o, const jv& a, const jv& b, bool* out);

}  // namespace jj
