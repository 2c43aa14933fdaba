// The routes of ml_server (docs/server.md, "Endpoints"), the guard every request passes before its
// handler (CORS preflight, 405 for a known path with the wrong method, 401 without the API key),
// the error bodies for what cpp-httplib refuses itself (404, 413, malformed requests), and the
// small endpoints: /health, /metrics, /v1/models, /tokenize, /detokenize.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http_guard.h"
#include "http_server.h"

namespace server {

namespace {

struct route {
  const char* path;
  const char* method;  // GET routes also answer HEAD
  bool needs_key;
};

// /health answers without the key, so that load balancers can probe it.
const route ROUTES[] = {
    {"/v1/chat/completions", "POST", true}, {"/v1/completions", "POST", true}, {"/v1/models", "GET", true},
    {"/health", "GET", false},              {"/metrics", "GET", true},         {"/tokenize", "POST", true},
    {"/detokenize", "POST", true},
};

const route* find_route(const std::string& path) {
  for (const route& r : ROUTES)
    if (path == r.path) return &r;
  return nullptr;
}

bool method_allowed(const route& r, const std::string& method) {
  return method == r.method || (std::string(r.method) == "GET" && method == "HEAD");
}

// Compares in time independent of where the strings differ (the key must not leak by timing).
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= (unsigned char)(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

void send_json(httplib::Response& res, const nlohmann::json& j, int status = 200) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

bool not_ready(server_context& c, httplib::Response& res) {
  if (c.ready.load()) return false;
  send_error(res, make_error(503, "the model is still loading", "server_error", "", "model_loading"));
  return true;
}

void handle_health(server_context& c, httplib::Response& res) {
  if (c.closing.load()) send_json(res, {{"status", "shutting down"}}, 503);
  else if (c.ready.load()) send_json(res, {{"status", "ok"}});
  else send_json(res, {{"status", "loading"}}, 503);
}

// Prometheus' text format (version 0.0.4).
void handle_metrics(server_context& c, httplib::Response& res) {
  if (not_ready(c, res)) return;
  const scheduler_metrics m = c.sched->metrics();
  std::string out;
  auto add = [&](const char* name, const char* type, const char* help, double v) {
    char line[64];
    std::snprintf(line, sizeof line, "%.17g", v);
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + line + "\n";
  };
  add("krafla_requests_total", "counter", "Generation requests accepted.", (double)m.requests);
  add("krafla_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", (double)m.prompt_tokens);
  add("krafla_cached_tokens_total", "counter", "Prompt tokens whose KV came from a slot's cache.", (double)m.cached_tokens);
  add("krafla_generated_tokens_total", "counter", "Tokens sampled.", (double)m.generated_tokens);
  add("krafla_queue_depth", "gauge", "Requests waiting for a slot.", m.queue_depth);
  add("krafla_active_slots", "gauge", "Slots serving a request.", m.active_slots);
  add("krafla_slots", "gauge", "Slots (--parallel).", m.slots);
  add("krafla_prefill_seconds_total", "counter", "Engine time spent on prompt tokens.", m.prefill_seconds);
  add("krafla_decode_seconds_total", "counter", "Engine time spent on generated tokens.", m.decode_seconds);
  const double prefilled = (double)m.prompt_tokens - (double)m.cached_tokens;
  add("krafla_prefill_tokens_per_second", "gauge", "Prompt tokens fed per second of prefill time.",
      m.prefill_seconds > 0 ? prefilled / m.prefill_seconds : 0.0);
  add("krafla_decode_tokens_per_second", "gauge", "Tokens generated per second of decode time (all slots).",
      m.decode_seconds > 0 ? (double)m.generated_tokens / m.decode_seconds : 0.0);
  res.set_content(out, "text/plain; version=0.0.4");
}

void handle_tokenize(server_context& c, const httplib::Request& req, httplib::Response& res) {
  if (not_ready(c, res)) return;
  tokenize_request tr;
  api_error err;
  if (!parse_tokenize_request(req.body, tr, err)) return send_error(res, err);
  std::vector<int32_t> ids;
  if (!tokenize_text(c.tok, tr.content, tr.add_special, &ids, &err, "content")) return send_error(res, err);
  nlohmann::json tokens = nlohmann::json::array();
  int32_t prev = -1;
  for (int32_t id : ids) {
    if (tr.with_pieces) {
      size_t n = 0;
      const char* p = ml_token_piece(c.tok, prev, id, &n);
      nlohmann::json item = nlohmann::json::object();
      item["id"] = id;
      item["piece"] = std::string(p ? p : "", n);
      tokens.push_back(std::move(item));
    } else {
      tokens.push_back(id);
    }
    prev = id;
  }
  send_json(res, {{"tokens", tokens}});
}

void handle_detokenize(server_context& c, const httplib::Request& req, httplib::Response& res) {
  if (not_ready(c, res)) return;
  std::vector<int32_t> ids;
  api_error err;
  if (!parse_detokenize_request(req.body, ids, err)) return send_error(res, err);
  if (!c.tok) return send_error(res, make_error(400, "the model has no tokenizer", "invalid_request_error", "tokens"));
  const int32_t vocab = ml_tokenizer_vocab_size(c.tok);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      return send_error(res, make_error(400, "token id " + std::to_string(ids[i]) + " is outside the vocabulary 0.." +
                                                 std::to_string(vocab - 1),
                                        "invalid_request_error", "tokens[" + std::to_string(i) + "]"));
  std::string text(ids.size() * 8 + 16, '\0');
  size_t len = 0;
  ml_error e;
  ml_status s = ml_detokenize(c.tok, ids.data(), ids.size(), 0, text.data(), text.size(), &len, &e);
  if (s != ML_OK && len > text.size()) {
    text.resize(len);
    s = ml_detokenize(c.tok, ids.data(), ids.size(), 0, text.data(), text.size(), &len, &e);
  }
  if (s != ML_OK) return send_error(res, make_error(400, e.msg, "invalid_request_error", "tokens"));
  text.resize(len);
  send_json(res, {{"content", text}});
}

// What cpp-httplib answers by itself (no route, a body over the limit, a malformed request) gets
// OpenAI's error body too.
std::string status_message(int status, const httplib::Request& req, const server_context& c) {
  switch (status) {
    case 404: return "unknown endpoint: " + req.method + " " + req.path;
    case 413:
      return "the request body is larger than the server's limit of " + std::to_string(c.opt.max_body) +
             " bytes (--max-body)";
    case 414: return "the request URI is too long";
    case 400: return "malformed HTTP request";
    default: return "HTTP error " + std::to_string(status);
  }
}

}  // namespace

api_error make_error(int status, const std::string& message, const std::string& type, const std::string& param,
                     const std::string& code) {
  api_error e;
  e.status = status;
  e.message = message;
  e.type = type;
  e.param = param;
  e.code = code;
  return e;
}

void send_error(httplib::Response& res, const api_error& e) {
  res.status = e.status;
  res.set_content(error_json(e), "application/json");
}

bool tokenize_text(const ml_tokenizer* tok, const std::string& text, bool add_special, std::vector<int32_t>* ids,
                   api_error* err, const std::string& param) {
  if (!tok) {
    *err = make_error(400, "the model has no tokenizer: give the prompt as token ids", "invalid_request_error", param);
    return false;
  }
  ids->assign(text.size() + 8, 0);
  size_t n = 0;
  ml_error e;
  ml_status s = ml_tokenize(tok, text.data(), text.size(), add_special ? 1 : 0, ids->data(), ids->size(), &n, &e);
  if (s != ML_OK && n > ids->size()) {
    ids->assign(n, 0);
    s = ml_tokenize(tok, text.data(), text.size(), add_special ? 1 : 0, ids->data(), ids->size(), &n, &e);
  }
  if (s != ML_OK) {
    *err = make_error(400, e.msg, "invalid_request_error", param);
    return false;
  }
  ids->resize(n);
  return true;
}

void install_routes(httplib::Server& svr, server_context& c) {
  if (!c.opt.cors.empty()) svr.set_default_headers({{"Access-Control-Allow-Origin", c.opt.cors}, {"Vary", "Origin"}});
  svr.set_pre_routing_handler([&c](const httplib::Request& req, httplib::Response& res) {
    if (refuse_bad_framing(req, res, c.opt)) return httplib::Server::HandlerResponse::Handled;  // http_guard.h
    const route* r = find_route(req.path);
    if (r && req.method == "OPTIONS" && !c.opt.cors.empty()) {  // a browser's CORS preflight
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", std::string(r->method) + ", OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (r && !method_allowed(*r, req.method)) {
      res.set_header("Allow", std::string(r->method) == "GET" ? "GET, HEAD" : r->method);
      send_error(res, make_error(405, req.method + " is not allowed on " + req.path + " (use " + r->method + ")",
                                 "invalid_request_error", "", "method_not_allowed"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (r && r->needs_key && c.closing.load()) {
      res.set_header("Connection", "close");
      send_error(res, make_error(503, "the server is shutting down", "server_error", "", "shutting_down"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (r && r->needs_key && !c.opt.api_key.empty()) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string bearer = "Bearer ";
      const bool has = auth.compare(0, bearer.size(), bearer) == 0;
      if (!has || !same_secret(auth.substr(bearer.size()), c.opt.api_key)) {
        res.set_header("WWW-Authenticate", "Bearer");
        send_error(res, make_error(401,
                                   has ? "Incorrect API key provided"
                                       : "no API key: send it as the header 'Authorization: Bearer KEY'",
                                   "authentication_error", "", "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  svr.set_error_handler([&c](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return;  // a handler's own error body
    send_error(res, make_error(res.status, status_message(res.status, req, c), "invalid_request_error", "",
                               res.status == 404 ? "not_found" : res.status == 413 ? "request_too_large" : ""));
  });
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    send_error(res, make_error(500, what, "server_error"));
  });
  // POST bodies are read by the guard (http_guard.h: --max-body for chunked bodies, --timeout).
  post_with_limits(svr, "/v1/chat/completions", c.opt, [&c](const httplib::Request& req, httplib::Response& res) {
    handle_generate(c, endpoint::chat, req, res);
  });
  post_with_limits(svr, "/v1/completions", c.opt, [&c](const httplib::Request& req, httplib::Response& res) {
    handle_generate(c, endpoint::completion, req, res);
  });
  svr.Get("/v1/models", [&c](const httplib::Request&, httplib::Response& res) {
    if (not_ready(c, res)) return;
    res.set_content(models_json(c.model_id, c.created, c.sched->slot_ctx()), "application/json");
  });
  svr.Get("/health", [&c](const httplib::Request&, httplib::Response& res) { handle_health(c, res); });
  svr.Get("/metrics", [&c](const httplib::Request&, httplib::Response& res) { handle_metrics(c, res); });
  post_with_limits(svr, "/tokenize", c.opt, [&c](const httplib::Request& req, httplib::Response& res) { handle_tokenize(c, req, res); });
  post_with_limits(svr, "/detokenize", c.opt, [&c](const httplib::Request& req, httplib::Response& res) { handle_detokenize(c, req, res); });
}

}  // namespace server
