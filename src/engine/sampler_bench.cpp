#include "sampler_bench.h"

#include <cmath>
#include <cstdlib>

#include "best_seconds.h"
#include "core/status.h"
#include "model/sampler.h"

namespace {

constexpr int32_t kVocab = 151936;

// Logits with a normal spread of `scale` (Box-Muller over xorshift64*), and id 1234 at `lead`
// when it is not 0: scale 2.5 and a lead of 20 give top-p a nucleus of one id out of ~1700
// candidates, as a trained model's confident step; scale 0.5 alone spreads the nucleus over most
// of the vocabulary, as a random-weight model does.
void fill_logits(float* l, float scale, float lead) {
  uint64_t state = 0x243F6A8885A308D3ull;
  for (int32_t i = 0; i < kVocab; i += 2) {
    const double u1 = (ml_rng_u32(&state) + 1.0) / 4294967296.0, u2 = ml_rng_u32(&state) / 4294967296.0;
    const double r = std::sqrt(-2.0 * std::log(u1)) * scale;
    l[i] = (float)(r * std::cos(6.283185307179586 * u2));
    if (i + 1 < kVocab) l[i + 1] = (float)(r * std::sin(6.283185307179586 * u2));
  }
  if (lead != 0.0f) l[1234] = lead;
}

}  // namespace

ml_status ml_bench_sampler(int reps, double min_seconds, ml_kernel_bench_cb cb, void* user, ml_error* err) {
  float* logits = static_cast<float*>(std::malloc(sizeof(float) * kVocab));
  void* scratch = std::malloc(ml_sampler_scratch_bytes(kVocab));
  if (!logits || !scratch) {
    std::free(logits);
    std::free(scratch);
    return ml_fail(err, ML_E_NOMEM, "kernel benchmark: cannot allocate the sampler's %d logits", (int)kVocab);
  }
  struct run {
    const char* op;
    const char* logits;
    float scale, lead, top_p;
    int32_t top_k;
  };
  const run runs[] = {{"sample (T 1, top-p 0.9)", "confident logits", 2.5f, 20.0f, 0.9f, 0},
                      {"sample (T 1, top-p 0.9)", "flat logits", 0.5f, 0.0f, 0.9f, 0},
                      {"sample (T 1, top-k 40)", "confident logits", 2.5f, 20.0f, 1.0f, 40}};
  ml_status st = ML_OK;
  for (const run& r : runs) {
    fill_logits(logits, r.scale, r.lead);
    ml_sampler_opts o;
    o.temperature = 1.0f;
    o.top_p = r.top_p;
    o.top_k = r.top_k;
    o.seed = 1;
    ml_sampler s;
    if ((st = ml_sampler_init(&s, kVocab, &o, scratch, err)) != ML_OK) break;
    const double best = ml::bench::best_seconds([&] { ml_sampler_sample(&s, logits); }, reps, min_seconds);
    const ml_kernel_bench_row row{r.op, r.logits, 1, kVocab, 1, best * 1e9, kVocab * 4.0 / best / 1e9, 0};
    cb(user, &row);
  }
  std::free(logits);
  std::free(scratch);
  return st;
}
