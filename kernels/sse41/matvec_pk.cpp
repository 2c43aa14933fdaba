// SSE4.1 packed kernels: matvec and matmul of Q8/Q4 weights in the row-interleaved layout of
// core/pack.h (G = 4, Q8 signed, Q4 nibbles raw 0..15, f32 scales) times Q8_0 activations. The
// tile code, its contract and its rounding rule are kernels/x86_pack128.h's (shared with sse2);
// this file supplies the activation broadcast and the step.
//
// Step (spec/architecture.txt, "Weight packing"): the 16-byte step of 4 rows is dotted against
// the step's 4 activation bytes broadcast to every lane (one lane per row). Q8: pmaddubsw(|w|,
// sign(x, w)) = w * x in pairs (|w|, |x| <= 127: pair sums <= 32258, no saturation), then
// pmaddwd(., 1) into int32. Taking the sign of x rather than of w lets the matmul compute |w| once
// per step for every token of the tile. Q4: the raw nibbles (0..15) are pmaddubsw's unsigned
// operand, the activations its signed one; the block's 8 results (4 steps, low and high nibbles)
// are summed in int16 (|sum| <= 8 * 2 * 15 * 127 = 30480), then one pmaddwd(., 1), and 8 x sum(x)
// is subtracted per block in int32: the block sum is exact.
//
// Broadcast buffer: 128 (token, block) pairs of 160 B = 20 KB (4096 columns for one token, 1024
// for a tile of 4; larger n takes several chunks).
#include <smmintrin.h>

#include <cstring>

#include "kernels/sse41/sse41.h"
#include "kernels/x86_pack128.h"

namespace {

struct V {
  static constexpr int kBufTokBlocks = 128;
  static constexpr int kQ8Offset = 0;

  // One 32-block of one token. q[k] = values 4k..4k+3 broadcast to the 4 lanes. A Q8 step s uses
  // q[s]; a Q4 step s uses q[s] (low nibbles) and q[s + 4] (high nibbles).
  struct XBlock {
    __m128i q[8];
    __m128i off;  // Q4: 8 * sum of the block's 32 quants (exact int32), broadcast; Q8: 0
    __m128 dx;    // the block's activation scale, broadcast
  };

  // Blocks [b0, b0 + nblk) of one token (quants q, scales d) into xb.
  static void expand(XBlock* xb, const int8_t* q, const float* d, int b0, int nblk, int offset) {
    for (int b = 0; b < nblk; ++b) {
      const int8_t* p = q + (size_t)(b0 + b) * ML_QK;
      int32_t sum = 0;
      for (int k = 0; k < 8; ++k) {
        int32_t v;
        std::memcpy(&v, p + 4 * k, 4);
        xb[b].q[k] = _mm_set1_epi32(v);
      }
      for (int i = 0; i < ML_QK; ++i) sum += p[i];
      xb[b].off = _mm_set1_epi32(offset * sum);
      xb[b].dx = _mm_set1_ps(d[b0 + b]);
    }
  }

  // Q8: |w| once per step for every token; the step's sign goes onto x.
  struct Q8 {
    struct W {
      __m128i aw, w;
    };
    static W prep(__m128i w) { return {_mm_abs_epi8(w), w}; }
    static __m128i step(__m128i s, const W& w, const XBlock& x, int k) {
      const __m128i p = _mm_maddubs_epi16(w.aw, _mm_sign_epi8(x.q[k], w.w));
      return _mm_add_epi32(s, _mm_madd_epi16(p, _mm_set1_epi16(1)));
    }
    static __m128i finish(__m128i s, const XBlock&) { return s; }  // signed weights: no offset
  };

  // Q4: the low and high nibbles; the step sums stay int16 pairs until finish.
  struct Q4 {
    struct W {
      __m128i lo, hi;
    };
    static W prep(__m128i w) {
      const __m128i m = _mm_set1_epi8(0x0F);
      return {_mm_and_si128(w, m), _mm_and_si128(_mm_srli_epi16(w, 4), m)};
    }
    static __m128i step(__m128i s, const W& w, const XBlock& x, int k) {
      return _mm_add_epi16(s, _mm_add_epi16(_mm_maddubs_epi16(w.lo, x.q[k]), _mm_maddubs_epi16(w.hi, x.q[k + 4])));
    }
    static __m128i finish(__m128i s, const XBlock& x) {
      return _mm_sub_epi32(_mm_madd_epi16(s, _mm_set1_epi16(1)), x.off);
    }
  };
};
static_assert(ml::k::sse41::pack.g == ml::k::x86pk128::kG && ml::k::sse41::pack.q8_offset == V::kQ8Offset &&
                  ml::k::sse41::pack.q4_xor == 0 && !ml::k::sse41::pack.d16,
              "kernels/sse41/matvec_pk.cpp reads G = 4, signed Q8, raw Q4, f32 scales");

}  // namespace

ML_X86_PACK128_ENTRIES(V, sse41)
