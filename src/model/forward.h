// The forward pass of the Llama family (spec/architecture.txt, "Data flow for one token") over a
// batch of consecutive positions: RMSNorm, Q8 activations into integer matrix products, RoPE, GQA
// attention over the KV cache, SwiGLU, classifier. Every per-token operation is the one a single
// token would get, in the same order, and each matmul column equals the matvec of that token, so
// batched and token-by-token runs give bit-identical logits.
#pragma once
#include <cstdint>

#include "model/model.h"
#include "model/state.h"

enum ml_logits_mode : int {
  ML_LOGITS_NONE = 0,  // prompt tokens before the last: the classifier is skipped
  ML_LOGITS_LAST = 1,  // s->logits[0..vocab) = the last token's logits
  ML_LOGITS_ALL = 2,   // s->logits[t * vocab ...] for every token t of the batch
};

// Runs tokens[0, n) at positions pos0 .. pos0 + n - 1 (1 <= n <= s->p.batch, pos0 + n <= ctx,
// every id < vocab; the caller checks).
void ml_forward(const ml_model* m, ml_state* s, const int32_t* tokens, int n, int pos0, ml_logits_mode logits);
