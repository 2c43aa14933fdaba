// Generations stepped together as ml_server's continuous batching does (krafla.h,
// ml_gen_take_pending): each step takes every generation's pending token, feeds them all in one
// ml_eval_batch with logits, then calls ml_gen_next on each. The oracle is each generation run
// alone through ml_generate on its own session and executor: the text, the ids and the stop
// reason must be identical. Also: a prompt prefilled through ml_eval_batch in chunks, then
// ml_gen_start with no prompt, generates what ml_gen_start feeding the prompt itself does.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "api/api_fixture.h"

namespace {

struct spec {
  std::string prompt;
  float temperature = 0.0f, top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f, presence = 0.0f, frequency = 0.0f;
  uint64_t seed = 0;
  int max_tokens = 0;
  std::vector<std::string> stops;
  int ctx = 0;  // the session's context; 0: the model's
};

struct outcome {
  std::string text;
  std::vector<int32_t> ids;  // the ids ml_generate's callback is told of
  ml_gen_stats st{};
};

ml_gen_params params_of(const spec& s, std::vector<const char*>* stop_ptrs) {
  stop_ptrs->clear();
  for (const std::string& x : s.stops) stop_ptrs->push_back(x.c_str());
  ml_gen_params p{};
  p.max_tokens = s.max_tokens;
  p.temperature = s.temperature;
  p.top_p = s.top_p;
  p.top_k = s.top_k;
  p.min_p = s.min_p;
  p.presence_penalty = s.presence;
  p.frequency_penalty = s.frequency;
  p.seed = s.seed;
  p.stop_at_eos = 1;
  p.stop = stop_ptrs->data();
  p.n_stop = stop_ptrs->size();
  return p;
}

// One ml_gen_next result recorded as ml_generate reports it: the piece, and the id unless the
// step ends generation without text.
void record(outcome* o, const char* text, size_t len, int32_t id, int done) {
  o->text.append(text, len);
  if ((len > 0 || !done) && id >= 0) o->ids.push_back(id);
}

outcome run_alone(const ml_model* m, const spec& sp) {
  api::exec ex(m, 1, 16);
  api::session s(m, ML_KV_F32, sp.ctx);
  const std::vector<int32_t> prompt = api::encode(ml_model_tokenizer(m), sp.prompt, 1);
  std::vector<const char*> stops;
  const ml_gen_params p = params_of(sp, &stops);
  outcome o;
  auto cb = [](void* user, int32_t id, const char* text, size_t len, int generated) {
    if (generated) {
      auto* out = static_cast<outcome*>(user);
      out->text.append(text, len);
      if (id >= 0) out->ids.push_back(id);
    }
    return 0;
  };
  ml_error err;
  const ml_status st = ml_generate(ex.e, s.s, prompt.data(), prompt.size(), &p, cb, &o, &o.st, &err);
  INFO(err.msg);
  REQUIRE(st == ML_OK);
  return o;
}

// Every spec on its own session, stepped together on one executor; the order of the sessions in
// each step's batch rotates.
// batch_next: sample with one ml_gen_next_batch per step (on the executor's threads) instead of
// one ml_gen_next per generation.
std::vector<outcome> run_together(const ml_model* m, const std::vector<spec>& specs, int threads, int exec_batch,
                                  bool batch_next) {
  const size_t n = specs.size();
  api::exec ex(m, threads, exec_batch);
  std::vector<std::unique_ptr<api::session>> sessions;
  std::vector<std::vector<const char*>> stops(n);
  std::vector<ml_gen*> gens(n, nullptr);
  ml_error err;
  for (size_t i = 0; i < n; ++i) {
    sessions.push_back(std::make_unique<api::session>(m, ML_KV_F32, specs[i].ctx));
    const std::vector<int32_t> prompt = api::encode(ml_model_tokenizer(m), specs[i].prompt, 1);
    const ml_gen_params p = params_of(specs[i], &stops[i]);
    const ml_status st = ml_gen_start(&gens[i], ex.e, sessions[i]->s, prompt.data(), prompt.size(), &p, &err);
    INFO(err.msg);
    REQUIRE(st == ML_OK);
  }
  std::vector<outcome> out(n);
  std::vector<bool> finished(n, false);
  size_t active = n, step = 0;
  while (active > 0) {
    REQUIRE(step < 1000);
    std::vector<ml_batch_token> batch;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + step) % n;
      if (finished[i]) continue;
      const int32_t t = ml_gen_take_pending(gens[i]);
      if (t >= 0) batch.push_back({sessions[i]->s, t, 1});
    }
    if (!batch.empty()) {
      const ml_status st = ml_eval_batch(ex.e, batch.data(), batch.size(), nullptr, nullptr, &err);
      INFO(err.msg);
      REQUIRE(st == ML_OK);
    }
    std::vector<size_t> live;
    for (size_t i = 0; i < n; ++i)
      if (!finished[i]) live.push_back(i);
    std::vector<ml_gen_step> steps(live.size());
    if (batch_next) {
      std::vector<ml_gen*> step_gens;
      for (size_t i : live) step_gens.push_back(gens[i]);
      ml_gen_next_batch(ex.e, step_gens.data(), steps.data(), steps.size());
    }
    for (size_t j = 0; j < live.size(); ++j) {
      const size_t i = live[j];
      ml_gen_step& r = steps[j];
      if (!batch_next) r.status = ml_gen_next(gens[i], &r.text, &r.len, &r.id, &r.done, &r.err);
      INFO(r.err.msg);
      REQUIRE(r.status == ML_OK);
      const int done = r.done;
      record(&out[i], r.text, r.len, r.id, done);
      if (done) {
        finished[i] = true;
        --active;
        out[i].st = ml_gen_get_stats(gens[i]);
      }
    }
    ++step;
  }
  for (ml_gen* g : gens) ml_gen_free(g);
  return out;
}

}  // namespace

TEST_CASE("gen batch: generations stepped together in one ml_eval_batch equal each run alone", "[api][generate]") {
  api::model m(api::stories_model());
  std::vector<spec> specs(4);
  specs[0].prompt = "Once upon a time";  // greedy to the end of max_tokens
  specs[0].max_tokens = 50;
  specs[1].prompt = "Lily wanted to play";  // sampled, cut by a stop string
  specs[1].temperature = 0.9f;
  specs[1].top_p = 0.9f;
  specs[1].seed = 42;
  specs[1].max_tokens = 90;
  specs[2].prompt = "The little dog";  // every sampling option, penalties included
  specs[2].temperature = 1.1f;
  specs[2].top_k = 40;
  specs[2].min_p = 0.05f;
  specs[2].presence = 0.8f;
  specs[2].frequency = 0.4f;
  specs[2].seed = 7;
  specs[2].max_tokens = 70;
  specs[2].stops = {"never in a story"};
  specs[3].prompt = "One day, a big bird";  // greedy with penalties, stopped by its context
  specs[3].presence = 0.5f;
  specs[3].frequency = 0.5f;
  specs[3].max_tokens = 200;
  specs[3].ctx = (int)api::encode(ml_model_tokenizer(m.m), specs[3].prompt, 1).size() + 30;

  // specs[1]'s stop string: a piece from the middle of its text without one.
  const outcome free_run = run_alone(m.m, specs[1]);
  REQUIRE(free_run.text.size() > 60);
  specs[1].stops = {"no such text", free_run.text.substr(free_run.text.size() / 2, 5)};

  std::vector<outcome> alone;
  for (const spec& s : specs) alone.push_back(run_alone(m.m, s));
  CHECK(alone[0].st.stop_reason == ML_STOP_LENGTH);
  CHECK(alone[1].st.stop_reason == ML_STOP_STRING);
  CHECK(alone[1].st.n_generated < specs[1].max_tokens);
  CHECK(alone[3].st.stop_reason == ML_STOP_CONTEXT);
  // The generations end at different steps, so later steps run fewer sessions.
  CHECK(alone[0].st.n_generated != alone[2].st.n_generated);

  struct shape {
    int threads, batch;
    bool batch_next;
  };
  for (const shape sh : {shape{1, 128, false}, shape{2, 3, false}, shape{1, 128, true}, shape{2, 3, true},
                         shape{3, 128, true}}) {
    INFO("threads " << sh.threads << ", batch " << sh.batch << ", ml_gen_next_batch " << sh.batch_next);
    const std::vector<outcome> together = run_together(m.m, specs, sh.threads, sh.batch, sh.batch_next);
    for (size_t i = 0; i < specs.size(); ++i) {
      INFO("generation " << i);
      CHECK(together[i].text == alone[i].text);
      CHECK(together[i].ids == alone[i].ids);
      CHECK(together[i].st.stop_reason == alone[i].st.stop_reason);
      CHECK(together[i].st.n_generated == alone[i].st.n_generated);
    }
  }
}

TEST_CASE("gen batch: a prompt prefilled in chunks through ml_eval_batch, then ml_gen_start without one",
          "[api][generate]") {
  api::model m(api::stories_model());
  const std::vector<int32_t> prompt =
      api::encode(ml_model_tokenizer(m.m), "Once upon a time, there was a little girl named Lily. She loved to", 1);
  REQUIRE(prompt.size() > 12);
  const std::vector<int32_t> other = api::encode(ml_model_tokenizer(m.m), "The sun was hot and the boy", 1);
  ml_gen_params p{};
  p.max_tokens = 60;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.min_p = 0.02f;
  p.presence_penalty = 0.3f;
  p.frequency_penalty = 0.2f;
  p.seed = 5;
  p.stop_at_eos = 1;
  auto steps = [](ml_gen* g) {
    outcome o;
    ml_error err;
    for (int done = 0; !done;) {
      const char* text;
      size_t len;
      int32_t id;
      REQUIRE(ml_gen_next(g, &text, &len, &id, &done, &err) == ML_OK);
      record(&o, text, len, id, done);
    }
    o.st = ml_gen_get_stats(g);
    ml_gen_free(g);
    return o;
  };
  ml_error err;
  api::exec ex(m.m, 2, 4);

  // The oracle: ml_gen_start feeds the prompt.
  api::session whole(m.m);
  ml_gen* g = nullptr;
  REQUIRE(ml_gen_start(&g, ex.e, whole.s, prompt.data(), prompt.size(), &p, &err) == ML_OK);
  const outcome want = steps(g);
  REQUIRE(want.ids.size() > 20);

  // Chunks of 5 through ml_eval_batch, each sharing its batch with another session's tokens; a
  // chunk's last token asks for logits.
  api::session chunked(m.m), bystander(m.m);
  for (size_t at = 0; at < prompt.size(); at += 5) {
    std::vector<ml_batch_token> batch;
    const size_t end = std::min(prompt.size(), at + 5);
    for (size_t i = at; i < end; ++i) {
      batch.push_back({chunked.s, prompt[i], i + 1 == end});
      if (i < other.size()) batch.push_back({bystander.s, other[i], 0});
    }
    REQUIRE(ml_eval_batch(ex.e, batch.data(), batch.size(), nullptr, nullptr, &err) == ML_OK);
  }
  REQUIRE(ml_session_pos(chunked.s) == (int)prompt.size());
  REQUIRE(ml_gen_start(&g, ex.e, chunked.s, nullptr, 0, &p, &err) == ML_OK);
  const outcome got = steps(g);
  CHECK(got.text == want.text);
  CHECK(got.ids == want.ids);
  CHECK(got.st.stop_reason == want.st.stop_reason);
  CHECK(got.st.n_generated == want.st.n_generated);
  CHECK(got.st.n_prompt == 0);

  // Without logits (a fresh session) there is nothing to continue from.
  api::session fresh(m.m);
  CHECK(ml_gen_start(&g, ex.e, fresh.s, nullptr, 0, &p, &err) == ML_E_ARG);
  CHECK(g == nullptr);
}

TEST_CASE("gen batch: ml_gen_next_batch refuses a generation whose token is not fed", "[api][generate]") {
  api::model m(api::stories_model());
  api::exec ex(m.m, 2, 128);
  api::session a(m.m, ML_KV_F32, 64), b(m.m, ML_KV_F32, 64);
  const std::vector<int32_t> prompt = api::encode(ml_model_tokenizer(m.m), "Once upon a time", 1);
  ml_gen_params p{};
  p.max_tokens = 10;
  p.top_p = 1.0f;
  ml_gen *ga = nullptr, *gb = nullptr;
  ml_error err;
  REQUIRE(ml_gen_start(&ga, ex.e, a.s, prompt.data(), prompt.size(), &p, &err) == ML_OK);
  REQUIRE(ml_gen_start(&gb, ex.e, b.s, prompt.data(), prompt.size(), &p, &err) == ML_OK);
  ml_gen* gens[2] = {ga, gb};
  ml_gen_step steps[2];
  ml_gen_next_batch(ex.e, gens, steps, 2);  // both sample from their prompts' logits
  REQUIRE(steps[0].status == ML_OK);
  REQUIRE(steps[1].status == ML_OK);
  CHECK(steps[0].id == steps[1].id);
  // a's token is taken and fed; b's is not: b is refused, a samples.
  const int32_t t = ml_gen_take_pending(ga);
  REQUIRE(t == steps[0].id);
  ml_batch_token fed{a.s, t, 1};
  REQUIRE(ml_eval_batch(ex.e, &fed, 1, nullptr, nullptr, &err) == ML_OK);
  ml_gen_next_batch(ex.e, gens, steps, 2);
  CHECK(steps[0].status == ML_OK);
  CHECK(steps[0].id >= 0);
  CHECK(steps[1].status == ML_E_ARG);
  CHECK(std::string(steps[1].err.msg).find("not fed") != std::string::npos);
  ml_gen_free(ga);
  ml_gen_free(gb);
}
