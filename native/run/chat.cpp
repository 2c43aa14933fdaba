// ml_run --chat and -i: the model's chat template (krafla.h, ml_chat_apply) renders the whole
// conversation each turn; the session keeps the tokens it shares with what it already holds, so a
// turn costs only its new tokens. Rendering the whole conversation (rather than appending the
// new turn's text) keeps templates that rewrite earlier turns -- Qwen3 drops past reasoning --
// exactly right: the session just keeps the longest prefix that still matches.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli.h"
#include "run/run.h"

namespace ml::run {
namespace {

struct turn {
  std::string role, content;
};

std::string messages_json(const std::vector<turn>& conv) {
  std::string j = "[";
  for (size_t i = 0; i < conv.size(); ++i) {
    if (i) j += ',';
    j += "{\"role\":" + ml::cli::json_string(conv[i].role.data(), conv[i].role.size()) +
         ",\"content\":" + ml::cli::json_string(conv[i].content.data(), conv[i].content.size()) + "}";
  }
  return j + "]";
}

// Collects the reply's text while printing it.
int on_reply(void* user, int32_t id, const char* piece, size_t len, int generated) {
  if (generated) static_cast<std::string*>(user)->append(piece, len);
  return on_token(nullptr, id, piece, len, generated);
}

struct chat_state {
  engine* e;
  const options* o;
  std::string tmpl;
  std::vector<turn> conv;
};

// The ids of the conversation rendered with the assistant's turn opened.
int render(const chat_state& c, std::vector<int32_t>* ids) {
  const std::string msgs = messages_json(c.conv);
  ml_chat_params p{};
  p.messages = msgs.data();
  p.messages_len = msgs.size();
  p.add_generation_prompt = 1;
  if (!c.o->vars.empty()) p.extra = c.o->vars.data(), p.extra_len = c.o->vars.size();
  if (!c.tmpl.empty()) p.chat_template = c.tmpl.data(), p.chat_template_len = c.tmpl.size();
  const ml_tokenizer* tok = ml_model_tokenizer(c.e->model);
  char* text = nullptr;
  size_t len = 0, n = 0;
  ml_error err;
  if (ml_chat_apply(tok, &p, &text, &len, &err) != ML_OK) return ml::cli::report(PROG, err);
  // The template writes the special tokens itself: encode without adding any (transformers'
  // apply_chat_template(tokenize=True) does the same).
  ids->assign(len + 8, 0);
  ml_status s = ml_tokenize(tok, text, len, 0, ids->data(), ids->size(), &n, &err);
  if (s != ML_OK && n > ids->size()) {
    ids->assign(n, 0);
    s = ml_tokenize(tok, text, len, 0, ids->data(), ids->size(), &n, &err);
  }
  ml_free(text);
  if (s != ML_OK) return ml::cli::report(PROG, err);
  ids->resize(n);
  return -1;
}

// One assistant turn: feeds what the session lacks of the rendered conversation, generates and
// records the reply. Returns -1 to go on, else the exit code.
int reply(chat_state& c) {
  std::vector<int32_t> ids;
  if (const int rc = render(c, &ids); rc >= 0) return rc;
  ml_session* s = c.e->session;
  const int ctx = ml_session_ctx(s);
  if (ids.size() >= (size_t)ctx) {
    std::fprintf(stderr, "%s: the conversation has %zu tokens and no longer fits the context of %d (--ctx N for more)\n",
                 PROG, ids.size(), ctx);
    return c.o->interactive ? ml::cli::EXIT_OK : ml::cli::EXIT_USAGE;
  }
  // Keep the longest prefix the session already holds; at least one token is fed anew so that
  // there are logits to sample from.
  const int held = ml_session_pos(s);
  const int32_t* toks = ml_session_tokens(s);
  size_t keep = 0;
  while (keep < ids.size() && keep < (size_t)held && toks[keep] == ids[keep]) ++keep;
  if (keep == ids.size()) --keep;
  // A recurrent state (linear attention) cannot go back: reuse all of it or start over.
  if (ml_model_get_info(c.e->model).recurrent && keep != (size_t)held) keep = 0;
  ml_error err;
  if (ml_session_truncate(s, (int)keep, &err) != ML_OK) return ml::cli::report(PROG, err);
  ml_gen_params gp{};
  gp.max_tokens = c.o->steps;
  gp.temperature = c.o->temp;
  gp.top_p = c.o->top_p;
  gp.top_k = c.o->top_k;
  gp.min_p = c.o->min_p;
  gp.presence_penalty = c.o->presence_penalty;
  gp.frequency_penalty = c.o->frequency_penalty;
  gp.seed = c.o->seed;
  gp.stop_at_eos = 1;
  std::string text;
  ml_gen_stats st{};
  // The prompt's text is not printed: only the reply (the callback sees generated pieces).
  struct sink {
    static int cb(void* user, int32_t id, const char* piece, size_t len, int generated) {
      return generated ? on_reply(user, id, piece, len, generated) : 0;
    }
  };
  if (ml_generate(c.e->exec, s, ids.data() + keep, ids.size() - keep, &gp, sink::cb, &text, &st, &err) != ML_OK) {
    std::fputc('\n', stdout);
    return ml::cli::report(PROG, err);
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "%s: %d new prompt tokens (%d reused from the cache), %d generated, %.2f tok/s\n", PROG,
               st.n_prompt, (int)keep, st.n_generated, st.gen_seconds > 0 ? st.n_generated / st.gen_seconds : 0.0);
  c.conv.push_back({"assistant", text});
  if (st.stop_reason == ML_STOP_CONTEXT) {
    std::fprintf(stderr, "%s: the reply reached the context limit of %d tokens (--ctx N for more)\n", PROG, ctx);
    return ml::cli::EXIT_OK;
  }
  return -1;
}

}  // namespace

int run_chat(engine& e, options& o) {
  const ml_tokenizer* tok = ml_model_tokenizer(e.model);
  if (!tok) return ml::cli::usage_error(PROG, "--chat/-i: the model has no tokenizer");
  chat_state c{&e, &o, {}, {}};
  if (!o.chat_template.empty() && !ml::cli::read_file(o.chat_template, &c.tmpl))
    return ml::cli::usage_error(PROG, "--chat-template: cannot read " + o.chat_template);
  if (c.tmpl.empty() && !ml_tokenizer_has_chat_template(tok))
    return ml::cli::usage_error(PROG, "--chat/-i: the model's tokenizer has no chat template; give one with --chat-template FILE");
  if (!o.system.empty()) c.conv.push_back({"system", o.system});
  if (o.chat) {
    c.conv.push_back({"user", o.prompt});
    const int rc = reply(c);
    return rc >= 0 ? rc : ml::cli::EXIT_OK;
  }
  // -i: one user message a line; "\" at a line's end continues the message on the next line.
  const bool tty = isatty(0);
  std::string line, msg;
  for (;;) {
    if (tty) std::fprintf(stderr, msg.empty() ? "> " : ". ");
    line.clear();
    int ch;
    while ((ch = std::fgetc(stdin)) != EOF && ch != '\n') line += (char)ch;
    if (ch == EOF && line.empty()) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      msg += line + "\n";
      continue;
    }
    msg += line;
    if (msg.empty()) continue;
    c.conv.push_back({"user", std::move(msg)});
    msg.clear();
    if (const int rc = reply(c); rc >= 0) return rc;
    if (ch == EOF) break;
  }
  return ml::cli::EXIT_OK;
}

}  // namespace ml::run
