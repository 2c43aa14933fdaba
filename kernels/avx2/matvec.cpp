// AVX2 matrix-vector kernels, row-major Q8 and Q4 weights times Q8 activations. The 4-row
// driver, its contract and its rounding rule are kernels/x86_matvec.h's (shared with avxvnni and
// avx512vnni); this file supplies the block dot.
// Idiom: each activation block is loaded (and |x| computed) once for four rows. A block's exact
// int32 dot lands in 8 lanes: pmaddubsw(|x|, sign(w, x)) + pmaddwd for Q8; pmaddubsw(nibbles, x)
// + pmaddwd minus 8 * sum(x) for Q4. The four rows' lanes are reduced in int32 (one vphaddd
// tree), converted, multiplied by {d_w * d_x} and added to a 4-lane float accumulator whose lane
// k is row r + k.
#include "kernels/avx2/avx2.h"
#include "kernels/x86_matvec.h"

namespace {
using namespace ml::k::x86;

struct L {
  // |x| for Q8, the per-lane 8 * sum(x) for Q4: computed once per block for every row.
  template <bool Q4>
  static __m256i prep(__m256i xq) {
    if constexpr (Q4) return dotu32_maddubs(_mm256_set1_epi8(8), xq);
    else return _mm256_abs_epi8(xq);
  }
  // The exact int32 dot of one row's block w with the activation block xq, in 8 lanes.
  template <bool Q4>
  static __m256i lanes(const uint8_t* w, __m256i xq, __m256i ax_or_off) {
    if constexpr (Q4) return _mm256_sub_epi32(dotu32_maddubs(unpack_q4(w), xq), ax_or_off);  // minus 8 * sum(x)
    else return dot32_maddubs(ax_or_off, xq, loadu256(w));
  }
};
using V = ml::k::x86mv::Block256<L>;

}  // namespace

ML_X86_MATVEC_ENTRIES(V, avx2)
