#!/usr/bin/env bash
# Tessera beside Triton on the static GPU benchmark: builds tessera_gpu_bench,
# runs it, compiles the same kernels with Triton (compile-only, explicit
# targets) and prints one table of both with Tessera/Triton ratios.
#
#   bench/triton/compare.sh [BUILD_DIR] [-- tessera_gpu_bench options...]
#
# Triton comes from PyPI into a virtual environment (TRITON_VENV, default
# BUILD_DIR/triton-venv), pinned: the first run needs the network once. The
# venv's nvdisasm wheel gives SASS where the CUDA toolkit lacks nvdisasm.
# Results (tessera.json, triton.json) go to BUILD_DIR/gpu-static-bench.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
VENV=${TRITON_VENV:-$BUILD/triton-venv}
OUT=$BUILD/gpu-static-bench
mkdir -p "$OUT"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet triton==3.9.0 nvidia-cuda-nvdisasm
fi
NVDISASM=$(find "$VENV" -path '*/bin/nvdisasm' -type f 2>/dev/null | head -1)
[ -n "$NVDISASM" ] && export PATH="$(dirname "$NVDISASM"):$PATH"

# Like for like: Triton's exp, division and sqrt are the hardware
# approximations, so Tessera's are compiled with them too
# (TESSERA_BENCH_PRECISION=accurate measures Tessera's default instead).
PRECISION=${TESSERA_BENCH_PRECISION:-approx}
cmake --build "$BUILD" --target tessera_gpu_bench
"$BUILD/bin/tessera_gpu_bench" --precision "$PRECISION" --json "$OUT/tessera.json" "$@" | tee "$OUT/tessera.txt"
"$VENV/bin/python" "$ROOT/bench/triton/static_peer.py" --measure-tool "$BUILD/bin/tessera_gpu_bench" \
  --json "$OUT/triton.json" 2> "$OUT/triton.log"
echo
"$VENV/bin/python" "$ROOT/bench/triton/static_peer.py" --compare "$OUT/tessera.json" "$OUT/triton.json" |
  tee "$OUT/compare.txt"
