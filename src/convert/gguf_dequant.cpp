// GGUF tensor types to float, following ggml's reference decoders (ggml-quants.c,
// dequantize_row_*), whose block layouts are the published GGUF format: F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1 (32 values a block) and the K-quants Q4_K, Q5_K, Q6_K (256 values a
// block; Q4_K_M files mix Q4_K and Q6_K). The importer uses these for the tensors it cannot copy.
#include <cstring>

#include "convert/gguf_internal.h"
#include "core/half.h"

namespace {

float h2f(const uint8_t* p) { return ml_half_to_float((uint16_t)(p[0] | p[1] << 8)); }

// Q4_K/Q5_K: the 6-bit scale and min of sub-block j from the 12 packed bytes q.
void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Block layouts (bytes): Q4_1 d, m, qs[16]; Q5_0 d, qh[4], qs[16]; Q5_1 d, m, qh[4], qs[16];
// Q4_K d, dmin, scales[12], qs[128]; Q5_K d, dmin, scales[12], qh[32], qs[128];
// Q6_K ql[128], qh[64], scales[16] (int8), d.
void q4_k(const uint8_t* b, float* y) {
  const float d = h2f(b), min = h2f(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
    uint8_t s1, m1, s2, m2;
    scale_min_k4(is, sc, &s1, &m1);
    scale_min_k4(is + 1, sc, &s2, &m2);
    const float d1 = d * s1, mm1 = min * m1, d2 = d * s2, mm2 = min * m2;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - mm1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - mm2;
  }
}

void q5_k(const uint8_t* b, float* y) {
  const float d = h2f(b), min = h2f(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
    uint8_t s1, m1, s2, m2;
    scale_min_k4(is, sc, &s1, &m1);
    scale_min_k4(is + 1, sc, &s2, &m2);
    const float d1 = d * s1, mm1 = min * m1, d2 = d * s2, mm2 = min * m2;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - mm1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - mm2;
  }
}

void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = h2f(b + 208);
  for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = (int)((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
      const int q2 = (int)((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
      const int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
      const int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
      y[l] = d * sc[is] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
  }
}

void q5_01(const uint8_t* b, float* y, bool has_min) {
  const float d = h2f(b), m = has_min ? h2f(b + 2) : 0.0f;
  const uint8_t* p = b + (has_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  const int off = has_min ? 0 : 16;
  for (int j = 0; j < 16; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = (float)(((qs[j] & 0xF) | h0) - off) * d + m;
    y[j + 16] = (float)(((qs[j] >> 4) | h1) - off) * d + m;
  }
}

}  // namespace

bool cv_gguf_dequant(uint32_t type, const uint8_t* p, uint64_t n, float* y) {
  switch (type) {
    case GGUF_T_F32:
      std::memcpy(y, p, n * 4);
      return true;
    case GGUF_T_F16:
      for (uint64_t i = 0; i < n; ++i) y[i] = h2f(p + 2 * i);
      return true;
    case GGUF_T_BF16:
      for (uint64_t i = 0; i < n; ++i) {
        const uint32_t bits = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
        std::memcpy(&y[i], &bits, 4);
      }
      return true;
    case GGUF_T_Q8_0:
      for (uint64_t b = 0; b < n / 32; ++b, p += 34) {
        const float d = h2f(p);
        for (int j = 0; j < 32; ++j) *y++ = (float)(int8_t)p[2 + j] * d;
      }
      return true;
    case GGUF_T_Q4_0:
    case GGUF_T_Q4_1: {
      const bool q41 = type == GGUF_T_Q4_1;
      for (uint64_t b = 0; b < n / 32; ++b, p += q41 ? 20 : 18, y += 32) {
        const float d = h2f(p), m = q41 ? h2f(p + 2) : 0.0f;
        const uint8_t* qs = p + (q41 ? 4 : 2);
        for (int j = 0; j < 16; ++j) {
          y[j] = q41 ? (float)(qs[j] & 0xF) * d + m : (float)((qs[j] & 0xF) - 8) * d;
          y[j + 16] = q41 ? (float)(qs[j] >> 4) * d + m : (float)((qs[j] >> 4) - 8) * d;
        }
      }
      return true;
    }
    case GGUF_T_Q5_0:
    case GGUF_T_Q5_1: {
      const bool q51 = type == GGUF_T_Q5_1;
      for (uint64_t b = 0; b < n / 32; ++b, p += q51 ? 24 : 22, y += 32) q5_01(p, y, q51);
      return true;
    }
    case GGUF_T_Q4_K:
      for (uint64_t b = 0; b < n / 256; ++b, p += 144, y += 256) q4_k(p, y);
      return true;
    case GGUF_T_Q5_K:
      for (uint64_t b = 0; b < n / 256; ++b, p += 176, y += 256) q5_k(p, y);
      return true;
    case GGUF_T_Q6_K:
      for (uint64_t b = 0; b < n / 256; ++b, p += 210, y += 256) q6_k(p, y);
      return true;
    default:
      return false;
  }
}
