// The forward pass of the Llama family for one token at one position (spec/architecture.txt,
// "Data flow for one token"): RMSNorm, Q8 activations into integer matvecs, RoPE, GQA attention
// over the KV cache, SwiGLU, classifier. Writes the logits into s->logits.
#pragma once
#include "model/model.h"
#include "model/state.h"

// Runs token at position pos (0 <= pos < s->ctx, 0 <= token < vocab; the caller checks both).
// When want_logits is false the classifier is skipped (prompt tokens before the last).
void ml_forward(const ml_model* m, ml_state* s, int token, int pos, bool want_logits);
