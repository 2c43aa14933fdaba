// An independent, naive sampler written from the documents, for the tests of the engine's
// (tests/model/test_sampler_penalties.cpp, tests/api/test_gen_penalties.cpp): OpenAI's penalty
// formula over a dense count array, softmax with std::exp in double, a full sort by (probability
// descending, id ascending), the temperature and the cuts in transformers' order (top-k, top-p,
// min-p), and llama2.c's xorshift64* written out again for the draws. It includes nothing of
// krafla.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace oracle {

struct params {
  float temp = 1.0f, top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f, presence = 0.0f, frequency = 0.0f;
};

// llama2.c's random_u32 and random_f32 (24 bits).
struct xorshift {
  uint64_t state;
  double unit() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const uint32_t u = (uint32_t)((state * 0x2545F4914F6CDD1Dull) >> 32);
    return (double)(u >> 8) / 16777216.0;
  }
};

// OpenAI: logit[j] -= c[j] * frequency_penalty + (c[j] > 0) * presence_penalty.
inline std::vector<double> penalized(const float* l, const std::vector<int>& counts, const params& p) {
  std::vector<double> out(counts.size());
  for (size_t j = 0; j < counts.size(); ++j)
    out[j] = (double)l[j] - (counts[j] * (double)p.frequency + (counts[j] > 0) * (double)p.presence);
  return out;
}

inline int32_t greedy(const std::vector<double>& pl) {
  return (int32_t)(std::max_element(pl.begin(), pl.end()) - pl.begin());  // the first maximum
}

// The candidates in the order the draw walks them (id order when neither top-k nor top-p
// applies, else by descending probability), with every id's unnormalised probability in *prob.
inline std::vector<int32_t> candidates(const std::vector<double>& pl, const params& p, std::vector<double>* prob) {
  const int32_t V = (int32_t)pl.size();
  const double mx = *std::max_element(pl.begin(), pl.end());
  std::vector<double>& q = *prob;
  q.assign(V, 0.0);
  for (int32_t i = 0; i < V; ++i) q[i] = std::exp((pl[i] - mx) / p.temp);
  std::vector<int32_t> idx(V);
  for (int32_t i = 0; i < V; ++i) idx[i] = i;
  const bool use_k = p.top_k > 0 && p.top_k < V, use_p = p.top_p < 1.0f;
  if (use_k || use_p)
    std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return q[a] != q[b] ? q[a] > q[b] : a < b; });
  if (use_k) idx.resize(p.top_k);
  if (use_p) {
    double total = 0;
    for (int32_t i : idx) total += q[i];
    double cum = 0;
    size_t keep = idx.size();
    for (size_t i = 0; i < idx.size(); ++i) {
      cum += q[idx[i]];
      if (cum > p.top_p * total) {
        keep = i + 1;
        break;
      }
    }
    idx.resize(keep);
  }
  // min-p: drop what is below min_p times the most probable one's (whose q is exp(0) = 1).
  std::vector<int32_t> kept;
  for (int32_t i : idx)
    if (q[i] >= p.min_p * 1.0) kept.push_back(i);
  return kept;
}

// The next id from logits[0, counts.size()) given how often each id was sampled before; one draw
// of rng unless greedy.
inline int32_t sample(const float* l, const std::vector<int>& counts, const params& p, xorshift* rng) {
  const std::vector<double> pl = penalized(l, counts, p);
  if (p.temp == 0.0f || p.top_k == 1) return greedy(pl);
  std::vector<double> q;
  const std::vector<int32_t> cand = candidates(pl, p, &q);
  double total = 0;
  for (int32_t i : cand) total += q[i];
  const double r = rng->unit() * total;
  double acc = 0;
  for (int32_t i : cand)
    if (r < (acc += q[i])) return i;
  return cand.back();
}

}  // namespace oracle
