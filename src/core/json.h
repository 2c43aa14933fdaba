// A strict JSON reader (RFC 8259) for the core: tokenizer.json, tokenizer_config.json, chat
// messages. Dependency-free and exception-free; the whole document lives in one ml_bump.
//
// Contract:
// - ml_json_parse accepts exactly RFC 8259 JSON (the JSONTestSuite y_ files), refuses every n_
//   file with ML_E_FORMAT and a message naming the byte offset and what was expected, and never
//   crashes or hangs on any input. Strings must be valid UTF-8 (overlongs, surrogates encoded in
//   UTF-8 and bytes past U+10FFFF are refused); \u escapes are decoded, surrogate pairs joined;
//   a lone surrogate escape is refused. A NUL (\u0000) inside a string is kept (len counts it).
// - Nesting deeper than ML_JSON_MAX_DEPTH is refused (no recursion on the C stack past it).
// - Numbers keep their text; num is the nearest double, and is_int/i64 say whether the text is
//   an integer that fits int64 exactly (no fraction, no exponent). A literal past double's range
//   is accepted as Python's json does: 1e400 gives num = inf, 1e-400 gives 0. num does not depend
//   on LC_NUMERIC. Literals longer than 4096 bytes are refused.
// - Object members keep the file's order; duplicate keys are kept (ml_json_get returns the last,
//   as Python's json and serde_json do).
// - Memory: everything comes from the caller's ml_bump; ML_E_NOMEM when it runs out.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/bump.h"
#include "core/status.h"

inline constexpr int ML_JSON_MAX_DEPTH = 512;

enum ml_json_type : uint8_t { ML_JSON_NULL, ML_JSON_FALSE, ML_JSON_TRUE, ML_JSON_NUMBER, ML_JSON_STRING, ML_JSON_ARRAY, ML_JSON_OBJECT };

struct ml_json;

struct ml_json_member {
  const char* key;  // NUL-terminated copy (a key may also contain NULs: key_len counts them)
  size_t key_len;
  ml_json* value;
};

struct ml_json {
  ml_json_type type;
  bool is_int;          // NUMBER: an integer literal that fits int64
  int64_t i64;          // NUMBER when is_int
  double num;           // NUMBER: its value (strtod rounding)
  const char* str;      // STRING: decoded UTF-8, NUL-terminated; NUMBER: the literal's text
  size_t len;           // STRING / NUMBER: bytes of str
  ml_json** items;      // ARRAY: n items
  ml_json_member* members;  // OBJECT: n members in file order
  size_t n;
  size_t offset;        // byte offset of the value in the input (for error messages)
};

// Parses text[0, len) into *out (allocated in b). ML_E_FORMAT with "json: byte N: ..." on error.
ml_status ml_json_parse(const char* text, size_t len, ml_bump* b, ml_json** out, ml_error* err);

// The member named key (NUL-terminated) of an object, the last when repeated; null when absent or
// when v is null or not an object.
const ml_json* ml_json_get(const ml_json* v, const char* key);

// Type helpers (null-safe: false for a null v).
inline bool ml_json_is(const ml_json* v, ml_json_type t) { return v && v->type == t; }
inline bool ml_json_is_bool(const ml_json* v) { return v && (v->type == ML_JSON_TRUE || v->type == ML_JSON_FALSE); }
const char* ml_json_type_name(ml_json_type t);  // "null", "boolean", "number", "string", "array", "object"

// Appends the JSON encoding of s[0, n) (quoted, escaped as Python's json.dumps(ensure_ascii=False)
// does: \" \\ \n \r \t \b \f, other controls as \u00XX) to out; false when out cannot grow.
// Declared here, used by the chat templates' tojson and by the server.
template <class T> class ml_vec;
bool ml_json_quote(ml_vec<char>* out, const char* s, size_t n);
