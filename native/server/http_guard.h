// The HTTP framing guard of ml_server (docs/server.md, "HTTP hardening"): what cpp-httplib does not
// check by itself, done from its hooks, plus the header deadline of its vendored patch.
//   - a request's framing headers (Content-Length digits only and one value, Transfer-Encoding
//     "chunked" only and never beside Content-Length, at most MAX_HEADERS headers) are checked
//     before its body is read: 400 / 413 / 431 / 501;
//   - Expect: 100-continue announcing a body over --max-body gets 413 instead of 100 Continue;
//   - POST bodies are read by the guard, which holds chunked bodies to --max-body (413) and the
//     whole body to --timeout seconds (408);
//   - every error answer carries `Connection: close` (httplib adds it to each status >= 400), and
//     the patched httplib then really closes the connection: the framing of what follows a refused
//     request is unknown (RFC 9112 6.3).
#pragma once
#include <cstddef>

#include <httplib.h>

#include "http_server.h"

namespace server {

// Headers a request may carry (431 beyond; httplib itself refuses more than 1000 with 400).
constexpr size_t MAX_HEADERS = 100;

// The thread pool, keep-alive, the header deadline (--timeout), the Expect: 100-continue handler
// and the close-after hook.
// min_workers: what the caller needs at least (slots + queue); the pool is larger so that idle
// keep-alive connections (each holding a thread until keep-alive times out) do not starve others.
void install_http_guard(httplib::Server& svr, const http_options& opt, size_t min_workers);

// Called first in the pre-routing handler: true when the request was refused (res is set, with
// Connection: close).
bool refuse_bad_framing(const httplib::Request& req, httplib::Response& res, const http_options& opt);

// A POST route whose body the guard reads (limits above) before calling handler with req.body set.
void post_with_limits(httplib::Server& svr, const char* path, const http_options& opt, httplib::Server::Handler handler);

// Marks res so that the connection is closed once it is written.
void close_after(httplib::Response& res);

}  // namespace server
