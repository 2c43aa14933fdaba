// The request parsers of native/server/api.h. Oracles: values written by hand from OpenAI's API
// reference (fields, defaults, ranges, error codes and wording) and llama-server's extensions;
// for the JSON layer, JSONTestSuite's verdicts (y_ files are JSON, so they never fail as JSON; n_
// files are not, so they always do); the parsed messages are read back with nlohmann.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api.h"
#include "test_util.h"

using namespace server;
using json = nlohmann::json;

namespace {

enum class ep { chat, completion, tokenize, detokenize };

// Runs one parser; returns whether it accepted the body.
bool run(ep e, const std::string& body, api_error& err, gen_request* rq = nullptr) {
  gen_request g;
  tokenize_request t;
  std::vector<int32_t> ids;
  bool ok = false;
  switch (e) {
    case ep::chat: ok = parse_chat_request(body, g, err); break;
    case ep::completion: ok = parse_completion_request(body, g, err); break;
    case ep::tokenize: ok = parse_tokenize_request(body, t, err); break;
    case ep::detokenize: ok = parse_detokenize_request(body, ids, err); break;
  }
  if (rq) *rq = g;
  return ok;
}

const std::string kMsgs = R"("messages":[{"role":"user","content":"hi"}])";
// A chat body: one user message plus the extra members.
std::string chat(const std::string& extra) { return "{" + kMsgs + extra + "}"; }
std::string messages(const std::string& list) { return R"({"messages":)" + list + "}"; }
std::string completion(const std::string& extra) { return R"({"prompt":"once")" + extra + "}"; }

gen_request chat_ok(const std::string& body) {
  gen_request rq;
  api_error err;
  const bool ok = parse_chat_request(body, rq, err);
  INFO(body.substr(0, 200) << " -> " << err.message);
  REQUIRE(ok);
  CHECK(rq.kind == endpoint::chat);
  return rq;
}

gen_request completion_ok(const std::string& body) {
  gen_request rq;
  api_error err;
  const bool ok = parse_completion_request(body, rq, err);
  INFO(body.substr(0, 200) << " -> " << err.message);
  REQUIRE(ok);
  CHECK(rq.kind == endpoint::completion);
  return rq;
}

struct bad_case {
  const char* name;
  ep e;
  std::string body;
  std::string param;  // the JSON path OpenAI's "param" names; "" = null
  const char* code;   // "" = null (a body that is not JSON)
  const char* fragment;
};

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }
std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::vector<bad_case> bad_cases() {
  const std::string ten_mb(10 << 20, 'x');
  return {
      // The body itself.
      {"empty body", ep::chat, "", "", "", "could not parse the JSON body"},
      {"null body", ep::chat, "null", "", "invalid_type", "expected an object, but got null"},
      {"array body", ep::chat, "[]", "", "invalid_type", "but got an array"},
      {"string body", ep::chat, "\"hi\"", "", "invalid_type", "but got a string"},
      {"number body", ep::completion, "42", "", "invalid_type", "but got an integer"},
      {"unclosed object", ep::chat, "{", "", "", "end of input"},
      {"trailing comma", ep::chat, chat(","), "", "", "could not parse"},
      {"trailing garbage", ep::chat, chat("") + " x", "", "", "could not parse"},
      {"NUL after the object", ep::chat, chat("") + std::string(1, '\0') + "x", "", "", "byte 46: a NUL byte"},
      {"comment", ep::chat, std::string("/* hi */") + chat(""), "", "", "could not parse"},
      {"single quotes", ep::chat, "{'messages':[]}", "", "", "could not parse"},
      {"10 MB of garbage", ep::chat, ten_mb, "", "", "could not parse"},
      {"NaN literal", ep::chat, chat(R"(,"temperature":NaN)"), "temperature", "", "could not parse"},
      {"Infinity literal", ep::chat, chat(R"(,"temperature":Infinity)"), "temperature", "", "could not parse"},
      {"number overflow", ep::chat, chat(R"(,"temperature":1e999)"), "temperature", "", "1e999 is out of range"},
      {"negative overflow", ep::chat, chat(R"(,"top_p":-1e999)"), "top_p", "", "out of range"},
      {"integer overflow", ep::chat, chat(R"(,"max_tokens":1e400)"), "max_tokens", "", "out of range"},
      {"invalid UTF-8 in content", ep::chat, messages("[{\"role\":\"user\",\"content\":\"caf\xC3\"}]"),
       "messages[0].content", "", "invalid UTF-8"},
      {"overlong UTF-8", ep::chat, messages("[{\"role\":\"user\",\"content\":\"\xC0\xAF\"}]"), "messages[0].content", "",
       "invalid UTF-8"},
      {"invalid UTF-8 in a key", ep::chat, messages("[{\"r\xFFole\":\"user\"}]"), "messages[0]", "", "invalid UTF-8"},
      {"lone surrogate escape", ep::chat, messages(R"([{"role":"user","content":"\ud800"}])"), "messages[0].content", "",
       "surrogate"},
      {"nesting too deep", ep::chat, chat(",\"x\":" + nested(100)), std::string("x") + repeat("[0]", 63), "", "deeper than 64"},
      // messages
      {"no messages", ep::chat, "{}", "messages", "missing_required_parameter", "Missing required parameter: 'messages'"},
      {"null messages", ep::chat, R"({"messages":null})", "messages", "missing_required_parameter", "'messages'"},
      {"messages a string", ep::chat, messages("\"hi\""), "messages", "invalid_type", "expected an array, but got a string"},
      {"empty messages", ep::chat, messages("[]"), "messages", "empty_array", "empty array"},
      {"message a number", ep::chat, messages("[1]"), "messages[0]", "invalid_type", "expected an object"},
      {"no role", ep::chat, messages(R"([{"content":"hi"}])"), "messages[0].role", "missing_required_parameter", "role"},
      {"role a number", ep::chat, messages(R"([{"role":5,"content":"hi"}])"), "messages[0].role", "invalid_type",
       "expected a string, but got an integer"},
      {"unknown role", ep::chat, messages(R"([{"role":"wizard","content":"hi"}])"), "messages[0].role", "invalid_value",
       "'wizard'. Supported values are"},
      {"role in capitals", ep::chat, messages(R"([{"role":"User","content":"hi"}])"), "messages[0].role", "invalid_value",
       "'User'"},
      {"tool role", ep::chat, messages(R"([{"role":"user","content":"a"},{"role":"tool","content":"42"}])"),
       "messages[1].role", "unsupported_value", "does not call tools"},
      {"10 MB role", ep::chat, messages(R"([{"role":")" + ten_mb + R"(","content":"hi"}])"), "messages[0].role",
       "invalid_value", "(10485760 bytes)"},
      {"user without content", ep::chat, messages(R"([{"role":"user"}])"), "messages[0].content",
       "missing_required_parameter", "content"},
      {"content a number", ep::chat, messages(R"([{"role":"user","content":42}])"), "messages[0].content", "invalid_type",
       "expected one of a string or array of objects, but got an integer"},
      {"content an object", ep::chat, messages(R"([{"role":"user","content":{}}])"), "messages[0].content", "invalid_type",
       "but got an object"},
      {"content parts empty", ep::chat, messages(R"([{"role":"user","content":[]}])"), "messages[0].content", "empty_array",
       "empty array"},
      {"content part a string", ep::chat, messages(R"([{"role":"user","content":["hi"]}])"), "messages[0].content[0]",
       "invalid_type", "expected an object"},
      {"image part", ep::chat,
       messages(R"([{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},)"
                R"({"type":"image_url","image_url":{"url":"http://x"}}]}])"),
       "messages[1].content[1].type", "unsupported_value", "text parts only (content part 1)"},
      {"unknown part type", ep::chat, messages(R"([{"role":"user","content":[{"type":"video"}]}])"),
       "messages[0].content[0].type", "invalid_value", "'video'"},
      {"part without type", ep::chat, messages(R"([{"role":"user","content":[{"text":"a"}]}])"),
       "messages[0].content[0].type", "missing_required_parameter", "type"},
      {"text part without text", ep::chat, messages(R"([{"role":"user","content":[{"type":"text"}]}])"),
       "messages[0].content[0].text", "missing_required_parameter", "text"},
      {"text part text a number", ep::chat, messages(R"([{"role":"user","content":[{"type":"text","text":5}]}])"),
       "messages[0].content[0].text", "invalid_type", "expected a string"},
      {"assistant tool_calls", ep::chat,
       messages(R"([{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]}])"),
       "messages[1].tool_calls", "unsupported_parameter", "does not call tools"},
      // Numbers.
      {"negative max_tokens", ep::chat, chat(R"(,"max_tokens":-1)"), "max_tokens", "integer_below_min_value",
       "Expected a value >= 1, but got -1 instead"},
      {"zero max_tokens", ep::chat, chat(R"(,"max_tokens":0)"), "max_tokens", "integer_below_min_value", ">= 1"},
      {"max_tokens a string", ep::chat, chat(R"(,"max_tokens":"100")"), "max_tokens", "invalid_type",
       "expected an integer, but got a string"},
      {"max_tokens a boolean", ep::chat, chat(R"(,"max_tokens":true)"), "max_tokens", "invalid_type", "a boolean"},
      {"max_tokens a decimal", ep::chat, chat(R"(,"max_tokens":1.5)"), "max_tokens", "invalid_type", "a decimal"},
      {"huge max_tokens", ep::chat, chat(R"(,"max_tokens":1e30)"), "max_tokens", "integer_above_max_value",
       "<= 2147483647"},
      {"max_tokens past uint64", ep::chat, chat(R"(,"max_tokens":99999999999999999999999)"), "max_tokens",
       "integer_above_max_value", "<= 2147483647"},
      {"max_tokens past int32", ep::chat, chat(R"(,"max_tokens":2147483648)"), "max_tokens", "integer_above_max_value",
       "2147483648"},
      {"negative max_completion_tokens", ep::chat, chat(R"(,"max_completion_tokens":-5)"), "max_completion_tokens",
       "integer_below_min_value", ">= 1"},
      {"temperature above 2", ep::chat, chat(R"(,"temperature":3)"), "temperature", "decimal_above_max_value",
       "Expected a value <= 2, but got 3 instead"},
      {"negative temperature", ep::chat, chat(R"(,"temperature":-0.1)"), "temperature", "decimal_below_min_value", ">= 0"},
      {"temperature a string", ep::chat, chat(R"(,"temperature":"hot")"), "temperature", "invalid_type",
       "expected a number, but got a string"},
      {"temperature NaN as a string", ep::chat, chat(R"(,"temperature":"NaN")"), "temperature", "invalid_type",
       "a string"},
      {"top_p above 1", ep::chat, chat(R"(,"top_p":1.5)"), "top_p", "decimal_above_max_value", "<= 1"},
      {"negative top_p", ep::chat, chat(R"(,"top_p":-0.5)"), "top_p", "decimal_below_min_value", ">= 0"},
      {"negative top_k", ep::chat, chat(R"(,"top_k":-1)"), "top_k", "integer_below_min_value", ">= 0"},
      {"top_k a decimal", ep::chat, chat(R"(,"top_k":2.5)"), "top_k", "invalid_type", "a decimal"},
      {"min_p 1", ep::chat, chat(R"(,"min_p":1)"), "min_p", "decimal_above_max_value", "< 1"},
      {"negative min_p", ep::chat, chat(R"(,"min_p":-0.1)"), "min_p", "decimal_below_min_value", ">= 0"},
      {"presence_penalty above 2", ep::chat, chat(R"(,"presence_penalty":2.5)"), "presence_penalty",
       "decimal_above_max_value", "<= 2"},
      {"frequency_penalty below -2", ep::chat, chat(R"(,"frequency_penalty":-3)"), "frequency_penalty",
       "decimal_below_min_value", ">= -2"},
      {"seed a decimal", ep::chat, chat(R"(,"seed":1.5)"), "seed", "invalid_type", "a decimal"},
      {"seed a string", ep::chat, chat(R"(,"seed":"42")"), "seed", "invalid_type", "expected an integer"},
      {"seed past 64 bits", ep::chat, chat(R"(,"seed":1e20)"), "seed", "integer_above_max_value", "64-bit"},
      {"n 2", ep::chat, chat(R"(,"n":2)"), "n", "unsupported_value", "'n' must be 1"},
      {"n 0", ep::chat, chat(R"(,"n":0)"), "n", "unsupported_value", "'n' must be 1"},
      {"n a string", ep::chat, chat(R"(,"n":"1")"), "n", "invalid_type", "expected an integer"},
      // stop, stream
      {"stop a number", ep::chat, chat(R"(,"stop":5)"), "stop", "invalid_type",
       "expected one of a string or array of strings"},
      {"five stops", ep::chat, chat(R"(,"stop":["a","b","c","d","e"])"), "stop", "array_above_max_length",
       "maximum length 4, but got an array with length 5"},
      {"empty stop string", ep::chat, chat(R"(,"stop":"")"), "stop", "invalid_value", "empty string"},
      {"empty stop in array", ep::chat, chat(R"(,"stop":["a",""])"), "stop[1]", "invalid_value", "empty string"},
      {"stop element a number", ep::chat, chat(R"(,"stop":["a",1])"), "stop[1]", "invalid_type", "expected a string"},
      {"stop with NUL", ep::chat, chat(R"(,"stop":["a\u0000b"])"), "stop[0]", "invalid_value", "U+0000"},
      {"stream a string", ep::chat, chat(R"(,"stream":"yes")"), "stream", "invalid_type", "expected a boolean"},
      {"stream_options without stream", ep::chat, chat(R"(,"stream_options":{"include_usage":true})"), "stream_options",
       "invalid_value", "only allowed when 'stream' is true"},
      {"stream_options a boolean", ep::chat, chat(R"(,"stream":true,"stream_options":true)"), "stream_options",
       "invalid_type", "expected an object"},
      {"include_usage a string", ep::chat, chat(R"(,"stream":true,"stream_options":{"include_usage":"yes"})"),
       "stream_options.include_usage", "invalid_type", "expected a boolean"},
      // logprobs
      {"logprobs a string", ep::chat, chat(R"(,"logprobs":"true")"), "logprobs", "invalid_type", "expected a boolean"},
      {"top_logprobs without logprobs", ep::chat, chat(R"(,"top_logprobs":5)"), "top_logprobs", "invalid_value",
       "requires 'logprobs' to be true"},
      {"top_logprobs 21", ep::chat, chat(R"(,"logprobs":true,"top_logprobs":21)"), "top_logprobs",
       "integer_above_max_value", "<= 20"},
      {"negative top_logprobs", ep::chat, chat(R"(,"logprobs":true,"top_logprobs":-1)"), "top_logprobs",
       "integer_below_min_value", ">= 0"},
      // What the server does not do.
      {"json_object", ep::chat, chat(R"(,"response_format":{"type":"json_object"})"), "response_format.type",
       "unsupported_value", "does not constrain its output to JSON"},
      {"json_schema", ep::chat, chat(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x"}})"),
       "response_format.type", "unsupported_value", "'json_schema'"},
      {"response_format a string", ep::chat, chat(R"(,"response_format":"text")"), "response_format", "invalid_type",
       "expected an object"},
      {"response_format xml", ep::chat, chat(R"(,"response_format":{"type":"xml"})"), "response_format.type",
       "invalid_value", "'xml'"},
      {"response_format without type", ep::chat, chat(R"(,"response_format":{})"), "response_format.type",
       "missing_required_parameter", "type"},
      {"tools", ep::chat, chat(R"(,"tools":[{"type":"function","function":{"name":"f"}}])"), "tools",
       "unsupported_parameter", "Unsupported parameter: 'tools'"},
      {"tools a string", ep::chat, chat(R"(,"tools":"f")"), "tools", "invalid_type", "expected an array"},
      {"tool_choice required", ep::chat, chat(R"(,"tool_choice":"required")"), "tool_choice", "unsupported_value",
       "does not call tools"},
      {"tool_choice a function", ep::chat, chat(R"(,"tool_choice":{"type":"function","function":{"name":"f"}})"),
       "tool_choice", "unsupported_value", "does not call tools"},
      {"tool_choice unknown", ep::chat, chat(R"(,"tool_choice":"always")"), "tool_choice", "invalid_value", "'always'"},
      {"functions", ep::chat, chat(R"(,"functions":[{"name":"f"}])"), "functions", "unsupported_parameter",
       "does not call tools"},
      {"function_call an object", ep::chat, chat(R"(,"function_call":{"name":"f"})"), "function_call",
       "unsupported_value", "does not call tools"},
      {"logit_bias", ep::chat, chat(R"(,"logit_bias":{"50256":-100})"), "logit_bias", "unsupported_parameter",
       "does not bias"},
      {"logit_bias an array", ep::chat, chat(R"(,"logit_bias":[])"), "logit_bias", "invalid_type", "expected an object"},
      {"grammar", ep::chat, chat(R"(,"grammar":"root ::= \"a\"")"), "grammar", "unsupported_parameter", "constrain"},
      {"audio", ep::chat, chat(R"(,"audio":{"voice":"alloy","format":"wav"})"), "audio", "unsupported_parameter",
       "text only"},
      {"audio modality", ep::chat, chat(R"(,"modalities":["text","audio"])"), "modalities[1]", "unsupported_value",
       "text only"},
      {"chat_template_kwargs a string", ep::chat, chat(R"(,"chat_template_kwargs":"x")"), "chat_template_kwargs",
       "invalid_type", "expected an object"},
      {"model a number", ep::chat, chat(R"(,"model":5)"), "model", "invalid_type", "expected a string"},
      {"duplicate key, the last bad", ep::chat, chat(R"(,"temperature":1,"temperature":5)"), "temperature",
       "decimal_above_max_value", "but got 5 instead"},
      // /v1/completions
      {"no prompt", ep::completion, "{}", "prompt", "missing_required_parameter", "'prompt'"},
      {"prompt a number", ep::completion, R"({"prompt":5})", "prompt", "invalid_type", "but got an integer"},
      {"prompt empty array", ep::completion, R"({"prompt":[]})", "prompt", "empty_array", "empty array"},
      {"two prompts", ep::completion, R"({"prompt":["a","b"]})", "prompt", "unsupported_value", "a batch of 2 prompts"},
      {"two token prompts", ep::completion, R"({"prompt":[[1,2],[3]]})", "prompt", "unsupported_value", "batch of 2"},
      {"negative token id", ep::completion, R"({"prompt":[1,-2]})", "prompt[1]", "integer_below_min_value", ">= 0"},
      {"decimal token id", ep::completion, R"({"prompt":[1,2.5]})", "prompt[1]", "invalid_type", "a decimal"},
      {"token ids and a string", ep::completion, R"({"prompt":[1,"a"]})", "prompt[1]", "invalid_type",
       "expected an integer, but got a string"},
      {"token id past int32", ep::completion, R"({"prompt":[3000000000]})", "prompt[0]", "integer_above_max_value",
       "2147483647"},
      {"empty token prompt", ep::completion, R"({"prompt":[[]]})", "prompt[0]", "empty_array", "empty array"},
      {"prompt of objects", ep::completion, R"({"prompt":[{"a":1}]})", "prompt[0]", "invalid_type", "an object"},
      {"echo", ep::completion, completion(R"(,"echo":true)"), "echo", "unsupported_value", "does not echo"},
      {"suffix", ep::completion, completion(R"(,"suffix":"end")"), "suffix", "unsupported_parameter", "suffix"},
      {"best_of 3", ep::completion, completion(R"(,"best_of":3)"), "best_of", "unsupported_value", "must be 1"},
      {"completion logprobs 6", ep::completion, completion(R"(,"logprobs":6)"), "logprobs", "integer_above_max_value",
       "<= 5"},
      {"completion logprobs true", ep::completion, completion(R"(,"logprobs":true)"), "logprobs", "invalid_type",
       "a boolean"},
      {"completion n 3", ep::completion, completion(R"(,"n":3)"), "n", "unsupported_value", "must be 1"},
      {"completion negative max_tokens", ep::completion, completion(R"(,"max_tokens":-1)"), "max_tokens",
       "integer_below_min_value", ">= 1"},
      // /tokenize and /detokenize
      {"tokenize without content", ep::tokenize, "{}", "content", "missing_required_parameter", "'content'"},
      {"tokenize content a number", ep::tokenize, R"({"content":5})", "content", "invalid_type", "expected a string"},
      {"add_special a string", ep::tokenize, R"({"content":"a","add_special":"yes"})", "add_special", "invalid_type",
       "expected a boolean"},
      {"with_pieces a number", ep::tokenize, R"({"content":"a","with_pieces":1})", "with_pieces", "invalid_type",
       "a boolean"},
      {"tokenize an array", ep::tokenize, R"(["a"])", "", "invalid_type", "expected an object"},
      {"tokens a string", ep::detokenize, R"({"tokens":"1,2"})", "tokens", "invalid_type", "expected an array"},
      {"negative token", ep::detokenize, R"({"tokens":[1,-1]})", "tokens[1]", "integer_below_min_value", ">= 0"},
      {"decimal token", ep::detokenize, R"({"tokens":[1.5]})", "tokens[0]", "invalid_type", "a decimal"},
      {"huge token", ep::detokenize, R"({"tokens":[1e10]})", "tokens[0]", "integer_above_max_value", "2147483647"},
      {"token a string", ep::detokenize, R"({"tokens":["1"]})", "tokens[0]", "invalid_type", "a string"},
  };
}

}  // namespace

TEST_CASE("server api: every bad request is a 400 naming its field and problem", "[server]") {
  const std::vector<bad_case> cases = bad_cases();
  REQUIRE(cases.size() >= 60);
  for (const bad_case& c : cases) {
    INFO(c.name);
    api_error err;
    bool ok = true;
    REQUIRE_NOTHROW(ok = run(c.e, c.body, err));
    INFO(err.message);
    CHECK_FALSE(ok);
    CHECK(err.status == 400);
    CHECK(err.type == "invalid_request_error");
    CHECK(err.param == c.param);
    CHECK(err.code == c.code);
    CHECK(err.message.find(c.fragment) != std::string::npos);
    // The message names the field it is about.
    if (!c.param.empty()) CHECK(err.message.find("'" + c.param + "'") != std::string::npos);
    // The error body is JSON in OpenAI's shape, whatever bytes the message quotes.
    const json body = json::parse(error_json(err));
    CHECK(body["error"]["message"] == err.message);
    CHECK(body["error"]["param"] == (c.param.empty() ? json(nullptr) : json(c.param)));
  }
}

TEST_CASE("server api: a minimal chat request gets OpenAI's defaults", "[server]") {
  const gen_request rq = chat_ok(chat(""));
  CHECK(rq.model.empty());
  CHECK(json::parse(rq.messages_json) == json::parse(R"([{"role":"user","content":"hi"}])"));
  CHECK(rq.max_tokens == -1);
  CHECK(rq.temperature == 1.0f);
  CHECK(rq.top_p == 1.0f);
  CHECK(rq.top_k == 0);
  CHECK(rq.min_p == 0.0f);
  CHECK_FALSE(rq.has_seed);
  CHECK(rq.presence_penalty == 0.0f);
  CHECK(rq.frequency_penalty == 0.0f);
  CHECK(rq.stop.empty());
  CHECK_FALSE(rq.stream);
  CHECK_FALSE(rq.include_usage);
  CHECK(rq.logprobs == -1);
  CHECK(rq.extra_json.empty());
  CHECK(rq.prompt.empty());
  CHECK(rq.prompt_ids.empty());
}

TEST_CASE("server api: every chat field lands in its place", "[server]") {
  const gen_request rq = chat_ok(chat(
      R"(,"model":"qwen","max_tokens":7,"temperature":0.25,"top_p":0.5,"top_k":40,"min_p":0.05,"seed":123,)"
      R"("presence_penalty":-1.5,"frequency_penalty":2,"stop":["\n\n","END"],"stream":true,)"
      R"("stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":3,"n":1,)"
      R"("response_format":{"type":"text"},"chat_template_kwargs":{"enable_thinking":false})"));
  CHECK(rq.model == "qwen");
  CHECK(rq.max_tokens == 7);
  CHECK(rq.temperature == 0.25f);
  CHECK(rq.top_p == 0.5f);
  CHECK(rq.top_k == 40);
  CHECK(rq.min_p == 0.05f);
  CHECK(rq.has_seed);
  CHECK(rq.seed == 123u);
  CHECK(rq.presence_penalty == -1.5f);
  CHECK(rq.frequency_penalty == 2.0f);
  CHECK(rq.stop == std::vector<std::string>{"\n\n", "END"});
  CHECK(rq.stream);
  CHECK(rq.include_usage);
  CHECK(rq.logprobs == 3);
  CHECK(json::parse(rq.extra_json) == json::parse(R"({"enable_thinking":false})"));
}

TEST_CASE("server api: messages are normalised for the chat template", "[server]") {
  const gen_request rq = chat_ok(messages(
      R"([{"role":"developer","content":"be brief"},{"role":"system","content":[{"type":"text","text":"a"},)"
      R"({"type":"text","text":"b"}]},{"role":"user","content":"caf\u00e9 \ud83d\ude00","name":"ann"},)"
      R"({"role":"assistant","content":null},{"role":"assistant"},{"role":"assistant","content":"ok","tool_calls":[]},)"
      R"({"role":"user","content":""}])"));
  const json expect = json::parse(
      "[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"system\",\"content\":\"a\\nb\"},"
      "{\"role\":\"user\",\"content\":\"caf\xC3\xA9 \xF0\x9F\x98\x80\"},{\"role\":\"assistant\",\"content\":\"\"},"
      "{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"assistant\",\"content\":\"ok\"},"
      "{\"role\":\"user\",\"content\":\"\"}]");
  CHECK(json::parse(rq.messages_json) == expect);
}

TEST_CASE("server api: seeds map to 64 bits deterministically", "[server]") {
  const auto seed_of = [](const char* v) { return chat_ok(chat(std::string(",\"seed\":") + v)).seed; };
  CHECK(seed_of("0") == 0u);
  CHECK(seed_of("-1") == UINT64_MAX);
  CHECK(seed_of("18446744073709551615") == UINT64_MAX);
  CHECK(seed_of("-9223372036854775808") == ((uint64_t)1 << 63));
  CHECK(seed_of("9223372036854775807") == ((uint64_t)1 << 63) - 1);
  CHECK(seed_of("1e3") == 1000u);
  CHECK(seed_of("4294967296") == 4294967296u);
  CHECK_FALSE(chat_ok(chat(R"(,"seed":null)")).has_seed);
}

TEST_CASE("server api: edge values that are accepted", "[server]") {
  CHECK(chat_ok(chat(R"(,"top_p":0)")).top_p == FLT_MIN);  // OpenAI takes 0: the top token only
  CHECK(chat_ok(chat(R"(,"top_p":1e-300)")).top_p == FLT_MIN);
  CHECK(chat_ok(chat(R"(,"temperature":0)")).temperature == 0.0f);
  CHECK(chat_ok(chat(R"(,"temperature":2)")).temperature == 2.0f);
  CHECK(chat_ok(chat(R"(,"max_tokens":2147483647)")).max_tokens == 2147483647);
  CHECK(chat_ok(chat(R"(,"max_tokens":5.0)")).max_tokens == 5);
  CHECK(chat_ok(chat(R"(,"max_tokens":1e2)")).max_tokens == 100);
  CHECK(chat_ok(chat(R"(,"max_tokens":10,"max_completion_tokens":20)")).max_tokens == 20);
  CHECK(chat_ok(chat(R"(,"max_completion_tokens":3)")).max_tokens == 3);
  CHECK(chat_ok(chat(R"(,"min_p":0.999)")).min_p == 0.999f);
  CHECK(chat_ok(chat(R"(,"min_p":0.99999999999)")).min_p < 1.0f);  // not rounded up to 1
  CHECK(chat_ok(chat(R"(,"stop":"###")")).stop == std::vector<std::string>{"###"});
  CHECK(chat_ok(chat(R"(,"stop":[])")).stop.empty());
  CHECK(chat_ok(chat(R"(,"logprobs":true)")).logprobs == 0);
  CHECK(chat_ok(chat(R"(,"logprobs":false)")).logprobs == -1);
  CHECK(chat_ok(chat(R"(,"logprobs":true,"top_logprobs":20)")).logprobs == 20);
  chat_ok(chat(R"(,"n":1.0)"));
  CHECK_FALSE(chat_ok(chat(R"(,"stream":false)")).stream);
  // The last of duplicate keys wins.
  CHECK(chat_ok(chat(R"(,"temperature":5,"temperature":0.5)")).temperature == 0.5f);
  // Null means "the default" for every optional field.
  const gen_request nulls = chat_ok(chat(
      R"(,"model":null,"max_tokens":null,"temperature":null,"top_p":null,"stop":null,"stream":null,)"
      R"("stream_options":null,"logprobs":null,"top_logprobs":null,"n":null,"response_format":null,"tools":null,)"
      R"("tool_choice":null,"logit_bias":null,"chat_template_kwargs":null,"seed":null)"));
  CHECK(nulls.max_tokens == -1);
  CHECK(nulls.temperature == 1.0f);
  CHECK(nulls.logprobs == -1);
  // Accepted and ignored: OpenAI's bookkeeping fields, what changes nothing without tools, and
  // fields this server does not know.
  const gen_request extra = chat_ok(chat(
      R"(,"user":"u1","metadata":{"k":"v"},"store":true,"service_tier":"auto","parallel_tool_calls":false,)"
      R"("tools":[],"functions":[],"tool_choice":"none","function_call":"auto","logit_bias":{},)"
      R"("modalities":["text"],"reasoning_effort":"low","cache_prompt":true,"id_slot":2,"mystery":[1,{"a":null}])"));
  CHECK(extra.temperature == 1.0f);
}

TEST_CASE("server api: large and unusual strings pass through intact", "[server]") {
  const std::string big(10 << 20, 'a');
  const gen_request rq = chat_ok(messages(R"([{"role":"user","content":")" + big + R"("}])"));
  CHECK(json::parse(rq.messages_json)[0]["content"].get<std::string>() == big);
  const gen_request esc = chat_ok(messages(R"([{"role":"user","content":"a\u0000b\"\\\/\n\t"}])"));
  CHECK(json::parse(esc.messages_json)[0]["content"].get<std::string>() == std::string("a\0b\"\\/\n\t", 8));
  chat_ok(chat(",\"x\":" + nested(60)));  // within the depth limit
}

TEST_CASE("server api: completion prompts in every accepted shape", "[server]") {
  const gen_request s = completion_ok(R"({"prompt":"Once upon"})");
  CHECK(s.prompt == "Once upon");
  CHECK(s.prompt_ids.empty());
  CHECK(s.max_tokens == 16);  // OpenAI's default for /v1/completions
  CHECK(s.logprobs == -1);
  CHECK(completion_ok(R"({"prompt":["one"]})").prompt == "one");
  CHECK(completion_ok(R"({"prompt":""})").prompt.empty());
  CHECK(completion_ok(R"({"prompt":[1,2,2147483647]})").prompt_ids == std::vector<int32_t>{1, 2, 2147483647});
  CHECK(completion_ok(R"({"prompt":[[4,5.0]]})").prompt_ids == std::vector<int32_t>{4, 5});
  const gen_request full = completion_ok(
      R"({"prompt":"x","max_tokens":100,"logprobs":5,"echo":false,"suffix":"","best_of":1,"seed":-2,)"
      R"("stop":"\n","stream":true,"stream_options":{"include_usage":false},"top_k":1,"user":"u"})");
  CHECK(full.max_tokens == 100);
  CHECK(full.logprobs == 5);
  CHECK(full.seed == UINT64_MAX - 1);
  CHECK(full.stop == std::vector<std::string>{"\n"});
  CHECK(full.stream);
  CHECK_FALSE(full.include_usage);
  CHECK(full.top_k == 1);
  CHECK(completion_ok(R"({"prompt":"x","logprobs":0})").logprobs == 0);
  CHECK(completion_ok(R"({"prompt":"x","max_tokens":null})").max_tokens == 16);
}

TEST_CASE("server api: tokenize and detokenize bodies", "[server]") {
  tokenize_request t;
  api_error err;
  REQUIRE(parse_tokenize_request(R"({"content":"Hello"})", t, err));
  CHECK(t.content == "Hello");
  CHECK(t.add_special);
  CHECK_FALSE(t.with_pieces);
  REQUIRE(parse_tokenize_request(R"({"content":"","add_special":false,"with_pieces":true,"parse_special":true})", t, err));
  CHECK(t.content.empty());
  CHECK_FALSE(t.add_special);
  CHECK(t.with_pieces);
  std::vector<int32_t> ids{9};
  REQUIRE(parse_detokenize_request(R"({"tokens":[0,1,2147483647,4.0]})", ids, err));
  CHECK(ids == std::vector<int32_t>{0, 1, 2147483647, 4});
  REQUIRE(parse_detokenize_request(R"({})", ids, err));
  CHECK(ids.empty());
  REQUIRE(parse_detokenize_request(R"({"tokens":[]})", ids, err));
  CHECK(ids.empty());
}

// JSONTestSuite (shared/data/JSONTestSuite/test_parsing): y_ files are JSON, so they may be
// refused only for what they hold (a code is set); n_ files are not, so they are always refused
// as a body that does not parse (no code); i_ files either way. Nothing throws.
TEST_CASE("server api: JSONTestSuite bodies get ok or a 400", "[server]") {
  const std::filesystem::path dir = ml_test_shared("data/JSONTestSuite/test_parsing");
  if (!std::filesystem::is_directory(dir)) {
    WARN("no " << dir.string() << ": skipped");
    return;
  }
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string body = ml_test_read<std::string>(entry.path());
    INFO(name);
    ++files;
    for (ep e : {ep::chat, ep::completion, ep::tokenize, ep::detokenize}) {
      api_error err;
      bool ok = false;
      REQUIRE_NOTHROW(ok = run(e, body, err));
      if (ok) {
        CHECK(name[0] != 'n');
        continue;
      }
      INFO(err.message);
      CHECK(err.status == 400);
      CHECK(err.type == "invalid_request_error");
      CHECK_FALSE(err.message.empty());
      if (name[0] == 'y') CHECK_FALSE(err.code.empty());
      if (name[0] == 'n') CHECK(err.code.empty());
      CHECK_NOTHROW(json::parse(error_json(err)));
    }
  }
  CHECK(files > 300);
}
