// The sampler's rows of ml_bench's kernel table (kernel_bench.cpp).
#pragma once
#include "krafla.h"

// Times ml_sampler_sample over a Qwen-sized vocabulary (151936 logits) at ml_run's defaults
// (temperature 1, top-p 0.9) and with top-k 40, on logits shaped like a trained model's (one clear
// favourite) and like a random-weight model's (flat): best ns per token of reps repetitions of at
// least min_seconds each.
ml_status ml_bench_sampler(int reps, double min_seconds, ml_kernel_bench_cb cb, void* user, ml_error* err);
