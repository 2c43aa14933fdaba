// The row-interleaved ("packed") layout of a Q8/Q4 weight matrix (spec/architecture.txt, "Weight
// packing"), and the function that builds it from the row-major layout.
//
// Rows are taken G at a time (G = the ISA's lane count: 16 avx512vnni, 8 avx2/avxvnni, 4 SSE and
// NEON); one 32-bit lane owns one row. nb = cols / 32 blocks per row, ng = ceil(rows / G) groups.
// Within a group, blocks follow each other; a block is a run of 4-byte steps, each step holding
// 4 consecutive bytes of every row of the group:
//
//   Q8: 8 steps per block. Byte j of row i in step s is value 4s + j of the block, plus q8_offset
//       (0 or 128: VNNI and SSE2 need unsigned weights), stored as uint8:
//         pq[((g * nb + b) * 8 + s) * 4G + 4i + j] = (uint8)(q[row][32b + 4s + j] + q8_offset)
//   Q4: 4 steps per block. Byte j of row i in step s is byte 4s + j of the row's 16-byte Q4 block
//       (low nibble: value 4s + j, high nibble: value 16 + 4s + j), XORed with q4_xor (0x88 on
//       NEON dotprod, where the nibbles then read as signed q - 8):
//         pq[((g * nb + b) * 4 + s) * 4G + 4i + j] = qb[row][16b + 4s + j] ^ q4_xor
//   Both: the 4 bytes of a row in a step are then XORed with q8_step_xor / q4_step_xor (byte j
//       with bits 8j..8j+7), so an ISA can flip single bytes: wasm_simd128 reads each 16-bit lane
//       whole, which needs the low byte of a Q8 lane unsigned (0x00800080) and the top nibble of a
//       Q4 lane signed (0x80008000).
//   Scales: pd[(g * nb + b) * G + i] = d[row][b], float32, or IEEE half when packed with d16
//       (the AVX2-and-up builds read f16 scales directly, halving the scale bytes of a decode).
//
// Rows of the last group beyond `rows` are padding: quants 0 (+ offset) and scale 0, so they
// contribute nothing; kernels never write their outputs.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/types.h"

struct ml_pack_params {
  int g = 0;              // rows per group; 0 = the build does not pack
  int q8_offset = 0;      // 0 or 128
  int q4_xor = 0;         // 0 or 0x88
  bool d16 = false;       // keep f16 scales as f16 (only when the matrix has f16 scales)
  bool pack_q8 = true;    // false: Q8 matrices stay row-major (an ISA whose Q8 row-major kernel wins)
  uint32_t q8_step_xor = 0;  // XORed into a row's 4 bytes of every Q8 step (after q8_offset)
  uint32_t q4_step_xor = 0;  // XORed into a row's 4 bytes of every Q4 step (after q4_xor)
};

// Same layout (every field but pack_q8, which only says which matrices get packed).
constexpr bool ml_pack_same_layout(const ml_pack_params& a, const ml_pack_params& b) {
  return a.g == b.g && a.q8_offset == b.q8_offset && a.q4_xor == b.q4_xor && a.d16 == b.d16 &&
         a.q8_step_xor == b.q8_step_xor && a.q4_step_xor == b.q4_step_xor;
}

// Bytes of the packed quants and scales of a rows x cols matrix of type (ML_DT_Q8 or ML_DT_Q4);
// false on overflow.
bool ml_pack_sizes(int type, int rows, int cols, bool scales_f16, const ml_pack_params* p, size_t* q_bytes,
                   size_t* d_bytes);

// Writes W's packed copy (of its type) into pq/pd (sized by ml_pack_sizes) and points W->pq/W->pd
// at them; W->pd_f16 tells whether pd holds halves.
void ml_pack_matrix(ml_qtensor* W, const ml_pack_params* p, void* pq, void* pd);

// Q8 activations of several tokens: token t's n quants at q + t * n, its scales at d + t * n / 32.
struct ml_qbatch {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  int n = 0;
  int n_tokens = 0;
};
