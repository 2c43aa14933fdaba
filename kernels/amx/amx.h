// The amx ISA (avx512vnni + AMX-TILE and AMX-INT8, kernels/isa.cmake). Parent: avx512vnni, whose
// pack layout (G = 16, Q8 stored + 128, Q4 raw nibbles, f16 scales kept f16) it keeps, so a packed
// arena is the same for both. Only the batched (prefill) packed matmul changes: its per-block
// int32 sums come from the tile unit (kernels/x86_amx.h); decode keeps avx512vnni's VNNI matvec,
// which a matrix-times-vector cannot beat with tiles (one token fills one row of sixteen).
// Untested on real AMX hardware so far: the tile arithmetic is tested on an emulated tile unit
// (tests/kernels/test_amx_emu.cpp); test_packed holds this matmul to the matvec on an AMX CPU.
#pragma once
#ifndef ML_ENABLE_AMX
#error "kernels/amx/amx.h included but ML_ENABLE_AMX is not set (kernels/isa.cmake)"
#endif
#include "kernels/avx512vnni/avx512vnni.h"

namespace ml::k::amx {
using namespace avx512vnni;
inline constexpr const char* isa_name = "amx";
// The packed matmuls (kernels/amx/matmul_pk.cpp) read avx512vnni's layout (a using-declaration:
// through the using-directives alone `pack` would be ambiguous with avx2's); the packed matvecs
// are avx512vnni's.
using avx512vnni::pack;
ML_K_BIND_PK(matmul_q8_pk, amx)
ML_K_BIND_PK(matmul_q4_pk, amx)
}  // namespace ml::k::amx
