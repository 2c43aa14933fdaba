// The C API of the WebAssembly module (krafla.mjs), for the JavaScript worker in web/. A thin
// layer over src/engine/krafla.h that hands the generation loop to JavaScript one token at a
// time, so the worker can post each piece and check for an abort between tokens.
// wasm/README.md is the contract; keep the two in step.
//
// Conventions: pointers are offsets into the wasm heap; every fallible call returns a negative
// value or 0 (null) on failure and leaves the message in krafla_last_error(). Not thread-safe:
// one caller (the worker's message loop) at a time.
#include <emscripten/emscripten.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "convert/convert.h"
#include "core/threads.h"
#include "engine/krafla.h"
#include "model/sampler.h"

namespace {

ml_error g_err;

void clear_error() {
  g_err.status = ML_OK;
  g_err.msg[0] = 0;
}

int fail(ml_status s, const char* msg) {
  g_err.status = s;
  std::snprintf(g_err.msg, sizeof g_err.msg, "%s", msg);
  return -(int)s;
}

}  // namespace

// One opened model: the engine, the model bytes it reads (owned here) and the sampler.
struct krafla_session {
  ml_engine* engine = nullptr;
  void* data = nullptr;
  ml_sampler sampler;
  void* sampler_scratch = nullptr;
  int vocab = 0, bos = -1, eos = -1;
  char info[1024] = {0};
};

extern "C" {

EMSCRIPTEN_KEEPALIVE const char* krafla_build_isa(void) { return ml_build_isa(); }
EMSCRIPTEN_KEEPALIVE int krafla_build_threads(void) { return ml_pool_threads_built() ? 1 : 0; }
EMSCRIPTEN_KEEPALIVE int krafla_build_pack_g(void) { return ml_build_pack_g(); }

EMSCRIPTEN_KEEPALIVE const char* krafla_last_error(void) { return g_err.msg; }
EMSCRIPTEN_KEEPALIVE int krafla_last_status(void) { return (int)g_err.status; }

// A buffer for the model bytes (free() it only if krafla_open is never called with it).
EMSCRIPTEN_KEEPALIVE void* krafla_alloc(size_t size) {
  clear_error();
  void* p = std::malloc(size ? size : 1);
  if (!p) fail(ML_E_NOMEM, "out of wasm memory for the model bytes (wasm32 allows 4 GB in all)");
  return p;
}

// Opens the .mlb bytes at data (from krafla_alloc; the session owns them from now on, also when
// the open fails). ctx 0 = the model's max_seq; kv: 0 f32, 1 q8, 2 f16; n_threads 0/1 = no
// workers; batch 0 = 128. Returns the session, or null.
EMSCRIPTEN_KEEPALIVE krafla_session* krafla_open(void* data, size_t size, int ctx, int kv, int n_threads, int batch) {
  clear_error();
  krafla_session* s = new (std::nothrow) krafla_session;
  if (!s) {
    std::free(data);
    fail(ML_E_NOMEM, "out of wasm memory");
    return nullptr;
  }
  s->data = data;
  ml_engine_params p{};
  p.ctx = ctx;
  p.kv = kv;
  p.n_threads = n_threads;
  p.batch = batch;
  if (ml_engine_open_memory(&s->engine, data, size, &p, &g_err) != ML_OK) {
    std::free(data);
    delete s;
    return nullptr;
  }
  const ml_engine_info i = ml_engine_get_info(s->engine);
  s->vocab = i.vocab_size;
  s->bos = i.bos_id;
  s->eos = i.eos_id;
  s->sampler_scratch = std::malloc(ml_sampler_scratch_bytes(i.vocab_size));
  if (!s->sampler_scratch ||
      ml_sampler_init(&s->sampler, i.vocab_size, 0.0f, 1.0f, 0, 0, s->sampler_scratch, &g_err) != ML_OK) {
    if (!s->sampler_scratch) fail(ML_E_NOMEM, "out of wasm memory for the sampler");
    ml_engine_close(s->engine);
    std::free(data);
    delete s;
    return nullptr;
  }
  std::snprintf(s->info, sizeof s->info,
                "{\"vocab_size\":%d,\"ctx\":%d,\"max_seq\":%d,\"dim\":%d,\"hidden_dim\":%d,\"n_layers\":%d,"
                "\"n_heads\":%d,\"n_kv_heads\":%d,\"head_dim\":%d,\"wtype\":\"%s\",\"bos_id\":%d,\"eos_id\":%d,"
                "\"has_tokenizer\":%s,\"isa\":\"%s\",\"threads_built\":%s,\"n_threads\":%d,\"batch\":%d,"
                "\"packed\":%s,\"pack_g\":%d,\"state_bytes\":%zu,\"packed_bytes\":%zu,\"model_bytes\":%zu}",
                i.vocab_size, i.ctx, i.max_seq, i.dim, i.hidden_dim, i.n_layers, i.n_heads, i.n_kv_heads, i.head_dim,
                i.wtype == 3 ? "q4" : "q8", i.bos_id, i.eos_id, i.has_tokenizer ? "true" : "false", i.isa,
                ml_pool_threads_built() ? "true" : "false", i.n_threads, i.batch, i.packed ? "true" : "false",
                i.pack_g, i.state_bytes, i.packed_bytes, size);
  return s;
}

EMSCRIPTEN_KEEPALIVE void krafla_close(krafla_session* s) {
  if (!s) return;
  ml_engine_close(s->engine);
  std::free(s->sampler_scratch);
  std::free(s->data);
  delete s;
}

// The model and build as a JSON object (wasm/README.md lists the keys).
EMSCRIPTEN_KEEPALIVE const char* krafla_info_json(const krafla_session* s) { return s ? s->info : "{}"; }

// UTF-8 text (len bytes) to ids. Returns the number of ids, which may exceed cap: then nothing
// useful was written and the caller retries with a buffer that large. -status on error.
EMSCRIPTEN_KEEPALIVE int krafla_tokenize(const krafla_session* s, const char* text, int len, int add_bos, int32_t* ids,
                                         int cap) {
  clear_error();
  size_t n = 0;
  const ml_status st =
      ml_engine_tokenize(s->engine, text, (size_t)len, add_bos, ids, (size_t)(cap < 0 ? 0 : cap), &n, &g_err);
  if (st == ML_OK || (st == ML_E_ARG && n > (size_t)cap)) {
    clear_error();
    return (int)n;
  }
  return -(int)st;
}

// The bytes of id's text after prev (-1 at the start), *len of them, as ml_run prints them: BOS
// and EOS give "". A piece may end inside a UTF-8 character (byte tokens): decode with a
// streaming decoder. The pointer is valid until the next call.
EMSCRIPTEN_KEEPALIVE const char* krafla_piece(const krafla_session* s, int prev, int id, int* len) {
  *len = 0;
  if (id == s->bos || id == s->eos) return "";
  size_t n = 0;
  const char* p = ml_engine_piece(s->engine, prev, id, &n);
  *len = p ? (int)n : 0;
  return p ? p : "";
}

// Feeds ids[0, n) at positions [pos, pos + n) and computes the logits of the last. 0 or -status.
EMSCRIPTEN_KEEPALIVE int krafla_eval(krafla_session* s, const int32_t* ids, int n, int pos) {
  clear_error();
  if (n <= 0) return fail(ML_E_ARG, "eval: no tokens");
  return -(int)ml_engine_eval(s->engine, ids, (size_t)n, pos, &g_err);
}

// The vocab_size logits of the last evaluated position.
EMSCRIPTEN_KEEPALIVE const float* krafla_logits(const krafla_session* s) { return ml_engine_logits(s->engine); }

// Sets the sampling parameters and restarts the generator (seed = seed_hi * 2^32 + seed_lo, as
// ml_run --seed). temperature 0 = greedy; top_p 1 = off; top_k 0 = off. 0 or -status.
EMSCRIPTEN_KEEPALIVE int krafla_sampler(krafla_session* s, float temperature, float top_p, int top_k, uint32_t seed_lo,
                                        uint32_t seed_hi) {
  clear_error();
  const uint64_t seed = ((uint64_t)seed_hi << 32) | seed_lo;
  return -(int)ml_sampler_init(&s->sampler, s->vocab, temperature, top_p, top_k, seed, s->sampler_scratch, &g_err);
}

// The next id drawn from the current logits (ml_engine_generate's step: sample, then the caller
// stops on EOS/BOS or feeds the id with krafla_eval at the next position).
EMSCRIPTEN_KEEPALIVE int krafla_sample(krafla_session* s) {
  return ml_sampler_sample(&s->sampler, ml_engine_logits(s->engine));
}

// ml_convert llama2c on files of the module's in-memory file system (Module.FS): a llama2.c
// float32 checkpoint and its tokenizer.bin to an .mlb at out. wtype 0 q8, 1 q4; scales 0 f32, 1 f16.
// 0 or -status.
EMSCRIPTEN_KEEPALIVE int krafla_convert_llama2c(const char* checkpoint, const char* tokenizer, const char* out,
                                                int wtype, int scales) {
  clear_error();
  cv_llama2c_opts o = cv_llama2c_defaults();
  o.checkpoint = checkpoint;
  o.tokenizer = tokenizer;
  o.out = out;
  o.wtype = wtype == 1 ? ML_DT_Q4 : ML_DT_Q8;
  o.scale_type = scales == 1 ? ML_SCALE_F16 : ML_SCALE_F32;
  return -(int)cv_llama2c(&o, &g_err);
}

}  // extern "C"
