// AVX-512 VNNI packed kernels: matvec and matmul of Q8/Q4 weights in the row-interleaved layout of
// core/pack.h with ml::k::avx512vnni::pack (G = 16: one 512-bit vector per 4-byte step of 16 rows;
// Q8 stored as q + 128, Q4 raw nibbles, f16 scales kept f16) times Q8_0 activations. The tile
// code, its contract and its rounding rule are kernels/x86_pack.h's; this file supplies the step.
//
// vpdpbusd (512-bit) multiplies unsigned by signed bytes and adds 4 products per lane into int32
// (exact: |block sum| <= 32 * 255 * 127). Q8: one vpdpbusd(acc, q + 128, x) per step, the block's
// sum starting from -128 * sum(x); Q4: vpdpbusd of the low and the high nibbles, starting from
// -8 * sum(x). Matmul tiles: 8 tokens (32 zmm registers: 8 float and 8 int accumulators plus the
// step's).
#include "kernels/avx512vnni/avx512vnni.h"
#include "kernels/x86_pack.h"

namespace {

struct V {
  using vi = __m512i;
  using vf = __m512;
  static constexpr int G = 16;
  static constexpr int TILE = 8;
  static constexpr int kQ8Offset = 128;
  static constexpr bool kQ8PrefetchOnAmd = false;  // x86_pack.h, Prefetch: AMD before Zen 5, measured on Zen 4
  static vi zero() { return _mm512_setzero_si512(); }
  static vi set1(int32_t v) { return _mm512_set1_epi32(v); }
  static vi load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static vi q8_prep(vi w) { return w; }
  static vi q8_step(vi acc, vi, vi w, vi x) { return _mm512_dpbusd_epi32(acc, w, x); }
  static vi lo_nibbles(vi w) { return _mm512_and_si512(w, _mm512_set1_epi8(0x0F)); }
  static vi hi_nibbles(vi w) { return _mm512_and_si512(_mm512_srli_epi16(w, 4), _mm512_set1_epi8(0x0F)); }
  static vi q4_start(vi init) { return init; }
  static vi q4_step(vi acc, vi lo, vi hi, vi xlo, vi xhi) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc, lo, xlo), hi, xhi);
  }
  static vi q4_finish(vi acc, vi) { return acc; }
  static vf fzero() { return _mm512_setzero_ps(); }
  static vf fset1(float v) { return _mm512_set1_ps(v); }
  static vf floadu(const float* p) { return _mm512_loadu_ps(p); }
  static void fstoreu(float* p, vf v) { _mm512_storeu_ps(p, v); }
  static vf cvt(vi v) { return _mm512_cvtepi32_ps(v); }
  static vf fmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
  static vf fadd(vf a, vf b) { return _mm512_add_ps(a, b); }
  template <bool F16>
  static vf scales(const void* d, size_t i) { return ml::k::x86pk::scales512<F16>(d, i); }
};
static_assert(ml::k::avx512vnni::pack.g == V::G && ml::k::avx512vnni::pack.q8_offset == V::kQ8Offset &&
                  ml::k::avx512vnni::pack.q4_xor == 0,
              "kernels/avx512vnni/matvec_pk.cpp reads G = 16, Q8 + 128, raw Q4");

}  // namespace

ML_X86_PACK_ENTRIES(V, avx512vnni)
