#!/usr/bin/env bash
# Decode and prefill tokens/s of the wasm builds under node next to the native scalar and avx2
# builds, on stories260K and a stories15M-shaped random model (docs/benchmarks.md, "WebAssembly in
# node"). Needs the presets built: scalar (ml_convert), avx2, wasm_* (missing ones are skipped).
#   tools/bench_wasm.sh [WORKDIR]      prints one Markdown table row per build, model and threads
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=${1:-$root/build/bench-wasm}
shared=${KRAFLA_SHARED:-$root/../shared}
mkdir -p "$work"
for b in wasm_scalar wasm_simd128 wasm_relaxed wasm_scalar_mt wasm_simd128_mt; do  # not built by default
  [[ -d build/$b ]] && cmake --build --preset $b --target ml_bench >/dev/null
done
conv=$root/build/scalar/bin/ml_convert
[[ -f $work/s260k_q8.mlb ]] || $conv llama2c "$shared/models/stories260K.bin" --tokenizer "$shared/models/tok512.bin" \
  --wtype q8 -o "$work/s260k_q8.mlb" >/dev/null
for w in q8 q4; do
  [[ -f $work/s15m_$w.mlb ]] || $conv random --dim 288 --hidden 768 --layers 6 --heads 6 --kv-heads 6 --vocab 32000 \
    --max-seq 256 --seed 1 --wtype $w -o "$work/s15m_$w.mlb" >/dev/null
done
node20="/usr/bin/node --no-experimental-fetch"
node22="/opt/krafla-node22/node_modules/.bin/node --no-experimental-fetch"
echo "| build | runtime | model | threads | decode tok/s | prefill tok/s (64) |"
echo "| --- | --- | --- | --- | --- | --- |"
row() {  # build runtime-label threads model cmd...
  local build=$1 rt=$2 t=$3 model=$4; shift 4
  local out
  out=$("$@" --no-kernels --model "$work/$model" -n 128 --prefill 64 --reps 3 -t "$t" 2>&1) || { echo "| $build | $rt | $model | $t | failed | |"; return; }
  local line
  line=$(echo "$out" | grep "^| $work/$model" | tail -1)
  # | model | ISA | wtype | dim | layers | -t | batch | packed | prefill tokens | prefill tok/s | decode tokens | decode tok/s | ...
  IFS='|' read -r _ _ _ _ _ _ _ _ _ _ pre _ dec _ <<<"$line"
  echo "| $build | $rt | ${model%.mlb} | $t | ${dec// /} | ${pre// /} |"
}
for model in s260k_q8.mlb s15m_q8.mlb s15m_q4.mlb; do
  for b in scalar avx2; do
    [[ -x build/$b/bin/ml_bench ]] && row "$b" native 1 "$model" build/$b/bin/ml_bench
  done
  for b in wasm_scalar wasm_simd128 wasm_relaxed; do
    rt=node20; cmd=$node20
    [[ $b == wasm_relaxed ]] && { rt=node22; cmd=$node22; }
    [[ -f build/$b/bin/ml_bench.js ]] && row "$b" "$rt" 1 "$model" $cmd "build/$b/bin/ml_bench.js"
  done
  for b in wasm_scalar_mt wasm_simd128_mt; do
    for t in 1 2; do
      [[ -f build/$b/bin/ml_bench.js ]] && row "$b" node20 "$t" "$model" $node20 "build/$b/bin/ml_bench.js"
    done
  done
done
