// ml_run's pieces shared by its files: the options, the engine it drives, and the chat modes
// (--chat: one reply; -i: a conversation on stdin), which live in chat.cpp.
#pragma once
#include <cstdint>
#include <string>

#include "krafla.h"

namespace ml::run {

inline const char* const PROG = "ml_run";

struct options {
  std::string model, tokenizer, prompt, tokens, dump_logits, kv = "f32";
  std::string system, chat_template, vars;  // --chat / -i
  bool chat = false, interactive = false;
  int steps = 256, top_k = 0, threads = 1, ctx = 0, batch = 128;
  bool no_pack = false, pack_cache = false, profile = false;
  float temp = 1.0f, top_p = 0.9f, min_p = 0.0f;
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  uint64_t seed = 0;
  bool seed_given = false;
};

// The model, the executor and the one session ml_run drives.
struct engine {
  ml_model* model = nullptr;
  ml_exec* exec = nullptr;
  ml_session* session = nullptr;
  ~engine() {
    ml_session_free(session);
    ml_exec_free(exec);
    ml_model_close(model);
  }
};

// Writes generated text to stdout as it comes (ml_token_cb).
int on_token(void* user, int32_t id, const char* piece, size_t len, int generated);

// --chat and -i (chat.cpp): the model's chat template over -s and -p (or stdin's lines), with the
// session's cache kept between turns. Returns the exit code.
int run_chat(engine& e, options& o);

}  // namespace ml::run
