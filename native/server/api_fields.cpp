// The request body's JSON tree and the typed field readers (api_fields.h). Messages follow
// OpenAI's wording ("Invalid type for 'messages[0].content': expected ..., but got ... instead.")
// and its codes, so that clients written against OpenAI show them as they would OpenAI's.
#include "api_fields.h"

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

namespace server {

void refuse(const std::string& param, const std::string& code, const std::string& message) {
  bad_request b;
  b.e.status = 400;
  b.e.type = "invalid_request_error";
  b.e.param = param;
  b.e.code = code;
  b.e.message = message;
  throw b;
}

namespace {

// The length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlongs, surrogates or code
// points past U+10FFFF), or 0.
size_t utf8_len(const std::string& s, size_t i) {
  const unsigned char c = s[i];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
  else return 0;
  if (s.size() - i < len) return 0;
  for (size_t k = 1; k < len; ++k) {
    const unsigned char d = s[i + k];
    if ((d & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (d & 0x3F);
  }
  const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// s with every byte that is not part of valid UTF-8 written as \xNN (nlohmann's error messages
// quote the raw bytes they stopped at).
std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_len(s, i);
    if (n) {
      out.append(s, i, n);
      i += n;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", (unsigned char)s[i]);
      out += hex;
      ++i;
    }
  }
  return out;
}

// Builds the tree through nlohmann's SAX interface, so that a parse error knows the path of the
// value it happened in ("temperature" for {"temperature": 1e999}) and nesting stops at
// kMaxBodyDepth before anything recursive sees it. Duplicate keys: the last value wins.
class tree_builder : public nlohmann::json_sax<json> {
 public:
  json root;
  bool failed = false;
  std::string error_param, error_message;

  bool null() override { return place(json(nullptr)); }
  bool boolean(bool v) override { return place(json(v)); }
  bool number_integer(number_integer_t v) override { return place(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return place(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return place(json(v)); }
  bool string(string_t& v) override { return place(json(std::move(v))); }
  bool binary(binary_t&) override { return false; }  // JSON text has no binary values
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool key(string_t& k) override {
    levels_.back().key = std::move(k);
    levels_.back().has_key = true;
    return true;
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override {
    failed = true;
    error_param = here();
    const std::string at = "byte " + std::to_string(position) +
                           (error_param.empty() ? "" : " (in '" + error_param + "')");
    if (ex.id == 406) {  // out_of_range: a number beyond a double's range
      error_message = "Invalid JSON body at " + at + ": the number " + printable(last_token) +
                      " is out of range (beyond what a double holds).";
      return false;
    }
    std::string what = ex.what();
    const size_t colon = what.find(": ", what.find("parse error"));
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    if (detail.find("ill-formed UTF-8") != std::string::npos)
      detail = "a string holds invalid UTF-8 (" + detail + ")";
    error_message = "We could not parse the JSON body of your request: " + at + ": " + printable(detail);
    return false;
  }

 private:
  struct level {
    json* value;
    std::string path, key;
    bool has_key = false;
  };
  std::vector<level> levels_;

  // The path of the value parsed next (or, in an object between members, of the object).
  std::string here() const {
    if (levels_.empty()) return "";
    const level& top = levels_.back();
    if (top.value->is_array()) return path_of(top.path, top.value->size());
    return top.has_key ? path_of(top.path, top.key) : top.path;
  }

  json* put(json&& v) {
    if (levels_.empty()) {
      root = std::move(v);
      return &root;
    }
    level& top = levels_.back();
    if (top.value->is_array()) {
      top.value->push_back(std::move(v));
      return &top.value->back();
    }
    top.has_key = false;
    json& slot = (*top.value)[top.key];
    slot = std::move(v);
    return &slot;
  }

  bool place(json&& v) {
    put(std::move(v));
    return true;
  }

  // Only the innermost open container grows, so a pointer to an open one stays valid (its parent
  // array does not reallocate until the child is closed).
  bool open(json&& container) {
    if ((int)levels_.size() >= kMaxBodyDepth) {
      failed = true;
      error_param = here();
      error_message = "Invalid JSON body: it nests deeper than " + std::to_string(kMaxBodyDepth) +
                      " levels" + (error_param.empty() ? "" : " (at '" + error_param + "')") + ".";
      return false;
    }
    std::string path = here();
    json* v = put(std::move(container));
    levels_.push_back(level{v, std::move(path), std::string(), false});
    return true;
  }

  bool close() {
    levels_.pop_back();
    return true;
  }
};

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

json parse_body(const std::string& body) {
  // nlohmann's reader takes a NUL byte for the end of the input ("123\0x" would read as 123); JSON
  // has no raw NUL anywhere (in a string it must be escaped), so one ends the parse here.
  const size_t nul = body.find('\0');
  if (nul != std::string::npos)
    refuse("", "", "We could not parse the JSON body of your request: byte " + std::to_string(nul + 1) +
                       ": a NUL byte (JSON allows U+0000 only as the escape \\u0000 in a string).");
  tree_builder b;
  const bool ok = json::sax_parse(body.begin(), body.end(), &b, json::input_format_t::json, true, false);
  if (!ok || b.failed) {
    if (!b.failed) refuse("", "", "We could not parse the JSON body of your request.");
    refuse(b.error_param, "", b.error_message);
  }
  if (!b.root.is_object())
    refuse("", "invalid_type", "Invalid type for the request body: expected an object, but got " +
                                   type_name(b.root) + " instead.");
  return std::move(b.root);
}

std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a decimal";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a value";
  }
}

std::string quote_value(const json& v) {
  if (v.is_array() || v.is_object()) return type_name(v);
  if (!v.is_string()) return v.dump(-1, ' ', false, json::error_handler_t::replace);
  const std::string& s = v.get_ref<const std::string&>();
  if (s.size() <= 64) return "'" + s + "'";
  size_t cut = 64;
  while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) --cut;  // a whole character
  return "'" + s.substr(0, cut) + "...' (" + std::to_string(s.size()) + " bytes)";
}

std::string path_of(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string path_of(const std::string& parent, size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

int64_t integer_at(const json& v, const std::string& path, int64_t lo, int64_t hi) {
  // Bounds stay within +-2^53, where a double compares exactly.
  const auto below = [&] {
    refuse(path, "integer_below_min_value",
           "Invalid '" + path + "': integer below minimum value. Expected a value >= " + std::to_string(lo) +
               ", but got " + quote_value(v) + " instead.");
  };
  const auto above = [&] {
    refuse(path, "integer_above_max_value",
           "Invalid '" + path + "': integer above maximum value. Expected a value <= " + std::to_string(hi) +
               ", but got " + quote_value(v) + " instead.");
  };
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > (uint64_t)hi) above();
    if ((int64_t)u < lo) below();
    return (int64_t)u;
  }
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x < lo) below();
    if (x > hi) above();
    return x;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::floor(d) != d)
      refuse(path, "invalid_type", "Invalid type for '" + path + "': expected an integer, but got a decimal (" +
                                       quote_value(v) + ") instead.");
    if (d < (double)lo) below();
    if (d > (double)hi) above();
    return (int64_t)d;
  }
  refuse(path, "invalid_type",
         "Invalid type for '" + path + "': expected an integer, but got " + type_name(v) + " instead.");
}

const json* fields::get(const char* key) const {
  const auto it = obj_.find(key);
  return it == obj_.end() || it->is_null() ? nullptr : &*it;
}

const json& fields::need(const char* key) const {
  const json* v = get(key);
  if (!v) refuse(path(key), "missing_required_parameter", "Missing required parameter: '" + path(key) + "'.");
  return *v;
}

void fields::expect(const char* key, const json& v, bool ok, const char* expected) const {
  if (!ok)
    refuse(path(key), "invalid_type", "Invalid type for '" + path(key) + "': expected " + expected + ", but got " +
                                          type_name(v) + " instead.");
}

bool fields::boolean(const char* key, bool& out) const {
  const json* v = get(key);
  if (!v) return false;
  expect(key, *v, v->is_boolean(), "a boolean");
  out = v->get<bool>();
  return true;
}

bool fields::string(const char* key, std::string& out) const {
  const json* v = get(key);
  if (!v) return false;
  expect(key, *v, v->is_string(), "a string");
  out = v->get<std::string>();
  return true;
}

bool fields::integer(const char* key, int64_t lo, int64_t hi, int64_t& out) const {
  const json* v = get(key);
  if (!v) return false;
  out = integer_at(*v, path(key), lo, hi);
  return true;
}

bool fields::number(const char* key, double lo, bool open_lo, double hi, bool open_hi, double& out) const {
  const json* v = get(key);
  if (!v) return false;
  expect(key, *v, v->is_number(), "a number");
  const double d = v->get<double>();
  const std::string p = path(key);
  if (d < lo || (open_lo && d == lo))
    refuse(p, "decimal_below_min_value", "Invalid '" + p + "': decimal below minimum value. Expected a value " +
                                             (open_lo ? "> " : ">= ") + number_text(lo) + ", but got " +
                                             quote_value(*v) + " instead.");
  if (d > hi || (open_hi && d == hi))
    refuse(p, "decimal_above_max_value", "Invalid '" + p + "': decimal above maximum value. Expected a value " +
                                             (open_hi ? "< " : "<= ") + number_text(hi) + ", but got " +
                                             quote_value(*v) + " instead.");
  out = d;
  return true;
}

}  // namespace server
