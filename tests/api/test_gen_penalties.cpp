// min_p and the presence/frequency penalties through the generation loop (krafla.h,
// ml_gen_params). Each step's id is checked against tests/sampling_oracle.h computed from the
// session's own logits and the ids generated so far (never the prompt's), and the session's logits
// must come out of sampling unchanged (others read them, e.g. for logprobs). Plus the range errors.
#include <cmath>
#include <string>
#include <vector>

#include "api/api_fixture.h"
#include "sampling_oracle.h"

namespace {

ml_gen_params gen_params(const oracle::params& o, uint64_t seed, int max_tokens) {
  ml_gen_params p{};
  p.max_tokens = max_tokens;
  p.temperature = o.temp;
  p.top_p = o.top_p;
  p.top_k = o.top_k;
  p.min_p = o.min_p;
  p.presence_penalty = o.presence;
  p.frequency_penalty = o.frequency;
  p.seed = seed;
  return p;
}

// Generates max_tokens ids (no stop at EOS), checking each against the oracle; returns them.
std::vector<int32_t> generate_checked(const ml_model* m, const std::vector<int32_t>& prompt, const oracle::params& o,
                                      uint64_t seed, int max_tokens) {
  const int vocab = ml_model_get_info(m).vocab_size;
  api::exec ex(m, 1, 8);
  api::session s(m);
  const ml_gen_params p = gen_params(o, seed, max_tokens);
  ml_gen* g = nullptr;
  ml_error err;
  const ml_status st = ml_gen_start(&g, ex.e, s.s, prompt.data(), prompt.size(), &p, &err);
  INFO(err.msg);
  REQUIRE(st == ML_OK);
  std::vector<int> counts(vocab, 0);
  oracle::xorshift rng{seed};
  std::vector<int32_t> ids;
  for (int done = 0; !done;) {
    // Feed the pending token here, so that the logits the sample is drawn from can be read first.
    const int32_t t = ml_gen_take_pending(g);
    if (t >= 0) REQUIRE(ml_session_feed(ex.e, s.s, &t, 1, &err) == ML_OK);
    const float* l = ml_session_logits(s.s);
    REQUIRE(l != nullptr);
    const std::vector<float> before(l, l + vocab);
    const char* text;
    size_t len;
    int32_t id;
    REQUIRE(ml_gen_next(g, &text, &len, &id, &done, &err) == ML_OK);
    if (id < 0) break;
    const int32_t want = oracle::sample(before.data(), counts, o, &rng);
    INFO("token " << ids.size());
    REQUIRE(id == want);
    REQUIRE(std::vector<float>(l, l + vocab) == before);
    ++counts[id];
    ids.push_back(id);
  }
  ml_gen_free(g);
  REQUIRE((int)ids.size() == max_tokens);
  return ids;
}

// How many ids occur more than once.
int repeats(const std::vector<int32_t>& ids) {
  int n = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (ids[j] == ids[i]) {
        ++n;
        break;
      }
  return n;
}

}  // namespace

TEST_CASE("gen penalties: every id is the oracle's, from the session's unchanged logits", "[api][generate]") {
  api::model m(api::stories_model());
  // A prompt that repeats words: the prompt's ids must not count.
  const std::vector<int32_t> prompt = api::encode(ml_model_tokenizer(m.m), "Tom and Tom and Tom and Tom", 1);
  struct named {
    const char* name;
    oracle::params p;
  };
  std::vector<named> cases;
  auto add = [&](const char* name, float temp, float top_p, int top_k, float min_p, float pres, float freq) {
    oracle::params p;
    p.temp = temp, p.top_p = top_p, p.top_k = top_k, p.min_p = min_p, p.presence = pres, p.frequency = freq;
    cases.push_back({name, p});
  };
  add("greedy", 0.0f, 1.0f, 0, 0.0f, 0.0f, 0.0f);
  add("greedy, presence", 0.0f, 1.0f, 0, 0.0f, 1.5f, 0.0f);
  add("greedy, frequency", 0.0f, 1.0f, 0, 0.0f, 0.0f, 0.7f);
  add("greedy, both negative", 0.0f, 1.0f, 0, 0.0f, -0.3f, -0.2f);
  add("sampled, min-p", 1.0f, 1.0f, 0, 0.1f, 0.0f, 0.0f);
  add("sampled, all", 0.9f, 0.95f, 0, 0.05f, 0.6f, 0.3f);
  add("sampled, top-k", 1.3f, 1.0f, 30, 0.02f, 2.0f, -0.5f);
  std::vector<std::vector<int32_t>> runs;
  for (const named& c : cases) {
    INFO(c.name);
    runs.push_back(generate_checked(m.m, prompt, c.p, 1234, 80));
  }
  // The penalties act: greedy text repeats less with them than without.
  INFO("repeats: greedy " << repeats(runs[0]) << ", presence " << repeats(runs[1]) << ", frequency "
                          << repeats(runs[2]));
  CHECK(runs[1] != runs[0]);
  CHECK(runs[2] != runs[0]);
  CHECK(repeats(runs[1]) < repeats(runs[0]));
  CHECK(repeats(runs[2]) < repeats(runs[0]));
}

TEST_CASE("gen penalties: min_p and the penalties outside their ranges are refused, naming them", "[api][generate]") {
  api::model m(api::stories_model());
  api::exec ex(m.m, 1, 8);
  api::session s(m.m);
  const std::vector<int32_t> prompt = api::encode(ml_model_tokenizer(m.m), "Once", 1);
  struct bad {
    float min_p, presence, frequency;
    const char* field;
  };
  for (const bad b : {bad{1.0f, 0, 0, "min_p"}, bad{-0.01f, 0, 0, "min_p"}, bad{NAN, 0, 0, "min_p"},
                      bad{0, 2.5f, 0, "presence_penalty"}, bad{0, NAN, 0, "presence_penalty"},
                      bad{0, -2.001f, 0, "presence_penalty"}, bad{0, 0, -3.0f, "frequency_penalty"},
                      bad{0, 0, NAN, "frequency_penalty"}, bad{0, 0, INFINITY, "frequency_penalty"}}) {
    ml_gen_params p{};
    p.max_tokens = 5;
    p.top_p = 1.0f;
    p.min_p = b.min_p;
    p.presence_penalty = b.presence;
    p.frequency_penalty = b.frequency;
    ml_gen* g = reinterpret_cast<ml_gen*>(&p);  // must be reset to NULL
    ml_error err{};
    INFO(b.field << " " << b.min_p << " " << b.presence << " " << b.frequency);
    CHECK(ml_gen_start(&g, ex.e, s.s, prompt.data(), prompt.size(), &p, &err) == ML_E_ARG);
    CHECK(g == nullptr);
    CHECK_THAT(err.msg, Catch::Contains(b.field));
    CHECK(ml_session_pos(s.s) == 0);  // nothing fed
  }
  // The ends of the ranges are accepted.
  ml_gen_params p{};
  p.max_tokens = 3;
  p.top_p = 1.0f;
  p.min_p = 0.99f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  ml_gen* g = nullptr;
  ml_error err;
  REQUIRE(ml_gen_start(&g, ex.e, s.s, prompt.data(), prompt.size(), &p, &err) == ML_OK);
  ml_gen_free(g);
}
