// Token sampling from logits: greedy, temperature, top-k, top-p (nucleus) and min-p, with
// OpenAI's presence and frequency penalties, and a seeded xorshift64* generator (llama2.c's, same
// constants), so one seed gives the same ids on every build and platform.
//
// Contract:
// - ml_sampler_init validates the parameters (ML_E_ARG naming the parameter and its value);
//   sampling never fails and never allocates: its vocab-sized scratch (probabilities and an index
//   array, ml_sampler_scratch_bytes) comes from the caller, normally the model's arena.
// - Penalties first, into the scratch (the logits are never modified): the logit of every id
//   with a count c > 0 becomes (double)logit - (c * frequency_penalty + presence_penalty), in
//   double; the counts are those the caller passes (the generation loop: the ids it has sampled
//   so far, not the prompt).
// - Greedy (temperature 0, or top_k 1) returns the argmax of the (penalized) logits, ties to the
//   lowest id; NaN logits are never chosen.
// - Otherwise: p_i = exp((l_i - max) / T) in double, with a portable exp built from +, *, / and
//   ldexp (no libm exp, whose last bit differs across platforms); the most probable id gets
//   exactly 1. Then, in transformers' order: top-k keeps the k most probable ids; top-p keeps
//   the shortest prefix of the rest, by descending probability, whose mass exceeds top_p of
//   theirs; min-p drops the ids whose p_i is below min_p (min_p times the most probable one's).
//   (llama.cpp cuts in the same order but applies its temperature last, so its min-p differs
//   from this one when T != 1.) Ties in probability order by ascending id, so the candidate set and
//   its order are fully determined. Every sum runs in a fixed order. One draw u in [0, 1) per
//   token (24 bits, as llama2.c's random_f32) picks the first candidate whose running mass
//   exceeds u times the candidates' total; candidates are in id order when neither top-k nor
//   top-p applies, else in descending probability.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"

// The sampling parameters; the defaults are greedy decoding.
struct ml_sampler_opts {
  float temperature = 0.0f;        // finite, >= 0; 0: greedy
  float top_p = 1.0f;              // (0, 1]; 1: off
  int32_t top_k = 0;               // >= 0; 0: off
  float min_p = 0.0f;              // [0, 1); 0: off
  float presence_penalty = 0.0f;   // [-2, 2]
  float frequency_penalty = 0.0f;  // [-2, 2]
  uint64_t seed = 0;
};

// How often an id was sampled (a generation's sparse history: one entry per distinct id).
struct ml_token_count {
  int32_t id;
  int32_t count;
};

struct ml_sampler {
  int32_t vocab = 0;
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;        // 1: off
  int32_t top_k = 0;         // 0 or >= vocab: off
  float min_p = 0.0f;        // 0: off
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  uint64_t rng = 0;          // xorshift64* state, never 0
  double* prob = nullptr;    // scratch [vocab]
  int32_t* idx = nullptr;    // scratch [vocab]
  int32_t* bucket = nullptr; // scratch: top-k's and top-p's bucket counts
};

// Bytes of scratch ml_sampler_init needs for a vocabulary (8-byte aligned memory); 0 when vocab
// is not positive or the size overflows size_t.
size_t ml_sampler_scratch_bytes(int32_t vocab);

// Checks o's ranges (ml_sampler_opts; NaN is out of every range). seed: the generator's state (0
// is replaced by a fixed nonzero constant, since xorshift would stay at 0). scratch:
// ml_sampler_scratch_bytes(vocab) bytes, 8-byte aligned; it may be null only for greedy
// sampling without penalties.
ml_status ml_sampler_init(ml_sampler* s, int32_t vocab, const ml_sampler_opts* o, void* scratch, ml_error* err);

// Restarts the generator from seed (as ml_sampler_init does).
void ml_sampler_seed(ml_sampler* s, uint64_t seed);

// Picks the next token from logits[0, vocab), penalizing the ids of counts[0, n_counts) (distinct
// ids; entries with a count <= 0 or an id outside the vocabulary are ignored). Does not modify the
// logits.
int32_t ml_sampler_sample(ml_sampler* s, const float* logits, const ml_token_count* counts = nullptr,
                          size_t n_counts = 0);

// Index of the largest of x[0, n), the lowest on ties, skipping NaN; 0 when all are NaN.
int32_t ml_argmax(const float* x, int32_t n);

// xorshift64*: advances *state and returns the high 32 bits of state * 0x2545F4914F6CDD1D.
uint32_t ml_rng_u32(uint64_t* state);
// A uniform double in [0, 1) with 24 random bits: (ml_rng_u32 >> 8) / 2^24.
double ml_rng_unit(uint64_t* state);

// e^x for x <= 0 (and -inf), identical on every IEEE-754 platform: Cody-Waite reduction by
// ln 2, a degree-13 Taylor polynomial, and ldexp. Relative error below 1e-15.
double ml_exp_portable(double x);
