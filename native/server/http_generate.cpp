// POST /v1/chat/completions and /v1/completions (docs/server.md): the request (api.h) to a prompt
// of token ids, a job on the scheduler, and its events to OpenAI's response, or to server-sent
// events when streamed. A chat is rendered and tokenized exactly as `ml_run --chat` does (the
// template writes the special tokens; nothing is added), so a greedy reply equals ml_run's.
#include <chrono>
#include <ctime>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "http_server.h"

namespace server {

namespace {

using ms = std::chrono::milliseconds;

// Random ids and seeds, from one generator seeded by the OS.
uint64_t random_u64() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lk(mu);
  return rng();
}

std::string random_id(const char* prefix) {
  static const char ALNUM[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += ALNUM[random_u64() % 62];
  return id;
}

// The chat's messages through the chat template, then tokenized without adding special tokens.
bool chat_prompt(const server_context& c, const gen_request& rq, std::vector<int32_t>* ids, api_error* err) {
  if (!c.tok) {
    *err = make_error(400, "the model has no tokenizer, so it cannot chat", "invalid_request_error", "messages");
    return false;
  }
  if (c.chat_template.empty() && !ml_tokenizer_has_chat_template(c.tok)) {
    *err = make_error(400, "the model has no chat template: start the server with --chat-template FILE, or use /v1/completions",
                      "invalid_request_error", "messages");
    return false;
  }
  ml_chat_params p{};
  p.messages = rq.messages_json.data();
  p.messages_len = rq.messages_json.size();
  p.add_generation_prompt = 1;
  if (!rq.extra_json.empty()) p.extra = rq.extra_json.data(), p.extra_len = rq.extra_json.size();
  if (!c.chat_template.empty()) p.chat_template = c.chat_template.data(), p.chat_template_len = c.chat_template.size();
  char* text = nullptr;
  size_t len = 0;
  ml_error e;
  if (ml_chat_apply(c.tok, &p, &text, &len, &e) != ML_OK) {
    *err = make_error(400, std::string("the chat template failed: ") + e.msg, "invalid_request_error", "messages");
    return false;
  }
  const std::string rendered(text, len);
  ml_free(text);
  return tokenize_text(c.tok, rendered, false, ids, err, "messages");
}

// A completion's prompt: its ids as given, or its text tokenized with the special tokens the
// tokenizer adds (BOS), as `ml_run -p` does.
bool completion_prompt(const server_context& c, const gen_request& rq, std::vector<int32_t>* ids, api_error* err) {
  if (!rq.prompt_ids.empty()) {
    const int vocab = ml_model_get_info(c.model).vocab_size;
    for (size_t i = 0; i < rq.prompt_ids.size(); ++i)
      if (rq.prompt_ids[i] < 0 || rq.prompt_ids[i] >= vocab) {
        *err = make_error(400, "token id " + std::to_string(rq.prompt_ids[i]) + " is outside the vocabulary 0.." +
                                   std::to_string(vocab - 1),
                          "invalid_request_error", "prompt");
        return false;
      }
    *ids = rq.prompt_ids;
    return true;
  }
  return tokenize_text(c.tok, rq.prompt, true, ids, err, "prompt");
}

const char* finish_reason(int stop_reason) {
  return stop_reason == ML_STOP_LENGTH || stop_reason == ML_STOP_CONTEXT ? "length" : "stop";
}

// Turns a step's tokens into the API's logprobs: each alternative's text after the same previous
// token as the sampled one.
struct logprob_writer {
  const ml_tokenizer* tok;
  int32_t prev;
  std::vector<token_logprob> convert(const std::vector<job_token>& tokens) {
    std::vector<token_logprob> out;
    for (const job_token& t : tokens) {
      token_logprob lp;
      lp.text = t.piece;
      lp.logprob = t.logprob;
      for (const auto& [id, v] : t.top) {
        size_t n = 0;
        const char* p = tok ? ml_token_piece(tok, prev, id, &n) : nullptr;
        lp.top.emplace_back(std::string(p ? p : "", n), v);
      }
      out.push_back(std::move(lp));
      prev = t.id;
    }
    return out;
  }
};

// Waits for a job's next event. Bounded by the job: every job ends (its tokens, its context, a
// cancel, the drain).
job_event next_event(job& j) {
  job_event ev;
  while (!j.next(ev, ms(1000))) {
  }
  return ev;
}

// A job's error before its first token is the engine refusing the request's settings (ML_E_ARG
// from ml_gen_start: 400); after it, a failure of the engine (500).
api_error engine_error(const std::string& message, bool started) {
  if (!started) return make_error(400, "the request cannot be served: " + message, "invalid_request_error");
  return make_error(500, "generation failed: " + message, "server_error");
}

void apply_done(gen_result& r, const job_event& ev) {
  r.finish_reason = finish_reason(ev.stop_reason);
  r.use.prompt_tokens = ev.prompt_tokens;
  r.use.completion_tokens = ev.completion_tokens;
  r.use.cached_tokens = ev.cached_tokens;
}

void reply_whole(const gen_request& rq, gen_result head, job& j, logprob_writer lw, httplib::Response& res) {
  for (bool started = false;; started = true) {
    job_event ev = next_event(j);
    if (ev.kind == job_event::error) return send_error(res, engine_error(ev.message, started));
    head.text += ev.text;
    if (rq.logprobs >= 0)
      for (token_logprob& lp : lw.convert(ev.tokens)) head.logprobs.push_back(std::move(lp));
    if (ev.kind == job_event::done) {
      apply_done(head, ev);
      break;
    }
  }
  res.set_content(rq.kind == endpoint::chat ? chat_completion_json(rq, head) : completion_json(rq, head),
                  "application/json");
}

// A streamed reply: the provider writes each event as `data: {chunk}\n\n` and ends with
// `data: [DONE]`. A failed write means the client is gone: its job is cancelled (the releaser
// runs on every end, and cancels whenever the stream did not finish).
struct stream_state {
  explicit stream_state(std::atomic<int>* in_flight) : guard(in_flight) {}
  in_flight_guard guard;
  gen_request rq;
  gen_result head;
  std::shared_ptr<job> j;
  logprob_writer lw;
  job_event first;  // taken before the response began (an error there is a plain HTTP error)
  bool have_first = true, role_sent = false;
  size_t sent = 0;  // bytes of the tokens streamed so far (completions' logprobs.text_offset)
};

bool write_data(httplib::DataSink& sink, const std::string& payload) {
  const std::string frame = "data: " + payload + "\n\n";
  return sink.write(frame.data(), frame.size());
}

bool stream_step(stream_state& s, httplib::DataSink& sink) {
  const bool chat = s.rq.kind == endpoint::chat;
  if (chat && !s.role_sent) {
    s.role_sent = true;
    const std::string role = "assistant";
    if (!write_data(sink, chat_chunk_json(s.rq, s.head, &role, "", {}, ""))) return false;
  }
  job_event ev;
  if (s.have_first) {
    ev = std::move(s.first);
    s.have_first = false;
  } else if (!s.j->next(ev, ms(500))) {
    return true;  // nothing yet: cpp-httplib calls again
  }
  if (ev.kind == job_event::error) {
    write_data(sink, error_json(engine_error(ev.message, true)));
    sink.done();
    return true;
  }
  std::vector<token_logprob> lps;
  if (s.rq.logprobs >= 0) lps = s.lw.convert(ev.tokens);
  if (!ev.text.empty() || !lps.empty()) {
    s.head.text_offset = s.sent;
    const std::string body = chat ? chat_chunk_json(s.rq, s.head, nullptr, ev.text, lps, "")
                                  : completion_chunk_json(s.rq, s.head, ev.text, lps, "");
    if (!write_data(sink, body)) return false;
  }
  // Counted by the tokens' own bytes, as the whole reply counts them: released text may lag a
  // token (a character split across byte tokens, a possible stop string held back).
  for (const job_token& t : ev.tokens) s.sent += t.piece.size();
  if (ev.kind == job_event::done) {
    apply_done(s.head, ev);
    const std::string last = chat ? chat_chunk_json(s.rq, s.head, nullptr, "", {}, s.head.finish_reason)
                                  : completion_chunk_json(s.rq, s.head, "", {}, s.head.finish_reason);
    if (!write_data(sink, last)) return false;
    if (s.rq.include_usage && !write_data(sink, usage_chunk_json(s.rq, s.head))) return false;
    const std::string done = "data: [DONE]\n\n";
    if (!sink.write(done.data(), done.size())) return false;
    sink.done();
  }
  return true;
}

}  // namespace

void handle_generate(server_context& c, endpoint kind, const httplib::Request& req, httplib::Response& res) {
  if (!c.ready.load())
    return send_error(res, make_error(503, "the model is still loading", "server_error", "", "model_loading"));
  in_flight_guard guard(&c.in_flight);
  gen_request rq;
  api_error err;
  const bool parsed = kind == endpoint::chat ? parse_chat_request(req.body, rq, err) : parse_completion_request(req.body, rq, err);
  if (!parsed) return send_error(res, err);
  std::vector<int32_t> prompt;
  if (!(kind == endpoint::chat ? chat_prompt(c, rq, &prompt, &err) : completion_prompt(c, rq, &prompt, &err)))
    return send_error(res, err);
  const int ctx = c.sched->slot_ctx();
  if (prompt.empty())
    return send_error(res, make_error(400, "the prompt is empty (it has no tokens)", "invalid_request_error", "prompt"));
  // The prompt and at least one generated token must fit a slot.
  if (prompt.size() + 1 > (size_t)ctx)
    return send_error(res, make_error(400,
                                      "This model's maximum context length is " + std::to_string(ctx) +
                                          " tokens. However, your messages resulted in " + std::to_string(prompt.size()) +
                                          " tokens, and the reply needs at least one more.",
                                      "invalid_request_error", kind == endpoint::chat ? "messages" : "prompt",
                                      "context_length_exceeded"));
  job_params jp;
  jp.prompt = prompt;
  jp.max_tokens = rq.max_tokens;
  jp.temperature = rq.temperature;
  jp.top_p = rq.top_p;
  jp.top_k = rq.top_k;
  jp.min_p = rq.min_p;
  jp.seed = rq.has_seed ? rq.seed : random_u64();
  jp.presence_penalty = rq.presence_penalty;
  jp.frequency_penalty = rq.frequency_penalty;
  jp.stop = rq.stop;
  jp.logprobs = rq.logprobs;
  std::string why;
  std::shared_ptr<job> j = c.sched->submit(std::move(jp), &why);
  if (!j) return send_error(res, make_error(503, why, "server_error", "", "server_busy"));

  gen_result head;
  head.id = random_id(kind == endpoint::chat ? "chatcmpl-" : "cmpl-");
  head.created = (int64_t)std::time(nullptr);
  head.model = rq.model.empty() ? c.model_id : rq.model;
  head.system_fingerprint = c.fingerprint;
  logprob_writer lw{c.tok, prompt.back()};
  if (!rq.stream) return reply_whole(rq, std::move(head), *j, lw, res);

  // The first event comes after the prompt is fed: an error there (a refused sampling setting)
  // is still a plain HTTP error, before any byte of the stream.
  auto st = std::make_shared<stream_state>(&c.in_flight);
  st->first = next_event(*j);
  if (st->first.kind == job_event::error) return send_error(res, engine_error(st->first.message, false));
  st->rq = std::move(rq);
  st->head = std::move(head);
  st->j = j;
  st->lw = lw;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx in front: pass each event on at once
  res.set_chunked_content_provider(
      "text/event-stream",
      [st](size_t, httplib::DataSink& sink) {
        if (stream_step(*st, sink)) return true;
        st->j->cancel();
        return false;
      },
      [st](bool success) {
        if (!success) st->j->cancel();
      });
}

}  // namespace server
