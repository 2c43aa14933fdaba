// The C API of the WebAssembly module (krafla.mjs), for the JavaScript worker in web/. A thin
// layer over krafla.h (src/engine/include) that steps the engine's one generation loop
// (ml_gen_next) one token per call, so the worker can post each piece and check for an abort
// between tokens.
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

#include "krafla.h"

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

// One opened model with the executor and the one session the worker drives, the model bytes
// (owned here), and the generation in progress.
struct krafla_session {
  ml_model* model = nullptr;
  ml_exec* exec = nullptr;
  ml_session* session = nullptr;
  ml_gen* gen = nullptr;
  void* data = nullptr;
  char* stops = nullptr;        // the generation's stop strings, NUL-separated
  const char** stop_ptrs = nullptr;
  int bos = -1, eos = -1;
  float min_p = 0, presence_penalty = 0, frequency_penalty = 0;  // krafla_gen_penalties
  char info[1024] = {0};
  char stats[512] = {0};
};

namespace {

void end_generation(krafla_session* s) {
  ml_gen_free(s->gen);
  s->gen = nullptr;
  std::free(s->stops);
  std::free(s->stop_ptrs);
  s->stops = nullptr;
  s->stop_ptrs = nullptr;
}

void destroy(krafla_session* s) {
  end_generation(s);
  ml_session_free(s->session);
  ml_exec_free(s->exec);
  ml_model_close(s->model);
  std::free(s->data);
  delete s;
}

// After the model opened: the executor, the session and the info JSON (size: the model's bytes as
// given). Returns s, or null (s destroyed) with the error set.
krafla_session* finish_open(krafla_session* s, size_t size, int kv, int n_threads, int batch) {
  ml_exec_params ep{};
  ep.n_threads = n_threads;
  ep.batch = batch;
  ml_session_params sp{};
  sp.kv = kv;
  if (ml_exec_create(&s->exec, s->model, &ep, &g_err) != ML_OK ||
      ml_session_create(&s->session, s->model, &sp, &g_err) != ML_OK) {
    destroy(s);
    return nullptr;
  }
  const ml_model_info i = ml_model_get_info(s->model);
  s->bos = i.bos_id;
  s->eos = i.eos_id;
  std::snprintf(s->info, sizeof s->info,
                "{\"vocab_size\":%d,\"ctx\":%d,\"max_seq\":%d,\"dim\":%d,\"hidden_dim\":%d,\"n_layers\":%d,"
                "\"n_heads\":%d,\"n_kv_heads\":%d,\"head_dim\":%d,\"wtype\":\"%s\",\"bos_id\":%d,\"eos_id\":%d,"
                "\"has_tokenizer\":%s,\"has_chat_template\":%s,\"tokenizer_kind\":\"%s\",\"isa\":\"%s\",\"threads_built\":%s,\"n_threads\":%d,\"batch\":%d,"
                "\"packed\":%s,\"pack_g\":%d,\"state_bytes\":%zu,\"packed_bytes\":%zu,\"model_bytes\":%zu}",
                i.vocab_size, ml_session_ctx(s->session), i.max_seq, i.dim, i.hidden_dim, i.n_layers, i.n_heads,
                i.n_kv_heads, i.head_dim, i.wtype == ML_DT_Q4 ? "q4" : "q8", i.bos_id, i.eos_id,
                i.has_tokenizer ? "true" : "false",
                ml_tokenizer_has_chat_template(ml_model_tokenizer(s->model)) ? "true" : "false",
                !i.has_tokenizer ? "none" : ml_tokenizer_is_hf(ml_model_tokenizer(s->model)) ? "hf" : "llama2c", i.isa, ml_build_threads() ? "true" : "false",
                ml_exec_threads(s->exec), ml_exec_batch(s->exec), i.packed ? "true" : "false", i.pack_g,
                ml_exec_bytes(s->exec) + ml_session_bytes(s->session), i.packed_bytes, size);
  return s;
}

}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE const char* krafla_build_isa(void) { return ml_build_isa(); }
EMSCRIPTEN_KEEPALIVE int krafla_build_threads(void) { return ml_build_threads(); }
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
  ml_model_params mp{};
  mp.ctx = ctx;
  if (ml_model_open_memory(&s->model, data, size, &mp, &g_err) != ML_OK) {
    destroy(s);
    return nullptr;
  }
  return finish_open(s, size, kv, n_threads, batch);
}

// Opens the model at path of the module's file system (Module.FS) as ml_model_open does: an .mlb,
// a GGUF file or a Hugging Face model folder (config.json, safetensors, tokenizer.json, ...),
// the last two converted at load into memory the model owns. The files are read once, whole, and
// closed before the conversion ends (the package drops each staged weight file once read).
// Other arguments as krafla_open. Returns the session, or null.
EMSCRIPTEN_KEEPALIVE krafla_session* krafla_open_path(const char* path, int ctx, int kv, int n_threads, int batch) {
  clear_error();
  krafla_session* s = new (std::nothrow) krafla_session;
  if (!s) {
    fail(ML_E_NOMEM, "out of wasm memory");
    return nullptr;
  }
  ml_model_params mp{};
  mp.ctx = ctx;
  if (ml_model_open(&s->model, path, &mp, &g_err) != ML_OK) {
    destroy(s);
    return nullptr;
  }
  return finish_open(s, ml_model_get_info(s->model).model_bytes, kv, n_threads, batch);
}

EMSCRIPTEN_KEEPALIVE void krafla_close(krafla_session* s) {
  if (s) destroy(s);
}

// The model and build as a JSON object (wasm/README.md lists the keys).
EMSCRIPTEN_KEEPALIVE const char* krafla_info_json(const krafla_session* s) { return s ? s->info : "{}"; }

// UTF-8 text (len bytes) to ids. Returns the number of ids, which may exceed cap: then nothing
// useful was written and the caller retries with a buffer that large. -status on error.
EMSCRIPTEN_KEEPALIVE int krafla_tokenize(const krafla_session* s, const char* text, int len, int add_bos, int32_t* ids,
                                         int cap) {
  clear_error();
  size_t n = 0;
  const ml_status st = ml_tokenize(ml_model_tokenizer(s->model), text, (size_t)len, add_bos, ids,
                                   (size_t)(cap < 0 ? 0 : cap), &n, &g_err);
  if (st == ML_OK || (st == ML_E_ARG && n > (size_t)cap)) {
    clear_error();
    return (int)n;
  }
  return -(int)st;
}

// The bytes of id's text after prev (-1 at the start), *len of them, as ml_run prints them: BOS
// and EOS give "". A piece may end inside a UTF-8 character (byte tokens). The pointer is valid
// until the next call.
EMSCRIPTEN_KEEPALIVE const char* krafla_piece(const krafla_session* s, int prev, int id, int* len) {
  size_t n = 0;
  const char* p = ml_token_piece(ml_model_tokenizer(s->model), prev, id, &n);
  *len = p ? (int)n : 0;
  return p ? p : "";
}

// tokenizer.decode(ids, skip_special_tokens) for a Hugging Face tokenizer (llama2.c: the pieces
// as if after BOS). Returns a malloc'd NUL-terminated string (*len bytes before the NUL) the caller
// frees, or 0 on error.
EMSCRIPTEN_KEEPALIVE char* krafla_detokenize(const krafla_session* s, const int32_t* ids, int n, int skip_special,
                                            int* len) {
  clear_error();
  *len = 0;
  const ml_tokenizer* t = ml_model_tokenizer(s->model);
  size_t need = 0;
  ml_status st = ml_detokenize(t, ids, (size_t)(n < 0 ? 0 : n), skip_special, nullptr, 0, &need, &g_err);
  if (st != ML_OK && !(st == ML_E_ARG && need > 0)) return nullptr;
  char* out = static_cast<char*>(std::malloc(need + 1));
  if (!out) return fail(ML_E_NOMEM, "detokenize: out of memory"), nullptr;
  st = ml_detokenize(t, ids, (size_t)n, skip_special, out, need, &need, &g_err);
  if (st != ML_OK) {
    std::free(out);
    return nullptr;
  }
  clear_error();
  out[need] = 0;
  *len = (int)need;
  return out;
}

// The chat template rendered over messages (a JSON array), as ml_chat_apply; extra (a JSON object
// or empty) and tmpl (a template replacing the model's, or empty) may have length 0. Returns a
// malloc'd NUL-terminated string the caller frees, or 0 on error.
EMSCRIPTEN_KEEPALIVE char* krafla_chat_apply(const krafla_session* s, const char* messages, int mlen, int add_gen,
                                            const char* extra, int elen, const char* tmpl, int tlen, int* len) {
  clear_error();
  *len = 0;
  ml_chat_params p{};
  p.messages = messages;
  p.messages_len = (size_t)mlen;
  p.add_generation_prompt = add_gen;
  if (elen > 0) p.extra = extra, p.extra_len = (size_t)elen;
  if (tlen > 0) p.chat_template = tmpl, p.chat_template_len = (size_t)tlen;
  char* out = nullptr;
  size_t n = 0;
  if (ml_chat_apply(ml_model_tokenizer(s->model), &p, &out, &n, &g_err) != ML_OK) return nullptr;
  *len = (int)n;
  return out;
}

// Whether id ends a turn (EOS, end-of-turn tokens): 1 or 0.
EMSCRIPTEN_KEEPALIVE int krafla_token_is_eog(const krafla_session* s, int id) {
  return ml_token_is_eog(ml_model_tokenizer(s->model), id);
}

// Keeps the session's first pos positions, then feeds ids[0, n) at positions [pos, pos + n) and
// computes the logits of the last. 0 or -status.
EMSCRIPTEN_KEEPALIVE int krafla_eval(krafla_session* s, const int32_t* ids, int n, int pos) {
  clear_error();
  if (n <= 0) return fail(ML_E_ARG, "eval: no tokens");
  if (pos != ml_session_pos(s->session) && ml_session_truncate(s->session, pos, &g_err) != ML_OK) return -(int)g_err.status;
  return -(int)ml_session_feed(s->exec, s->session, ids, (size_t)n, &g_err);
}

// The vocab_size logits of the last evaluated position.
EMSCRIPTEN_KEEPALIVE const float* krafla_logits(const krafla_session* s) { return ml_session_logits(s->session); }

// Sets the sampling parameters and restarts the generator (seed = seed_hi * 2^32 + seed_lo, as
// ml_run --seed). temperature 0 = greedy; top_p 1 = off; top_k 0 = off. 0 or -status.
EMSCRIPTEN_KEEPALIVE int krafla_sampler(krafla_session* s, float temperature, float top_p, int top_k, uint32_t seed_lo,
                                        uint32_t seed_hi) {
  clear_error();
  const ml_sampler_params p{temperature, top_p, top_k, ((uint64_t)seed_hi << 32) | seed_lo};
  return -(int)ml_session_set_sampler(s->session, &p, &g_err);
}

// The next id drawn from the current logits (not fed).
EMSCRIPTEN_KEEPALIVE int krafla_sample(krafla_session* s) { return ml_session_sample(s->session); }

// Starts a generation (ml_gen_start): keeps the session's first `keep` positions (0: a fresh
// sequence), feeds the prompt ids[0, n) and sets the sampling. stops: n_stops NUL-terminated
// UTF-8 stop strings back to back (copied). 0 or -status.
EMSCRIPTEN_KEEPALIVE int krafla_gen_start(krafla_session* s, int keep, const int32_t* ids, int n, int max_tokens,
                                          float temperature, float top_p, int top_k, uint32_t seed_lo,
                                          uint32_t seed_hi, int stop_at_eos, const char* stops, int stops_bytes,
                                          int n_stops) {
  clear_error();
  end_generation(s);
  if (n < 0 || n_stops < 0 || stops_bytes < 0) return fail(ML_E_ARG, "generate: negative count");
  if (ml_session_truncate(s->session, keep, &g_err) != ML_OK) return -(int)g_err.status;
  s->stops = static_cast<char*>(std::malloc((size_t)stops_bytes + 1));
  s->stop_ptrs = static_cast<const char**>(std::malloc(sizeof(char*) * (size_t)(n_stops + 1)));
  if (!s->stops || !s->stop_ptrs) {
    end_generation(s);
    return fail(ML_E_NOMEM, "generate: out of wasm memory for the stop strings");
  }
  std::memcpy(s->stops, stops, (size_t)stops_bytes);
  s->stops[stops_bytes] = 0;
  const char* at = s->stops;
  for (int i = 0; i < n_stops; ++i) {
    if (at >= s->stops + stops_bytes + 1) {
      end_generation(s);
      return fail(ML_E_ARG, "generate: the stop strings are not NUL-terminated");
    }
    s->stop_ptrs[i] = at;
    at += std::strlen(at) + 1;
  }
  ml_gen_params p{};
  p.max_tokens = max_tokens;
  p.temperature = temperature;
  p.top_p = top_p;
  p.top_k = top_k;
  p.seed = ((uint64_t)seed_hi << 32) | seed_lo;
  p.stop_at_eos = stop_at_eos;
  p.min_p = s->min_p;
  p.presence_penalty = s->presence_penalty;
  p.frequency_penalty = s->frequency_penalty;
  p.stop = s->stop_ptrs;
  p.n_stop = (size_t)n_stops;
  if (ml_gen_start(&s->gen, s->exec, s->session, ids, (size_t)n, &p, &g_err) != ML_OK) {
    end_generation(s);
    return -(int)g_err.status;
  }
  return 0;
}

// min_p and the presence and frequency penalties of the generations krafla_gen_start starts from
// now on (ml_gen_params'; all 0 = off, the default). ml_gen_start checks their ranges. Always 0.
EMSCRIPTEN_KEEPALIVE int krafla_gen_penalties(krafla_session* s, float min_p, float presence_penalty,
                                              float frequency_penalty) {
  s->min_p = min_p;
  s->presence_penalty = presence_penalty;
  s->frequency_penalty = frequency_penalty;
  return 0;
}

// One step (ml_gen_next): returns the text it releases (whole UTF-8 characters), *len bytes of
// it; out[0] = the sampled id (-1 when none), out[1] = 1 when generation has ended. Null on error.
EMSCRIPTEN_KEEPALIVE const char* krafla_gen_next(krafla_session* s, int* len, int32_t* out) {
  clear_error();
  *len = 0;
  out[0] = -1;
  out[1] = 1;
  if (!s->gen) {
    fail(ML_E_ARG, "generate: no generation in progress");
    return nullptr;
  }
  const char* text;
  size_t n;
  int done = 0;
  if (ml_gen_next(s->gen, &text, &n, &out[0], &done, &g_err) != ML_OK) return nullptr;
  *len = (int)n;
  out[1] = done;
  return text;
}

// Ends the generation now (an abort) and returns the text it still held, *len bytes.
EMSCRIPTEN_KEEPALIVE const char* krafla_gen_cancel(krafla_session* s, int* len) {
  *len = 0;
  if (!s->gen) return "";
  const char* text;
  size_t n;
  ml_gen_cancel(s->gen, &text, &n);
  *len = (int)n;
  return text;
}

// The generation's statistics as JSON: n_prompt, n_generated, prompt_seconds, gen_seconds,
// stop_reason ("length", "eos", "context", "abort", "stop").
EMSCRIPTEN_KEEPALIVE const char* krafla_gen_stats(krafla_session* s) {
  if (!s->gen) return "{}";
  static const char* const reasons[] = {"length", "eos", "context", "abort", "stop"};
  const ml_gen_stats st = ml_gen_get_stats(s->gen);
  std::snprintf(s->stats, sizeof s->stats,
                "{\"n_prompt\":%d,\"n_generated\":%d,\"prompt_seconds\":%.9g,\"gen_seconds\":%.9g,"
                "\"stop_reason\":\"%s\"}",
                st.n_prompt, st.n_generated, st.prompt_seconds, st.gen_seconds,
                st.stop_reason >= 0 && st.stop_reason <= 4 ? reasons[st.stop_reason] : "length");
  return s->stats;
}

// ml_convert llama2c on files of the module's in-memory file system (Module.FS): a llama2.c
// float32 checkpoint and its tokenizer.bin to an .mlb at out. wtype 0 q8, 1 q4; scales 0 f32, 1 f16.
// 0 or -status.
EMSCRIPTEN_KEEPALIVE int krafla_convert_llama2c(const char* checkpoint, const char* tokenizer, const char* out,
                                                int wtype, int scales) {
  clear_error();
  ml_convert_llama2c_params o = ml_convert_llama2c_defaults();
  o.checkpoint = checkpoint;
  o.tokenizer = tokenizer;
  o.out = out;
  o.wtype = wtype == 1 ? ML_DT_Q4 : ML_DT_Q8;
  o.scales_f16 = scales == 1;
  return -(int)ml_convert_llama2c(&o, &g_err);
}

}  // extern "C"
