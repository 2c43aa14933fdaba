// Plain data shared by kernels, ops and the model: quantized weight matrices and quantized
// activations. Kernels see only these types and their own intrinsics.
//
// Block layout (docs/format.md has the byte-level table). A block is 32 consecutive values of
// one row. Quants and scales live in separate arrays:
//   Q8: int8 q[rows][cols], each in [-127, 127]; value = q * d
//   Q4: uint8 q[rows][cols/2]; in block b of a row, byte j (0..15) holds value j in its low
//       nibble and value j+16 in its high nibble (GGUF Q4_0 order); value = (nibble - 8) * d
//   scales d[rows][cols/32], float32, or IEEE half when d_f16 is set.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/half.h"
#include "krafla_types.h"  // ml_dtype

inline constexpr int ML_QK = 32;  // values per quantization block

// Activation blocks whose largest magnitude is below this quantize to all zeros with d = 0.
// It keeps 127 / amax finite.
inline constexpr float ML_QUANT_TINY = 1e-30f;

// A quantized weight matrix, row-major [rows][cols], cols a multiple of 32. Each matrix carries
// its own type, so one model may mix them (the ops dispatch on it; the forward pass never does).
struct ml_qtensor {
  int type = 0;             // ML_DT_Q8 or ML_DT_Q4 (krafla_types.h)
  const void* q = nullptr;  // int8 (Q8) or packed nibbles (Q4)
  const void* d = nullptr;  // per-block scales: float or half (d_f16)
  int rows = 0;
  int cols = 0;
  int d_f16 = 0;            // 1: d holds uint16_t halves
  // Packed copy (core/pack.h); null when the matrix is row-major only.
  const void* pq = nullptr;
  const void* pd = nullptr;
  int pd_f16 = 0;           // 1: pd holds uint16_t halves
};

// Scale of block i (row * cols/32 + block).
inline float ml_qtensor_scale(const ml_qtensor* W, size_t i) {
  return W->d_f16 ? ml_half_to_float(static_cast<const uint16_t*>(W->d)[i])
                  : static_cast<const float*>(W->d)[i];
}

// Q8_0-quantized activations: n values (n a multiple of 32 wherever a matvec reads them),
// q[n] and one float scale per block d[n/32].
struct ml_qact {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  int n = 0;
};
