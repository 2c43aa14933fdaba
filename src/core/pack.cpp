#include "core/pack.h"

#include <cstring>

#include "core/checked.h"

bool ml_pack_sizes(int type, int rows, int cols, bool scales_f16, const ml_pack_params* p, size_t* q_bytes,
                   size_t* d_bytes) {
  const size_t g = (size_t)p->g;
  const size_t groups = ((size_t)rows + g - 1) / g;
  const size_t nb = (size_t)cols / ML_QK;
  const size_t block_bytes = type == ML_DT_Q4 ? 16 : 32;  // per row
  const size_t scale_bytes = p->d16 && scales_f16 ? 2 : 4;
  size_t padded_rows;
  return ml_mul(groups, g, &padded_rows) && ml_mul3(padded_rows, nb, block_bytes, q_bytes) &&
         ml_mul3(padded_rows, nb, scale_bytes, d_bytes);
}

void ml_pack_matrix(ml_qtensor* W, const ml_pack_params* p, void* pq_out, void* pd_out) {
  const int G = p->g;
  const int nb = W->cols / ML_QK;
  const int groups = (W->rows + G - 1) / G;
  const bool q4 = W->type == ML_DT_Q4;
  const int steps = q4 ? 4 : 8;
  const bool d16 = p->d16 && W->d_f16;
  uint8_t* pq = static_cast<uint8_t*>(pq_out);
  for (int g = 0; g < groups; ++g) {
    for (int b = 0; b < nb; ++b) {
      for (int s = 0; s < steps; ++s) {
        uint8_t* step = pq + (((size_t)g * nb + b) * steps + s) * 4 * G;
        for (int i = 0; i < G; ++i) {
          const int row = g * G + i;
          for (int j = 0; j < 4; ++j) {
            uint8_t v;
            const uint8_t flip = (uint8_t)((q4 ? p->q4_step_xor : p->q8_step_xor) >> (8 * j));
            if (row >= W->rows) {
              v = q4 ? (uint8_t)(0x88 ^ p->q4_xor) : (uint8_t)p->q8_offset;  // value 0 (q4: nibble 8 = 0)
            } else if (q4) {
              v = static_cast<const uint8_t*>(W->q)[(size_t)row * W->cols / 2 + (size_t)b * 16 + 4 * s + j] ^ (uint8_t)p->q4_xor;
            } else {
              v = (uint8_t)(static_cast<const int8_t*>(W->q)[(size_t)row * W->cols + (size_t)b * 32 + 4 * s + j] + p->q8_offset);
            }
            step[4 * i + j] = v ^ flip;
          }
        }
      }
      for (int i = 0; i < G; ++i) {
        const int row = g * G + i;
        const size_t at = ((size_t)g * nb + b) * G + i;
        const size_t src = (size_t)row * nb + b;
        if (d16) {
          static_cast<uint16_t*>(pd_out)[at] = row < W->rows ? static_cast<const uint16_t*>(W->d)[src] : 0;
        } else {
          static_cast<float*>(pd_out)[at] = row < W->rows ? ml_qtensor_scale(W, src) : 0.0f;
        }
      }
    }
  }
  W->pq = pq_out;
  W->pd = pd_out;
  W->pd_f16 = d16;
}
