// Fuzzes ml_server's HTTP layer: the input, as the bytes a client sends on one connection, goes
// through cpp-httplib's request parser (third_party/cpp-httplib, patched), ml_server's framing
// guard (http_guard.cpp) and its real routes and error handlers (http_routes.cpp) — the server as
// ml_server sets it up, with no model loaded, so a generation request is answered 503 "loading".
// Requests are served one after another from the same bytes, as on a keep-alive connection with
// pipelining, until the server ends the connection. Checks beyond the sanitizers:
// - every answer begins with an HTTP/1.1 status line;
// - an answer that says `Connection: close` (every error does: after a refused request the
//   framing of what follows is unknown, RFC 9112 6.3) ends the connection: no further request is
//   read from the same bytes (request smuggling otherwise);
// - at most 16 requests per input, so a run cannot loop.
// Input: the first byte chooses how the stream hands over its bytes (all buffered, as a socket
// stream that read ahead, or in small reads); the rest is the connection's bytes. Seeds:
// fuzz/corpus/http_request (fuzz/make_seeds.py) and a dictionary of HTTP words (run.py).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include <httplib.h>

#include "http_guard.h"
#include "http_server.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// A connection whose incoming bytes are the input; what the server writes is kept.
class input_stream : public httplib::Stream {
 public:
  input_stream(const uint8_t* data, size_t size, bool buffered, size_t chunk)
      : data_(data), size_(size), buffered_(buffered), chunk_(chunk) {}

  bool is_readable() const override { return buffered_ && pos_ < size_; }
  bool wait_readable() const override { return pos_ < size_; }
  bool wait_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min({size, size_ - pos_, buffered_ ? size_ : chunk_});
    std::memcpy(ptr, data_ + pos_, n);
    pos_ += n;
    return (ssize_t)n;
  }
  ssize_t write(const char* ptr, size_t size) override {
    out.append(ptr, size);
    return (ssize_t)size;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8080;
  }
  socket_t socket() const override { return INVALID_SOCKET; }  // poll() ignores it: "alive", no I/O
  time_t duration() const override { return 0; }
  const char* buffered_data(size_t& size) const override {
    size = buffered_ ? size_ - pos_ : 0;
    return size ? (const char*)data_ + pos_ : nullptr;
  }
  void consume_buffered(size_t size) override { pos_ += size; }

  bool at_end() const { return pos_ >= size_; }
  std::string out;

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
  bool buffered_;
  size_t chunk_;
};

// ml_server's httplib::Server (ml_server.cpp), with process_request reachable.
class fuzz_server : public httplib::Server {
 public:
  explicit fuzz_server(server::server_context& c) {
    set_payload_max_length(c.opt.max_body);
    set_read_timeout(c.opt.timeout, 0);
    set_write_timeout(c.opt.timeout, 0);
    set_keep_alive_max_count(1000);
    server::install_http_guard(*this, c.opt, 8);
    server::install_routes(*this, c);
  }
  bool serve(httplib::Stream& s, bool& closed) {
    return process_request(s, "127.0.0.1", 40000, "127.0.0.1", 8080, false, closed, nullptr, nullptr);
  }
};

// The status and header section of the first final answer in out (after any "100 Continue");
// status -1 when there is none.
int final_answer(const std::string& out, std::string* headers) {
  size_t at = 0;
  for (;;) {
    if (out.compare(at, 9, "HTTP/1.1 ") != 0 || out.size() < at + 12) return -1;
    const int status = std::atoi(out.substr(at + 9, 3).c_str());
    const size_t end = out.find("\r\n\r\n", at);
    if (end == std::string::npos) return -1;
    if (status != 100) {
      *headers = out.substr(at, end + 2 - at);
      return status;
    }
    at = end + 4;
  }
}

server::server_context* context() {
  static server::server_context* c = [] {
    auto* ctx = new server::server_context;
    ctx->opt.api_key = "sk-fuzz";
    ctx->opt.cors = "https://example.org";
    ctx->opt.max_body = 4096;
    ctx->opt.timeout = 2;
    ctx->model_id = "fuzz.mlb";
    return ctx;
  }();
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static fuzz_server svr(*context());
  const bool buffered = (data[0] & 1) != 0;
  const size_t chunk = 1 + (data[0] >> 1) % 7;
  input_stream s(data + 1, size - 1, buffered, chunk);
  for (int i = 0; i < 16 && !s.at_end(); ++i) {
    const size_t before = s.out.size();
    bool closed = false;
    const bool ok = svr.serve(s, closed);
    const std::string answer = s.out.substr(before);
    if (answer.empty()) {
      check(!ok || closed || s.at_end());  // nothing answered: the connection must be over
      break;
    }
    std::string headers;
    const int status = final_answer(answer, &headers);
    check(status >= 100 && status <= 599);
    if (status >= 400) check(headers.find("\r\nConnection: close\r\n") != std::string::npos);
    if (headers.find("\r\nConnection: close\r\n") != std::string::npos) check(!ok || closed);
    if (!ok || closed) break;
  }
  return 0;
}
