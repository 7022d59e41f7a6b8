#!/usr/bin/env bash
# Tessera beside Triton on the static GPU benchmark: builds tessera_gpu_bench,
# runs it, compiles the same kernels with Triton (compile-only, explicit
# targets) and prints one table of both with Tessera/Triton ratios.
#
#   bench/triton/compare.sh [BUILD_DIR] [-- tessera_gpu_bench options...]
#
# --only NAME, --targets T1,T2 and --reps N among the options are given to
# the Triton side too, so a filtered run measures the same rows on both.
#
# Triton comes from PyPI into a virtual environment (TRITON_VENV, default
# BUILD_DIR/triton-venv), pinned: the first run needs the network once. The
# venv's nvdisasm wheel gives SASS where the CUDA toolkit lacks nvdisasm.
# Raw results (tessera.json, triton.json, the two tables) go to
# BUILD_DIR/gpu-static-bench; the comparison, with the date, the commit, the
# host's CPU and the tool versions, is also written to
# bench/results/triton-compare-<date>-<commit>.md (TRITON_RESULTS_DIR
# overrides the folder); docs/gpu_bench.md describes the kernels and columns.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
VENV=${TRITON_VENV:-$BUILD/triton-venv}
OUT=$BUILD/gpu-static-bench
RESULTS=${TRITON_RESULTS_DIR:-$ROOT/bench/results}
mkdir -p "$OUT" "$RESULTS"

# The filters both sides understand.
PEER_ARGS=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --only | --targets | --reps)
      if ((i + 1 < ${#args[@]})); then PEER_ARGS+=("${args[$i]}" "${args[$((i + 1))]}"); fi ;;
  esac
done

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
  --json "$OUT/triton.json" ${PEER_ARGS[@]+"${PEER_ARGS[@]}"} 2> "$OUT/triton.log"
echo
"$VENV/bin/python" "$ROOT/bench/triton/static_peer.py" --compare "$OUT/tessera.json" "$OUT/triton.json" |
  tee "$OUT/compare.txt"

# ------------------------------------------------------------ results page
# One dated file per run and commit; a run with uncommitted changes says so.
DATE=$(date -u +%Y-%m-%d)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=""
if [ "$COMMIT" != unknown ] && [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  DIRTY=" (with uncommitted changes)"
fi
CPU=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//' || true)
[ -n "$CPU" ] || CPU=$(uname -m)
release() { "$@" 2>/dev/null | grep -m1 -i 'release' || true; }
TRITON_VERSION=$("$VENV/bin/python" -c 'import triton; print(triton.__version__)' 2>/dev/null || echo unknown)
PTXAS=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
PTXAS_VERSION=$(release "$PTXAS" --version)
NVDISASM_VERSION=""
if command -v nvdisasm > /dev/null; then NVDISASM_VERSION="$(release nvdisasm --version) ($(command -v nvdisasm))"; fi
LLVM_DIR=$(sed -n 's/^LLVM_DIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null | head -1 || true)
LLVM_VERSION=""
[ -n "$LLVM_DIR" ] && LLVM_VERSION=$("${LLVM_DIR%/lib/cmake/llvm}/bin/llvm-config" --version 2>/dev/null || echo "$LLVM_DIR")
CMAKE_VERSION=$(cmake --version | head -1)
PAGE=$RESULTS/triton-compare-$DATE-$COMMIT.md
{
  echo "# Tessera beside Triton: static GPU benchmark, $DATE, commit $COMMIT$DIRTY"
  echo
  echo "Written by \`bench/triton/compare.sh\`; the kernels and columns are described in"
  echo "[docs/gpu_bench.md](../../docs/gpu_bench.md)."
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| date (UTC) | $DATE |"
  echo "| commit | \`$COMMIT\`$DIRTY |"
  echo "| host CPU | $CPU ($(nproc 2>/dev/null || echo ?) threads, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo ?)) |"
  echo "| command | \`bench/triton/compare.sh $BUILD${*:+ -- $*}\` |"
  echo "| Tessera precision | $PRECISION |"
  echo "| Triton | $TRITON_VERSION |"
  echo "| ptxas | ${PTXAS_VERSION:-not found} |"
  echo "| nvdisasm | ${NVDISASM_VERSION:-not found (NVIDIA counts are PTX)} |"
  echo "| LLVM (Tessera's build) | ${LLVM_VERSION:-unknown} |"
  echo "| CMake | $CMAKE_VERSION |"
  echo
  echo "## Tessera beside Triton"
  echo
  echo "Each cell is Tessera/Triton and their ratio (\`=\` both zero, \`inf\` Triton zero)."
  echo
  echo '```text'
  cat "$OUT/compare.txt"
  echo '```'
  echo
  echo "## Tessera's rows (layout statistics, loop all/others, ptxas time)"
  echo
  echo '```text'
  cat "$OUT/tessera.txt"
  echo '```'
} > "$PAGE"
echo
echo "written: $PAGE"
