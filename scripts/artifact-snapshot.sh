#!/usr/bin/env bash
# Writes every bundled example's generated code into DIR: PTX (sm_80, sm_90a),
# AMDGCN (gfx942, gfx950, gfx1100, gfx1200), the GPU LLVM module of each, and the optimised
# LLVM IR for a pinned AVX2 CPU. For refactors that must not change the code:
#   scripts/artifact-snapshot.sh /tmp/before; (change, rebuild);
#   scripts/artifact-snapshot.sh /tmp/after; diff -r /tmp/before /tmp/after
# TESSERA=<path> picks the tool (default: build/bin/tessera).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: artifact-snapshot.sh DIR}
T=${TESSERA:-$root/build/bin/tessera}
mkdir -p "$out"
for k in $("$T" list | cut -f1); do
  for t in nvptx:sm_80 nvptx:sm_90a amdgpu:gfx942 amdgpu:gfx950 amdgpu:gfx1100 amdgpu:gfx1200; do
    st=ptx
    [[ $t == amdgpu* ]] && st=amdgcn
    "$T" compile "$k" --target "$t" --emit "$st" > "$out/$k.${t//:/_}.$st"
    "$T" compile "$k" --target "$t" --emit llvm-gpu > "$out/$k.${t//:/_}.llvm"
  done
  "$T" compile "$k" --target cpu:x86-64-v3 --emit llvm-opt > "$out/$k.avx2.ll"
done
echo "artifact-snapshot: $(ls "$out" | wc -l) files in $out"
