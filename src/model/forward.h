// The forward pass of the Llama family (spec/architecture.txt, "Data flow for one token") over a
// batch of tokens that may belong to different sessions: RMSNorm, Q8 activations into integer
// matrix products, RoPE, GQA attention over each token's own session cache, SwiGLU, classifier.
// The weights are read once per step for the whole batch. Every per-token operation is the one a
// single token would get, in the same order, and each matmul column equals the matvec of that
// token, so a token's logits are bit-identical whatever else shares its batch, and whatever the
// batch size and thread count.
#pragma once
#include <cstdint>

#include "model/exec.h"
#include "model/model.h"
#include "model/session.h"
#include "ops/matvec.h"

// n tokens (1 <= n <= exec max_batch): token i is tokens[i] of sessions[i] at position pos[i].
// The caller checks: ids in the vocabulary, pos[i] < that session's ctx, a session's positions in
// the batch distinct, and every earlier position of each session already in its cache.
// logits[i] != 0: the token's logits are computed into exec->logits, one row per such token in
// batch order; at most exec->logit_rows tokens of a batch may ask. The forward pass stores each token's K/V in its session; it does not touch a
// session's position or history (the engine does).
struct ml_batch {
  int n = 0;
  const int32_t* tokens = nullptr;
  ml_session* const* sessions = nullptr;
  const int* pos = nullptr;
  const uint8_t* logits = nullptr;
  // When exactly one token asks for logits and this is set, its row is written here (the
  // session's own logits) instead of exec->logits, which saves copying a vocabulary of floats.
  float* logits_out = nullptr;
};

// Returns the number of logit rows written.
int ml_forward(const ml_model* m, ml_exec* e, const ml_batch* b);

// Quantizes n tokens' rows of width w (row stride ld) into e's activation buffer, token t at t * w:
// the input of the next matrix products.
ml_qbatch ml_quantize_rows(ml_exec* e, const float* x, int ld, int w, int n);

// The matrix products of one decode step alone (forward_matrices.cpp): every matrix of the forward
// pass once, in its order and grouping, on e's pool, over a fixed activation (e's scratch is
// overwritten; no session is touched). Returns their summed seconds; *bytes: the weight bytes
// they read. For benchmarks: a token's time beyond this is its other work.
double ml_forward_matrices(const ml_model* m, ml_exec* e, double* bytes);
