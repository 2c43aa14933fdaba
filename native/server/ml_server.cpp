// ml_server: an OpenAI-compatible HTTP server over one model (docs/server.md). It listens first
// (printing `listening on http://HOST:PORT` as its first line of stdout, so that --port 0 tells
// its caller the port chosen), answers /health with 503 while the model loads, then serves.
// SIGINT/SIGTERM: stop accepting, let the requests in flight finish (up to --drain-timeout), exit 0.
// Windows: Ctrl-C, Ctrl-Break (SIGBREAK) and SIGTERM, through the C runtime's signal().
#ifndef _WIN32
#include <pthread.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

#include "cli/cli.h"
#include "http_guard.h"
#include "http_server.h"

namespace {

const char* const PROG = "ml_server";

struct options {
  std::string model, kv = "f32", chat_template;
  int parallel = 4, ctx = 0, threads = 0, queue = 64, batch = 0, drain_timeout = 30;
  server::http_options http;
};

int check_values(const options& o) {
  if (o.http.port < 0 || o.http.port > 65535) return ml::cli::usage_error(PROG, "--port: must be in 0..65535");
  if (o.parallel < 1 || o.parallel > 256) return ml::cli::usage_error(PROG, "--parallel: must be in 1..256");
  if (o.ctx < 0) return ml::cli::usage_error(PROG, "--ctx: must be >= 1");
  if (o.threads < 0 || o.threads > 1024) return ml::cli::usage_error(PROG, "-t: must be in 1..1024 (0: every core)");
  if (o.queue < 0 || o.queue > 4096) return ml::cli::usage_error(PROG, "--queue: must be in 0..4096");
  if (o.batch < 0 || o.batch > 128) return ml::cli::usage_error(PROG, "--batch: must be in 1..128");
  if (o.http.max_body < 1) return ml::cli::usage_error(PROG, "--max-body: must be >= 1");
  if (o.http.timeout < 1 || o.http.timeout > 86400) return ml::cli::usage_error(PROG, "--timeout: must be in 1..86400");
  if (o.drain_timeout < 0) return ml::cli::usage_error(PROG, "--drain-timeout: must be >= 0");
  return -1;
}

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// Loads the model and starts the scheduler; the server answers 503 until this is done.
int load(server::server_context& c, const options& o) {
  ml_model_params mp{};
  mp.ctx = o.ctx;
  mp.n_threads = server::engine_threads(o.threads);
  ml_model* m = nullptr;
  ml_error err;
  if (ml_model_open(&m, o.model.c_str(), &mp, &err) != ML_OK) return ml::cli::report(PROG, err);
  c.model = m;
  c.tok = ml_model_tokenizer(m);
  server::scheduler_options so;
  so.parallel = o.parallel;
  so.ctx = o.ctx;
  so.kv = ml::cli::kv_type(o.kv);
  so.threads = o.threads;
  so.queue = o.queue;
  so.batch = o.batch;
  std::string why;
  c.sched = server::scheduler::create(m, so, &why);
  if (!c.sched) return ml::cli::usage_error(PROG, why);
  const ml_model_info info = ml_model_get_info(m);
  c.fingerprint = std::string("krafla-") + info.isa + "-kv" + o.kv;
  std::fprintf(stderr, "%s: %s: %d slots of %d positions, kv %s, %s kernels%s\n", PROG, c.model_id.c_str(), o.parallel,
               c.sched->slot_ctx(), o.kv.c_str(), info.isa,
               c.tok ? (ml_tokenizer_has_chat_template(c.tok) || !c.chat_template.empty() ? ", chat template" : ", no chat template")
                     : ", no tokenizer");
  c.ready.store(true);
  return -1;
}

#ifndef _WIN32
// Blocks SIGINT and SIGTERM: every thread started from here on inherits the mask, and only
// wait_for_signal takes them. A client gone mid-write must not kill the process (SIGPIPE).
void hold_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// Waits for SIGINT or SIGTERM (blocked in every thread; polled here), or for the listener to end.
// (listening, not svr.is_running(): that turns true only once the listener thread has started,
// which under wine came after a small model had loaded.)
int wait_for_signal(const std::atomic<bool>& listening) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  for (;;) {
    timespec ts{0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) return sig;
    if (!listening.load()) return 0;
  }
}
#else
// Windows has no signal masks: the C runtime runs a console signal's handler on a thread of its
// own, which only notes the signal; wait_for_signal polls the note. Writes to a closed socket fail
// with an error there (no SIGPIPE).
std::atomic<int> g_stop_signal{0};
extern "C" void note_stop_signal(int sig) {
  g_stop_signal.store(sig);
  signal(sig, note_stop_signal);  // the C runtime resets the handler before calling it
}

void hold_stop_signals() {
  for (int s : {SIGINT, SIGTERM, SIGBREAK}) signal(s, note_stop_signal);
}

int wait_for_signal(const std::atomic<bool>& listening) {
  for (;;) {
    if (const int sig = g_stop_signal.load()) return sig;
    if (!listening.load()) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}
#endif

const char* signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "SIGBREAK";
}

}  // namespace

int ml_main(int argc, char** argv) {
#if defined(__GLIBC__)
  // glibc raises its mmap threshold whenever a large block is freed, so later blocks of that size
  // come from the threads' heaps and stay resident there: under load the RSS crept up in steps of
  // about 0.6 MB (e2e.server.http_load measured 2112 KiB over 60 s once, 8 MB above this setting in
  // all). Setting the threshold turns that adjustment off: blocks of 128 KiB and more go back to
  // the system when freed.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
  options o;
  CLI::App app{"ml_server: an OpenAI-compatible HTTP server over a krafla model", PROG};
  app.add_option("model", o.model, "model: .mlb, GGUF file or Hugging Face folder")->required();
  app.add_option("--host", o.http.host, "address to listen on (default 127.0.0.1)");
  app.add_option("--port", o.http.port, "port (default 8080; 0 = a free one, printed)");
  app.add_option("--parallel", o.parallel, "requests served at once, one slot each (default 4)");
  app.add_option("--ctx", o.ctx, "positions per slot (default: the model's max_seq, at most 4096)");
  app.add_option("-t,--threads", o.threads, "threads of the engine (default 0 = every core)");
  ml::cli::add_kv_option(app, &o.kv);
  app.add_option("--batch", o.batch, "tokens per forward step, 1..128 (default 128)");
  app.add_option("--queue", o.queue, "requests that may wait for a slot; more get 503 (default 64)");
  app.add_option("--api-key", o.http.api_key, "require 'Authorization: Bearer KEY' (default: $KRAFLA_API_KEY)");
  app.add_option("--chat-template", o.chat_template, "a Jinja chat template file replacing the model's");
  app.add_option("--cors", o.http.cors, "allow browsers of this origin ('*' for any): CORS headers and preflight");
  app.add_option("--max-body", o.http.max_body, "largest request body in bytes (default 8388608); more gets 413");
  app.add_option("--timeout", o.http.timeout, "seconds a connection's read or write may wait (default 600)");
  app.add_option("--drain-timeout", o.drain_timeout,
                 "on SIGINT/SIGTERM, seconds to let requests in flight finish before cancelling them (default 30)");
  if (const int rc = ml::cli::parse(app, PROG, argc, argv); rc >= 0) return rc;
  if (const int rc = check_values(o); rc >= 0) return rc;
  if (o.http.api_key.empty())
    if (const char* k = std::getenv("KRAFLA_API_KEY")) o.http.api_key = k;

  server::server_context c;
  c.opt = o.http;
  c.model_id = base_name(o.model);
  c.created = (int64_t)std::time(nullptr);
  if (!o.chat_template.empty() && !ml::cli::read_file(o.chat_template, &c.chat_template))
    return ml::cli::usage_error(PROG, "--chat-template: cannot read " + o.chat_template);
  if (!o.chat_template.empty() && c.chat_template.empty())
    return ml::cli::usage_error(PROG, "--chat-template: " + o.chat_template + " is empty");

  hold_stop_signals();  // before any thread starts

  httplib::Server svr;
  const size_t workers = std::min<size_t>(512, (size_t)o.parallel + (size_t)o.queue + 4);
  svr.set_payload_max_length(o.http.max_body);
  svr.set_read_timeout(o.http.timeout, 0);
  svr.set_write_timeout(o.http.timeout, 0);
  svr.set_keep_alive_max_count(1000);
  server::install_http_guard(svr, o.http, workers);  // pool, keep-alive, Expect, close-after (http_guard.h)
  server::install_routes(svr, c);
  int port = o.http.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.http.host);
    if (port < 0) return ml::cli::usage_error(PROG, "cannot listen on " + o.http.host + " (any port)");
  } else if (!svr.bind_to_port(o.http.host, port)) {
    return ml::cli::usage_error(PROG, "cannot listen on " + o.http.host + ":" + std::to_string(port));
  }
  std::printf("listening on http://%s:%d\n", o.http.host.c_str(), port);
  std::fflush(stdout);
  std::atomic<bool> listening{true};
  std::thread listener([&svr, &listening] {
    svr.listen_after_bind();
    listening.store(false);
  });

  if (const int rc = load(c, o); rc >= 0) {
    svr.stop();
    listener.join();
    return rc;
  }
  const int sig = wait_for_signal(listening);
  if (sig) std::fprintf(stderr, "%s: %s: no new connections; finishing the requests in flight (up to %d s)\n", PROG,
                        signal_name(sig), o.drain_timeout);
  // New requests get 503 from here on; the jobs in flight finish (or are cancelled when the drain
  // times out) and their responses are written to the end before the listener stops: cpp-httplib
  // cuts a stream short once stop() is called.
  c.closing.store(true);
  c.sched->drain(std::chrono::seconds(o.drain_timeout));
  for (int i = 0; i < 100 && c.in_flight.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  svr.stop();
  // The listener ends once its connections do: idle keep-alive ones within 5 s; one stuck in a
  // slow read could hold it for --timeout, so after 10 s the process leaves without it.
  for (int i = 0; i < 100 && listening.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (listening.load()) {
    std::fprintf(stderr, "%s: connections still open after the drain; exiting\n", PROG);
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(sig ? ml::cli::EXIT_OK : ml::cli::EXIT_FAILURE_);
  }
  listener.join();
  c.sched.reset();
  ml_model_close(const_cast<ml_model*>(c.model));
  if (!sig) {
    std::fprintf(stderr, "%s: the listener stopped unexpectedly\n", PROG);
    return ml::cli::EXIT_FAILURE_;
  }
  return ml::cli::EXIT_OK;
}
