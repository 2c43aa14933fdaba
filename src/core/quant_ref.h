// The reference quantization rules. These are the specification that every quantize_q8 kernel
// must reproduce bit for bit (spec/kernels.txt), and the rules the converters use for weights.
#pragma once
#include <cstddef>
#include <cstdint>

// Q8_0, for activations and Q8 weights. Per block of up to 32 values (the last may be short):
//   amax = max |x|; if amax < ML_QUANT_TINY: q = 0, d = 0
//   else d = amax / 127, id = 127 / amax (both float32),
//        q = clamp(trunc(x * id + copysign(0.5, x)), -127, 127), multiply then add, no FMA.
// Writes n quants and ceil(n / 32) scales.
void ml_quantize_q8_ref(int8_t* q, float* d, const float* x, size_t n);

// Q4_0, for weights only (n a multiple of 32), the GGUF rule: per block, m = the value of
// largest magnitude (with its sign), d = m / -8, id = 1 / d (0 when d = 0),
// nibble = min(15, (int)(x * id + 8.5)). Byte j holds values j (low) and j+16 (high).
void ml_quantize_q4_ref(uint8_t* q, float* d, const float* x, size_t n);

// One scale for a whole row of n values (the Q8 KV cache and the quantized query), with the
// same rounding rule as ml_quantize_q8_ref.
void ml_quantize_row_q8_ref(int8_t* q, float* d, const float* x, size_t n);

// Value i of a Q4 block-row (GGUF nibble order), as the signed integer nibble - 8.
inline int ml_q4_value(const uint8_t* row, size_t i) {
  const uint8_t byte = row[(i / 32) * 16 + (i % 16)];
  return ((i % 32) < 16 ? (byte & 0x0F) : (byte >> 4)) - 8;
}
