#!/bin/bash
# CTest tools.amx_variants_emu (the amx preset, tests/CMakeLists.txt): the harness still builds
# against the kernel as it is (experiments.patch and signed.patch apply to kernels/x86_amx.h, every
# variant compiles) and, over the emulated tile unit, every variant that must keep the bits gives
# avx512vnni's output (amx_variants exits 1 otherwise), at 17 tokens (a full tile and one token)
# and 64. The emulated build still runs AVX-512 code (VBMI in the vbmi variants): SKIP (exit 77) on
# a CPU without it.
# Usage: tools/amx_variants/check.sh AMX_BUILD_DIR
set -euo pipefail
B=$(cd "$1" && pwd)
for f in avx512f avx512bw avx512vl avx512_vnni avx512vbmi f16c; do  # avx512vbmi: the vbmi variants
  if ! grep -qw "$f" /proc/cpuinfo; then
    echo "SKIP (CPU): the emulated harness runs AVX-512 VNNI code, and this CPU lacks $f"
    exit 77
  fi
done
out=$B/amx-variants
AMX_BUILD=$B AMX_VARIANTS_OUT=$out EXTRA=-DEMU "$(dirname "$0")/build.sh" >/dev/null
"$out/amx_variants_emu" 17 1 0.001 small
"$out/amx_variants_emu" 64 1 0.001 small
