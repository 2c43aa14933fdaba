// Token sampling: penalties, greedy, temperature, top-k, top-p, min-p over caller-provided
// scratch, with llama2.c's xorshift64* generator and a portable exp. See sampler.h for the exact
// rules.
#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/checked.h"

namespace {

constexpr uint64_t kZeroSeed = 0x9E3779B97F4A7C15ull;  // replaces seed 0 (a fixed point of xorshift)

// Descending probability, then ascending id: a total order, so std::sort and std::nth_element
// give the same result in every standard library.
struct ByProb {
  const double* p;
  bool operator()(int32_t a, int32_t b) const { return p[a] != p[b] ? p[a] > p[b] : a < b; }
};

}  // namespace

uint32_t ml_rng_u32(uint64_t* state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

double ml_rng_unit(uint64_t* state) { return (double)(ml_rng_u32(state) >> 8) / 16777216.0; }

double ml_exp_portable(double x) {
  if (std::isnan(x)) return x;
  if (x < -745.2) return 0.0;  // below the smallest subnormal, e^x rounds to 0
  if (x > 0.0) x = 0.0;        // only called with x <= 0; clamp rounding strays
  // x = k ln2 + r, |r| <= ln2/2. ln2_hi has 32 significant bits, so k * ln2_hi is exact.
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  // floor(y) for y in [-1075, 0.5] without a libm call (the loop over the vocabulary runs this
  // per logit): truncation, one lower for a negative non-integer.
  const double y = x * kLog2e + 0.5;
  double k = (double)(int64_t)y;
  if (k > y) k -= 1.0;
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  // Taylor to r^13: the first omitted term is below 0.35^14 / 14! < 5e-18.
  double p = 1.0 / 6227020800.0;  // 1/13!
  static constexpr double kInvFact[13] = {1.0,
                                          1.0,
                                          1.0 / 2,
                                          1.0 / 6,
                                          1.0 / 24,
                                          1.0 / 120,
                                          1.0 / 720,
                                          1.0 / 5040,
                                          1.0 / 40320,
                                          1.0 / 362880,
                                          1.0 / 3628800,
                                          1.0 / 39916800,
                                          1.0 / 479001600};
  for (int i = 12; i >= 0; i--) p = p * r + kInvFact[i];
  // Scaling by 2^k: one multiplication by 2^k built from its bits is exact while the result is
  // normal (p >= 0.7, k >= -1021), the same value as ldexp; below, ldexp rounds the subnormal.
  if (k < -1021.0) return std::ldexp(p, (int)k);
  const uint64_t bits = (uint64_t)((int64_t)k + 1023) << 52;
  double two_k;
  std::memcpy(&two_k, &bits, sizeof two_k);
  return p * two_k;
}

int32_t ml_argmax(const float* x, int32_t n) {
  // Greedy decoding runs this over the whole vocabulary every token (151936 logits for Qwen), so
  // it takes two passes without a loop-carried dependence: the maximum in kLanes independent
  // running maxima (vector registers), then the first index holding it. A NaN compares false and
  // is never the maximum; ties (and -0 against +0, which compare equal) keep the first index.
  constexpr int32_t kLanes = 16;
  float lane[kLanes];
  for (float& v : lane) v = -INFINITY;
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int32_t j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  float m = -INFINITY;
  for (const float v : lane) m = v > m ? v : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (i = 0; i < n; ++i)
    if (x[i] == m) return i;
  return 0;  // every logit is NaN
}

size_t ml_sampler_scratch_bytes(int32_t vocab) {
  size_t bytes;
  if (vocab <= 0 || !ml_mul((size_t)vocab, sizeof(double) + sizeof(int32_t), &bytes)) return 0;
  return bytes;
}

void ml_sampler_seed(ml_sampler* s, uint64_t seed) { s->rng = seed ? seed : kZeroSeed; }

ml_status ml_sampler_init(ml_sampler* s, int32_t vocab, const ml_sampler_opts* o, void* scratch, ml_error* err) {
  *s = ml_sampler{};
  if (vocab <= 0) return ml_fail(err, ML_E_ARG, "sampler: vocab %d must be positive", (int)vocab);
  if (!std::isfinite(o->temperature) || o->temperature < 0.0f)
    return ml_fail(err, ML_E_ARG, "sampler: temperature %g must be finite and >= 0", (double)o->temperature);
  if (!(o->top_p > 0.0f && o->top_p <= 1.0f))
    return ml_fail(err, ML_E_ARG, "sampler: top_p %g must be in (0, 1]", (double)o->top_p);
  if (o->top_k < 0) return ml_fail(err, ML_E_ARG, "sampler: top_k %d must be >= 0", (int)o->top_k);
  if (!(o->min_p >= 0.0f && o->min_p < 1.0f))
    return ml_fail(err, ML_E_ARG, "sampler: min_p %g must be in [0, 1)", (double)o->min_p);
  if (!(o->presence_penalty >= -2.0f && o->presence_penalty <= 2.0f))
    return ml_fail(err, ML_E_ARG, "sampler: presence_penalty %g must be in [-2, 2]", (double)o->presence_penalty);
  if (!(o->frequency_penalty >= -2.0f && o->frequency_penalty <= 2.0f))
    return ml_fail(err, ML_E_ARG, "sampler: frequency_penalty %g must be in [-2, 2]", (double)o->frequency_penalty);
  const bool greedy = o->temperature == 0.0f || o->top_k == 1;
  const bool penalties = o->presence_penalty != 0.0f || o->frequency_penalty != 0.0f;
  if (!greedy || penalties) {
    if (ml_sampler_scratch_bytes(vocab) == 0)
      return ml_fail(err, ML_E_NOMEM, "sampler: scratch for vocab %d overflows", (int)vocab);
    if (!scratch)
      return ml_fail(err, ML_E_ARG, "sampler: scratch is null (temperature %g%s needs it)", (double)o->temperature,
                     penalties ? " with penalties" : "");
    if (reinterpret_cast<uintptr_t>(scratch) % alignof(double) != 0)
      return ml_fail(err, ML_E_ARG, "sampler: scratch %p is not 8-byte aligned", scratch);
    s->prob = static_cast<double*>(scratch);
    s->idx = reinterpret_cast<int32_t*>(static_cast<double*>(scratch) + vocab);
  }
  s->vocab = vocab;
  s->temperature = o->temperature;
  s->top_p = o->top_p;
  s->top_k = o->top_k;
  s->min_p = o->min_p;
  s->presence_penalty = o->presence_penalty;
  s->frequency_penalty = o->frequency_penalty;
  ml_sampler_seed(s, o->seed);
  return ML_OK;
}

namespace {

// Index of the largest of x[0, n), the lowest on ties, skipping NaN; 0 when all are NaN (as
// ml_argmax, over the penalized logits).
int32_t argmax_double(const double* x, int32_t n) {
  int32_t i = 0;
  while (i < n && std::isnan(x[i])) ++i;
  if (i == n) return 0;
  int32_t best = i;
  double m = x[i];
  for (++i; i < n; ++i)
    if (x[i] > m) m = x[best = i];
  return best;
}

// Samples (temperature, top-k, top-p, min-p, one draw) once the logits are known: logit(i) is id
// i's logit as a double, top the index of the largest. logit may read s->prob[i]: each entry is
// read before it is overwritten.
template <class Logit>
int32_t draw(ml_sampler* s, Logit logit, int32_t top) {
  const int32_t V = s->vocab;
  const double mx = logit(top);
  if (std::isnan(mx)) return 0;  // every logit is NaN
  const double T = s->temperature;
  double* p = s->prob;
  int32_t* idx = s->idx;
  // Unnormalised probabilities: the maximum gets exactly 1, NaN gets 0; with +inf logits, only
  // the +inf ones keep mass.
  for (int32_t i = 0; i < V; i++) {
    const double l = logit(i);
    p[i] = l == mx ? 1.0 : std::isnan(l) ? 0.0 : ml_exp_portable((l - mx) / T);
    idx[i] = i;
  }
  int32_t n = V;
  bool sorted = false;
  const ByProb by_prob{p};
  if (s->top_k > 0 && s->top_k < V) {
    n = s->top_k;
    std::nth_element(idx, idx + (n - 1), idx + V, by_prob);
    std::sort(idx, idx + n, by_prob);
    sorted = true;
  }
  if (s->top_p < 1.0f) {
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) total += p[idx[i]];
    const double mass = (double)s->top_p * total;
    if (!sorted) {
      // llama2.c's cut: the ids below (1 - top_p) * total / (n - 1), at most n - 1 of them
      // since the most probable one is always kept, together carry less than (1 - top_p) *
      // total, so the nucleus lies among the others; sort only those. (idx is still 0..V-1.)
      if (n > 1) {
        const double cut = (1.0 - (double)s->top_p) * total / (double)(n - 1);
        int32_t kept = 0;
        for (int32_t i = 0; i < n; i++)
          if (p[i] >= cut || i == top) idx[kept++] = i;
        n = kept;
      }
      std::sort(idx, idx + n, by_prob);
      sorted = true;
    }
    double cum = 0.0;
    int32_t last = n - 1;
    for (int32_t i = 0; i < n; i++) {
      cum += p[idx[i]];
      if (cum > mass) {
        last = i;
        break;
      }
    }
    n = last + 1;
  }
  if (s->min_p > 0.0f) {
    // The most probable id has p exactly 1 (and min_p < 1), so it always stays.
    const double floor = s->min_p;
    if (sorted) {
      while (n > 1 && p[idx[n - 1]] < floor) --n;
    } else {
      int32_t kept = 0;
      for (int32_t i = 0; i < n; i++)
        if (p[idx[i]] >= floor) idx[kept++] = idx[i];
      n = kept;
    }
  }
  double total = 0.0;
  for (int32_t i = 0; i < n; i++) total += p[idx[i]];
  const double r = ml_rng_unit(&s->rng) * total;
  double acc = 0.0;
  for (int32_t i = 0; i < n; i++) {
    acc += p[idx[i]];
    if (r < acc) return idx[i];
  }
  return idx[n - 1];  // r rounded onto the total
}

}  // namespace

int32_t ml_sampler_sample(ml_sampler* s, const float* logits, const ml_token_count* counts, size_t n_counts) {
  const int32_t V = s->vocab;
  const bool greedy = s->temperature == 0.0f || s->top_k == 1;
  const bool penalize = n_counts > 0 && (s->presence_penalty != 0.0f || s->frequency_penalty != 0.0f);
  if (!penalize) {
    const int32_t top = ml_argmax(logits, V);
    if (greedy) return top;
    return draw(s, [logits](int32_t i) { return (double)logits[i]; }, top);
  }
  // The penalized logits, in the probability scratch (draw turns them into probabilities in place).
  double* pl = s->prob;
  for (int32_t i = 0; i < V; i++) pl[i] = logits[i];
  const double freq = s->frequency_penalty, pres = s->presence_penalty;
  for (size_t k = 0; k < n_counts; k++) {
    const ml_token_count c = counts[k];
    if (c.id < 0 || c.id >= V || c.count <= 0) continue;
    pl[c.id] -= (double)c.count * freq + pres;
  }
  const int32_t top = argmax_double(pl, V);
  if (greedy) return top;
  return draw(s, [pl](int32_t i) { return pl[i]; }, top);
}
