// See http_guard.h. Everything here goes through cpp-httplib's public hooks, plus the header
// deadline that third_party/cpp-httplib's patch adds (set_header_timeout).
#include "http_guard.h"

#include "http_pool.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <string>

namespace server {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; });
}

std::string lower_trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  std::string out = s.substr(b, e - b);
  for (char& ch : out) ch = (char)std::tolower((unsigned char)ch);
  return out;
}

bool refuse(httplib::Response& res, int status, const std::string& message, const std::string& code = "") {
  send_error(res, make_error(status, message, "invalid_request_error", "", code));
  close_after(res);
  return true;
}

// The value of Content-Length as a number; false when absent. Assumes refuse_bad_framing passed.
bool content_length(const httplib::Request& req, unsigned long long* n) {
  if (!req.has_header("Content-Length")) return false;
  const std::string v = req.get_header_value("Content-Length");
  if (v.size() > 19) {
    *n = ~0ull;
    return true;
  }
  *n = std::stoull(v);
  return true;
}

// Bytes beyond --max-body that the server still reads and drops before its 413.
constexpr unsigned long long DRAIN_LIMIT = 64ull << 20;

bool refuse_too_large(httplib::Response& res, const http_options& opt) {
  return refuse(res, 413, "the request body is larger than the server's limit of " + std::to_string(opt.max_body) +
                              " bytes (--max-body)",
                "request_too_large");
}

}  // namespace

void close_after(httplib::Response& res) {
  if (res.get_header_value("Connection") != "close") res.set_header("Connection", "close");
}

bool refuse_bad_framing(const httplib::Request& req, httplib::Response& res, const http_options& opt) {
  // httplib itself refuses more than CPPHTTPLIB_HEADER_MAX_COUNT (1000, set in CMakeLists.txt) with 400.
  if (req.headers.size() > MAX_HEADERS)
    return refuse(res, 431, "the request has more than " + std::to_string(MAX_HEADERS) + " headers",
                  "request_header_fields_too_large");
  const auto lengths = req.headers.equal_range("Content-Length");
  std::string length;
  for (auto it = lengths.first; it != lengths.second; ++it) {
    if (!all_digits(it->second))
      return refuse(res, 400, "Content-Length '" + it->second + "' is not a decimal number");
    if (!length.empty() && it->second != length) return refuse(res, 400, "two different Content-Length headers");
    length = it->second;
  }
  const bool has_te = req.has_header("Transfer-Encoding");
  if (has_te) {
    if (req.get_header_value_count("Transfer-Encoding") != 1 ||
        lower_trimmed(req.get_header_value("Transfer-Encoding")) != "chunked")
      return refuse(res, 501, "Transfer-Encoding '" + req.get_header_value("Transfer-Encoding") +
                                  "' is not supported (only 'chunked')");
    if (!length.empty()) return refuse(res, 400, "a request may not have both Content-Length and Transfer-Encoding");
  }
  if ((has_te || !length.empty()) && req.is_multipart_form_data())
    return refuse(res, 415, "multipart bodies are not accepted: send JSON");
  // A body over --max-body is read and dropped by httplib (then 413), so that closing the
  // connection does not reset it under the client's feet; one too large to be worth reading is
  // refused at once.
  unsigned long long n = 0;
  if (content_length(req, &n) && n > opt.max_body && n - opt.max_body > DRAIN_LIMIT) return refuse_too_large(res, opt);
  return false;
}

void post_with_limits(httplib::Server& svr, const char* path, const http_options& opt, httplib::Server::Handler handler) {
  svr.Post(path, [opt, handler](const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& reader) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opt.timeout);
    std::string body;
    bool too_big = false, too_slow = false;
    const bool read = reader([&](const char* data, size_t n) {
      if (body.size() + n > opt.max_body) return !(too_big = true);
      if (std::chrono::steady_clock::now() > deadline) return !(too_slow = true);
      body.append(data, n);
      return true;
    });
    if (too_big || (!read && res.status == 413)) return (void)refuse_too_large(res, opt);
    if (too_slow)
      return (void)refuse(res, 408, "the request body took longer than " + std::to_string(opt.timeout) +
                                        " s (--timeout) to arrive");
    if (!read) return (void)refuse(res, 400, "the request body is malformed or was cut short");
    // The Request httplib passes is its own non-const object; the handler sees the body as if
    // httplib had read it.
    const_cast<httplib::Request&>(req).body = std::move(body);
    res.status = -1;
    handler(req, res);
  });
}

void install_http_guard(httplib::Server& svr, const http_options& opt, size_t min_workers) {
  // As llama-server: idle keep-alive connections are closed after 5 s (or --timeout when shorter),
  // and the pool has room for many of them beside the requests being served.
  const size_t workers = std::min<size_t>(1024, std::max<size_t>(min_workers, 512));
  // Threads start on demand and end after 2 s idle (4 kept): memory and threads follow the load.
  svr.new_task_queue = [workers] { return new lazy_pool(workers, 4, std::chrono::milliseconds(2000)); };
  svr.set_keep_alive_timeout(std::min(5, opt.timeout));
  // The request line and headers must arrive within --timeout of their first byte (slowloris).
  svr.set_header_timeout(opt.timeout);
  svr.set_expect_100_continue_handler([opt](const httplib::Request& req, httplib::Response& res) {
    // RFC 9110 10.1.1: the final status instead of 100 Continue for a body that would be refused.
    if (refuse_bad_framing(req, res, opt)) return res.status;
    unsigned long long n = 0;
    if (content_length(req, &n) && n > opt.max_body) return refuse_too_large(res, opt), 413;
    return 100;
  });
}

}  // namespace server
