// AMX packed matmuls: kernels/x86_amx.h over the tile instructions themselves. Layout, contract
// and rounding are that header's (each token's column == avx512vnni's packed matvec, bit for bit).
//
// GCC's tile intrinsics are macros that paste their register argument into the assembly text
// ("%%tmm"#dst), so a register must be spelled as a literal: each operation below picks its
// literal with `if constexpr` over the template argument. They also declare no memory input
// (_tile_loadd reads memory the compiler is not told about; _tile_loadconfig claims 8 of its 64
// bytes), so a compiler barrier precedes each: the Q4 unpacking's stores and the configuration's
// must be in memory before the tile unit reads them.
#include "kernels/amx/amx.h"
#include "kernels/x86_amx.h"

#ifndef __AMX_INT8__
#error "kernels/amx/matmul_pk.cpp needs -mamx-tile -mamx-int8 (ISA amx)"
#endif

namespace {

using ml::k::amx_tiles::Config;

#define ML_TMM_LITERAL(T, OP)             \
  static_assert(T >= 0 && T < 8, "tmm0-7"); \
  if constexpr (T == 0) OP(0);              \
  else if constexpr (T == 1) OP(1);         \
  else if constexpr (T == 2) OP(2);         \
  else if constexpr (T == 3) OP(3);         \
  else if constexpr (T == 4) OP(4);         \
  else if constexpr (T == 5) OP(5);         \
  else if constexpr (T == 6) OP(6);         \
  else OP(7);

struct TilesHw {
  static void barrier() { __asm__ volatile("" ::: "memory"); }
  void config(const Config& c) {
    barrier();
    _tile_loadconfig(&c);
  }
  template <int T>
  void load(const void* p, size_t stride) {
    barrier();
#define ML_TLOAD(i) _tile_loadd(i, p, stride)
    ML_TMM_LITERAL(T, ML_TLOAD)
#undef ML_TLOAD
  }
  template <int T>
  void zero() {
#define ML_TZERO(i) _tile_zero(i)
    ML_TMM_LITERAL(T, ML_TZERO)
#undef ML_TZERO
  }
  // The register plan of kernels/x86_amx.h: C = tmm0-3, A = tmm4/5, B = tmm6/7 by C's parity.
  template <int C, int A, int B>
  void dpbsud() {
    static_assert(C >= 0 && C < 4 && A == 4 + C % 2 && B == 6 + C % 2, "kernels/x86_amx.h's tile registers");
    if constexpr (C == 0) _tile_dpbsud(0, 4, 6);
    else if constexpr (C == 1) _tile_dpbsud(1, 5, 7);
    else if constexpr (C == 2) _tile_dpbsud(2, 4, 6);
    else _tile_dpbsud(3, 5, 7);
  }
  template <int T>
  void store(void* p, size_t stride) {
#define ML_TSTORE(i) _tile_stored(i, p, stride)
    ML_TMM_LITERAL(T, ML_TSTORE)
#undef ML_TSTORE
  }
  void release() { _tile_release(); }
};

#undef ML_TMM_LITERAL

}  // namespace

extern "C" void ml_k_matmul_q8_pk_amx(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  TilesHw tl;
  ml::k::x86amx::matmul_q8(tl, Y, ldy, W, X, r0, r1);
}

extern "C" void ml_k_matmul_q4_pk_amx(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  TilesHw tl;
  ml::k::x86amx::matmul_q4(tl, Y, ldy, W, X, r0, r1);
}
