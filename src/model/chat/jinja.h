// The chat-template renderer's private declarations: tokens, syntax tree, values, and the
// functions the lexer, parser, value helpers, built-ins and evaluator share. Nothing here is part
// of the public interface (model/chat/template.h).
//
// Memory: the syntax tree lives in the template's ml_bump; the values of one rendering live in a
// per-render ml_bump that is freed when ml_template_render returns. Every struct here is trivially
// destructible (nothing runs a destructor on bump memory).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/bump.h"
#include "core/json.h"
#include "core/status.h"
#include "core/vec.h"
#include "model/chat/template.h"

// Named limits (ML_E_ARG past them; the template size is checked at parse time).
inline constexpr size_t ML_TEMPLATE_MAX_TEXT = 1u << 20;             // template bytes
inline constexpr uint64_t ML_TEMPLATE_MAX_ITERATIONS = 1000000;      // loop iterations per rendering, all loops together
inline constexpr int ML_TEMPLATE_MAX_CALL_DEPTH = 64;                // nested macro calls
inline constexpr int ML_TEMPLATE_MAX_NESTING = 128;                  // syntax nesting (blocks and expressions)
inline constexpr size_t ML_TEMPLATE_MAX_OUTPUT = 64u << 20;          // bytes of output (and of any one string)
inline constexpr size_t ML_TEMPLATE_MAX_MEMORY = 512u << 20;         // bytes of values one rendering may allocate

namespace jj {

// ---- values -------------------------------------------------------------------------------------

enum class vk : uint8_t { undef, none, boolean, integer, real, str, list, dict, ns, macro, func, method };

struct jlist;
struct jdict;
struct node;
struct scope;

// Built-in functions reachable as values.
enum class fn : uint8_t { range, dict, namespace_, raise_exception, strftime_now, caller, cycle_ };

struct jv {
  vk k = vk::undef;
  bool tuple = false;      // list: printed as a tuple
  bool b = false;          // boolean
  int64_t i = 0;           // integer
  double f = 0;            // real
  const char* s = nullptr; // str: bytes (not NUL-terminated); undef: the missing name (may be null)
  size_t n = 0;            // str: bytes
  jlist* l = nullptr;      // list
  jdict* d = nullptr;      // dict, ns
  const node* m = nullptr; // macro: its node; method: unused
  scope* env = nullptr;    // macro: the scope it closes over; func caller: the call block's scope
  const node* caller = nullptr;  // macro: the body of the {% call %} block that invoked it (caller())
  jv* recv = nullptr;      // method: the receiver
  fn f_id = fn::range;     // func
  const char* name = nullptr;    // method: its name (NUL-terminated)
};

struct jlist {
  jv* items;
  size_t n;
};

struct jdict {
  jv* keys;
  jv* vals;
  size_t n, cap;
};

// ---- tokens -------------------------------------------------------------------------------------

enum class tk : uint8_t { text, var_begin, var_end, block_begin, block_end, name, str, integer, real, op, eof };

struct token {
  tk k;
  int line;
  const char* s;  // text / name / decoded string / op
  size_t n;
  int64_t i;
  double f;
  bool big = false;  // integer literal past int64 (kept as real)
};

// Splits the template into tokens, applying jinja2's whitespace rules (trim_blocks, lstrip_blocks,
// the '-' and '+' markers, one trailing newline dropped, newlines normalised to \n).
ml_status lex(const char* text, size_t len, ml_bump* b, ml_vec<token>* out, ml_error* err);

// ---- syntax tree --------------------------------------------------------------------------------

enum class nk : uint8_t {
  // statements
  text, output, if_, for_, set, set_attr, set_block, macro, call_block, filter_block, break_, continue_, with_, body,
  // expressions
  lit, name, attr, item, slice, call, filter, test, neg, pos, not_, and_, or_, bin, compare, cond, list, tuple, dict,
};

// Binary operators and comparisons.
enum class op : uint8_t { add, sub, mul, div, floordiv, mod, pow, concat, eq, ne, lt, le, gt, ge, in, not_in };

struct node {
  nk k;
  int line;
  op o = op::add;
  const char* s = nullptr;  // text, name, attribute, filter/test/macro name, set target
  size_t n = 0;
  jv val;                   // literal
  node* a = nullptr;        // operand / condition / target / callee / iterable
  node* b = nullptr;        // second operand / value / loop filter
  node* c = nullptr;        // third (slice step, cond else)
  node** kids = nullptr;    // body, list items, positional args, names of a multi-target
  size_t nkids = 0;
  node** else_kids = nullptr;  // else / elif chain / for-else; dict values; compare operands
  size_t nelse = 0;
  const char** kw = nullptr;   // keyword argument names (call, filter, test) / macro parameter names
  node** kwv = nullptr;        // their values / macro parameter defaults (null: none)
  size_t nkw = 0;
  op* ops = nullptr;           // compare: the operators between else_kids
  int builtin = -1;            // filter / test index into the built-in tables
  bool negate = false;         // test: "is not"; for: the body uses `loop`
};

ml_status parse(const token* toks, size_t ntoks, ml_bump* b, node** root, ml_error* err);

// ---- built-ins ----------------------------------------------------------------------------------

// Index of a filter / test by name, -1 when unknown.
int find_filter(const char* s, size_t n);
int find_test(const char* s, size_t n);

struct rt;  // the evaluator's state (eval.cpp)

ml_status apply_filter(rt* r, const node* at, int id, const jv& v, const jv* args, size_t nargs, const char* const* kw,
                       const jv* kwv, size_t nkw, jv* out);
ml_status apply_test(rt* r, const node* at, int id, const jv& v, const jv* args, size_t nargs, bool* out);
ml_status call_method(rt* r, const node* at, const jv& m, const jv* args, size_t nargs, const char* const* kw,
                      const jv* kwv, size_t nkw, jv* out);
// The method `name` of v as a value (vk::method), or false when v has none by that name.
bool lookup_method(rt* r, const jv& v, const char* name, size_t n, jv* out, bool* nomem);

// ---- values: helpers shared by the built-ins and the evaluator ------------------------------------

ml_bump* rt_bump(rt* r);
ml_status rt_fail(rt* r, const node* at, ml_status s, const char* fmt, ...) ML_PRINTF(4, 5);
ml_status rt_nomem(rt* r);
ml_status rt_call(rt* r, const node* at, const jv& callee, const jv* args, size_t nargs, const char* const* kw,
                  const jv* kwv, size_t nkw, jv* out);

inline jv v_undef(const char* name = nullptr) { jv v; v.k = vk::undef; v.s = name; return v; }
inline jv v_none() { jv v; v.k = vk::none; return v; }
inline jv v_bool(bool b) { jv v; v.k = vk::boolean; v.b = b; return v; }
inline jv v_int(int64_t i) { jv v; v.k = vk::integer; v.i = i; return v; }
inline jv v_real(double f) { jv v; v.k = vk::real; v.f = f; return v; }
inline jv v_str(const char* s, size_t n) { jv v; v.k = vk::str; v.s = s; v.n = n; return v; }

// Allocation: false when memory or ML_TEMPLATE_MAX_MEMORY runs out.
bool new_str(ml_bump* b, const char* s, size_t n, jv* out);
bool new_list(ml_bump* b, const jv* items, size_t n, jv* out);
bool new_dict(ml_bump* b, size_t cap, jv* out);
// Sets key (a string) in a dict / namespace, replacing an existing member.
bool dict_set(ml_bump* b, jdict* d, const jv& key, const jv& val);
const jv* dict_get(const jdict* d, const jv& key);
const jv* dict_get_str(const jdict* d, const char* s, size_t n);

bool truthy(const jv& v);
bool equal(const jv& a, const jv& b);
// Python's <: -1, 0, 1 in *cmp; false when the two cannot be ordered.
bool order(const jv& a, const jv& b, int* cmp);
const char* type_name(const jv& v);  // Python's: "str", "int", "list", "dict", ...
bool is_number(const jv& v);         // int, float or bool (Python's numbers)
double num(const jv& v);

// str(v) and repr(v) (Python), appended to out; false on OOM. Undefined prints as nothing.
bool append_str(ml_vec<char>* out, const jv& v);
bool append_repr(ml_vec<char>* out, const jv& v);
// json.dumps(v, ensure_ascii=False, indent=indent (negative: none), sort_keys); ML_E_ARG on values
// JSON cannot hold.
ml_status append_json(rt* r, const node* at, ml_vec<char>* out, const jv& v, int indent, bool sort_keys, int depth);
// str(v) as a string value.
ml_status to_str(rt* r, const jv& v, jv* out);
// Converts a JSON value to a template value (strings are shared, not copied).
bool from_json(ml_bump* b, const ml_json* j, jv* out, int depth);

// UTF-8: code points in s[0, n), and the byte offset of code point i.
size_t utf8_len(const char* s, size_t n);
size_t utf8_offset(const char* s, size_t n, size_t cp);
bool is_space_at(const char* s, size_t n, size_t* len);  // Python's str.isspace for the code point at s

}  // namespace jj
