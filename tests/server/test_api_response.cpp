// The response builders of native/server/api.h, parsed back with nlohmann and checked field by
// field against OpenAI's API reference: the chat completion object, the chat completion chunk,
// the (legacy) completion object and its stream events, the usage chunk of
// stream_options.include_usage, the model list and the error object. The key sets below are
// written from that reference, not from the code.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api.h"

using namespace server;
using json = nlohmann::json;

namespace {

std::set<std::string> keys(const json& o) {
  std::set<std::string> k;
  for (auto it = o.begin(); it != o.end(); ++it) k.insert(it.key());
  return k;
}

gen_request request(endpoint kind, int logprobs = -1, bool include_usage = false) {
  gen_request rq;
  rq.kind = kind;
  rq.model = "asked-model";
  rq.logprobs = logprobs;
  rq.stream = include_usage;
  rq.include_usage = include_usage;
  return rq;
}

gen_result result(const char* id) {
  gen_result r;
  r.id = id;
  r.created = 1733000000;
  r.model = "stories15M";
  r.text = "Hello world";
  r.finish_reason = "stop";
  r.use.prompt_tokens = 12;
  r.use.completion_tokens = 3;
  r.use.cached_tokens = 8;
  r.system_fingerprint = "krafla-0.1.0-scalar";
  return r;
}

std::vector<token_logprob> three_tokens() {
  return {{"Hel", -0.5, {{"Hel", -0.5}, {"He", -1.25}, {"H", -3.0}}},
          {"lo", -0.125, {{"lo", -0.125}, {"p", -2.5}, {"l", -4.0}}},
          {" world", -std::numeric_limits<double>::infinity(), {{" world", -1e300}, {" there", std::nan("")}}}};
}

void check_usage(const json& u, int prompt, int completion, int cached) {
  CHECK(keys(u) == std::set<std::string>{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"});
  CHECK(u["prompt_tokens"] == prompt);
  CHECK(u["completion_tokens"] == completion);
  CHECK(u["total_tokens"] == prompt + completion);
  CHECK(u["prompt_tokens_details"] == json{{"cached_tokens", cached}});
}

}  // namespace

TEST_CASE("server api: the chat completion object", "[server]") {
  const json j = json::parse(chat_completion_json(request(endpoint::chat), result("chatcmpl-1")));
  CHECK(keys(j) == std::set<std::string>{"id", "object", "created", "model", "system_fingerprint", "choices", "usage"});
  CHECK(j["id"] == "chatcmpl-1");
  CHECK(j["object"] == "chat.completion");
  CHECK(j["created"] == 1733000000);
  CHECK(j["model"] == "stories15M");
  CHECK(j["system_fingerprint"] == "krafla-0.1.0-scalar");
  REQUIRE(j["choices"].size() == 1);
  const json& c = j["choices"][0];
  CHECK(keys(c) == std::set<std::string>{"index", "message", "logprobs", "finish_reason"});
  CHECK(c["index"] == 0);
  CHECK(c["message"] == json{{"role", "assistant"}, {"content", "Hello world"}, {"refusal", nullptr}});
  CHECK(c["logprobs"].is_null());
  CHECK(c["finish_reason"] == "stop");
  check_usage(j["usage"], 12, 3, 8);

  // The request's model when the result names none; null fingerprint and finish_reason when empty.
  gen_result r = result("chatcmpl-2");
  r.model.clear();
  r.system_fingerprint.clear();
  r.finish_reason.clear();
  const json k = json::parse(chat_completion_json(request(endpoint::chat), r));
  CHECK(k["model"] == "asked-model");
  CHECK(k["system_fingerprint"].is_null());
  CHECK(k["choices"][0]["finish_reason"].is_null());
}

TEST_CASE("server api: chat logprobs", "[server]") {
  gen_result r = result("chatcmpl-3");
  r.logprobs = three_tokens();
  const json lp = json::parse(chat_completion_json(request(endpoint::chat, 2), r))["choices"][0]["logprobs"];
  CHECK(keys(lp) == std::set<std::string>{"content", "refusal"});
  CHECK(lp["refusal"].is_null());
  REQUIRE(lp["content"].size() == 3);
  const json& t0 = lp["content"][0];
  CHECK(keys(t0) == std::set<std::string>{"token", "logprob", "bytes", "top_logprobs"});
  CHECK(t0["token"] == "Hel");
  CHECK(t0["logprob"] == -0.5);
  CHECK(t0["bytes"] == json{72, 101, 108});
  REQUIRE(t0["top_logprobs"].size() == 2);  // top_logprobs 2 of the 3 given
  CHECK(t0["top_logprobs"][1] == json{{"token", "He"}, {"logprob", -1.25}, {"bytes", json{72, 101}}});
  // -inf, -1e300 and NaN have no JSON form: OpenAI's floor, -9999.
  CHECK(lp["content"][2]["logprob"] == -9999.0);
  CHECK(lp["content"][2]["top_logprobs"][0]["logprob"] == -9999.0);
  CHECK(lp["content"][2]["top_logprobs"][1]["logprob"] == -9999.0);
  // logprobs without top_logprobs: empty lists.
  const json none = json::parse(chat_completion_json(request(endpoint::chat, 0), r))["choices"][0]["logprobs"];
  CHECK(none["content"][1]["top_logprobs"] == json::array());
}

TEST_CASE("server api: half a UTF-8 character still gives valid JSON", "[server]") {
  gen_result r = result("chatcmpl-4");
  const std::string euro = "\xE2\x82\xAC";
  r.text = "price: " + euro.substr(0, 2);  // a piece that ends inside the character
  r.logprobs = {{euro.substr(0, 2), -0.25, {{euro.substr(0, 2), -0.25}, {"\xFF", -3.0}}}, {euro.substr(2), -0.5, {}}};
  for (const std::string& body : {chat_completion_json(request(endpoint::chat, 2), r),
                                  completion_json(request(endpoint::completion, 2), r)}) {
    const json j = json::parse(body);  // nlohmann refuses invalid UTF-8: this parse is the check
    CHECK(j.is_object());
    CHECK(body.find("\\ufffd") == std::string::npos);  // U+FFFD written as UTF-8, not escaped
  }
  const json c = json::parse(chat_completion_json(request(endpoint::chat, 2), r));
  CHECK(c["choices"][0]["message"]["content"] == "price: \xEF\xBF\xBD");  // U+FFFD
  const json& t = c["choices"][0]["logprobs"]["content"];
  CHECK(t[0]["bytes"] == json{0xE2, 0x82});  // the raw bytes survive
  CHECK(t[1]["bytes"] == json{0xAC});
  CHECK(t[0]["top_logprobs"][1]["bytes"] == json{0xFF});
  // The error body too.
  api_error e;
  e.message = "bad \xC3";
  CHECK(json::parse(error_json(e))["error"]["message"] == "bad \xEF\xBF\xBD");
}

TEST_CASE("server api: the completion object and its logprobs", "[server]") {
  gen_result r = result("cmpl-1");
  r.logprobs = three_tokens();
  r.text_offset = 0;
  const json j = json::parse(completion_json(request(endpoint::completion, 1), r));
  CHECK(keys(j) == std::set<std::string>{"id", "object", "created", "model", "system_fingerprint", "choices", "usage"});
  CHECK(j["object"] == "text_completion");
  CHECK(j["id"] == "cmpl-1");
  const json& c = j["choices"][0];
  CHECK(keys(c) == std::set<std::string>{"text", "index", "logprobs", "finish_reason"});
  CHECK(c["text"] == "Hello world");
  CHECK(c["index"] == 0);
  CHECK(c["finish_reason"] == "stop");
  const json& lp = c["logprobs"];
  CHECK(keys(lp) == std::set<std::string>{"tokens", "token_logprobs", "top_logprobs", "text_offset"});
  CHECK(lp["tokens"] == json{"Hel", "lo", " world"});
  CHECK(lp["token_logprobs"] == json{-0.5, -0.125, -9999.0});
  CHECK(lp["top_logprobs"] == json::parse(R"([{"Hel":-0.5},{"lo":-0.125},{" world":-9999.0}])"));
  CHECK(lp["text_offset"] == json{0, 3, 5});
  check_usage(j["usage"], 12, 3, 8);
  // Without logprobs: null. Two alternatives with one text: the first (more probable) kept.
  CHECK(json::parse(completion_json(request(endpoint::completion), r))["choices"][0]["logprobs"].is_null());
  r.logprobs = {{"a", -1.0, {{"a", -1.0}, {"a", -2.0}, {"b", -3.0}}}};
  const json dup = json::parse(completion_json(request(endpoint::completion, 5), r))["choices"][0]["logprobs"];
  CHECK(dup["top_logprobs"][0] == json{{"a", -1.0}, {"b", -3.0}});
}

TEST_CASE("server api: chat chunks", "[server]") {
  const gen_request rq = request(endpoint::chat);
  const gen_result head = result("chatcmpl-5");
  const std::string assistant = "assistant";
  const json first = json::parse(chat_chunk_json(rq, head, &assistant, "", {}, ""));
  CHECK(keys(first) == std::set<std::string>{"id", "object", "created", "model", "system_fingerprint", "choices"});
  CHECK(first["object"] == "chat.completion.chunk");
  CHECK(first["id"] == "chatcmpl-5");
  CHECK(first["created"] == 1733000000);
  const json& c = first["choices"][0];
  CHECK(keys(c) == std::set<std::string>{"index", "delta", "logprobs", "finish_reason"});
  CHECK(c["delta"] == json{{"role", "assistant"}, {"content", ""}});
  CHECK(c["finish_reason"].is_null());
  CHECK(c["logprobs"].is_null());
  const json mid = json::parse(chat_chunk_json(rq, head, nullptr, "Hel", {}, ""));
  CHECK(mid["choices"][0]["delta"] == json{{"content", "Hel"}});
  const json last = json::parse(chat_chunk_json(rq, head, nullptr, "", {}, "length"));
  CHECK(last["choices"][0]["delta"] == json::object());
  CHECK(last["choices"][0]["finish_reason"] == "length");
  const json both = json::parse(chat_chunk_json(rq, head, nullptr, "!", {}, "stop"));
  CHECK(both["choices"][0]["delta"] == json{{"content", "!"}});
  CHECK(both["choices"][0]["finish_reason"] == "stop");

  // With logprobs: the step's tokens; with include_usage: "usage": null on every chunk.
  const gen_request rq2 = request(endpoint::chat, 1, true);
  const std::vector<token_logprob> step = {three_tokens()[0]};
  const json lp = json::parse(chat_chunk_json(rq2, head, nullptr, "Hel", step, ""));
  CHECK(lp.contains("usage"));
  CHECK(lp["usage"].is_null());
  CHECK(lp["choices"][0]["logprobs"]["content"][0]["token"] == "Hel");
  CHECK(lp["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size() == 1);
  CHECK(lp["choices"][0]["logprobs"]["refusal"].is_null());

  const json usage = json::parse(usage_chunk_json(rq2, result("chatcmpl-5")));
  CHECK(keys(usage) == std::set<std::string>{"id", "object", "created", "model", "system_fingerprint", "choices", "usage"});
  CHECK(usage["object"] == "chat.completion.chunk");
  CHECK(usage["choices"] == json::array());
  check_usage(usage["usage"], 12, 3, 8);
}

TEST_CASE("server api: completion chunks", "[server]") {
  const gen_request rq = request(endpoint::completion, 0, true);
  gen_result head = result("cmpl-2");
  head.text_offset = 10;  // ten bytes already sent
  const std::vector<token_logprob> step = {three_tokens()[0], three_tokens()[1]};
  const json j = json::parse(completion_chunk_json(rq, head, "Hello", step, ""));
  CHECK(keys(j) == std::set<std::string>{"id", "object", "created", "model", "system_fingerprint", "choices", "usage"});
  CHECK(j["object"] == "text_completion");
  CHECK(j["usage"].is_null());
  const json& c = j["choices"][0];
  CHECK(keys(c) == std::set<std::string>{"text", "index", "logprobs", "finish_reason"});
  CHECK(c["text"] == "Hello");
  CHECK(c["finish_reason"].is_null());
  CHECK(c["logprobs"]["text_offset"] == json{10, 13});
  CHECK(c["logprobs"]["top_logprobs"] == json::parse("[{},{}]"));
  const json end = json::parse(completion_chunk_json(request(endpoint::completion), head, "", {}, "length"));
  CHECK_FALSE(end.contains("usage"));
  CHECK(end["choices"][0]["finish_reason"] == "length");
  CHECK(end["choices"][0]["logprobs"].is_null());
  const json usage = json::parse(usage_chunk_json(rq, result("cmpl-2")));
  CHECK(usage["object"] == "text_completion");
  CHECK(usage["choices"] == json::array());
  check_usage(usage["usage"], 12, 3, 8);
}

TEST_CASE("server api: the model list and the error object", "[server]") {
  const json m = json::parse(models_json("stories15M", 1733000000, 512));
  CHECK(keys(m) == std::set<std::string>{"object", "data"});
  CHECK(m["object"] == "list");
  REQUIRE(m["data"].size() == 1);
  const json& d = m["data"][0];
  CHECK(d["id"] == "stories15M");
  CHECK(d["object"] == "model");
  CHECK(d["created"] == 1733000000);
  CHECK(d["owned_by"] == "krafla");
  CHECK(d["meta"]["n_ctx"] == 512);

  api_error e;
  e.message = "Invalid 'n'.";
  e.param = "n";
  e.code = "unsupported_value";
  CHECK(json::parse(error_json(e)) ==
        json::parse(R"({"error":{"message":"Invalid 'n'.","type":"invalid_request_error","param":"n","code":"unsupported_value"}})"));
  const api_error bare{503, "busy", "server_error", "", ""};
  CHECK(json::parse(error_json(bare)) ==
        json::parse(R"({"error":{"message":"busy","type":"server_error","param":null,"code":null}})"));
  // A parser's refusal, end to end.
  gen_request rq;
  api_error err;
  REQUIRE_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"n":2})", rq, err));
  const json body = json::parse(error_json(err));
  CHECK(body["error"]["param"] == "n");
  CHECK(body["error"]["code"] == "unsupported_value");
  CHECK(body["error"]["type"] == "invalid_request_error");
}
