// One variant of the amx packed matmul for the harness (main.cpp): compiled once per line of
// variants.txt with HEADER (kernels/x86_amx.h or the patched copy), the variant's -D flags,
// FN (its entry point) and -Dx86amx=x86amx_FN, so every variant's templates get their own names.
// The tile type is the kernel's own TilesHw, cut out of kernels/amx/matmul_pk.cpp by build.sh;
// -DEMU swaps in the emulated tile unit to check the harness on a CPU without AMX. TilesHw gains
// TDPBSSD (A and B signed bytes) here, which only the signed variants use; TilesEmu has it.
#include HEADER

namespace {
using ml::k::amx_tiles::Config;
#include "tiles_hw.inc"

#ifdef EMU
using Tiles = ml::k::amx_tiles::TilesEmu;  // has dpbssd
#else
struct Tiles : TilesHw {
  // TDPBSSD, with the kernel's register plan (C = tmm0-3, A = tmm4/5, B = tmm6/7 by C's parity).
  template <int C, int A, int B>
  void dpbssd() {
    static_assert(C >= 0 && C < 4 && A == 4 + C % 2 && B == 6 + C % 2, "kernels/x86_amx.h's tile registers");
    if constexpr (C == 0) _tile_dpbssd(0, 4, 6);
    else if constexpr (C == 1) _tile_dpbssd(1, 5, 7);
    else if constexpr (C == 2) _tile_dpbssd(2, 4, 6);
    else _tile_dpbssd(3, 5, 7);
  }
};
#endif
}  // namespace

extern "C" void FN(int q4, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
  Tiles tl;
  if (q4) ml::k::x86amx::matmul_q4(tl, Y, ldy, W, X, r0, r1);
  else ml::k::x86amx::matmul_q8(tl, Y, ldy, W, X, r0, r1);
}
