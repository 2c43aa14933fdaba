// The OpenAI API as ml_server speaks it: request bodies validated into plain fields, and the
// response, chunk and error bodies in exactly OpenAI's shapes. Pure functions over strings (no
// engine, no sockets), so the Catch2 table and the fuzz harness drive them directly. Every
// accepted field, its default and range, and every refusal: docs/server.md, "Requests" and "Errors".
//
// Owner of the implementation: api_request.cpp (parsing), api_response.cpp (bodies).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace server {

// Every failure the client sees: {"error":{"message","type","param","code"}} with this HTTP
// status. param and code are null when empty. The parsers fill code with OpenAI's codes
// ("invalid_type", "integer_below_min_value", "unsupported_value", ...).
struct api_error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // authentication_error, not_found_error, server_error, ...
  std::string param;                           // the offending field ("messages[1].role", "temperature")
  std::string code;                            // "context_length_exceeded", "invalid_api_key", ...
};

enum class endpoint { chat, completion };

// A validated POST /v1/chat/completions or /v1/completions. Defaults are OpenAI's.
struct gen_request {
  endpoint kind = endpoint::chat;
  std::string model;          // as sent (echoed in the response); empty when absent
  std::string messages_json;  // chat: [{"role":..,"content":"<text>"},...] with text parts joined
                              // by "\n" and "developer" renamed "system", ready for ml_chat_apply
  std::string prompt;         // completion: the prompt text (prompt_ids empty)
  std::vector<int32_t> prompt_ids;  // completion: a prompt given as token ids
  int max_tokens = -1;        // max_tokens / max_completion_tokens, >= 1; -1: until EOS or the context
                              // ends (chat's default; /v1/completions defaults to 16, as OpenAI)
  float temperature = 1.0f;   // 0..2
  float top_p = 1.0f;         // (0, 1]; a request's 0 arrives as the smallest float (the top token)
  int top_k = 0;              // 0 = off (llama-server's extension)
  float min_p = 0.0f;         // [0, 1) (llama-server's extension)
  bool has_seed = false;
  uint64_t seed = 0;          // any JSON integer in [-2^63, 2^64); a negative one as its two's complement
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;  // -2..2
  std::vector<std::string> stop;  // at most 4, each non-empty and without NUL
  bool stream = false, include_usage = false;
  int logprobs = -1;  // -1: none; else the number of top alternatives per token (chat: top_logprobs
                      // 0..20 with logprobs true; completions: logprobs 0..5)
  std::string extra_json;  // chat_template_kwargs (an object, as JSON) for the template, or empty
};

// Body to request. false fills err (status 400, param naming the field, e.g. "messages[0].content";
// 500 server_error only when memory runs out, or on a defect of the parser). Never throws.
bool parse_chat_request(const std::string& body, gen_request& out, api_error& err);
bool parse_completion_request(const std::string& body, gen_request& out, api_error& err);

// POST /tokenize {"content": string, "add_special": bool, "with_pieces": bool} and /detokenize
// {"tokens": [ids]} (ids in [0, 2^31); the vocabulary's bound is the caller's to check).
struct tokenize_request {
  std::string content;
  bool add_special = true;
  bool with_pieces = false;
};
bool parse_tokenize_request(const std::string& body, tokenize_request& out, api_error& err);
bool parse_detokenize_request(const std::string& body, std::vector<int32_t>& ids, api_error& err);

// One generated token's log-probability and its top alternatives (the model's distribution before
// sampling settings: log-softmax of the raw logits).
struct token_logprob {
  std::string text;  // the token's bytes as decoded (may be part of a UTF-8 character)
  double logprob = 0;
  std::vector<std::pair<std::string, double>> top;  // most probable first; the first rq.logprobs
                                                    // are written
};

struct usage {
  int prompt_tokens = 0, completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose KV came from the cache (usage.prompt_tokens_details)
};

// What a finished (or finishing) generation reports.
struct gen_result {
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;
  std::string model;
  std::string text;
  std::string finish_reason;  // "stop" or "length"
  std::vector<token_logprob> logprobs;  // when the request asked (logprobs >= 0)
  usage use;
  std::string system_fingerprint;  // the build and model configuration; null when empty
  size_t text_offset = 0;  // completions' logprobs.text_offset of logprobs[0]: the bytes of the
                           // completion before it (a stream's later chunks: the bytes already sent)
};

// Bodies, as UTF-8 JSON: text that is not valid UTF-8 (a token ending inside a character) gets
// U+FFFD in strings, and its raw bytes in logprobs' "bytes". A logprob that is not finite or below
// -9999 is written -9999 (OpenAI's floor). The chunk builders take the delta of one step;
// finish_reason empty = null.
std::string error_json(const api_error& e);
std::string chat_completion_json(const gen_request& rq, const gen_result& r);
std::string completion_json(const gen_request& rq, const gen_result& r);
// The first chat chunk carries {"role":"assistant","content":""}; later ones {"content":text};
// the last {} with finish_reason. logprobs may be empty.
std::string chat_chunk_json(const gen_request& rq, const gen_result& head, const std::string* role,
                            const std::string& text, const std::vector<token_logprob>& logprobs,
                            const std::string& finish_reason);
std::string completion_chunk_json(const gen_request& rq, const gen_result& head, const std::string& text,
                                  const std::vector<token_logprob>& logprobs, const std::string& finish_reason);
// stream_options.include_usage: the last chunk before [DONE], choices [] and usage set.
std::string usage_chunk_json(const gen_request& rq, const gen_result& r);
std::string models_json(const std::string& model_id, int64_t created, int ctx);

}  // namespace server
