// AVX-VNNI packed kernels: matvec and matmul of Q8/Q4 weights in the row-interleaved layout of
// core/pack.h with ml::k::avxvnni::pack (G = 8: one 256-bit vector per 4-byte step of 8 rows; Q8
// stored as q + 128, Q4 raw nibbles, f16 scales kept f16) times Q8_0 activations. The tile code,
// its contract and its rounding rule are kernels/x86_pack.h's; this file supplies the step.
//
// vpdpbusd multiplies unsigned by signed bytes and adds 4 products per lane into int32 (exact:
// |block sum| <= 32 * 255 * 127). Q8: one vpdpbusd(acc, q + 128, x) per step, the block's sum
// starting from -128 * sum(x); Q4: vpdpbusd of the low and the high nibbles, starting from
// -8 * sum(x). So a block's int32 is exactly scalar's. Matmul tiles: 4 tokens.
#include "kernels/avxvnni/avxvnni.h"
#include "kernels/x86_pack.h"

namespace {

struct V : ml::k::x86pk::Lanes256 {
  static constexpr int kQ8Offset = 128;
  static vi q8_prep(vi w) { return w; }
  static vi q8_step(vi acc, vi, vi w, vi x) { return _mm256_dpbusd_avx_epi32(acc, w, x); }
  static vi q4_start(vi init) { return init; }
  static vi q4_step(vi acc, vi lo, vi hi, vi xlo, vi xhi) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, lo, xlo), hi, xhi);
  }
  static vi q4_finish(vi acc, vi) { return acc; }
};
static_assert(ml::k::avxvnni::pack.g == V::G && ml::k::avxvnni::pack.q8_offset == V::kQ8Offset &&
                  ml::k::avxvnni::pack.q4_xor == 0,
              "kernels/avxvnni/matvec_pk.cpp reads G = 8, Q8 + 128, raw Q4");

}  // namespace

ML_X86_PACK_ENTRIES(V, avxvnni)
