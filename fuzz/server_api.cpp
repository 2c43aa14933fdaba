// Fuzzes ml_server's OpenAI mapping (native/server/api.h): the input, as a request body, goes
// through all four parsers, and then through every response builder. Checks beyond the sanitizers:
// - a parser never throws, and a refusal is status 400, type invalid_request_error, with a
//   message; error_json of it is JSON holding the same message and param (null when empty);
// - an accepted request keeps the parsers' promises: the ranges of api.h, at most 4 stop strings
//   (non-empty, no NUL), include_usage only with stream, chat_template_kwargs an object, and
//   messages_json an array of {role: system|user|assistant, content: string} that parses to
//   itself when sent again as messages (the normalisation is idempotent);
// - every builder's body is valid JSON (nlohmann's parser refuses invalid UTF-8) when the text and
//   the token pieces are the input's raw bytes, and the logprobs' "bytes" give those bytes back.
// Input: a body. Seeds: fuzz/corpus/server_api (fuzz/make_seeds.py), JSONTestSuite's files and a
// dictionary of the field names (run.py).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api.h"

using namespace server;
using json = nlohmann::json;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

json parse(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const std::exception&) {
    std::abort();  // a builder wrote something that is not JSON
  }
}

void check_refusal(const api_error& err) {
  check(err.status == 400 && err.type == "invalid_request_error" && !err.message.empty());
  const json body = parse(error_json(err));
  check(body.at("error").at("type") == "invalid_request_error");
  check(err.param.empty() ? body["error"]["param"].is_null() : body["error"]["param"] == err.param);
  check(err.code.empty() ? body["error"]["code"].is_null() : body["error"]["code"] == err.code);
}

void check_request(const gen_request& rq) {
  const bool chat = rq.kind == endpoint::chat;
  check(rq.max_tokens == (chat ? -1 : 16) || rq.max_tokens >= 1);
  check(rq.temperature >= 0.0f && rq.temperature <= 2.0f);
  check(rq.top_p > 0.0f && rq.top_p <= 1.0f);
  check(rq.top_k >= 0);
  check(rq.min_p >= 0.0f && rq.min_p < 1.0f);
  check(rq.presence_penalty >= -2.0f && rq.presence_penalty <= 2.0f);
  check(rq.frequency_penalty >= -2.0f && rq.frequency_penalty <= 2.0f);
  check(rq.logprobs >= -1 && rq.logprobs <= (chat ? 20 : 5));
  check(rq.stop.size() <= 4);
  for (const std::string& s : rq.stop) check(!s.empty() && s.find('\0') == std::string::npos);
  check(!rq.include_usage || rq.stream);
  if (!chat) {
    check(rq.messages_json.empty() && rq.extra_json.empty());
    for (int32_t id : rq.prompt_ids) check(id >= 0);
    return;
  }
  check(rq.prompt.empty() && rq.prompt_ids.empty());
  if (!rq.extra_json.empty()) check(parse(rq.extra_json).is_object());
  const json m = parse(rq.messages_json);
  check(m.is_array() && !m.empty());
  for (const json& msg : m) {
    check(msg.is_object() && msg.size() == 2 && msg.at("content").is_string());
    const std::string& role = msg.at("role").get_ref<const std::string&>();
    check(role == "system" || role == "user" || role == "assistant");
  }
  gen_request again;
  api_error err;
  check(parse_chat_request("{\"messages\":" + rq.messages_json + "}", again, err));
  check(again.messages_json == rq.messages_json);
}

// The builders over the request, with the input's bytes as the generated text and token pieces.
void check_builders(const gen_request& rq, const std::string& bytes) {
  gen_result r;
  r.id = rq.kind == endpoint::chat ? "chatcmpl-f" : "cmpl-f";
  r.created = 1;
  r.model = bytes.substr(0, 16);
  r.text = bytes;
  r.finish_reason = bytes.size() % 2 ? "stop" : "length";
  r.use = usage{(int)bytes.size(), 3, 1};
  r.system_fingerprint = bytes.substr(bytes.size() / 2);
  for (size_t i = 0; i < bytes.size() && r.logprobs.size() < 64; i += 3) {
    token_logprob t;
    t.text = bytes.substr(i, 3);
    t.logprob = -(double)(unsigned char)bytes[i] / 7.0;
    t.top = {{t.text, t.logprob}, {bytes.substr(i, 1), -std::numeric_limits<double>::infinity()}, {bytes.substr(i + 1, 2), -3.0}};
    r.logprobs.push_back(t);
  }
  const std::string assistant = "assistant";
  const std::vector<std::string> bodies = {
      chat_completion_json(rq, r),
      completion_json(rq, r),
      chat_chunk_json(rq, r, &assistant, "", r.logprobs, ""),
      chat_chunk_json(rq, r, nullptr, bytes, r.logprobs, r.finish_reason),
      completion_chunk_json(rq, r, bytes, r.logprobs, r.finish_reason),
      usage_chunk_json(rq, r),
      models_json(bytes, r.created, (int)bytes.size()),
  };
  for (const std::string& b : bodies) check(parse(b).is_object());
  if (rq.logprobs >= 0 && !r.logprobs.empty()) {
    const json lp = parse(bodies[0])["choices"][0]["logprobs"]["content"];
    check(lp.size() == r.logprobs.size());
    for (size_t i = 0; i < lp.size(); ++i) {
      std::string raw;
      for (const json& b : lp[i]["bytes"]) raw += (char)b.get<int>();
      check(raw == r.logprobs[i].text);
      check(lp[i]["top_logprobs"].size() == std::min<size_t>(3, (size_t)rq.logprobs));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  api_error err;
  gen_request rq;
  try {
    for (bool chat : {true, false}) {
      err = api_error{};
      const bool ok = chat ? parse_chat_request(body, rq, err) : parse_completion_request(body, rq, err);
      if (ok) {
        check(rq.kind == (chat ? endpoint::chat : endpoint::completion));
        check_request(rq);
        check_builders(rq, body);
      } else {
        check_refusal(err);
      }
    }
    tokenize_request t;
    err = api_error{};
    if (!parse_tokenize_request(body, t, err)) check_refusal(err);
    std::vector<int32_t> ids;
    err = api_error{};
    if (parse_detokenize_request(body, ids, err)) {
      for (int32_t id : ids) check(id >= 0);
    } else {
      check_refusal(err);
    }
  } catch (...) {
    std::abort();  // nothing may escape the parsers or the builders
  }
  return 0;
}
