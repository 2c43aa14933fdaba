// AVX-512 VNNI matrix-vector kernels, row-major Q8 and Q4 weights times Q8 activations. The
// 4-row driver, its contract and its rounding rule are kernels/x86_matvec.h's (shared with avx2
// and avxvnni); this file supplies the pair dot (an odd last block runs as a half-width step
// whose upper lanes are zero).
// Idiom: two 32-blocks per 512-bit vpdpbusd (lanes 0-7 block b, 8-15 block
// b + 1; Q4 uses x86_avx.h's q4_order), so each activation pair is loaded once for four rows.
// Q8: there is no 512-bit psignb, so w is negated with a byte-masked subtract where x < 0 and
// vpdpbusd(0, |x|, that) gives the exact block lanes. Q4: vpdpbusd(-8 * sum(x), nibbles, x), the
// offset computed once per pair. The four rows' lanes are reduced in int32 to 8 block sums
// (hsum4x2_i32), converted, multiplied by {d_w * d_x} and added to a 4-lane float accumulator,
// block b first, then block b + 1: exactly scalar's acc += (float)isum * (dw * dx), so the result
// is bit-identical to scalar. Each row's scales for 8 blocks are one vector load (wscale_4x8).
#include "kernels/avx512vnni/avx512vnni.h"
#include "kernels/x86_matvec.h"

namespace {
using namespace ml::k::x86;

// The exact int32 lanes of row k of wq (rows row_bytes apart) against x's blocks b and b + 1
// (ONE: block b alone, upper lanes 0). xv: the activation pair; p: -8 * sum(x) per lane for Q4,
// |x| for Q8 (neg: the bytes where x < 0).
template <bool Q4, bool ONE>
inline __m512i pair_lanes(const uint8_t* wq, size_t row_bytes, int k, int b, __m512i xv, __m512i p, __mmask64 neg) {
  if constexpr (Q4) {
    const uint8_t* w = wq + (size_t)k * row_bytes + (size_t)b * (ML_QK / 2);
    return _mm512_dpbusd_epi32(p, unpack_q4x2<ONE>(w), xv);
  } else {
    const uint8_t* w = wq + (size_t)k * row_bytes + (size_t)b * ML_QK;
    const __m512i wv = ONE ? _mm512_zextsi256_si512(loadu256(w)) : _mm512_loadu_si512(w);
    return dot64_vnni(_mm512_setzero_si512(), p, neg, wv);
  }
}

// The activation pair (ONE: block b, upper half 0), in Q4 order for Q4.
template <bool Q4, bool ONE>
inline __m512i load_pair(const int8_t* p) {
  const __m512i v = ONE ? _mm512_zextsi256_si512(loadu256(p)) : _mm512_loadu_si512(p);
  return Q4 ? q4_order(v) : v;
}

// The two block sums of one row's lanes (Q4 order for Q4).
template <bool Q4>
inline void pair_sums(__m512i v, int32_t& s0, int32_t& s1) {
  const __m256i lo = lo256(v), hi = hi256(v);
  if constexpr (Q4) {
    const __m256i t = _mm256_add_epi32(lo, hi);  // {block b | block b + 1}
    s0 = hsum_i32(_mm256_castsi256_si128(t));
    s1 = hsum_i32(_mm256_extracti128_si256(t, 1));
  } else {
    s0 = hsum_i32(lo);
    s1 = hsum_i32(hi);
  }
}

// What every row's pair_lanes needs from the activation pair: -8 * sum(x) per lane, or |x|.
template <bool Q4>
inline __m512i pair_prep(__m512i xv) {
  if constexpr (Q4)
    return _mm512_sub_epi32(_mm512_setzero_si512(),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), xv));
  else
    return _mm512_abs_epi8(xv);
}

struct V {
  // Blocks b, b + 1 of four rows: acc (lane k = row k) += (float)isum_k(b) * d_k(b), then the same
  // for block b + 1 (skipped for ONE). d = {scales of block b | scales of block b + 1}.
  template <bool Q4, bool ONE>
  static __m128 step4(__m128 acc, const uint8_t* wq, size_t row_bytes, const ml_qact* x, int b, __m256 d) {
    const __m512i xv = load_pair<Q4, ONE>(x->q + b * ML_QK);
    const __m512i p = pair_prep<Q4>(xv);
    const __mmask64 neg = Q4 ? 0 : _mm512_movepi8_mask(xv);
    const __m512i v0 = pair_lanes<Q4, ONE>(wq, row_bytes, 0, b, xv, p, neg);
    const __m512i v1 = pair_lanes<Q4, ONE>(wq, row_bytes, 1, b, xv, p, neg);
    const __m512i v2 = pair_lanes<Q4, ONE>(wq, row_bytes, 2, b, xv, p, neg);
    const __m512i v3 = pair_lanes<Q4, ONE>(wq, row_bytes, 3, b, xv, p, neg);
    const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(hsum4x2_i32<Q4>(v0, v1, v2, v3)), d);
    acc = _mm_add_ps(acc, _mm256_castps256_ps128(t));
    if constexpr (!ONE) acc = _mm_add_ps(acc, _mm256_extractf128_ps(t, 1));
    return acc;
  }
  // One row's sums of blocks b and b + 1 (ONE: block b alone, s1 = 0).
  template <bool Q4, bool ONE>
  static void sums1(const uint8_t* wq, const ml_qact* x, int b, int32_t& s0, int32_t& s1) {
    const __m512i xv = load_pair<Q4, ONE>(x->q + b * ML_QK);
    const __m512i xp = pair_prep<Q4>(xv);
    pair_sums<Q4>(pair_lanes<Q4, ONE>(wq, 0, 0, b, xv, xp, Q4 ? 0 : _mm512_movepi8_mask(xv)), s0, s1);
  }
};

}  // namespace

ML_X86_MATVEC_ENTRIES(V, avx512vnni)
