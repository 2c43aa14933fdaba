// The amx packed matmul (kernels/x86_amx.h) over the emulated tile unit (amx_tiles::TilesEmu),
// for tests/kernels/test_amx_emu.cpp. Compiled with the build's ISA flags (the kernel's epilogue is
// AVX-512) into ml_tests of the builds whose chain has avx512vnni (tests/CMakeLists.txt); the
// tests call it only when the CPU runs avx512vnni. No namespace-scope objects (nothing runs before
// the tests' CPU check).
#include "kernels/x86_amx.h"

// Y[t * ldy + r] for rows [r0, r1) as ml_k_matmul_q4/q8_pk_amx computes them, with the tile
// instructions emulated. Returns false when the kernel used the tile unit in a way the hardware
// refuses (TilesEmu::fault).
extern "C" bool kt_amx_emu_matmul(int q4, float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0,
                                  int r1) {
  ml::k::amx_tiles::TilesEmu tl;
  if (q4) ml::k::x86amx::matmul_q4(tl, Y, ldy, W, X, r0, r1);
  else ml::k::x86amx::matmul_q8(tl, Y, ldy, W, X, r0, r1);
  return !tl.fault && !tl.configured;  // and released at the end
}
