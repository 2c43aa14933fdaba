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

namespace {

uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Adds o to each byte of w, modulo 256 per byte (no carry between bytes).
uint32_t add_bytes(uint32_t w, uint8_t o) {
  const uint32_t ob = 0x01010101u * o;
  return ((w & 0x7F7F7F7Fu) + (ob & 0x7F7F7F7Fu)) ^ ((w ^ ob) & 0x80808080u);
}

}  // namespace

// A step is 4 consecutive bytes of one row, so it is packed as one 32-bit word: byte j of the
// word (little-endian, as on every target we build) is byte j of the step.
void ml_pack_matrix(ml_qtensor* W, const ml_pack_params* p, void* pq_out, void* pd_out) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the packed layout is written as little-endian words");
  const int G = p->g;
  const size_t nb = (size_t)W->cols / ML_QK;
  const int groups = (W->rows + G - 1) / G;
  const bool q4 = W->type == ML_DT_Q4;
  const int steps = q4 ? 4 : 8;
  const size_t row_bytes = nb * (q4 ? 16 : 32);
  const bool d16 = p->d16 && W->d_f16;
  const uint32_t flip = q4 ? p->q4_step_xor : p->q8_step_xor;
  // A padding row's step: value 0 (a Q4 nibble 8, a Q8 byte 0 plus the offset).
  const uint32_t pad = 0x01010101u * (q4 ? (uint8_t)(0x88 ^ p->q4_xor) : (uint8_t)p->q8_offset) ^ flip;
  const uint32_t q4_mask = 0x01010101u * (uint8_t)p->q4_xor;
  const uint8_t* src = static_cast<const uint8_t*>(W->q);
  uint8_t* pq = static_cast<uint8_t*>(pq_out);
  for (int g = 0; g < groups; ++g) {
    const int live = W->rows - g * G < G ? W->rows - g * G : G;  // rows of the group that exist
    const uint8_t* rows = src + (size_t)g * G * row_bytes;
    for (size_t b = 0; b < nb; ++b) {
      for (int s = 0; s < steps; ++s) {
        uint8_t* step = pq + ((g * nb + b) * steps + s) * 4 * G;
        const size_t at = b * (q4 ? 16 : 32) + 4 * (size_t)s;
        for (int i = 0; i < live; ++i) {
          const uint32_t w = load32(rows + i * row_bytes + at);
          const uint32_t v = (q4 ? w ^ q4_mask : add_bytes(w, (uint8_t)p->q8_offset)) ^ flip;
          std::memcpy(step + 4 * i, &v, 4);
        }
        for (int i = live; i < G; ++i) std::memcpy(step + 4 * i, &pad, 4);
      }
      // Scales through memcpy: pd need not be aligned to its element (the tests misalign it), and
      // ARMv7's float stores fault on an unaligned address.
      uint8_t* scales = static_cast<uint8_t*>(pd_out) + (g * nb + b) * G * (d16 ? 2 : 4);
      for (int i = 0; i < G; ++i) {
        const size_t from = ((size_t)g * G + i) * nb + b;
        if (d16) {
          const uint16_t h = i < live ? static_cast<const uint16_t*>(W->d)[from] : 0;
          std::memcpy(scales + 2 * i, &h, 2);
        } else {
          const float f = i < live ? ml_qtensor_scale(W, from) : 0.0f;
          std::memcpy(scales + 4 * i, &f, 4);
        }
      }
    }
  }
  W->pq = pq_out;
  W->pd = pd_out;
  W->pd_f16 = d16;
}
