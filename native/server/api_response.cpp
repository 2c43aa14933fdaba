// Response, chunk and error bodies in OpenAI's shapes (api.h): the chat completion object, the
// chat completion chunk, the legacy text completion, the model list and the error object. Keys
// are written in OpenAI's order (nlohmann's ordered_json). Text comes from token pieces, which may
// end inside a UTF-8 character: the dump replaces such bytes with U+FFFD, and logprobs' "bytes"
// keeps them exactly.
#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "api.h"

namespace server {
namespace {

using ojson = nlohmann::ordered_json;

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

ojson null_or(const std::string& s) { return s.empty() ? ojson(nullptr) : ojson(s); }

// OpenAI writes -9999.0 for a token too improbable to measure; JSON has no -Infinity.
double floored(double logprob) { return std::isfinite(logprob) && logprob > -9999.0 ? logprob : -9999.0; }

ojson bytes_of(const std::string& s) {
  ojson a = ojson::array();
  for (unsigned char c : s) a.push_back((int)c);
  return a;
}

size_t top_count(const gen_request& rq, const token_logprob& t) {
  return std::min(t.top.size(), (size_t)std::max(rq.logprobs, 0));
}

ojson usage_json(const usage& u) {
  return ojson{{"prompt_tokens", u.prompt_tokens},
               {"completion_tokens", u.completion_tokens},
               {"total_tokens", u.prompt_tokens + u.completion_tokens},
               {"prompt_tokens_details", ojson{{"cached_tokens", u.cached_tokens}}}};
}

// Chat: {"content":[{token, logprob, bytes, top_logprobs:[{token, logprob, bytes}]}], "refusal":null}.
ojson chat_logprobs(const gen_request& rq, const std::vector<token_logprob>& lp) {
  ojson content = ojson::array();
  for (const token_logprob& t : lp) {
    ojson top = ojson::array();
    for (size_t k = 0; k < top_count(rq, t); ++k)
      top.push_back(ojson{{"token", t.top[k].first}, {"logprob", floored(t.top[k].second)}, {"bytes", bytes_of(t.top[k].first)}});
    content.push_back(ojson{{"token", t.text}, {"logprob", floored(t.logprob)}, {"bytes", bytes_of(t.text)}, {"top_logprobs", top}});
  }
  return ojson{{"content", content}, {"refusal", nullptr}};
}

// Completions: parallel arrays; top_logprobs holds one {token: logprob} object per token (the
// most probable kept where two alternatives have the same text); text_offset counts bytes from
// the start of the completion.
ojson completion_logprobs(const gen_request& rq, const std::vector<token_logprob>& lp, size_t offset) {
  ojson tokens = ojson::array(), token_logprobs = ojson::array(), top_logprobs = ojson::array(), offsets = ojson::array();
  for (const token_logprob& t : lp) {
    tokens.push_back(t.text);
    token_logprobs.push_back(floored(t.logprob));
    ojson top = ojson::object();
    for (size_t k = 0; k < top_count(rq, t); ++k)
      if (!top.contains(t.top[k].first)) top[t.top[k].first] = floored(t.top[k].second);
    top_logprobs.push_back(top);
    offsets.push_back(offset);
    offset += t.text.size();
  }
  return ojson{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

ojson head(const gen_request& rq, const gen_result& r, const char* object) {
  return ojson{{"id", r.id},
               {"object", object},
               {"created", r.created},
               {"model", r.model.empty() ? rq.model : r.model},
               {"system_fingerprint", null_or(r.system_fingerprint)}};
}

}  // namespace

std::string error_json(const api_error& e) {
  return dump(ojson{{"error", ojson{{"message", e.message}, {"type", e.type}, {"param", null_or(e.param)}, {"code", null_or(e.code)}}}});
}

std::string chat_completion_json(const gen_request& rq, const gen_result& r) {
  ojson j = head(rq, r, "chat.completion");
  ojson message{{"role", "assistant"}, {"content", r.text}, {"refusal", nullptr}};
  j["choices"] = ojson::array({ojson{{"index", 0},
                                     {"message", message},
                                     {"logprobs", rq.logprobs >= 0 ? chat_logprobs(rq, r.logprobs) : ojson(nullptr)},
                                     {"finish_reason", null_or(r.finish_reason)}}});
  j["usage"] = usage_json(r.use);
  return dump(j);
}

std::string completion_json(const gen_request& rq, const gen_result& r) {
  ojson j = head(rq, r, "text_completion");
  j["choices"] = ojson::array(
      {ojson{{"text", r.text},
             {"index", 0},
             {"logprobs", rq.logprobs >= 0 ? completion_logprobs(rq, r.logprobs, r.text_offset) : ojson(nullptr)},
             {"finish_reason", null_or(r.finish_reason)}}});
  j["usage"] = usage_json(r.use);
  return dump(j);
}

std::string chat_chunk_json(const gen_request& rq, const gen_result& head_r, const std::string* role,
                            const std::string& text, const std::vector<token_logprob>& logprobs,
                            const std::string& finish_reason) {
  ojson delta = ojson::object();
  if (role) delta["role"] = *role;
  if (role || !text.empty() || finish_reason.empty()) delta["content"] = text;
  ojson j = head(rq, head_r, "chat.completion.chunk");
  j["choices"] = ojson::array(
      {ojson{{"index", 0},
             {"delta", delta},
             {"logprobs", rq.logprobs >= 0 && !logprobs.empty() ? chat_logprobs(rq, logprobs) : ojson(nullptr)},
             {"finish_reason", null_or(finish_reason)}}});
  if (rq.include_usage) j["usage"] = nullptr;  // OpenAI: null on every chunk but the usage chunk
  return dump(j);
}

std::string completion_chunk_json(const gen_request& rq, const gen_result& head_r, const std::string& text,
                                  const std::vector<token_logprob>& logprobs, const std::string& finish_reason) {
  ojson j = head(rq, head_r, "text_completion");
  j["choices"] = ojson::array(
      {ojson{{"text", text},
             {"index", 0},
             {"logprobs", rq.logprobs >= 0 && !logprobs.empty() ? completion_logprobs(rq, logprobs, head_r.text_offset)
                                                                : ojson(nullptr)},
             {"finish_reason", null_or(finish_reason)}}});
  if (rq.include_usage) j["usage"] = nullptr;
  return dump(j);
}

std::string usage_chunk_json(const gen_request& rq, const gen_result& r) {
  ojson j = head(rq, r, rq.kind == endpoint::chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = ojson::array();
  j["usage"] = usage_json(r.use);
  return dump(j);
}

std::string models_json(const std::string& model_id, int64_t created, int ctx) {
  // "meta" is llama-server's extension of the model object; n_ctx is the context a request gets.
  return dump(ojson{{"object", "list"},
                    {"data", ojson::array({ojson{{"id", model_id},
                                                 {"object", "model"},
                                                 {"created", created},
                                                 {"owned_by", "krafla"},
                                                 {"meta", ojson{{"n_ctx", ctx}}}}})}});
}

}  // namespace server
