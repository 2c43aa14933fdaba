// ref_forward's forward pass in double precision (xtensor + BLAS), written as a specification,
// not a fast path: every architecture of .mlb version 2 (Llama, Qwen2.5, Qwen3, Gemma 3 and
// Qwen3.5's attention and gated-delta layers), computed as Hugging Face transformers does.
// Contract: Forward feeds one token per step() at positions 0, 1, 2 ... and returns that
// position's logits. For a quantized model (.mlb) every matvec input is first rounded through
// the Q8 activation rule in float32 (q8_round_group); weights are already dequantized doubles.
// The KV cache is emulated per KvMode (attention layers only: a gated-delta layer's conv window
// and state stay double). Nothing here is shared with src/.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "ref_model.h"

namespace ref {

// How K and V are kept between positions:
//  f64: as computed (the float checkpoint's own math);
//  f32: cast to float32 and back;
//  f16: rounded to IEEE binary16 (nearest even) and back; queries stay unrounded;
//  q8:  per position and KV head, head_dim values quantized with one scale (the Q8 rule);
//       each query head is quantized the same way, scores = (integer dot) * qd * kd * scale,
//       and the V sum uses the dequantized values.
enum class KvMode { f64, f32, f16, q8 };

class Forward {
 public:
  // max_positions: how many step() calls will be made (at most model.max_seq).
  Forward(const RefModel& model, KvMode kv, uint32_t max_positions);
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;

  // Runs token at the next position; returns vocab logits.
  std::vector<double> step(uint32_t token);

 private:
  // A gated-delta layer's output for this position (before the residual add); h is the
  // activation-rounded normed input. Advances the layer's conv window and delta state.
  xt::xtensor<double, 1> delta_block(uint32_t l, const xt::xtensor<double, 1>& h);

  struct State;
  const RefModel& m_;
  KvMode kv_;
  uint32_t max_positions_;
  uint32_t pos_ = 0;
  std::unique_ptr<State> s_;
};

// The Q8 rule, applied to x[0..n) as one group, in float32: xf = float(x); amax = max |xf|;
// amax < 1e-30 (or NaN): q = 0, d = 0; else d = amax/127, id = 127/amax (float32),
// q = clamp(trunc(xf*id + copysign(0.5, xf)), -127, 127), multiply then add in float32.
// Writes the integer quants as doubles to q and returns d.
float q8_round_group(const double* x, size_t n, double* q);

// Rounding ties. An engine computes activations in float32, so a value whose exact scaled
// magnitude x * 127/amax lies within a few float32 ulps of a .5 rounding boundary may legitimately
// round the other way there; that one-step flip moves the logits by up to ~1e-2 on small models.
// q8_round_group counts such near-ties (within NEAR_TIE_REL relative distance); the test harness
// holds positions from the first near-tie on to the KL criterion instead of the 1e-3 bound.
inline constexpr double NEAR_TIE_REL = 3e-7;
// The number of near-ties q8_round_group has seen in this process.
uint64_t near_ties_seen();

// Rounds x to the nearest IEEE binary16 value (ties to even; overflow to +-inf), exactly.
double round_to_half(double x);

}  // namespace ref
