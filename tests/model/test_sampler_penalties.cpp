// The sampler's presence/frequency penalties and min-p (src/model/sampler.h) against the naive
// oracle of tests/sampling_oracle.h (OpenAI's formula over a dense count array, std::exp, a full
// sort, transformers' order of cuts, llama2.c's draws replayed), constructed cases, and the
// parameters' ranges.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "model/sampler.h"
#include "sampling_oracle.h"

namespace {

using oracle::params;

ml_sampler_opts to_opts(const params& p, uint64_t seed) {
  ml_sampler_opts o;
  o.temperature = p.temp;
  o.top_p = p.top_p;
  o.top_k = p.top_k;
  o.min_p = p.min_p;
  o.presence_penalty = p.presence;
  o.frequency_penalty = p.frequency;
  o.seed = seed;
  return o;
}

// Owns a sampler and its scratch.
struct Sampler {
  std::vector<double> scratch;
  ml_sampler s;
  Sampler(int32_t vocab, const params& p, uint64_t seed) : scratch(ml_sampler_scratch_bytes(vocab) / 8 + 1) {
    const ml_sampler_opts o = to_opts(p, seed);
    ml_error err;
    const ml_status st = ml_sampler_init(&s, vocab, &o, scratch.data(), &err);
    INFO(err.msg);
    REQUIRE(st == ML_OK);
  }
  int32_t operator()(const std::vector<float>& l, const std::vector<ml_token_count>& c) {
    return ml_sampler_sample(&s, l.data(), c.data(), c.size());
  }
};

std::vector<double> penalized(const std::vector<float>& l, const std::vector<int>& dense, const params& p) {
  return oracle::penalized(l.data(), dense, p);
}

std::vector<float> random_logits(int n, uint32_t seed, float scale) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> l(n);
  for (float& v : l) v = d(g);
  return l;
}

// Appends id to a sparse history and to its dense twin.
void record(std::vector<ml_token_count>* sparse, std::vector<int>* dense, int32_t id) {
  ++(*dense)[id];
  for (ml_token_count& c : *sparse)
    if (c.id == id) {
      ++c.count;
      return;
    }
  sparse->push_back({id, 1});
}

}  // namespace

TEST_CASE("sampler penalties: greedy is the argmax of OpenAI's penalized logits", "[sampler]") {
  const std::vector<float> l = {3.0f, 2.5f, 0.0f, -1.0f};
  params p;
  p.temp = 0.0f;
  auto pick = [&](const params& q, std::vector<ml_token_count> c) {
    Sampler s(4, q, 1);
    return s(l, c);
  };
  // Presence counts once: 3 - 0.4 = 2.6 still beats 2.5, however often id 0 was sampled (per
  // occurrence it would be 3 - 1.2 = 1.8).
  p.presence = 0.4f;
  CHECK(pick(p, {{0, 3}}) == 0);
  CHECK(pick(p, {{0, 1}}) == 0);
  // Frequency counts per occurrence: 3 - 3 * 0.2 = 2.4 loses to 2.5; once (2.8) it does not.
  p.presence = 0.0f;
  p.frequency = 0.2f;
  CHECK(pick(p, {{0, 3}}) == 1);
  CHECK(pick(p, {{0, 1}}) == 0);
  // Both: 3 - (2 * 0.125 + 0.25) = 2.5 ties with id 1: the lowest id wins.
  p.frequency = 0.125f;
  p.presence = 0.25f;
  CHECK(pick(p, {{0, 2}}) == 0);
  CHECK(pick(p, {{0, 2}, {1, 1}}) == 0);  // id 1 penalized too
  // Negative penalties favour the ids sampled before: once, -1 - (1 * -2 + -2) = 3 ties with id 0
  // and loses on the id; twice, -1 - (2 * -2 + -2) = 5 wins.
  p.frequency = -2.0f;
  p.presence = -2.0f;
  CHECK(pick(p, {{3, 1}}) == 0);
  CHECK(pick(p, {{3, 2}}) == 3);
  // No history, or zero counts, or ids outside the vocabulary: the plain argmax.
  p.presence = 2.0f;
  CHECK(pick(p, {}) == 0);
  CHECK(pick(p, {{0, 0}}) == 0);
  CHECK(pick(p, {{7, 5}, {-1, 2}}) == 0);
  // top_k 1 at any temperature is greedy over the penalized logits as well.
  params k1;
  k1.temp = 1.3f;
  k1.top_k = 1;
  k1.presence = 0.6f;
  CHECK(pick(k1, {{0, 1}}) == 1);

  // Random logits and histories against the oracle.
  int changed = 0;  // trials where the penalties moved the argmax
  for (uint32_t trial = 0; trial < 40; ++trial) {
    const int32_t V = 700;
    const std::vector<float> rl = random_logits(V, trial, 1.5f);
    std::mt19937 g(trial);
    std::vector<int32_t> by_logit(V);
    for (int32_t i = 0; i < V; ++i) by_logit[i] = i;
    std::sort(by_logit.begin(), by_logit.end(), [&](int32_t a, int32_t b) { return rl[a] > rl[b]; });
    std::vector<ml_token_count> sparse;
    std::vector<int> dense(V, 0);
    // A history mostly among the most probable ids, so that the penalties change the answer.
    for (int i = 0; i < 30; ++i) record(&sparse, &dense, g() % 4 == 0 ? (int32_t)(g() % V) : by_logit[g() % 6]);
    params q;
    q.temp = 0.0f;
    q.presence = std::uniform_real_distribution<float>(-2.0f, 2.0f)(g);
    q.frequency = std::uniform_real_distribution<float>(-0.5f, 2.0f)(g);
    Sampler s(V, q, 1);
    INFO("trial " << trial);
    const int32_t got = s(rl, sparse);
    CHECK(got == oracle::greedy(penalized(rl, dense, q)));
    changed += got != ml_argmax(rl.data(), V);
  }
  CHECK(changed >= 10);
}

TEST_CASE("sampler penalties: draws match the oracle with penalties, min-p, top-k and top-p", "[sampler]") {
  const int32_t V = 3000;
  const std::vector<params> cases = [] {
    std::vector<params> c;
    auto add = [&](float temp, float top_p, int32_t top_k, float min_p, float pres, float freq) {
      params p;
      p.temp = temp, p.top_p = top_p, p.top_k = top_k, p.min_p = min_p, p.presence = pres, p.frequency = freq;
      c.push_back(p);
    };
    add(1.0f, 1.0f, 0, 0.05f, 0.0f, 0.0f);   // min-p alone: candidates in id order
    add(0.7f, 1.0f, 0, 0.2f, 0.0f, 0.0f);
    add(1.0f, 1.0f, 0, 0.0f, 1.0f, 0.5f);    // penalties alone
    add(0.9f, 0.9f, 0, 0.1f, 0.5f, 0.3f);    // top-p, then min-p
    add(1.2f, 1.0f, 60, 0.02f, -0.7f, 1.1f); // top-k, then min-p
    add(1.0f, 0.8f, 200, 0.01f, 2.0f, 2.0f);
    add(1.5f, 1.0f, 0, 0.999f, 0.0f, 0.0f);  // min-p just under 1: the maximum alone
    return c;
  }();
  for (size_t k = 0; k < cases.size(); ++k) {
    const params& p = cases[k];
    INFO("case " << k);
    const std::vector<float> l = random_logits(V, 11 + (uint32_t)k, 2.0f);
    const uint64_t seed = 1000 + k;
    Sampler s(V, p, seed);
    oracle::xorshift rng{seed};
    std::vector<ml_token_count> sparse;
    std::vector<int> dense(V, 0);
    const std::vector<float> copy = l;
    for (int i = 0; i < 80; ++i) {
      const int32_t want = oracle::sample(l.data(), dense, p, &rng);
      const int32_t got = s(l, sparse);
      REQUIRE(got == want);
      record(&sparse, &dense, got);
    }
    CHECK(l == copy);  // the logits are read, never written
  }
}

TEST_CASE("sampler min-p: the candidate set is cut after the temperature", "[sampler]") {
  // Probabilities relative to the maximum at temperature 1: 1, e^-1 = 0.368, e^-2 = 0.135.
  const std::vector<float> l = {-2.0f, 0.0f, -1.0f};
  auto seen = [&](float temp, float min_p) {
    params p;
    p.temp = temp;
    p.min_p = min_p;
    Sampler s(3, p, 5);
    std::vector<int> hits(3, 0);
    for (int i = 0; i < 3000; ++i) hits[s(l, {})]++;
    return std::vector<bool>{hits[0] > 0, hits[1] > 0, hits[2] > 0};
  };
  CHECK(seen(1.0f, 0.0f) == std::vector<bool>{true, true, true});
  CHECK(seen(1.0f, 0.2f) == std::vector<bool>{false, true, true});
  CHECK(seen(1.0f, 0.5f) == std::vector<bool>{false, true, false});
  // At temperature 2 the ratios are e^-0.5 = 0.607 and e^-1 = 0.368: min-p 0.5 keeps id 2.
  CHECK(seen(2.0f, 0.5f) == std::vector<bool>{false, true, true});
  // Equal maxima both have probability 1, and min-p keeps both.
  params p;
  p.min_p = 0.9f;
  Sampler s(4, p, 9);
  std::vector<int> hits(4, 0);
  for (int i = 0; i < 2000; ++i) hits[s({1.0f, 3.0f, 3.0f, 2.9f}, {})]++;
  CHECK(hits[0] == 0);
  CHECK(hits[1] > 0);
  CHECK(hits[2] > 0);
  CHECK(hits[3] > 0);  // e^-0.1 = 0.905 >= 0.9
}

TEST_CASE("sampler penalties: min_p and the penalties outside their ranges are rejected, naming them", "[sampler]") {
  std::vector<double> scratch(ml_sampler_scratch_bytes(10) / 8 + 2);
  ml_sampler s;
  ml_error err;
  auto init = [&](const params& p, void* scr) {
    err = ml_error{};
    const ml_sampler_opts o = to_opts(p, 1);
    return ml_sampler_init(&s, 10, &o, scr, &err);
  };
  struct bad {
    float min_p, presence, frequency;
    const char* msg;
  };
  for (const bad b : {bad{-0.1f, 0, 0, "min_p -0.1"}, bad{1.0f, 0, 0, "min_p 1 "}, bad{NAN, 0, 0, "min_p nan"},
                      bad{INFINITY, 0, 0, "min_p inf"}, bad{0, 2.01f, 0, "presence_penalty 2.01"},
                      bad{0, -2.5f, 0, "presence_penalty -2.5"}, bad{0, NAN, 0, "presence_penalty nan"},
                      bad{0, 0, 3.0f, "frequency_penalty 3"}, bad{0, 0, -INFINITY, "frequency_penalty -inf"},
                      bad{0, 0, NAN, "frequency_penalty nan"}}) {
    params p;
    p.min_p = b.min_p, p.presence = b.presence, p.frequency = b.frequency;
    INFO(b.msg);
    CHECK(init(p, scratch.data()) == ML_E_ARG);
    CHECK_THAT(err.msg, Catch::Contains(b.msg));
  }
  // The ends of the ranges are accepted.
  for (const bad b : {bad{0.0f, -2.0f, 2.0f, ""}, bad{0.9999f, 2.0f, -2.0f, ""}}) {
    params p;
    p.min_p = b.min_p, p.presence = b.presence, p.frequency = b.frequency;
    CHECK(init(p, scratch.data()) == ML_OK);
  }
  // Greedy needs no scratch, unless it penalizes.
  params g;
  g.temp = 0.0f;
  CHECK(init(g, nullptr) == ML_OK);
  g.frequency = 0.5f;
  CHECK(init(g, nullptr) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("penalties"));
}
