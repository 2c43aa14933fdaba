#!/bin/bash
# Builds tools/amx_variants (README.md) into build/amx-variants/amx_variants, statically, from the
# amx preset's static dev build (configured and built here if missing). EXTRA=-DEMU builds
# amx_variants_emu instead: the emulated tile unit, for checking the harness on a CPU without AMX.
# AMX_BUILD (an amx preset's build folder with libml_core.a and libml_kernels.a) and
# AMX_VARIANTS_OUT (the output folder) override those two folders (check.sh, the CTest).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$ROOT/tools/amx_variants
B=${AMX_BUILD:-$ROOT/build/dev-amx}
O=${AMX_VARIANTS_OUT:-$ROOT/build/amx-variants}
EXTRA=${EXTRA:-}
if [ -n "${AMX_BUILD:-}" ] && { [ ! -f "$B/kernels/libml_kernels.a" ] || [ ! -f "$B/src/core/libml_core.a" ]; }; then
  echo "build.sh: $B has no libml_kernels.a / libml_core.a (build the amx preset there first)" >&2
  exit 1
fi
if [ ! -f "$B/kernels/libml_kernels.a" ] || [ ! -f "$B/src/core/libml_core.a" ]; then
  cmake --preset amx -B "$B" -DCMAKE_EXE_LINKER_FLAGS=-static >/dev/null
  cmake --build "$B" --target ml_kernels ml_core
fi
mkdir -p "$O"
cp "$ROOT/kernels/x86_amx.h" "$O/x86_amx.h"
cp "$ROOT/kernels/x86_amx.h" "$O/exp_x86_amx.h"
patch -s "$O/exp_x86_amx.h" "$SRC/experiments.patch"
cp "$ROOT/kernels/x86_amx.h" "$O/sig_x86_amx.h"
patch -s "$O/sig_x86_amx.h" "$SRC/signed.patch"
# The kernel's TilesHw (and its register macro) as kernels/amx/matmul_pk.cpp defines it.
awk '/^#define ML_TMM_LITERAL/ {p = 1} /^}  \/\/ namespace/ {p = 0} p' "$ROOT/kernels/amx/matmul_pk.cpp" \
  >"$O/tiles_hw.inc"
FLAGS=(-DML_ENABLE_AMX -DML_ENABLE_AVX2 -DML_ENABLE_AVX512VNNI -DML_ENABLE_SCALAR -DML_ENABLE_SSE2
  -DML_ENABLE_SSE41 -DML_ISA_AMX '-DML_ISA_HEADER="kernels/amx/amx.h"' -DML_ISA_NAMESPACE=amx -DML_PREFETCH=1
  -I"$B/inc/engine" -I"$B/generated" -I"$O" -O3 -DNDEBUG -ffp-contract=off -mavx2 -mfma -mf16c -mavx512f
  -mavx512bw -mavx512vl -mavx512vnni -mamx-tile -mamx-int8 -fno-exceptions -fno-rtti -std=c++20)
: >"$O/variants.inc"
objs=()
pids=()
exact=1  # the variants before variants.txt's "# Timing only" line must keep avx512vnni's bits
while read -r name header flags; do
  case "$name $header" in "# Timing"*) exact=0 ;; esac
  case "$name" in "" | "#"*) continue ;; esac
  echo "V($name, $exact)" >>"$O/variants.inc"
  # $flags unquoted: one word per flag
  c++ "${FLAGS[@]}" $EXTRA "-DHEADER=\"$header\"" "-DFN=$name" "-Dx86amx=x86amx_$name" $flags \
    -c "$SRC/variant.cpp" -o "$O/v_$name$EXTRA.o" &
  pids+=($!)
  objs+=("$O/v_$name$EXTRA.o")
done <"$SRC/variants.txt"
for p in "${pids[@]}"; do wait "$p"; done
c++ "${FLAGS[@]}" $EXTRA -c "$SRC/main.cpp" -o "$O/main$EXTRA.o"
out=$O/amx_variants; [ -n "$EXTRA" ] && out=${out}_emu
c++ -static -o "$out" "$O/main$EXTRA.o" "${objs[@]}" "$B/src/core/libml_core.a" "$B/kernels/libml_kernels.a" \
  "$B/src/core/libml_core.a"
echo "$out"
