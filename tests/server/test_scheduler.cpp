// The scheduler (native/server/scheduler.h) against the engine run alone: every job, whatever runs
// beside it, whatever the slot held before and however its prompt was split into chunks, gives
// the ids and text of the same generation on a fresh session of its own (ml_gen_start/ml_gen_next
// with the whole prompt). Plus cancel, the queue bound, drain, logprobs (recomputed here in long
// double from the solo run's logits) and a recurrent model's prefix rule.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "krafla.h"
#include "scheduler.h"

namespace {

using ms = std::chrono::milliseconds;

std::string tmp(const std::string& name) {
  static const std::string dir = [] {
    char t[] = "/tmp/krafla-sched-XXXXXX";
    const char* d = mkdtemp(t);
    return std::string(d ? d : "/tmp");
  }();
  return dir + "/" + name;
}

std::string shared(const std::string& rel) {
  const char* s = std::getenv("KRAFLA_SHARED");
  return std::string(s && *s ? s : ML_SHARED_DIR_DEFAULT) + "/" + rel;
}

// A random Llama with tok512's vocabulary (so there is text, byte tokens and all), written once.
std::string llama_model() {
  static std::string path;
  if (!path.empty()) return path;
  path = tmp("llama.mlb");
  const std::string tok = shared("models/tok512.bin");
  ml_convert_random_params p = ml_convert_random_defaults();
  p.dim = 64;
  p.hidden = 128;
  p.layers = 2;
  p.heads = 4;
  p.kv_heads = 2;
  p.vocab = 512;
  p.max_seq = 1024;
  p.seed = 5;
  p.tokenizer = tok.c_str();
  p.out = path.c_str();
  ml_error err;
  const ml_status s = ml_convert_random(&p, &err);
  INFO(err.msg);
  REQUIRE(s == ML_OK);
  return path;
}

// Qwen3.5's hybrid layers (linear attention: a recurrent state), shortened from its real config.
std::string recurrent_model() {
  static std::string path;
  if (!path.empty()) return path;
  std::ifstream in(shared("data/hf/qwen3.5-0.8b/config.reconstructed.json"));
  REQUIRE(in.good());
  nlohmann::json c = nlohmann::json::parse(in);
  nlohmann::json& t = c.contains("text_config") ? c["text_config"] : c;
  t["hidden_size"] = 64;
  t["intermediate_size"] = 96;
  t["num_attention_heads"] = 4;
  t["num_key_value_heads"] = 2;
  t["head_dim"] = 32;
  t["max_position_embeddings"] = 256;
  t["num_hidden_layers"] = 2;
  t["layer_types"] = {"linear_attention", "full_attention"};
  t["full_attention_interval"] = 2;
  t["linear_num_key_heads"] = 2;
  t["linear_num_value_heads"] = 4;
  t["linear_key_head_dim"] = 16;
  t["linear_value_head_dim"] = 16;
  const std::string cfg = tmp("qwen35.json");
  std::ofstream(cfg) << c.dump();
  path = tmp("qwen35.mlb");
  ml_convert_random_params p = ml_convert_random_defaults();
  p.config = cfg.c_str();
  p.vocab = 128;
  p.seed = 3;
  p.out = path.c_str();
  ml_error err;
  const ml_status s = ml_convert_random(&p, &err);
  INFO(err.msg);
  REQUIRE(s == ML_OK);
  return path;
}

struct model_handle {
  ml_model* m = nullptr;
  explicit model_handle(const std::string& path) {
    ml_error err;
    const ml_status s = ml_model_open(&m, path.c_str(), nullptr, &err);
    INFO(err.msg);
    REQUIRE(s == ML_OK);
  }
  ~model_handle() { ml_model_close(m); }
};

struct reply {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<double> logprobs;
  std::vector<std::vector<std::pair<int32_t, double>>> tops;
  int stop_reason = -1, completion_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
  bool error = false;
  std::string message;
  bool operator==(const reply& o) const {
    return text == o.text && ids == o.ids && stop_reason == o.stop_reason && completion_tokens == o.completion_tokens;
  }
};

std::ostream& operator<<(std::ostream& os, const reply& r) {
  os << "{text '" << r.text << "', " << r.ids.size() << " ids, stop " << r.stop_reason << ", generated "
     << r.completion_tokens << "}";
  return os;
}

// The oracle: the same generation on a fresh session, one thread, the whole prompt at once.
// Logprobs are recomputed here in long double from the session's logits after each sample.
reply solo(const ml_model* m, const server::job_params& p) {
  ml_exec* e = nullptr;
  ml_session* s = nullptr;
  ml_exec_params ep{};
  ep.n_threads = 1;
  ml_error err;
  REQUIRE(ml_exec_create(&e, m, &ep, &err) == ML_OK);
  REQUIRE(ml_session_create(&s, m, nullptr, &err) == ML_OK);
  std::vector<const char*> stops;
  for (const auto& x : p.stop) stops.push_back(x.c_str());
  ml_gen_params gp{};
  gp.max_tokens = p.max_tokens < 0 ? INT_MAX : p.max_tokens;  // as sched_step.cpp's start_gen
  gp.temperature = p.temperature;
  gp.top_p = p.top_p;
  gp.top_k = p.top_k;
  gp.seed = p.seed;
  gp.stop_at_eos = 1;
  gp.stop = stops.data();
  gp.n_stop = stops.size();
  gp.min_p = p.min_p;
  gp.presence_penalty = p.presence_penalty;
  gp.frequency_penalty = p.frequency_penalty;
  ml_gen* g = nullptr;
  REQUIRE(ml_gen_start(&g, e, s, p.prompt.data(), p.prompt.size(), &gp, &err) == ML_OK);
  reply r;
  const int vocab = ml_model_get_info(m).vocab_size;
  for (int done = 0; !done;) {
    const char* text;
    size_t len;
    int32_t id;
    REQUIRE(ml_gen_next(g, &text, &len, &id, &done, &err) == ML_OK);
    r.text.append(text, len);
    if (id < 0 || (done && ml_gen_get_stats(g).stop_reason == ML_STOP_EOS)) continue;
    r.ids.push_back(id);
    const float* l = ml_session_logits(s);
    long double mx = l[0], sum = 0;
    for (int i = 0; i < vocab; ++i) mx = std::max(mx, (long double)l[i]);
    for (int i = 0; i < vocab; ++i) sum += std::exp((long double)l[i] - mx);
    r.logprobs.push_back((double)((long double)l[id] - mx - std::log(sum)));
  }
  const ml_gen_stats st = ml_gen_get_stats(g);
  r.stop_reason = st.stop_reason;
  r.completion_tokens = st.n_generated;
  ml_gen_free(g);
  ml_session_free(s);
  ml_exec_free(e);
  return r;
}

// Reads a job's events to the end (bounded: 60 s).
reply collect(const std::shared_ptr<server::job>& j) {
  reply r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    server::job_event ev;
    if (!j->next(ev, ms(100))) continue;
    if (ev.kind == server::job_event::error) {
      r.error = true;
      r.message = ev.message;
      return r;
    }
    r.text += ev.text;
    for (const auto& t : ev.tokens) {
      r.ids.push_back(t.id);
      r.logprobs.push_back(t.logprob);
      r.tops.push_back(t.top);
    }
    if (ev.kind == server::job_event::done) {
      r.stop_reason = ev.stop_reason;
      r.completion_tokens = ev.completion_tokens;
      r.prompt_tokens = ev.prompt_tokens;
      r.cached_tokens = ev.cached_tokens;
      return r;
    }
  }
  FAIL("the job sent no final event within 60 s");
  return r;
}

std::vector<int32_t> random_prompt(uint32_t seed, size_t n, int vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids{1};
  while (ids.size() < n) ids.push_back(3 + (int32_t)(rng() % (uint32_t)(vocab - 3)));
  return ids;
}

server::job_params params(std::vector<int32_t> prompt, uint64_t seed, int max_tokens = 40) {
  server::job_params p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.seed = seed;
  return p;
}

std::unique_ptr<server::scheduler> make(const ml_model* m, int parallel, int queue = 64, int prefill_chunk = 0,
                                        int threads = 2) {
  server::scheduler_options o;
  o.parallel = parallel;
  o.queue = queue;
  o.threads = threads;
  o.prefill_chunk = prefill_chunk;
  std::string err;
  auto s = server::scheduler::create(m, o, &err);
  INFO(err);
  REQUIRE(s);
  return s;
}

std::shared_ptr<server::job> submit(server::scheduler& s, const server::job_params& p) {
  std::string err;
  auto j = s.submit(p, &err);
  INFO(err);
  REQUIRE(j);
  return j;
}

}  // namespace

TEST_CASE("scheduler: concurrent jobs give what each gives alone", "[server][scheduler]") {
  model_handle m(llama_model());
  // Prompts long enough to take several chunks of 7 while the others decode; one greedy, one with
  // top-k, two with stop strings, two with min_p and penalties, one cut by max_tokens 0.
  std::vector<server::job_params> ps;
  for (uint32_t i = 0; i < 8; ++i) ps.push_back(params(random_prompt(100 + i, 5 + 9 * i, 512), 1000 + i, 30 + 5 * (int)i));
  ps[1].temperature = 0;
  ps[2].top_k = 5;
  ps[7].max_tokens = 0;
  ps[4].min_p = 0.05f;  // the engine's min_p and OpenAI's penalties, passed through
  ps[4].presence_penalty = 0.7f;
  ps[6].frequency_penalty = 1.5f;
  std::vector<reply> alone;
  for (const auto& p : ps) alone.push_back(solo(m.m, p));
  // Stop strings taken from the middle of the unstopped replies, so that they do match.
  for (int i : {3, 5}) {
    REQUIRE(alone[(size_t)i].text.size() > 12);
    ps[(size_t)i].stop = {alone[(size_t)i].text.substr(8, 3), "\x01never"};
    const reply cut = solo(m.m, ps[(size_t)i]);
    CHECK(cut.stop_reason == ML_STOP_STRING);
    CHECK(cut.text == alone[(size_t)i].text.substr(0, alone[(size_t)i].text.find(ps[(size_t)i].stop[0])));
    alone[(size_t)i] = cut;
  }
  for (int prefill_chunk : {0, 7}) {
    auto s = make(m.m, 4, 64, prefill_chunk);
    std::vector<std::shared_ptr<server::job>> jobs;
    for (const auto& p : ps) jobs.push_back(submit(*s, p));
    for (size_t i = 0; i < ps.size(); ++i) {
      INFO("job " << i << ", prefill_chunk " << prefill_chunk);
      const reply r = collect(jobs[i]);
      CHECK(r == alone[i]);
      CHECK(r.prompt_tokens == (int)ps[i].prompt.size());
    }
    const server::scheduler_metrics mt = s->metrics();
    CHECK(mt.requests == ps.size());
    CHECK(mt.active_slots == 0);
    CHECK(mt.queue_depth == 0);
    CHECK(mt.slots == 4);
    uint64_t gen = 0;
    for (const auto& a : alone) gen += (uint64_t)a.completion_tokens;
    CHECK(mt.generated_tokens == gen);
  }
}

TEST_CASE("scheduler: the same reply cold, warm, after other jobs and interleaved", "[server][scheduler]") {
  model_handle m(llama_model());
  const server::job_params p = params(random_prompt(7, 40, 512), 42, 24);
  const reply want = solo(m.m, p);
  auto s = make(m.m, 2, 64, 5);
  const reply cold = collect(submit(*s, p));
  CHECK(cold == want);
  CHECK(cold.cached_tokens == 0);
  const reply warm = collect(submit(*s, p));
  CHECK(warm == want);
  CHECK(warm.cached_tokens == (int)p.prompt.size() - 1);  // all but the one fed for logits
  // A prompt sharing the first 20 tokens, then p again.
  server::job_params q = params(random_prompt(7, 20, 512), 5, 10);
  for (int32_t id : random_prompt(8, 15, 512)) q.prompt.push_back(id);
  const reply other = collect(submit(*s, q));
  CHECK(other == solo(m.m, q));
  CHECK(other.cached_tokens >= 20);
  CHECK(collect(submit(*s, p)) == want);
  // Interleaved: p among five others on two slots (some wait in the queue).
  std::vector<std::shared_ptr<server::job>> jobs;
  std::vector<server::job_params> others;
  for (uint32_t i = 0; i < 5; ++i) others.push_back(params(random_prompt(200 + i, 10 + 6 * i, 512), 7 + i, 15));
  for (size_t i = 0; i < others.size(); ++i) {
    jobs.push_back(submit(*s, others[i]));
    if (i == 2) jobs.push_back(submit(*s, p));
  }
  for (size_t i = 0, k = 0; i < jobs.size(); ++i) {
    const reply r = collect(jobs[i]);
    if (i == 3) {
      CHECK(r == want);
    } else {
      CHECK(r == solo(m.m, others[k]));
      ++k;
    }
  }
  // A second turn: the first turn's prompt and reply, then more. The slot keeps all of it but the
  // last sampled token (never fed).
  server::job_params turn2 = p;
  turn2.prompt.insert(turn2.prompt.end(), want.ids.begin(), want.ids.end());
  for (int32_t id : random_prompt(9, 6, 512)) turn2.prompt.push_back(id);
  auto s2 = make(m.m, 1);
  REQUIRE(collect(submit(*s2, p)) == want);
  const reply r2 = collect(submit(*s2, turn2));
  CHECK(r2 == solo(m.m, turn2));
  // (an EOS is neither in ids nor fed; a last token cut by max_tokens is in ids, not fed)
  CHECK(r2.cached_tokens == (int)(p.prompt.size() + want.ids.size()) - (want.stop_reason == ML_STOP_EOS ? 0 : 1));
}

TEST_CASE("scheduler: logprobs are the log-softmax of the logits the token was drawn from", "[server][scheduler]") {
  model_handle m(llama_model());
  server::job_params p = params(random_prompt(11, 12, 512), 3, 20);
  p.logprobs = 4;
  const reply want = solo(m.m, p);
  auto s = make(m.m, 2);
  auto other = submit(*s, params(random_prompt(12, 30, 512), 4, 30));  // shares the steps
  const reply r = collect(submit(*s, p));
  collect(other);
  REQUIRE(r == want);
  REQUIRE(r.logprobs.size() == want.logprobs.size());
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    CHECK(std::fabs(r.logprobs[i] - want.logprobs[i]) < 1e-9);
    REQUIRE(r.tops[i].size() == 4);
    for (size_t k = 1; k < 4; ++k) CHECK(r.tops[i][k - 1].second >= r.tops[i][k].second);
    CHECK(r.tops[i][0].second >= r.logprobs[i]);
    CHECK(r.tops[i][0].second <= 0.0);
  }
  // Greedy: the sampled token is the most probable one.
  p.temperature = 0;
  const reply g = collect(submit(*s, p));
  REQUIRE(!g.ids.empty());
  for (size_t i = 0; i < g.ids.size(); ++i) {
    CHECK(g.tops[i][0].first == g.ids[i]);
    CHECK(g.tops[i][0].second == g.logprobs[i]);
  }
}

// A job that runs long: greedy until the context ends (1000 positions of a tiny model), from a
// prompt whose solo run samples no EOS in its first 400 tokens, so that only a cancel ends it soon.
server::job_params long_job(const ml_model* m, uint32_t seed) {
  for (uint32_t s = seed; s < seed + 100; ++s) {
    server::job_params p = params(random_prompt(s, 8, 512), s, 400);
    p.temperature = 0;
    if (solo(m, p).stop_reason != ML_STOP_LENGTH) continue;
    p.max_tokens = -1;
    return p;
  }
  FAIL("no prompt of 100 ran 400 tokens without EOS");
  return {};
}

TEST_CASE("scheduler: cancel ends a job at the next step and frees its slot", "[server][scheduler]") {
  model_handle m(llama_model());
  auto s = make(m.m, 1, 4);
  auto j = submit(*s, long_job(m.m, 21));
  server::job_event ev;
  REQUIRE(j->next(ev, ms(30000)));  // it is generating
  j->cancel();
  const reply r = collect(j);
  CHECK(r.stop_reason == ML_STOP_CALLBACK);
  CHECK(r.completion_tokens < 1000);
  CHECK(s->metrics().active_slots == 0);
  // The slot serves the next job, whose reply does not depend on the cancelled one.
  const server::job_params p = params(random_prompt(22, 9, 512), 8, 12);
  CHECK(collect(submit(*s, p)) == solo(m.m, p));
  // A queued job cancelled before it starts ends without running.
  const server::job_params la = long_job(m.m, 23);
  auto a = submit(*s, la);
  auto b = submit(*s, p);
  b->cancel();
  const reply rb = collect(b);
  CHECK(rb.stop_reason == ML_STOP_CALLBACK);
  CHECK(rb.completion_tokens == 0);
  a->cancel();
  CHECK(collect(a).stop_reason == ML_STOP_CALLBACK);
}

TEST_CASE("scheduler: the queue bound refuses, drain finishes what runs and refuses the rest", "[server][scheduler]") {
  model_handle m(llama_model());
  auto s = make(m.m, 1, 1);
  const server::job_params la = long_job(m.m, 31), lb = long_job(m.m, 32), lc = long_job(m.m, 33);
  auto a = submit(*s, la);
  auto b = submit(*s, lb);
  std::string err;
  CHECK(s->submit(lc, &err) == nullptr);
  CHECK(err.find("queue is full") != std::string::npos);
  a->cancel();
  b->cancel();
  collect(a);
  collect(b);
  CHECK(s->submit(long_job(m.m, 34), &err) != nullptr);  // room again (its job ends with the scheduler)

  auto s2 = make(m.m, 2, 4);
  std::vector<server::job_params> ps;
  std::vector<std::shared_ptr<server::job>> jobs;
  for (uint32_t i = 0; i < 4; ++i) {
    ps.push_back(params(random_prompt(40 + i, 10, 512), i, 20));
    jobs.push_back(submit(*s2, ps.back()));
  }
  s2->drain(ms(60000));
  for (size_t i = 0; i < jobs.size(); ++i) CHECK(collect(jobs[i]) == solo(m.m, ps[i]));
  CHECK(s2->submit(ps[0], &err) == nullptr);
  CHECK(err.find("shutting down") != std::string::npos);
  // A drain that times out cancels what still runs.
  auto s3 = make(m.m, 1, 4);
  auto c = submit(*s3, long_job(m.m, 35));
  server::job_event first;
  REQUIRE(c->next(first, ms(30000)));
  s3->drain(ms(0));
  CHECK(collect(c).stop_reason == ML_STOP_CALLBACK);
}

TEST_CASE("scheduler: bad jobs are refused", "[server][scheduler]") {
  model_handle m(llama_model());
  auto s = make(m.m, 1);
  std::string err;
  CHECK(s->submit(params({}, 1), &err) == nullptr);
  CHECK(err.find("empty") != std::string::npos);
  CHECK(s->submit(params({1, 600}, 1), &err) == nullptr);
  CHECK(err.find("600") != std::string::npos);
  CHECK(s->submit(params(std::vector<int32_t>((size_t)s->slot_ctx() + 1, 5), 1), &err) == nullptr);
  CHECK(err.find("context") != std::string::npos);
  server::scheduler_options o;
  o.parallel = 0;
  CHECK(server::scheduler::create(m.m, o, &err) == nullptr);
  CHECK(err.find("parallel") != std::string::npos);
}

TEST_CASE("scheduler: a recurrent model reuses only an exact continuation and replies the same", "[server][scheduler]") {
  model_handle m(recurrent_model());
  REQUIRE(ml_model_get_info(m.m).recurrent == 1);
  const server::job_params p = params(random_prompt(51, 20, 128), 1, 12);
  const reply want = solo(m.m, p);
  REQUIRE(want.stop_reason == ML_STOP_LENGTH);
  auto s = make(m.m, 1);
  CHECK(collect(submit(*s, p)) == want);
  // The same prompt again: the state cannot go back one token, so nothing is reused.
  const reply again = collect(submit(*s, p));
  CHECK(again == want);
  CHECK(again.cached_tokens == 0);
  // An exact continuation of what the slot holds (prompt + reply but the last token) is reused.
  REQUIRE(collect(submit(*s, p)) == want);
  server::job_params turn2 = p;
  turn2.prompt.insert(turn2.prompt.end(), want.ids.begin(), want.ids.end() - 1);
  for (int32_t id : random_prompt(52, 5, 128)) turn2.prompt.push_back(id);
  const reply r2 = collect(submit(*s, turn2));
  CHECK(r2 == solo(m.m, turn2));
  CHECK(r2.cached_tokens == (int)(p.prompt.size() + want.ids.size()) - 1);
  // A prompt that shares a prefix but is no continuation starts over.
  server::job_params fork = p;
  fork.prompt.back() = (fork.prompt.back() + 1) % 128;
  const reply rf = collect(submit(*s, fork));
  CHECK(rf == solo(m.m, fork));
  CHECK(rf.cached_tokens == 0);
}
