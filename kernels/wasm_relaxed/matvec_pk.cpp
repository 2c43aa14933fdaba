// WebAssembly relaxed-SIMD packed kernels: matvec and matmul over core/pack.h's plain G = 4 layout
// (signed Q8, raw Q4 nibbles, f32 scales), on the tiling of kernels/wasm_simd128/pack_tile.h;
// this file supplies the block dot.
// The dot: i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, acc) adds, per 32-bit lane, the four
// products a[4l+j] * b[4l+j]. A lane is one row's 4 bytes of a step; b must stay in 0..127 for
// every engine to agree, and pair sums stay within int16 (2 x 127 x 127 = 32258):
//   Q8: b = |x| (the activation quad, broadcast), a = w with the sign of x applied
//       ((w ^ m) - m, m = x >> 7), so a * b = w * x; w in [-127, 127] negates safely.
//   Q4: b = the nibble (0..15), a = x, then 8 x sum(x) is subtracted per block as in simd128.
// Integer block sums are exact, so each row is the scalar kernel's arithmetic: bit-exact, and the
// matmul's columns equal the packed matvec bit for bit.
#include "kernels/wasm_relaxed/wasm_relaxed.h"
#include "kernels/wasm_simd128/pack_tile.h"

namespace {

using ml::k::wasm_pk::XBlock;
static_assert(ml::k::wasm_relaxed::pack.g == ml::k::wasm_pk::kG && ml::k::wasm_relaxed::pack.q8_offset == 0 &&
                  ml::k::wasm_relaxed::pack.q4_xor == 0 && !ml::k::wasm_relaxed::pack.d16 &&
                  ml::k::wasm_relaxed::pack.q8_step_xor == 0 && ml::k::wasm_relaxed::pack.q4_step_xor == 0,
              "kernels/wasm_relaxed/matvec_pk.cpp reads G = 4, signed Q8, raw Q4, f32 scales");

inline v128_t rdot(v128_t a, v128_t b_i7, v128_t acc) {
  return __builtin_wasm_relaxed_dot_i8x16_i7x16_add_s_i32x4(a, b_i7, acc);
}

// Quad k = values 4k..4k+3, broadcast to the 4 lanes. Q8: c[k] = |quad k|, c[8 + k] = its sign
// mask, no correction; Q4: c[k] = quad k as is (no sign masks), correction 8 x sum(x).
template <bool Q4>
void expand_quads(XBlock& xb, const int8_t* p) {
  int32_t sum = 0;
  for (int k = 0; k < 8; ++k) {
    const v128_t v = wasm_v128_load32_splat(p + 4 * k);
    if constexpr (Q4) {
      xb.c[k] = v;
      sum += (int32_t)p[4 * k] + p[4 * k + 1] + p[4 * k + 2] + p[4 * k + 3];
    } else {
      xb.c[k] = wasm_i8x16_abs(v);
      xb.c[8 + k] = wasm_i8x16_shr(v, 7);
    }
  }
  xb.neg_off = wasm_i32x4_splat(-8 * sum);  // 0 for Q8
}

struct DotQ8 {
  static constexpr bool kQ4 = false;
  static constexpr bool kPairs = false;
  static void expand(XBlock& xb, const int8_t* p) { expand_quads<false>(xb, p); }
  template <int T, int NG>
  static void dot(v128_t s[NG * T], const uint8_t* wb, size_t gstride, const XBlock* const xb[T], int b) {
    static_assert(NG == 1, "kPairs is false");
    auto step = [&](int k) {
      const v128_t w = wasm_v128_load(wb + 16 * k);
#pragma clang loop unroll(full)
      for (int t = 0; t < T; ++t) {
        const v128_t sm = xb[t][b].c[8 + k];
        s[t] = rdot(wasm_i8x16_sub(wasm_v128_xor(w, sm), sm), xb[t][b].c[k], s[t]);
      }
    };
    ML_W_STEPS(8, step)
  }
};

struct DotQ4 {
  static constexpr bool kQ4 = true;
  static constexpr bool kPairs = false;
  static void expand(XBlock& xb, const int8_t* p) { expand_quads<true>(xb, p); }
  template <int T, int NG>
  static void dot(v128_t s[NG * T], const uint8_t* wb, size_t gstride, const XBlock* const xb[T], int b) {
    static_assert(NG == 1, "kPairs is false");
    const v128_t m = wasm_i8x16_splat(0x0F);
    auto step = [&](int k) {
      const v128_t w = wasm_v128_load(wb + 16 * k);
      const v128_t lo = wasm_v128_and(w, m), hi = wasm_u8x16_shr(w, 4);
#pragma clang loop unroll(full)
      for (int t = 0; t < T; ++t) s[t] = rdot(xb[t][b].c[k + 4], hi, rdot(xb[t][b].c[k], lo, s[t]));
    };
    ML_W_STEPS(4, step)
  }
};

}  // namespace

ML_WASM_PK_ENTRIES(DotQ8, DotQ4, wasm_relaxed)
