// Reading a request body into typed fields, for api_request.cpp: the body parsed into a JSON tree
// (depth-limited, the path of a parse error kept), and readers that check one field's type and
// range. A reader that finds a problem throws bad_request with OpenAI's message, code and param;
// the parse_* functions of api.h catch it at their boundary. Internal to ml_server_api.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "api.h"

namespace server {

using json = nlohmann::json;

// The deepest nesting a body may have: messages[i].content[j].text sits at depth 5, and
// chat_template_kwargs gets room for tool definitions. Deeper bodies are refused before anything
// walks them (nlohmann's dump and copy recurse).
constexpr int kMaxBodyDepth = 64;

struct bad_request {
  api_error e;
};

// Throws bad_request (status 400, invalid_request_error).
[[noreturn]] void refuse(const std::string& param, const std::string& code, const std::string& message);

// The body as a JSON object (duplicate keys: the last wins, as nlohmann and Python's json do).
// Refuses text that is not JSON (the byte and, where one is open, the field's path named), invalid
// UTF-8 in strings, numbers beyond a double's range, nesting deeper than kMaxBodyDepth and a body
// that is not an object.
json parse_body(const std::string& body);

// "a string", "an integer", "a decimal", "a boolean", "an object", "an array", "null".
std::string type_name(const json& v);
// What was sent, for a message: a string in single quotes (cut to 64 bytes, its size named), a
// number or literal as JSON, a container by its type name ("an array").
std::string quote_value(const json& v);
// A child's path: path_of("messages[0]", "content") = "messages[0].content"; path_of("", "n") = "n".
std::string path_of(const std::string& parent, const std::string& key);
std::string path_of(const std::string& parent, size_t index);

// Fields of one object. get() is null for a member that is absent or JSON null: OpenAI's optional
// fields all take null for "the default".
class fields {
 public:
  fields(const json& obj, std::string path) : obj_(obj), path_(std::move(path)) {}
  const json* get(const char* key) const;
  std::string path(const char* key) const { return path_of(path_, key); }

  // Each returns whether the field was present (not null); out is left alone when absent.
  bool boolean(const char* key, bool& out) const;
  bool string(const char* key, std::string& out) const;
  // An integer in [lo, hi]; a decimal with an integral value (5.0, 1e3) counts as one.
  bool integer(const char* key, int64_t lo, int64_t hi, int64_t& out) const;
  // A number in [lo, hi], either bound exclusive when open_lo / open_hi.
  bool number(const char* key, double lo, bool open_lo, double hi, bool open_hi, double& out) const;
  // Required: refuses with missing_required_parameter when absent or null.
  const json& need(const char* key) const;
  // Refuses with invalid_type unless v has the expected type ("a string", ...).
  void expect(const char* key, const json& v, bool ok, const char* expected) const;

 private:
  const json& obj_;
  std::string path_;
};

// An integer element (of an array) in [lo, hi], with the same rules as fields::integer.
int64_t integer_at(const json& v, const std::string& path, int64_t lo, int64_t hi);

}  // namespace server
