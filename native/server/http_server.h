// ml_server's HTTP side (docs/server.md): the state the handlers share, and the functions that put
// the routes on a cpp-httplib server. http_routes.cpp: the guard every request passes (CORS,
// methods, the API key), errors, /health, /metrics, /v1/models, /tokenize, /detokenize.
// http_generate.cpp: /v1/chat/completions and /v1/completions, whole or streamed.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <httplib.h>

#include "api.h"
#include "krafla.h"
#include "scheduler.h"

namespace server {

struct http_options {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;          // empty: no key asked
  std::string cors;             // empty: no CORS headers
  size_t max_body = 8u << 20;   // bytes of a request body (413 beyond)
  int timeout = 600;            // seconds a read or a write on a connection may wait
};

// What the handlers share. The model and the scheduler are set once loading is done (ready).
struct server_context {
  http_options opt;
  std::string model_id;      // the model file's name, as /v1/models lists it
  int64_t created = 0;       // when the server started (seconds since the epoch)
  std::string chat_template; // --chat-template's text; empty: the tokenizer's
  std::string fingerprint;   // system_fingerprint: the build's kernels and the slots' KV type
  std::atomic<bool> ready{false};
  std::atomic<bool> closing{false};  // SIGINT/SIGTERM: new requests get 503, those in flight finish
  std::atomic<int> in_flight{0};     // generation requests not yet answered to the end
  const ml_model* model = nullptr;
  const ml_tokenizer* tok = nullptr;
  std::unique_ptr<scheduler> sched;
};

// Counts a generation request in flight for as long as it lives (a stream: until its last write).
struct in_flight_guard {
  std::atomic<int>* n;
  explicit in_flight_guard(std::atomic<int>* count) : n(count) { ++*n; }
  ~in_flight_guard() { --*n; }
  in_flight_guard(const in_flight_guard&) = delete;
  in_flight_guard& operator=(const in_flight_guard&) = delete;
};

// Sets res to error e in OpenAI's shape.
void send_error(httplib::Response& res, const api_error& e);
api_error make_error(int status, const std::string& message, const std::string& type = "invalid_request_error",
                     const std::string& param = "", const std::string& code = "");

// Puts every route, the request guard and the error handlers on svr.
void install_routes(httplib::Server& svr, server_context& c);
// The generation endpoints (http_generate.cpp).
void handle_generate(server_context& c, endpoint kind, const httplib::Request& req, httplib::Response& res);

// Text to ids with the model's tokenizer; false fills err (400).
bool tokenize_text(const ml_tokenizer* tok, const std::string& text, bool add_special, std::vector<int32_t>* ids,
                   api_error* err, const std::string& param);

}  // namespace server
