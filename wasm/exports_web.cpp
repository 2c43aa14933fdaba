// The calls the JavaScript package (web/, npm `krafla`) makes into the wasm module, on top of
// krafla.h. They take and return plain numbers and pointers (ccall/cwrap-friendly): no structs
// by value, no 64-bit integers (the 3.1.6 glue has no BigInt by default).
//
// A session owns an engine, the model bytes it reads (wasm has no mmap: kr_open takes a buffer
// from kr_alloc and frees it in kr_close), and the state of one generation. Generation is
// stepwise (kr_gen_start, then kr_gen_next per token) so that the worker returns to its event
// loop between tokens: that is how an AbortSignal takes effect within one token.
//
// Errors: a call that fails returns 0 / a negative value and leaves its message in kr_error().
#include <emscripten/emscripten.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "model/sampler.h"
#include "src/engine/krafla.h"
#include "convert/convert.h"

namespace {

ml_error g_err;

struct kr_session {
  ml_engine* e = nullptr;
  void* model_bytes = nullptr;  // owned (kr_alloc), freed after the engine
  ml_engine_info info{};
  ml_sampler sampler;
  void* scratch = nullptr;
  int pos = 0;           // the next position to feed
  int32_t pending = -1;  // a sampled token not yet fed (fed by the next kr_gen_next)
  int32_t prev = -1;     // the previous token, for kr_gen_piece
};

int fail(ml_status s, const char* msg) {
  ml_fail(&g_err, s, "%s", msg);
  return -1;
}

ml_engine_params params_of(int n_threads, int ctx) {
  ml_engine_params p{};
  p.n_threads = n_threads > 0 ? n_threads : 1;
  p.ctx = ctx > 0 ? ctx : 0;
  return p;
}

kr_session* finish(kr_session* s, ml_status st) {
  if (st != ML_OK) {
    if (s->e) ml_engine_close(s->e);
    std::free(s->model_bytes);
    delete s;
    return nullptr;
  }
  s->info = ml_engine_get_info(s->e);
  s->scratch = std::malloc(ml_sampler_scratch_bytes(s->info.vocab_size));
  if (!s->scratch) {
    ml_fail(&g_err, ML_E_NOMEM, "cannot allocate the sampler's scratch");
    return finish(s, ML_E_NOMEM);
  }
  return s;
}

}  // namespace

extern "C" {

// The last error's message and status name ("io", "format", "nomem", ...).
EMSCRIPTEN_KEEPALIVE const char* kr_error(void) { return g_err.msg; }
EMSCRIPTEN_KEEPALIVE const char* kr_error_kind(void) { return ml_status_name(g_err.status); }

// The build: its kernel ISA ("scalar", "wasm_simd128", ...), packed row group, and 1 when it was
// built with pthreads (then kr_open may ask for more than one thread).
EMSCRIPTEN_KEEPALIVE const char* kr_build_isa(void) { return ml_build_isa(); }
EMSCRIPTEN_KEEPALIVE int kr_build_pack_g(void) { return ml_build_pack_g(); }
EMSCRIPTEN_KEEPALIVE int kr_build_threads(void) {
#ifdef __EMSCRIPTEN_PTHREADS__
  return 1;
#else
  return 0;
#endif
}

// A 64-byte-aligned buffer for model bytes (0 when the heap cannot grow that far).
EMSCRIPTEN_KEEPALIVE void* kr_alloc(size_t size) {
  void* p = std::aligned_alloc(64, (size + 63) / 64 * 64);
  if (!p) ml_fail(&g_err, ML_E_NOMEM, "cannot allocate %zu bytes for the model in wasm memory", size);
  return p;
}
EMSCRIPTEN_KEEPALIVE void kr_free(void* p) { std::free(p); }

// Opens a .mlb held in bytes (from kr_alloc; the session owns them from now on, even on failure).
EMSCRIPTEN_KEEPALIVE kr_session* kr_open(void* bytes, size_t size, int n_threads, int ctx) {
  kr_session* s = new (std::nothrow) kr_session;
  if (!s) {
    std::free(bytes);
    fail(ML_E_NOMEM, "cannot allocate a session");
    return nullptr;
  }
  s->model_bytes = bytes;
  const ml_engine_params p = params_of(n_threads, ctx);
  return finish(s, ml_engine_open_memory(&s->e, bytes, size, &p, &g_err));
}

// Opens a .mlb from the module's file system (MEMFS: the converter's output).
EMSCRIPTEN_KEEPALIVE kr_session* kr_open_file(const char* path, int n_threads, int ctx) {
  kr_session* s = new (std::nothrow) kr_session;
  if (!s) {
    fail(ML_E_NOMEM, "cannot allocate a session");
    return nullptr;
  }
  const ml_engine_params p = params_of(n_threads, ctx);
  return finish(s, ml_engine_open(&s->e, path, &p, &g_err));
}

EMSCRIPTEN_KEEPALIVE void kr_close(kr_session* s) {
  if (!s) return;
  std::free(s->scratch);
  ml_engine_close(s->e);
  std::free(s->model_bytes);
  delete s;
}

// Writes the model's numbers into out[0..15]: vocab_size, ctx, max_seq, dim, hidden_dim,
// n_layers, n_heads, n_kv_heads, head_dim, wtype, bos_id, eos_id, has_tokenizer, n_threads,
// packed (pack_g, 0 when row-major), state_bytes / 1024.
EMSCRIPTEN_KEEPALIVE void kr_info(const kr_session* s, int32_t* out) {
  const ml_engine_info& i = s->info;
  const int32_t v[16] = {i.vocab_size, i.ctx,      i.max_seq, i.dim,        i.hidden_dim,    i.n_layers,
                         i.n_heads,    i.n_kv_heads, i.head_dim, i.wtype,    i.bos_id,        i.eos_id,
                         i.has_tokenizer, i.n_threads, i.packed ? i.pack_g : 0, (int32_t)(i.state_bytes / 1024)};
  std::memcpy(out, v, sizeof v);
}

// Text to ids (BOS first when add_bos): the count, or -1 (kr_error) when the model has no
// tokenizer or more than cap ids are needed.
EMSCRIPTEN_KEEPALIVE int kr_tokenize(const kr_session* s, const char* text, size_t len, int add_bos, int32_t* ids,
                                     size_t cap) {
  size_t n = 0;
  if (ml_engine_tokenize(s->e, text, len, add_bos, ids, cap, &n, &g_err) != ML_OK) return -1;
  return (int)n;
}

// The text of id after prev, as ml_run prints it (BOS and EOS print nothing); *len its bytes.
EMSCRIPTEN_KEEPALIVE const char* kr_piece(const kr_session* s, int32_t prev, int32_t id, int32_t* len) {
  *len = 0;
  if (id == s->info.bos_id || id == s->info.eos_id) return "";
  size_t n = 0;
  const char* p = ml_engine_piece(s->e, prev, id, &n);
  *len = (int32_t)n;
  return p ? p : "";
}

// Starts a generation as ml_engine_generate does: validates the sampling parameters, feeds the
// prompt from position 0 (batched). 0 on success, -1 with kr_error otherwise.
EMSCRIPTEN_KEEPALIVE int kr_gen_start(kr_session* s, const int32_t* prompt, int n, float temperature, float top_p,
                                      int top_k, uint32_t seed_lo, uint32_t seed_hi) {
  s->pending = -1;
  s->pos = 0;
  if (n <= 0) return fail(ML_E_ARG, "the prompt is empty: it needs at least one token (BOS)");
  if (n > s->info.ctx) {
    ml_fail(&g_err, ML_E_ARG, "the prompt has %d tokens, more than the context of %d", n, s->info.ctx);
    return -1;
  }
  const uint64_t seed = (uint64_t)seed_hi << 32 | seed_lo;
  if (ml_sampler_init(&s->sampler, s->info.vocab_size, temperature, top_p, top_k, seed, s->scratch, &g_err) != ML_OK)
    return -1;
  if (ml_engine_eval(s->e, prompt, (size_t)n, 0, &g_err) != ML_OK) return -1;
  s->pos = n;
  s->prev = prompt[n - 1];
  return 0;
}

// The next token: feeds the previous sampled one (if any), then samples. Returns the id (the
// caller stops at BOS/EOS and at its token limit, as ml_engine_generate), -2 when the context is
// full, -1 on error.
EMSCRIPTEN_KEEPALIVE int kr_gen_next(kr_session* s) {
  if (s->pending >= 0) {
    if (s->pos >= s->info.ctx) return -2;
    if (ml_engine_eval(s->e, &s->pending, 1, s->pos, &g_err) != ML_OK) return -1;
    ++s->pos;
    s->prev = s->pending;
    s->pending = -1;
  }
  if (s->pos == 0) return fail(ML_E_ARG, "kr_gen_next before kr_gen_start");
  s->pending = ml_sampler_sample(&s->sampler, ml_engine_logits(s->e));
  return s->pending;
}

// The piece of the token kr_gen_next just returned (after the token before it).
EMSCRIPTEN_KEEPALIVE const char* kr_gen_piece(const kr_session* s, int32_t* len) {
  return kr_piece(s, s->prev, s->pending, len);
}

// Feeds n tokens at position pos (the benchmark's prefill); 0 or -1.
EMSCRIPTEN_KEEPALIVE int kr_eval(kr_session* s, const int32_t* ids, int n, int pos) {
  return ml_engine_eval(s->e, ids, (size_t)n, pos, &g_err) == ML_OK ? 0 : -1;
}

// Converts a llama2.c float32 checkpoint plus tokenizer.bin (paths in the module's file system)
// to a .mlb at out, weights Q8 (wtype 2) or Q4 (3). 0 or -1 (kr_error names the file at fault).
EMSCRIPTEN_KEEPALIVE int kr_convert_llama2c(const char* checkpoint, const char* tokenizer, const char* out, int wtype) {
  cv_llama2c_opts o;
  o.checkpoint = checkpoint;
  o.tokenizer = tokenizer;
  o.out = out;
  o.wtype = wtype == ML_DT_Q4 ? ML_DT_Q4 : ML_DT_Q8;
  return cv_llama2c(&o, &g_err) == ML_OK ? 0 : -1;
}

}  // extern "C"
