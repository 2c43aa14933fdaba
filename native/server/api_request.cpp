// Request bodies to gen_request / tokenize_request (api.h): OpenAI's documented fields with its
// defaults, ranges and error wording, plus llama-server's top_k, min_p and chat_template_kwargs.
// docs/server.md ("Requests") lists every field; what this file refuses, it refuses with the
// field's path, because a sampling option that is silently ignored gives a reply the client did
// not ask for. Fields it does not know are ignored, as llama-server does (OpenAI refuses them).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <new>
#include <string>

#include "api.h"
#include "api_fields.h"

namespace server {
namespace {

constexpr int64_t kMaxInt32 = 2147483647;

// Runs a parse, turning its refusal into err. Anything else thrown is a defect of this file (a
// type the readers did not check): status 500, so that the fuzz harness and the tests catch it.
template <class F>
bool guarded(api_error& err, F&& parse) {
  try {
    parse();
    return true;
  } catch (const bad_request& b) {
    err = b.e;
  } catch (const std::bad_alloc&) {
    err = api_error{500, "Out of memory while reading the request.", "server_error", "", ""};
  } catch (const std::exception& e) {
    err = api_error{500, std::string("Internal error while reading the request: ") + e.what(), "server_error", "", ""};
  }
  return false;
}

[[noreturn]] void unsupported_parameter(const std::string& param, const std::string& why) {
  refuse(param, "unsupported_parameter", "Unsupported parameter: '" + param + "'. " + why);
}

[[noreturn]] void unsupported_value(const std::string& param, const json& v, const std::string& why) {
  refuse(param, "unsupported_value", "Unsupported value for '" + param + "': " + quote_value(v) + ". " + why);
}

[[noreturn]] void invalid_value(const std::string& param, const json& v, const std::string& supported) {
  refuse(param, "invalid_value",
         "Invalid value for '" + param + "': " + quote_value(v) + ". Supported values are: " + supported + ".");
}

// max_tokens (both endpoints) and max_completion_tokens (chat; it wins over max_tokens, being
// OpenAI's newer name for the same limit). OpenAI refuses 0 and negatives; so does this.
void read_max_tokens(const fields& f, const char* key, gen_request& rq) {
  int64_t n;
  if (f.integer(key, 1, kMaxInt32, n)) rq.max_tokens = (int)n;
}

// seed: any JSON integer OpenAI's int64 takes, and unsigned ones up to 2^64 - 1 (llama-server's
// uint32 seeds fit too). A negative seed maps to its two's complement, so -1 is a fixed seed like
// any other (not llama-server's "random").
void read_seed(const fields& f, gen_request& rq) {
  const json* v = f.get("seed");
  if (!v) return;
  const std::string p = f.path("seed");
  if (v->is_number_unsigned()) {
    rq.seed = v->get<uint64_t>();
  } else if (v->is_number_integer()) {
    rq.seed = (uint64_t)v->get<int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::floor(d) != d)
      refuse(p, "invalid_type", "Invalid type for 'seed': expected an integer, but got a decimal (" + quote_value(*v) +
                                    ") instead.");
    if (d < -9223372036854775808.0 || d >= 18446744073709551616.0)
      refuse(p, "integer_above_max_value", "Invalid 'seed': " + quote_value(*v) +
                                               " is outside the 64-bit integers [-2^63, 2^64 - 1].");
    rq.seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
  } else {
    f.expect("seed", *v, false, "an integer");
  }
  rq.has_seed = true;
}

// stop: a string or an array of at most 4 strings (OpenAI's limit). Each must be non-empty (an
// empty one would end every reply at once) and free of NUL (the engine takes C strings).
void read_stop(const fields& f, gen_request& rq) {
  const json* v = f.get("stop");
  if (!v) return;
  const auto one = [&](const json& s, const std::string& p) {
    const std::string& text = s.get_ref<const std::string&>();
    if (text.empty())
      refuse(p, "invalid_value", "Invalid '" + p + "': empty string. A stop sequence needs at least one character.");
    if (text.find('\0') != std::string::npos)
      refuse(p, "invalid_value", "Invalid '" + p + "': a stop sequence may not contain U+0000.");
    rq.stop.push_back(text);
  };
  if (v->is_string()) return one(*v, f.path("stop"));
  f.expect("stop", *v, v->is_array(), "one of a string or array of strings");
  if (v->size() > 4)
    refuse(f.path("stop"), "array_above_max_length",
           "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length " +
               std::to_string(v->size()) + " instead.");
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string p = path_of(f.path("stop"), i);
    if (!(*v)[i].is_string())
      refuse(p, "invalid_type", "Invalid type for '" + p + "': expected a string, but got " + type_name((*v)[i]) +
                                    " instead.");
    one((*v)[i], p);
  }
}

// stream, and stream_options (only with stream true, as OpenAI): include_usage adds the usage
// chunk before [DONE]. Other members of stream_options are ignored.
void read_stream(const fields& f, gen_request& rq) {
  f.boolean("stream", rq.stream);
  const json* so = f.get("stream_options");
  if (!so) return;
  f.expect("stream_options", *so, so->is_object(), "an object");
  if (!rq.stream)
    refuse(f.path("stream_options"), "invalid_value",
           "Invalid 'stream_options': it is only allowed when 'stream' is true.");
  fields(*so, f.path("stream_options")).boolean("include_usage", rq.include_usage);
}

// The fields both endpoints share: sampling, penalties, stop, stream, n, and the refusals of
// what would change the output if it were ignored.
void read_common(const fields& f, gen_request& rq) {
  f.string("model", rq.model);
  read_max_tokens(f, "max_tokens", rq);
  double d;
  if (f.number("temperature", 0.0, false, 2.0, false, d)) rq.temperature = (float)d;
  // OpenAI takes top_p 0; the nucleus of mass 0 is the single most probable token, which the
  // engine's sampler (top_p in (0, 1]) gives for the smallest positive top_p.
  if (f.number("top_p", 0.0, false, 1.0, false, d)) rq.top_p = d > 0 ? (float)d : FLT_MIN;
  if (rq.top_p < FLT_MIN) rq.top_p = FLT_MIN;  // a positive top_p below float's range
  int64_t n;
  if (f.integer("top_k", 0, kMaxInt32, n)) rq.top_k = (int)n;
  // A min_p just below 1 (0.99999999) would round to 1.0f: the largest float below 1 instead.
  if (f.number("min_p", 0.0, false, 1.0, true, d)) rq.min_p = std::min((float)d, std::nextafter(1.0f, 0.0f));
  if (f.number("presence_penalty", -2.0, false, 2.0, false, d)) rq.presence_penalty = (float)d;
  if (f.number("frequency_penalty", -2.0, false, 2.0, false, d)) rq.frequency_penalty = (float)d;
  read_seed(f, rq);
  read_stop(f, rq);
  read_stream(f, rq);

  if (const json* v = f.get("n")) {
    const int64_t choices = integer_at(*v, f.path("n"), INT32_MIN, kMaxInt32);
    if (choices != 1)
      unsupported_value(f.path("n"), *v, "This server returns one choice per request: 'n' must be 1.");
  }
  if (const json* v = f.get("logit_bias")) {
    f.expect("logit_bias", *v, v->is_object(), "an object");
    if (!v->empty()) unsupported_parameter(f.path("logit_bias"), "This server does not bias token logits.");
  }
  // llama-server's output constraints: ignoring them would return unconstrained text.
  for (const char* key : {"grammar", "json_schema"})
    if (f.get(key)) unsupported_parameter(f.path(key), "This server does not constrain its output.");
}

// One message's content: a string, or an array of text parts joined by "\n" (as llama-server
// joins them); null or absent only for an assistant message (""), whose tool_calls are refused.
std::string read_content(const fields& mf, bool assistant) {
  if (assistant && !mf.get("content")) return "";
  const json* c = &mf.need("content");
  if (c->is_string()) return c->get<std::string>();
  mf.expect("content", *c, c->is_array(), "one of a string or array of objects");
  const std::string cp = mf.path("content");
  if (c->empty())
    refuse(cp, "empty_array",
           "Invalid '" + cp + "': empty array. Expected an array with minimum length 1, but got an empty array instead.");
  std::string text;
  for (size_t j = 0; j < c->size(); ++j) {
    const json& part = (*c)[j];
    const std::string pp = path_of(cp, j);
    if (!part.is_object())
      refuse(pp, "invalid_type", "Invalid type for '" + pp + "': expected an object, but got " + type_name(part) +
                                     " instead.");
    const fields pf(part, pp);
    const json& type = pf.need("type");
    pf.expect("type", type, type.is_string(), "a string");
    const std::string& t = type.get_ref<const std::string&>();
    if (t != "text") {
      if (t == "image_url" || t == "input_audio" || t == "file" || t == "refusal")
        unsupported_value(pf.path("type"), type,
                          "This server reads text parts only (content part " + std::to_string(j) + ").");
      invalid_value(pf.path("type"), type, "'text'");
    }
    const json& body = pf.need("text");
    pf.expect("text", body, body.is_string(), "a string");
    if (j) text += '\n';
    text += body.get_ref<const std::string&>();
  }
  return text;
}

// messages: a non-empty array of {role, content}. Roles: system, developer (as system, which is
// what chat templates know), user, assistant. tool and function are refused: this server calls
// no tools, so a conversation that holds their results cannot have come from it. Other message
// members (name, refusal, ...) are ignored.
std::string read_messages(const fields& f) {
  const json& m = f.need("messages");
  f.expect("messages", m, m.is_array(), "an array");
  if (m.empty())
    refuse(f.path("messages"), "empty_array",
           "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.");
  json out = json::array();
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string p = path_of(f.path("messages"), i);
    if (!m[i].is_object())
      refuse(p, "invalid_type", "Invalid type for '" + p + "': expected an object, but got " + type_name(m[i]) +
                                    " instead.");
    const fields mf(m[i], p);
    const json& role = mf.need("role");
    mf.expect("role", role, role.is_string(), "a string");
    const std::string& r = role.get_ref<const std::string&>();
    if (r == "tool" || r == "function")
      unsupported_value(mf.path("role"), role, "This server does not call tools, so it reads no tool results.");
    if (r != "system" && r != "developer" && r != "user" && r != "assistant")
      invalid_value(mf.path("role"), role, "'system', 'developer', 'user', and 'assistant'");
    if (const json* calls = mf.get("tool_calls"))
      if (!calls->is_array() || !calls->empty())
        unsupported_parameter(mf.path("tool_calls"), "This server does not call tools.");
    if (mf.get("function_call")) unsupported_parameter(mf.path("function_call"), "This server does not call functions.");
    out.push_back(json{{"role", r == "developer" ? "system" : r}, {"content", read_content(mf, r == "assistant")}});
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

// tools / functions (empty arrays are accepted: nothing to call), tool_choice / function_call
// ("none" and "auto" are accepted: with no tools both mean a plain reply).
void refuse_tools(const fields& f) {
  for (const char* key : {"tools", "functions"}) {
    if (const json* v = f.get(key)) {
      f.expect(key, *v, v->is_array(), "an array");
      if (!v->empty()) unsupported_parameter(f.path(key), "This server does not call tools.");
    }
  }
  for (const char* key : {"tool_choice", "function_call"}) {
    const json* v = f.get(key);
    if (!v) continue;
    if (v->is_object()) unsupported_value(f.path(key), *v, "This server does not call tools.");
    f.expect(key, *v, v->is_string(), "one of a string or object");
    const std::string& s = v->get_ref<const std::string&>();
    if (s == "required") unsupported_value(f.path(key), *v, "This server does not call tools.");
    if (s != "none" && s != "auto") invalid_value(f.path(key), *v, "'none', 'auto', and 'required'");
  }
}

// response_format: {"type":"text"} only; the JSON modes are refused until output can be constrained.
void read_response_format(const fields& f) {
  const json* v = f.get("response_format");
  if (!v) return;
  f.expect("response_format", *v, v->is_object(), "an object");
  const fields rf(*v, f.path("response_format"));
  const json& type = rf.need("type");
  rf.expect("type", type, type.is_string(), "a string");
  const std::string& t = type.get_ref<const std::string&>();
  if (t == "json_object" || t == "json_schema")
    unsupported_value(rf.path("type"), type, "This server does not constrain its output to JSON yet; use 'text'.");
  if (t != "text") invalid_value(rf.path("type"), type, "'text', 'json_object', and 'json_schema'");
}

// Audio output: refused (text only); modalities may say ["text"].
void refuse_audio(const fields& f) {
  if (f.get("audio")) unsupported_parameter(f.path("audio"), "This server writes text only.");
  const json* v = f.get("modalities");
  if (!v) return;
  f.expect("modalities", *v, v->is_array(), "an array");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string p = path_of(f.path("modalities"), i);
    if (!m.is_string())
      refuse(p, "invalid_type", "Invalid type for '" + p + "': expected a string, but got " + type_name(m) + " instead.");
    if (m.get_ref<const std::string&>() != "text") unsupported_value(p, m, "This server writes text only.");
  }
}

// Chat's logprobs (a boolean) and top_logprobs (0..20, only with logprobs true).
void read_chat_logprobs(const fields& f, gen_request& rq) {
  bool want = false;
  f.boolean("logprobs", want);
  int64_t top = 0;
  const bool has_top = f.integer("top_logprobs", 0, 20, top);
  if (has_top && !want)
    refuse(f.path("top_logprobs"), "invalid_value", "Invalid 'top_logprobs': it requires 'logprobs' to be true.");
  if (want) rq.logprobs = (int)top;
}

// prompt: a string, an array of one string, an array of token ids, or an array of one array of
// token ids. Several prompts in one request (OpenAI's batch) are refused: one choice per request.
void read_prompt(const fields& f, gen_request& rq) {
  const json& p = f.need("prompt");
  const std::string pp = f.path("prompt");
  if (p.is_string()) {
    rq.prompt = p.get<std::string>();
    return;
  }
  f.expect("prompt", p, p.is_array(), "one of a string, array of strings, or array of integers");
  if (p.empty())
    refuse(pp, "empty_array",
           "Invalid 'prompt': empty array. Expected an array with minimum length 1, but got an empty array instead.");
  const auto ids = [&](const json& a, const std::string& path) {
    if (a.empty())
      refuse(path, "empty_array", "Invalid '" + path +
                                      "': empty array. Expected an array with minimum length 1, but got an empty array instead.");
    rq.prompt_ids.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) rq.prompt_ids.push_back((int32_t)integer_at(a[i], path_of(path, i), 0, kMaxInt32));
  };
  if (p[0].is_number()) return ids(p, pp);
  if (!p[0].is_string() && !p[0].is_array())
    refuse(path_of(pp, 0), "invalid_type", "Invalid type for '" + path_of(pp, 0) +
                                               "': expected one of a string, integer, or array of integers, but got " +
                                               type_name(p[0]) + " instead.");
  if (p.size() > 1)
    refuse(pp, "unsupported_value",
           "Unsupported value for 'prompt': a batch of " + std::to_string(p.size()) +
               " prompts. This server completes one prompt per request; send one request per prompt.");
  if (p[0].is_string()) {
    rq.prompt = p[0].get<std::string>();
    return;
  }
  ids(p[0], path_of(pp, 0));
}

// /v1/completions' own fields: echo, suffix and best_of only at their defaults; logprobs 0..5.
void read_completion_only(const fields& f, gen_request& rq) {
  bool echo = false;
  if (f.boolean("echo", echo) && echo)
    unsupported_value(f.path("echo"), *f.get("echo"), "This server does not echo the prompt.");
  std::string suffix;
  if (f.string("suffix", suffix) && !suffix.empty())
    unsupported_parameter(f.path("suffix"), "This server does not insert text between a prompt and a suffix.");
  int64_t n;
  if (f.integer("best_of", INT32_MIN, kMaxInt32, n) && n != 1)
    unsupported_value(f.path("best_of"), *f.get("best_of"), "This server samples one completion: 'best_of' must be 1.");
  if (f.integer("logprobs", 0, 5, n)) rq.logprobs = (int)n;
}

}  // namespace

bool parse_chat_request(const std::string& body, gen_request& out, api_error& err) {
  return guarded(err, [&] {
    const json doc = parse_body(body);
    const fields f(doc, "");
    gen_request rq;
    rq.kind = endpoint::chat;
    rq.messages_json = read_messages(f);
    read_common(f, rq);
    read_max_tokens(f, "max_completion_tokens", rq);
    read_chat_logprobs(f, rq);
    read_response_format(f);
    refuse_tools(f);
    refuse_audio(f);
    if (const json* kw = f.get("chat_template_kwargs")) {
      f.expect("chat_template_kwargs", *kw, kw->is_object(), "an object");
      rq.extra_json = kw->dump(-1, ' ', false, json::error_handler_t::replace);
    }
    out = std::move(rq);
  });
}

bool parse_completion_request(const std::string& body, gen_request& out, api_error& err) {
  return guarded(err, [&] {
    const json doc = parse_body(body);
    const fields f(doc, "");
    gen_request rq;
    rq.kind = endpoint::completion;
    rq.max_tokens = 16;  // OpenAI's documented default for /v1/completions
    read_prompt(f, rq);
    read_common(f, rq);
    read_completion_only(f, rq);
    out = std::move(rq);
  });
}

bool parse_tokenize_request(const std::string& body, tokenize_request& out, api_error& err) {
  return guarded(err, [&] {
    const json doc = parse_body(body);
    const fields f(doc, "");
    tokenize_request rq;
    const json& c = f.need("content");
    f.expect("content", c, c.is_string(), "a string");
    rq.content = c.get<std::string>();
    f.boolean("add_special", rq.add_special);
    f.boolean("with_pieces", rq.with_pieces);
    out = std::move(rq);
  });
}

bool parse_detokenize_request(const std::string& body, std::vector<int32_t>& ids, api_error& err) {
  return guarded(err, [&] {
    const json doc = parse_body(body);
    const fields f(doc, "");
    std::vector<int32_t> out;
    if (const json* t = f.get("tokens")) {  // absent or null: no tokens (llama-server's "")
      f.expect("tokens", *t, t->is_array(), "an array");
      out.reserve(t->size());
      for (size_t i = 0; i < t->size(); ++i)
        out.push_back((int32_t)integer_at((*t)[i], path_of(f.path("tokens"), i), 0, kMaxInt32));
    }
    ids = std::move(out);
  });
}

}  // namespace server
