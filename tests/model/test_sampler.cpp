// The sampler (src/model/sampler.h): greedy ties, top-k/top-p limits, reproducibility, the
// observed distribution against softmax (chi-square), a naive full-sort reference built on
// std::exp, the generator's known answers (computed independently in Python), and parameter
// validation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "model/sampler.h"

namespace {

ml_sampler_opts opts(float temp, float top_p, int32_t top_k, uint64_t seed) {
  ml_sampler_opts o;
  o.temperature = temp;
  o.top_p = top_p;
  o.top_k = top_k;
  o.seed = seed;
  return o;
}

// Owns a sampler and its scratch.
struct Sampler {
  std::vector<double> scratch;
  ml_sampler s;
  Sampler(int32_t vocab, const ml_sampler_opts& o) : scratch(ml_sampler_scratch_bytes(vocab) / sizeof(double) + 1) {
    ml_error err;
    const ml_status st = ml_sampler_init(&s, vocab, &o, scratch.data(), &err);
    INFO(err.msg);
    REQUIRE(st == ML_OK);
  }
  Sampler(int32_t vocab, float temp, float top_p, int32_t top_k, uint64_t seed)
      : Sampler(vocab, opts(temp, top_p, top_k, seed)) {}
  int32_t operator()(const std::vector<float>& logits) { return ml_sampler_sample(&s, logits.data()); }
};

std::vector<double> softmax(const std::vector<float>& l, double temp) {
  const double mx = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double sum = 0;
  for (size_t i = 0; i < l.size(); i++) sum += p[i] = std::exp((l[i] - mx) / temp);
  for (double& v : p) v /= sum;
  return p;
}

// Draws n samples and returns the chi-square statistic of the counts against expected
// probabilities want (ids with want 0 must never appear).
double chi_square(Sampler& s, const std::vector<float>& logits, const std::vector<double>& want, int n) {
  std::vector<int> count(logits.size(), 0);
  for (int i = 0; i < n; i++) count[s(logits)]++;
  double chi = 0;
  for (size_t i = 0; i < want.size(); i++) {
    if (want[i] == 0) {
      CHECK(count[i] == 0);
      continue;
    }
    const double e = want[i] * n;
    chi += (count[i] - e) * (count[i] - e) / e;
  }
  return chi;
}

// The documented rule, written plainly: full sort by (probability desc, id asc), std::exp.
int32_t reference_sample(const std::vector<float>& l, double temp, double top_p, int top_k, uint64_t* rng) {
  const int32_t V = (int32_t)l.size();
  const double mx = *std::max_element(l.begin(), l.end());
  std::vector<double> p(V);
  for (int32_t i = 0; i < V; i++) p[i] = std::exp((l[i] - mx) / temp);
  std::vector<int32_t> idx(V);
  for (int32_t i = 0; i < V; i++) idx[i] = i;
  const bool limit = (top_k > 0 && top_k < V) || top_p < 1;
  if (limit) std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return p[a] != p[b] ? p[a] > p[b] : a < b; });
  if (top_k > 0 && top_k < V) idx.resize(top_k);
  double total = 0;
  for (int32_t i : idx) total += p[i];
  if (top_p < 1) {
    double cum = 0;
    size_t keep = idx.size();
    for (size_t i = 0; i < idx.size(); i++) {
      cum += p[idx[i]];
      if (cum > top_p * total) {
        keep = i + 1;
        break;
      }
    }
    idx.resize(keep);
    total = cum;
  }
  const double r = ml_rng_unit(rng) * total;
  double acc = 0;
  for (int32_t i : idx)
    if (r < (acc += p[i])) return i;
  return idx.back();
}

std::vector<float> random_logits(int n, uint32_t seed, float scale) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> l(n);
  for (float& v : l) v = d(g);
  return l;
}

}  // namespace

TEST_CASE("sampler: xorshift64* known answers", "[sampler]") {
  // llama2.c's random_u32 from state 42, computed in Python with 64-bit masking.
  uint64_t st = 42;
  const uint32_t want[5] = {1456360119u, 3359763283u, 3393612768u, 4054632243u, 3283045847u};
  for (uint32_t w : want) CHECK(ml_rng_u32(&st) == w);
  // Seed 0 is replaced by 0x9E3779B97F4A7C15.
  ml_sampler s;
  const ml_sampler_opts seed0 = opts(0.0f, 1.0f, 0, 0);
  ml_sampler_init(&s, 4, &seed0, nullptr, nullptr);
  CHECK(ml_rng_u32(&s.rng) == 226735074u);
  CHECK(ml_rng_u32(&s.rng) == 1422150777u);
  uint64_t u = 7;
  for (int i = 0; i < 1000; i++) {
    const double x = ml_rng_unit(&u);
    REQUIRE((x >= 0.0 && x < 1.0));
  }
}

TEST_CASE("sampler: portable exp matches std::exp", "[sampler]") {
  for (double x = -740.0; x <= 0.0; x += 0.0137) {
    const double want = std::exp(x);
    CHECK(std::fabs(ml_exp_portable(x) - want) <= 4e-16 * want + 1e-320);
  }
  CHECK(ml_exp_portable(0.0) == 1.0);
  CHECK(ml_exp_portable(-1000.0) == 0.0);
  CHECK(ml_exp_portable(-INFINITY) == 0.0);
}

// Sampling must give the same ids on every target and in every version: these are the bits the
// first implementation (std::floor and std::ldexp) gave, across the normal/subnormal boundary.
TEST_CASE("sampler: portable exp keeps its known bits", "[sampler]") {
  const double known[][2] = {
      {-0x1p-1, 0x1.368b2fc6f960ap-1},
      {-0x1.0624dd2f1a9fcp-10, 0x1.ff7cfe56f1a9ep-1},
      {-0x1p+0, 0x1.78b56362cef38p-2},
      {-0x1.92p+5, 0x1.6b30390494d8ep-73},
      {-0x1.5e0cccccccccdp+9, 0x1.f52f93df4dfcfp-1011},
      {-0x1.6226666666666p+9, 0x1.19e98b83de7a3p-1022},
      {-0x1.6232b020c49bap+9, 0x1.001b6f469cc89p-1022},
      {-0x1.624p+9, 0x0.e6cf6d08897acp-1022},
      {-0x1.628p+9, 0x0.8bfe55de02338p-1022},
      {-0x1.72p+9, 0x0.0000000000055p-1022},
      {-0x1.748p+9, 0x0.0000000000001p-1022},
      {-0x1.62e42fefa39efp-2, 0x1.6a09e667f3bccp-1},
  };
  for (const auto& k : known) {
    INFO("x = " << k[0]);
    CHECK(ml_exp_portable(k[0]) == k[1]);
  }
}

// draw() computes every id's probability in a loop the compiler vectorizes (sampler.cpp,
// exp_portable_lane); each lane must hold the bits of the scalar ml_exp_portable, across the
// normal and subnormal range and with NaN and -inf logits among them.
TEST_CASE("sampler: the vectorized probabilities are the scalar exp's bits", "[sampler]") {
  const int32_t V = 70001;
  std::vector<float> l(V);
  for (int32_t i = 0; i < V; i++) l[i] = 3.0f - (float)i * 0.0041f;
  l[17] = NAN;
  l[18] = -INFINITY;
  const double T = 0.37;
  Sampler s(V, (float)T, 1.0f, 0, 1);
  s(l);
  int32_t subnormal = 0, differ = 0;
  for (int32_t i = 0; i < V; i++) {
    const double want = i == 0 ? 1.0 : i == 17 ? 0.0 : ml_exp_portable(((double)l[i] - (double)l[0]) / (double)(float)T);
    subnormal += want > 0 && want < 0x1p-1022;
    differ += s.s.prob[i] != want;
  }
  CHECK(subnormal > 100);
  CHECK(differ == 0);
}

TEST_CASE("sampler: greedy takes the argmax, ties to the lowest id", "[sampler]") {
  Sampler g(6, 0.0f, 1.0f, 0, 1);
  CHECK(g({1, 3, 3, 2, -5, 3}) == 1);
  CHECK(g({7, 7, 7, 7, 7, 7}) == 0);
  CHECK(g({NAN, 1, NAN, 4, 4, 0}) == 3);
  CHECK(g({-INFINITY, -INFINITY, -1e30f, -INFINITY, -INFINITY, -INFINITY}) == 2);
  CHECK(ml_argmax(std::vector<float>{NAN, NAN}.data(), 2) == 0);
  // Greedy needs no scratch.
  ml_sampler s;
  ml_error err;
  const ml_sampler_opts greedy = opts(0.0f, 1.0f, 0, 1), top1 = opts(0.8f, 1.0f, 1, 1);
  CHECK(ml_sampler_init(&s, 6, &greedy, nullptr, &err) == ML_OK);
  CHECK(ml_sampler_init(&s, 6, &top1, nullptr, &err) == ML_OK);  // top_k 1 is greedy
}

// The one-pass definition ml_argmax must agree with: the first non-NaN logit, replaced by each
// later one that compares greater.
static int32_t argmax_reference(const std::vector<float>& x) {
  size_t i = 0;
  while (i < x.size() && std::isnan(x[i])) ++i;
  if (i == x.size()) return 0;
  size_t best = i;
  for (++i; i < x.size(); ++i)
    if (x[i] > x[best]) best = i;
  return (int32_t)best;
}

TEST_CASE("sampler: argmax over long vectors with NaN, ties, infinities and signed zeros", "[sampler]") {
  std::mt19937 rng(7);
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 5.0f};
  for (int32_t n : {0, 1, 15, 16, 17, 31, 33, 100, 1000, 151936}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> x(n);
      std::uniform_real_distribution<float> u(-3.0f, 3.0f);
      const int kind = trial % 4;  // 0 random, 1 few values (ties), 2 with specials, 3 all one special
      for (auto& v : x) v = kind == 1 ? (float)(rng() % 3) : u(rng);
      if (kind == 2 && n > 0)
        for (int k = 0; k < 1 + n / 10; ++k) x[rng() % n] = specials[rng() % 6];
      if (kind == 3)
        for (auto& v : x) v = specials[trial / 4 % 6];
      INFO("n = " << n << ", trial " << trial);
      CHECK(ml_argmax(x.data(), n) == argmax_reference(x));
    }
  }
}

TEST_CASE("sampler: top-k 1 and a tiny top-p are greedy", "[sampler]") {
  for (uint32_t trial = 0; trial < 20; trial++) {
    const std::vector<float> l = random_logits(1000, trial, 3.0f);
    const int32_t best = ml_argmax(l.data(), 1000);
    Sampler k1(1000, 1.5f, 1.0f, 1, trial + 1);
    Sampler p0(1000, 1.0f, 1e-6f, 0, trial + 1);
    Sampler p0k(1000, 0.7f, 1e-6f, 50, trial + 1);
    for (int i = 0; i < 20; i++) {
      CHECK(k1(l) == best);
      CHECK(p0(l) == best);
      CHECK(p0k(l) == best);
    }
  }
  // Equal maxima: top-p keeps the lowest id, like greedy.
  Sampler p0(4, 1.0f, 1e-6f, 0, 3);
  CHECK(p0({1, 5, 5, 2}) == 1);
}

TEST_CASE("sampler: equal probabilities order by id", "[sampler]") {
  // 300 equal logits (shuffled positions of two values would hide nothing: all are equal).
  const std::vector<float> l(300, 0.25f);
  Sampler k(300, 1.0f, 1.0f, 5, 17);     // top-k 5: ids 0..4
  Sampler p(300, 1.0f, 0.05f, 0, 17);    // top-p 0.05: the first 16 (16/300 > 0.05)
  Sampler kp(300, 1.0f, 0.5f, 40, 17);   // top-k 40, then half of them: ids 0..20
  std::vector<int> hits_k(300, 0), hits_p(300, 0), hits_kp(300, 0);
  for (int i = 0; i < 3000; i++) {
    hits_k[k(l)]++;
    hits_p[p(l)]++;
    hits_kp[kp(l)]++;
  }
  for (int i = 0; i < 300; i++) {
    INFO("id " << i);
    CHECK((hits_k[i] > 0) == (i < 5));
    CHECK((hits_p[i] > 0) == (i < 16));
    CHECK((hits_kp[i] > 0) == (i < 21));
  }
  // A small top-p over few equal ids: llama2.c's cut-off, (1 - top_p) / (n - 1), lies above
  // every probability here; the most probable id must survive it.
  Sampler two(2, 1.0f, 0.1f, 0, 17), three(3, 1.0f, 0.2f, 0, 17);
  for (int i = 0; i < 50; i++) {
    CHECK(two({0.0f, 0.0f}) == 0);
    CHECK(three({1.0f, 1.0f, 1.0f}) == 0);
  }
}

TEST_CASE("sampler: the same seed gives the same ids, another seed others", "[sampler]") {
  const std::vector<float> l = random_logits(500, 9, 1.0f);
  for (auto [top_p, top_k] : {std::pair{1.0f, 0}, std::pair{0.9f, 0}, std::pair{1.0f, 40}, std::pair{0.8f, 100}}) {
    Sampler a(500, 1.0f, top_p, top_k, 1234), b(500, 1.0f, top_p, top_k, 1234), c(500, 1.0f, top_p, top_k, 99);
    std::vector<int32_t> ia, ib, ic;
    for (int i = 0; i < 200; i++) {
      ia.push_back(a(l));
      ib.push_back(b(l));
      ic.push_back(c(l));
    }
    CHECK(ia == ib);
    CHECK(ia != ic);
    ml_sampler_seed(&a.s, 1234);  // restarting the generator repeats the sequence
    for (int i = 0; i < 200; i++) CHECK(a(l) == ia[i]);
  }
}

TEST_CASE("sampler: draws follow the softmax (chi-square)", "[sampler]") {
  // Bounds: chi-square critical values at p = 1e-6 are 33 (4 dof) and 24 (1 dof); the seeds are
  // fixed, so the outcome is deterministic and cannot flake.
  const std::vector<float> l = {0.0f, 1.0f, 2.0f, 0.5f, -1.0f};
  const int n = 40000;
  SECTION("temperature 1") {
    Sampler s(5, 1.0f, 1.0f, 0, 2024);
    CHECK(chi_square(s, l, softmax(l, 1.0), n) < 33.0);
  }
  SECTION("temperature 0.5 sharpens") {
    Sampler s(5, 0.5f, 1.0f, 0, 7);
    CHECK(chi_square(s, l, softmax(l, 0.5), n) < 33.0);
  }
  SECTION("top-k 2 renormalises over the two largest") {
    Sampler s(5, 1.0f, 1.0f, 2, 11);
    std::vector<double> want = softmax(l, 1.0);
    const double z = want[2] + want[1];
    want = {0, want[1] / z, want[2] / z, 0, 0};
    CHECK(chi_square(s, l, want, n) < 24.0);
  }
  SECTION("top-p keeps the shortest prefix over the mass") {
    // softmax: 2.0 -> 0.5065, 1.0 -> 0.1863, 0.5 -> 0.1130, ... With top-p 0.6 the prefix is
    // {2.0, 1.0} (0.69 > 0.6); {2.0} alone (0.51) is not enough.
    Sampler s(5, 1.0f, 0.6f, 0, 13);
    std::vector<double> want = softmax(l, 1.0);
    REQUIRE(want[2] < 0.6);
    REQUIRE(want[2] + want[1] > 0.6);
    const double z = want[2] + want[1];
    want = {0, want[1] / z, want[2] / z, 0, 0};
    CHECK(chi_square(s, l, want, n) < 24.0);
  }
}

TEST_CASE("sampler: matches a full-sort reference on a large vocabulary", "[sampler]") {
  struct P {
    float temp, top_p;
    int top_k;
  };
  for (const P p : {P{1.0f, 1.0f, 0}, P{0.8f, 0.9f, 0}, P{1.2f, 0.5f, 0}, P{1.0f, 1.0f, 40}, P{0.7f, 0.95f, 200},
                    P{1.0f, 0.99f, 0}}) {
    const std::vector<float> l = random_logits(32000, 5, 2.5f);
    Sampler s(32000, p.temp, p.top_p, p.top_k, 77);
    uint64_t rng = 77;
    INFO("temp " << p.temp << " top_p " << p.top_p << " top_k " << p.top_k);
    for (int i = 0; i < 50; i++) CHECK(s(l) == reference_sample(l, p.temp, p.top_p, p.top_k, &rng));
  }
}

// Top-k and top-p sort only the probability buckets they reach (sampler.cpp, lazy_order): logits
// whose nucleus is a handful of ids, most of the vocabulary, ids below the 24 octaves the buckets
// cover (the last bucket), and many equal probabilities must all give the full sort's ids.
TEST_CASE("sampler: top-k's and top-p's buckets give the full sort's ids", "[sampler]") {
  const int32_t V = 50000;
  struct Case {
    const char* what;
    float scale, spike, top_p, temp;
    int top_k;
  };
  for (const Case c : {Case{"confident: a nucleus of a few ids", 2.5f, 20.0f, 0.9f, 1.0f, 0},
                       Case{"uncertain: thousands of ids", 2.5f, 8.0f, 0.9f, 1.0f, 0},
                       Case{"flat: most of the vocabulary", 0.3f, 0.0f, 0.95f, 1.0f, 0},
                       Case{"a spike over a flat rest: the nucleus below 2^-24", 0.3f, 20.0f, 0.5f, 1.0f, 0},
                       Case{"top_p 0.999 and a low temperature", 3.0f, 5.0f, 0.999f, 0.6f, 0},
                       Case{"top-k 40 alone", 2.5f, 8.0f, 1.0f, 1.0f, 40},
                       Case{"top-k into the last bucket, then top-p", 0.3f, 20.0f, 0.7f, 1.0f, 30000}}) {
    std::vector<float> l = random_logits(V, 11, c.scale);
    l[4321] += c.spike;
    Sampler s(V, c.temp, c.top_p, c.top_k, 123);
    uint64_t rng = 123;
    INFO(c.what);
    for (int i = 0; i < 30; i++) CHECK(s(l) == reference_sample(l, c.temp, c.top_p, c.top_k, &rng));
  }
  // Logits on a coarse grid: runs of equal probability, ordered by id inside each bucket.
  std::vector<float> l(V);
  std::mt19937 g(3);
  for (float& v : l) v = (float)(g() % 40) * 0.25f;
  Sampler s(V, 1.0f, 0.8f, 0, 9);
  uint64_t rng = 9;
  for (int i = 0; i < 30; i++) CHECK(s(l) == reference_sample(l, 1.0, 0.8, 0, &rng));
}

TEST_CASE("sampler: the logits are not modified, and odd logits are handled", "[sampler]") {
  std::vector<float> l = random_logits(100, 3, 1.0f);
  const std::vector<float> copy = l;
  Sampler s(100, 0.9f, 0.9f, 10, 5);
  for (int i = 0; i < 10; i++) s(l);
  CHECK(l == copy);
  // NaN logits get no mass; +inf logits take all of it.
  Sampler t(4, 1.0f, 1.0f, 0, 5);
  for (int i = 0; i < 100; i++) {
    const int32_t a = t({NAN, 0.0f, NAN, 0.0f});
    CHECK((a == 1 || a == 3));
    CHECK(t({0.0f, INFINITY, 3.0f, 1e30f}) == 1);
  }
  // top_k above the vocabulary means no limit.
  Sampler big(4, 1.0f, 1.0f, 100, 5);
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 400; i++) seen[big({0, 0, 0, 0})]++;
  for (int c : seen) CHECK(c > 50);
}

TEST_CASE("sampler: invalid parameters are rejected, naming them", "[sampler]") {
  std::vector<double> scratch(ml_sampler_scratch_bytes(10) / 8 + 2);
  ml_sampler s;
  ml_error err;
  auto init = [&](int32_t vocab, float temp, float top_p, int32_t top_k, void* scr) {
    err = ml_error{};
    const ml_sampler_opts o = opts(temp, top_p, top_k, 1);
    return ml_sampler_init(&s, vocab, &o, scr, &err);
  };
  CHECK(init(10, NAN, 1.0f, 0, scratch.data()) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("temperature"));
  CHECK(init(10, -0.5f, 1.0f, 0, scratch.data()) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("temperature -0.5"));
  CHECK(init(10, INFINITY, 1.0f, 0, scratch.data()) == ML_E_ARG);
  CHECK(init(10, 1.0f, 0.0f, 0, scratch.data()) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("top_p 0"));
  CHECK(init(10, 1.0f, 1.5f, 0, scratch.data()) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("top_p 1.5"));
  CHECK(init(10, 1.0f, NAN, 0, scratch.data()) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("top_p"));
  CHECK(init(10, 1.0f, -0.1f, 0, scratch.data()) == ML_E_ARG);
  CHECK(init(10, 1.0f, 1.0f, -1, scratch.data()) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("top_k -1"));
  CHECK(init(0, 1.0f, 1.0f, 0, scratch.data()) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("vocab 0"));
  CHECK(init(10, 1.0f, 1.0f, 0, nullptr) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("scratch"));
  CHECK(init(10, 1.0f, 1.0f, 0, reinterpret_cast<char*>(scratch.data()) + 4) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("aligned"));
  CHECK(init(10, 1.0f, 1.0f, 0, scratch.data()) == ML_OK);
  // 12 bytes per id (a double and an index) and 24 * 2^s + 3 bucket counts, s = floor(log2(vocab))
  // - 6 within [2, 11]: at most 1.5 bytes more per id.
  CHECK(ml_sampler_scratch_bytes(10) == 10 * 12 + (24 * 4 + 3) * 4);
  CHECK(ml_sampler_scratch_bytes(32000) == 32000 * 12 + (24 * 256 + 3) * 4);
  CHECK(ml_sampler_scratch_bytes(151936) == 151936 * 12 + (24 * 2048 + 3) * 4);
  for (int32_t v = 256; v < 4000000; v = v * 3 / 2) CHECK(ml_sampler_scratch_bytes(v) <= (size_t)v * 27 / 2 + 12);
  CHECK(ml_sampler_scratch_bytes(0) == 0);
  CHECK(ml_sampler_scratch_bytes(-3) == 0);
}
