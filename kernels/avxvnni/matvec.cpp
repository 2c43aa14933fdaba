// AVX-VNNI matrix-vector kernels, row-major Q8 and Q4 weights times Q8 activations: the avx2
// kernels (kernels/avx2/matvec.cpp) with VEX vpdpbusd forming each block dot in one instruction.
// The 4-row driver, its contract and its rounding rule are kernels/x86_matvec.h's.
// Idiom: each activation block is loaded once for four rows. Q8: the block's exact int32 lanes
// are vpdpbusd(0, |x|, sign(w, x)); Q4: vpdpbusd(-8 * sum(x), nibbles, x), the offset computed
// once per block and used as the accumulator's start (no saturation: the lanes stay far below
// 2^31). The four rows' lanes are reduced in int32 and scaled exactly as scalar code does.
#include "kernels/avxvnni/avxvnni.h"
#include "kernels/x86_matvec.h"

namespace {
using namespace ml::k::x86;

struct L {
  // |x| for Q8, the per-lane -8 * sum(x) for Q4: computed once per block for every row.
  template <bool Q4>
  static __m256i prep(__m256i xq) {
    if constexpr (Q4)
      return _mm256_sub_epi32(_mm256_setzero_si256(),
                              _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), xq));
    else return _mm256_abs_epi8(xq);
  }
  // The exact int32 dot of one row's block w with the activation block xq, in 8 lanes.
  template <bool Q4>
  static __m256i lanes(const uint8_t* w, __m256i xq, __m256i ax_or_off) {
    if constexpr (Q4) return _mm256_dpbusd_avx_epi32(ax_or_off, unpack_q4(w), xq);  // starts from -8 * sum(x)
    else return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), ax_or_off, _mm256_sign_epi8(loadu256(w), xq));
  }
};
using V = ml::k::x86mv::Block256<L>;

}  // namespace

ML_X86_MATVEC_ENTRIES(V, avxvnni)
