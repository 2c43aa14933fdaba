// SSE2 packed kernels: matvec and matmul of Q8/Q4 weights in the row-interleaved layout of
// core/pack.h (G = 4, Q8 stored with a +128 offset, Q4 nibbles raw 0..15, f32 scales) times Q8_0
// activations. The tile code, its contract and its rounding rule are kernels/x86_pack128.h's
// (shared with sse41); this file supplies the activation expansion and the step.
//
// Step (spec/architecture.txt, "Weight packing", SSE2): each 16-bit lane of a step holds two
// bytes of one row. Q8 splits it into the even byte (w & 0xFF) and the odd byte (w >> 8); Q4 into
// four nibbles (even/odd byte, low/high nibble). Each part goes through pmaddwd against
// activations expanded beforehand into matching broadcast int16 pairs, so one pmaddwd yields one
// partial sum per row and the loop has no shuffles. The weights read as unsigned (q + 128, or the
// raw nibble), so offset x sum(x) (128 or 8) is subtracted per block in int32: the block sum is
// exact.
//
// Expansion buffer: 64 (token, block) pairs of 288 B = 18 KB (2048 columns for one token, 512
// for a tile of 4; larger n takes several chunks).
#include <emmintrin.h>

#include "kernels/sse2/sse2.h"
#include "kernels/x86_pack128.h"

namespace {

struct V {
  static constexpr int kBufTokBlocks = 64;
  static constexpr int kQ8Offset = 128;

  // One 32-block of one token, expanded. Quad k holds values 4k..4k+3 (a, b, c, d):
  // e[k] = (a, c) and o[k] = (b, d) as int16 pairs, broadcast to the 4 lanes (one lane per row).
  // A Q8 step s uses quad s; a Q4 step s uses quad s (low nibbles) and quad s + 4 (high nibbles).
  struct XBlock {
    __m128i e[8], o[8];
    __m128i off;  // offset * sum of the block's 32 quants (exact int32), broadcast
    __m128 dx;    // the block's activation scale, broadcast
  };

  static int32_t pair16(int8_t lo, int8_t hi) {
    return (int32_t)((uint32_t)(uint16_t)(int16_t)lo | ((uint32_t)(uint16_t)(int16_t)hi << 16));
  }

  // Blocks [b0, b0 + nblk) of one token (quants q, scales d) into xb.
  static void expand(XBlock* xb, const int8_t* q, const float* d, int b0, int nblk, int offset) {
    for (int b = 0; b < nblk; ++b) {
      const int8_t* p = q + (size_t)(b0 + b) * ML_QK;
      int32_t sum = 0;
      for (int k = 0; k < 8; ++k) {
        const int8_t* v = p + 4 * k;
        xb[b].e[k] = _mm_set1_epi32(pair16(v[0], v[2]));
        xb[b].o[k] = _mm_set1_epi32(pair16(v[1], v[3]));
        sum += (int32_t)v[0] + v[1] + v[2] + v[3];
      }
      xb[b].off = _mm_set1_epi32(offset * sum);
      xb[b].dx = _mm_set1_ps(d[b0 + b]);
    }
  }

  // Q8: the even and odd bytes (q + 128) of each 16-bit lane, as int16.
  struct Q8 {
    struct W {
      __m128i e, o;
    };
    static W prep(__m128i w) { return {_mm_and_si128(w, _mm_set1_epi16(0x00FF)), _mm_srli_epi16(w, 8)}; }
    static __m128i step(__m128i s, const W& w, const XBlock& x, int k) {
      return _mm_add_epi32(s, _mm_add_epi32(_mm_madd_epi16(w.e, x.e[k]), _mm_madd_epi16(w.o, x.o[k])));
    }
    static __m128i finish(__m128i s, const XBlock& x) { return _mm_sub_epi32(s, x.off); }
  };

  // Q4: the four nibbles of each 16-bit lane (even/odd byte x low/high nibble), as int16.
  struct Q4 {
    struct W {
      __m128i el, ol, eh, oh;
    };
    static W prep(__m128i w) {
      const __m128i m = _mm_set1_epi16(0x000F);
      return {_mm_and_si128(w, m), _mm_and_si128(_mm_srli_epi16(w, 8), m), _mm_and_si128(_mm_srli_epi16(w, 4), m),
              _mm_srli_epi16(w, 12)};
    }
    static __m128i step(__m128i s, const W& w, const XBlock& x, int k) {
      const __m128i lo = _mm_add_epi32(_mm_madd_epi16(w.el, x.e[k]), _mm_madd_epi16(w.ol, x.o[k]));
      const __m128i hi = _mm_add_epi32(_mm_madd_epi16(w.eh, x.e[k + 4]), _mm_madd_epi16(w.oh, x.o[k + 4]));
      return _mm_add_epi32(s, _mm_add_epi32(lo, hi));
    }
    static __m128i finish(__m128i s, const XBlock& x) { return _mm_sub_epi32(s, x.off); }
  };
};
static_assert(ml::k::sse2::pack.g == ml::k::x86pk128::kG && ml::k::sse2::pack.q8_offset == V::kQ8Offset &&
                  ml::k::sse2::pack.q4_xor == 0 && !ml::k::sse2::pack.d16,
              "kernels/sse2/matvec_pk.cpp reads G = 4, Q8 + 128, raw Q4, f32 scales");

}  // namespace

ML_X86_PACK128_ENTRIES(V, sse2)
