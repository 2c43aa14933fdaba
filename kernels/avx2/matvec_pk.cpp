// AVX2 packed kernels: matvec and matmul of Q8/Q4 weights in the row-interleaved layout of
// core/pack.h with ml::k::avx2::pack (G = 8: one 256-bit vector per 4-byte step of 8 rows; Q8
// signed, Q4 raw nibbles, f16 scales kept f16) times Q8_0 activations. The tile code, its
// contract and its rounding rule are kernels/x86_pack.h's; this file supplies the step.
//
// Q8: pmaddubsw(|w|, sign(x, w)) = w * x in pairs (|w|, |x| <= 127: pair sums <= 32258, no
// saturation), then pmaddwd(., 1) into int32. The sign is taken of x, so |w| is computed once per
// step for every token of a tile. Q4: the raw nibbles (0..15) are pmaddubsw's unsigned operand;
// a block's 8 results (4 steps, low and high nibbles) are summed in int16 (|sum| <= 8 * 2 * 15 *
// 127 = 30480), then one pmaddwd(., 1) adds them to the block's -8 * sum(x) in int32.
// Matmul tiles: 4 tokens (16 ymm registers: 4 float and 4 int accumulators plus the step's).
#include "kernels/avx2/avx2.h"
#include "kernels/x86_pack.h"

namespace {

struct V : ml::k::x86pk::Lanes256 {
  static constexpr int kQ8Offset = 0;
  static vi q8_prep(vi w) { return _mm256_abs_epi8(w); }
  static vi q8_step(vi acc, vi aw, vi w, vi x) {
    const vi p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  static vi q4_start(vi) { return _mm256_setzero_si256(); }  // int16 pairs
  static vi q4_step(vi acc, vi lo, vi hi, vi xlo, vi xhi) {
    return _mm256_add_epi16(acc, _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo), _mm256_maddubs_epi16(hi, xhi)));
  }
  static vi q4_finish(vi acc, vi init) { return _mm256_add_epi32(_mm256_madd_epi16(acc, _mm256_set1_epi16(1)), init); }
};
static_assert(ml::k::avx2::pack.g == V::G && ml::k::avx2::pack.q8_offset == V::kQ8Offset &&
                  ml::k::avx2::pack.q4_xor == 0,
              "kernels/avx2/matvec_pk.cpp reads G = 8, signed Q8, raw Q4");

}  // namespace

ML_X86_PACK_ENTRIES(V, avx2)
