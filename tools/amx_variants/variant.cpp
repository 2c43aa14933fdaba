// One variant of the amx packed matmul for the harness (main.cpp): compiled once per line of
// variants.txt with HEADER (kernels/x86_amx.h or the patched copy), the variant's -D flags,
// FN (its entry point) and -Dx86amx=x86amx_FN, so every variant's templates get their own names.
// The tile type is the kernel's own TilesHw, cut out of kernels/amx/matmul_pk.cpp by build.sh;
// -DEMU swaps in the emulated tile unit to check the harness on a CPU without AMX.
#include HEADER

namespace {
using ml::k::amx_tiles::Config;
#include "tiles_hw.inc"
}  // namespace

extern "C" void FN(int q4, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1) {
#ifdef EMU
  ml::k::amx_tiles::TilesEmu tl;
#else
  TilesHw tl;
#endif
  if (q4) ml::k::x86amx::matmul_q4(tl, Y, ldy, W, X, r0, r1);
  else ml::k::x86amx::matmul_q8(tl, Y, ldy, W, X, r0, r1);
}
