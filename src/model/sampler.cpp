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

// Top-k's and top-p's probability buckets (lazy_order): 24 octaves below 1, each in 2^sub_bits
// steps, p = 1 in bucket 0, and one bucket after them for everything smaller. Finer steps leave
// less to sort, coarser ones take less memory: sub_bits = floor(log2(vocab)) - 6 within [2, 11]
// adds at most 1.5 bytes per id to the scratch (2048 steps an octave for a 150k vocabulary).
struct buckets {
  int sub_bits;
  int32_t range;  // buckets before the last

  explicit buckets(int32_t vocab) {
    int log2 = 0;
    while (log2 < 30 && (int32_t{2} << log2) <= vocab) ++log2;  // floor(log2(vocab))
    sub_bits = std::clamp(log2 - 6, 2, 11);
    range = (24 << sub_bits) + 1;
  }
  int32_t counts() const { return range + 2; }  // the last bucket and the prefix sums' extra entry
  // p's bucket for p in [0, 1]: a larger p never lands in a later bucket, since the bits of a
  // non-negative double order as its value.
  int32_t of(double p) const {
    uint64_t bits;
    std::memcpy(&bits, &p, sizeof bits);
    const int64_t below = ((int64_t)1023 << sub_bits) - (int64_t)(bits >> (52 - sub_bits));
    return below < 0 ? 0 : below < range ? (int32_t)below : range;  // p > 1 cannot happen; kept safe
  }
};

// Descending probability, then ascending id: a total order, so std::sort and std::nth_element
// give the same result in every standard library.
struct ByProb {
  const double* p;
  bool operator()(int32_t a, int32_t b) const { return p[a] != p[b] ? p[a] > p[b] : a < b; }
};

// e^x for x <= 0 that is not NaN (ml_exp_portable): x = k ln2 + r with |r| <= ln2/2 (ln2_hi has 32
// significant bits, so k * ln2_hi is exact), a Taylor polynomial to r^13 (the first omitted term
// is below 0.35^14 / 14! < 5e-18), times 2^k. Selects instead of branches, so that the loop over
// the vocabulary vectorizes; each step is one IEEE operation per lane, so a vector build gives
// the scalar bits (-ffp-contract=off keeps the compiler from fusing them).
inline double exp_portable_lane(double x) {
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const bool underflow = x < -745.2;
  x = x > 0.0 ? 0.0 : underflow ? 0.0 : x;
  // k = floor(y), y in [-1075, 0.5]: y rounded to an integer by adding and subtracting 2^52 +
  // 2^51 (exact in round-to-nearest), one lower where that rounded up. (std::floor would keep the
  // loop from vectorizing while floating-point exceptions are honoured.)
  constexpr double kRound = 6755399441055744.0;  // 2^52 + 2^51
  const double y = x * kLog2e + 0.5;
  const double near = (y + kRound) - kRound;
  const double k = near > y ? near - 1.0 : near;  // in [-1075, 0]
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  double q = 1.0 / 6227020800.0;
  q = q * r + 1.0 / 479001600;
  q = q * r + 1.0 / 39916800;
  q = q * r + 1.0 / 3628800;
  q = q * r + 1.0 / 362880;
  q = q * r + 1.0 / 40320;
  q = q * r + 1.0 / 5040;
  q = q * r + 1.0 / 720;
  q = q * r + 1.0 / 120;
  q = q * r + 1.0 / 24;
  q = q * r + 1.0 / 6;
  q = q * r + 1.0 / 2;
  q = q * r + 1.0;
  q = q * r + 1.0;
  // 2^k from its bits. Below k = -1021 the result is subnormal: scale by 2^(k+64) (exact, still
  // normal) and then by 2^-64, which rounds once, as ldexp does. The exponent field comes from
  // k + 2^52 + 2^51, whose low mantissa bits hold k plus 2^51 (no float-to-int conversion, which
  // SSE2 and AVX2 lack for 64-bit lanes).
  const bool subnormal = k < -1021.0;
  const double ks = subnormal ? k + 64.0 : k;
  const double shifted = ks + kRound;
  uint64_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  bits = (bits + 1023) << 52;
  double two_k;
  std::memcpy(&two_k, &bits, sizeof two_k);
  const double v = q * two_k;
  return underflow ? 0.0 : subnormal ? v * 0x1p-64 : v;
}

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
  return exp_portable_lane(x);
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
  if (vocab <= 0 || !ml_mul((size_t)vocab, sizeof(double) + sizeof(int32_t), &bytes) ||
      !ml_add(bytes, (size_t)buckets(vocab).counts() * sizeof(int32_t), &bytes))
    return 0;
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
    s->bucket = s->idx + vocab;
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

// Sorts a bucket's ids, ascending on arrival, into ByProb order. Most buckets hold a few dozen:
// those are sorted by insertion on a copy of their probabilities (a stable sort by probability
// alone keeps equal ones in id order), without reading p at random ids on every comparison.
void sort_bucket(int32_t* ids, int32_t n, const double* p) {
  constexpr int32_t kSmall = 64;
  if (n > kSmall) {
    std::sort(ids, ids + n, ByProb{p});
    return;
  }
  double key[kSmall];
  int32_t id[kSmall];
  for (int32_t i = 0; i < n; i++) {
    const double k = p[ids[i]];
    int32_t j = i;
    for (; j > 0 && key[j - 1] < k; j--) {
      key[j] = key[j - 1];
      id[j] = id[j - 1];
    }
    key[j] = k;
    id[j] = ids[i];
  }
  std::copy(id, id + n, ids);
}

// The ids in ByProb order, sorted only as far as they are read. A full sort of most of a 150k
// vocabulary took longer than a small model's forward pass, and top-k's selection over all of it
// half as long; so the candidates (p >= cut, and `top`) are counted into probability buckets and
// placed in bucket order (two passes over p), and a bucket is sorted when a reader reaches it.
// The order read is the one a full sort gives, since buckets never reorder two ids and ByProb is
// a total order; so is every sum over it.
struct lazy_order {
  int32_t* idx;        // [n]: the candidates placed, in bucket order; [0, sorted) in ByProb order
  const double* p;
  const int32_t* end;  // end[b]: one past bucket b in idx
  int32_t n = 0, sorted = 0, next = 0;  // next: the first bucket not sorted yet

  // want: how many ids, from the first in order, the reader may read (top-k's k; top-p: all of
  // them); the buckets after the one that holds the want-th are counted but not placed.
  lazy_order(const double* prob, int32_t V, int32_t top, double cut, int32_t want, int32_t* ids, int32_t* count)
      : idx(ids), p(prob), end(count) {
    const buckets B(V);
    const int32_t last = B.range;
    std::fill(count, count + B.counts(), 0);
    // Most of a large vocabulary lands in the last bucket: it is counted by difference, since
    // one counter in memory would serialize the loop on its increments.
    int32_t candidates = 0;
    for (int32_t i = 0; i < V; i++) {
      if (p[i] < cut && i != top) continue;
      ++candidates;
      const int32_t b = B.of(p[i]);
      if (b < last) count[b + 1]++;
    }
    for (int32_t b = 1; b <= last; b++) count[b] += count[b - 1];  // count[b]: bucket b's start
    count[last + 1] = candidates;
    int32_t stop = 0;  // the first bucket that ends at or after the want-th id
    while (stop < last && count[stop + 1] < want) ++stop;
    n = count[stop + 1];
    for (int32_t i = 0; i < V; i++) {
      if (p[i] < cut && i != top) continue;
      const int32_t b = B.of(p[i]);
      if (b <= stop) idx[count[b]++] = i;  // then count[b]: bucket b's end
    }
  }
  // Sorts buckets until at least `want` ids (or all n) are in order.
  void sort_to(int32_t want) {
    while (sorted < want && sorted < n) {
      sort_bucket(idx + sorted, end[next] - sorted, p);
      sorted = end[next++];
    }
  }
};

// Top-p: the length of the shortest prefix of idx[0, n) whose mass exceeds `mass` (n when none
// does). idx is in ByProb order, or becomes so as `order` (when given) sorts it.
int32_t nucleus(const int32_t* idx, int32_t n, const double* p, double mass, lazy_order* order) {
  double cum = 0.0;
  for (int32_t i = 0; i < n; i++) {
    if (order) order->sort_to(i + 1);
    cum += p[idx[i]];
    if (cum > mass) return i + 1;
  }
  return n;
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
  // the +inf ones keep mass. Selects, not branches, so the compiler vectorizes it.
  for (int32_t i = 0; i < V; i++) {
    const double l = logit(i);
    const double e = exp_portable_lane((l - mx) / T);
    p[i] = l == mx ? 1.0 : l != l ? 0.0 : e;
    idx[i] = i;
  }
  int32_t n = V;
  bool sorted = false;
  if (s->top_k > 0 && s->top_k < V) {
    lazy_order order(p, V, top, 0.0, s->top_k, idx, s->bucket);  // among every id (p >= 0)
    order.sort_to(s->top_k);
    n = s->top_k;
    sorted = true;
  }
  if (s->top_p < 1.0f) {
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) total += p[idx[i]];
    const double mass = (double)s->top_p * total;
    if (sorted) {
      n = nucleus(idx, n, p, mass, nullptr);  // top-k's, in order
    } else {
      // llama2.c's cut: the ids below (1 - top_p) * total / (V - 1), at most V - 1 of them
      // since the most probable one is always kept, together carry less than (1 - top_p) *
      // total, so the nucleus lies among the others.
      const double cut = V > 1 ? (1.0 - (double)s->top_p) * total / (double)(V - 1) : 0.0;
      lazy_order order(p, V, top, cut, V, idx, s->bucket);
      n = nucleus(idx, order.n, p, mass, &order);
      sorted = true;
    }
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
