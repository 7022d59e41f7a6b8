#!/usr/bin/env bash
# The GPU acceptance kit (docs/bench.md, "The GPU acceptance kit"). On a
# machine with an NVIDIA GPU, given the archive of scripts/gpu-bundle.sh or
# run from the tree it unpacks to:
#
#   bash gpu-acceptance.sh tessera-gpu-bundle.tar.xz [DEST] [OPTIONS]
#   bash DEST/tessera-gpu/gpu-acceptance.sh [OPTIONS]
#
# In at most 8 minutes of wall time (unpacking included) it finds what the
# machine has (the GPU; cuBLAS and NCCL in the system's folders, else in a
# Python environment's nvidia/*/lib wheels; PyTorch and Triton), runs every
# example on the GPU against its reference (accurate and approximate math),
# the tests that need a real device, the performance model's predictions,
# Tessera's GEMMs (f16, bf16 against cuBLAS; fp8), flash attention and
# softmax/layernorm/rmsnorm (against a device-to-device copy) with `tessera
# bench`, the Python peers (bench/gpu/peers.py: PyTorch's cuBLAS, cuBLASLt
# fp8, SDPA flash and cuDNN, Triton kernels) and compute-sanitizer's memcheck
# and racecheck on the warp-specialised GEMM and the attention kernel. Every
# step has its own time limit and says why it was skipped. It prints one
# table of measurements (each beside the model's prediction and the speed of
# light) and one of steps, and writes them (report.md) with the raw JSON
# (results.json, bench-*.json, peers.json) and every step's log to the
# results folder. The exit status is 1 when a check failed, 2 on a usage error.
#
# OPTIONS
#   --out DIR           the results folder (default: $OUT when set, else
#                       tessera-gpu-results next to the archive, or beside the
#                       unpacked bundle)
#   --budget S          the kit's wall-time budget in seconds (default 480)
#   --python PY         the Python of the peers (default: python3 on the PATH)
#   --with-cpu-control  also every example on the CPU and the emulators
#                       (test_examples: 2-3 minutes on 16 cores)
#   --dry-run [--build DIR]
#                       no GPU needed: from the build tree (DIR, default
#                       ./build), every step's plumbing and the time of the
#                       steps that need no GPU. The GPU's kernels run on the
#                       emulator (emu:nvptx:sm_90a) at small shapes, the
#                       driver, cuBLAS and NCCL are tests/runtime/fake's, found
#                       through a stand-in Python environment, and compute-
#                       sanitizer's part is the emulator's own race and bounds
#                       checks. The Python peers run as they would (without
#                       torch, each row says so). tests/gpu_acceptance_test.sh.
# TESSERA_ACCEPT_STEP_SECONDS, when set, replaces every step's own limit.
# Shapes are NAME:A,B,... words, jq programs are single-quoted:
# shellcheck disable=SC2054,SC2016
set -uo pipefail
started=$(date +%s)
here=$(cd "$(dirname "$0")" && pwd)

# ---- the command line --------------------------------------------------------
usage() {  # [STATUS]: 2 (to standard error) unless 0 (--help)
  if [ "${1:-2}" = 0 ]; then
    sed -n '2,/^# TESSERA_ACCEPT_STEP_SECONDS/p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
  fi
  sed -n '2,/^# TESSERA_ACCEPT_STEP_SECONDS/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
if [ $# -ge 1 ] && [ -f "$1" ]; then
  # An archive: unpack it, then run the kit it carries, with the time spent
  # unpacking counted in its budget.
  archive=$(readlink -f "$1")
  shift
  dest=""
  if [ $# -ge 1 ] && [ "${1#-}" = "$1" ]; then
    dest=$1
    shift
  fi
  [ -n "$dest" ] || dest=$(mktemp -d)
  if ! mkdir -p "$dest" || ! tar -C "$dest" -xJf "$archive"; then
    echo "gpu-acceptance: cannot unpack $archive into $dest" >&2
    exit 2
  fi
  exec bash "$dest/tessera-gpu/gpu-acceptance.sh" --started "$started" --archive "$archive" "$@"
fi

out=${OUT:-} budget=480 py=python3 cpu_control="" dry="" build="" archive="" fakes=""
while (($#)); do
  case $1 in
    --out | --budget | --python | --build | --started | --archive | --fakes)
      [ $# -ge 2 ] || usage
      case $1 in
        --out) out=$2 ;;
        --budget) budget=$2 ;;
        --python) py=$2 ;;
        --build) build=$2 ;;
        --started) started=$2 ;;  # the unpacking's start (internal)
        --archive) archive=$2 ;;  # the archive unpacked (internal)
        --fakes) fakes=$2 ;;      # the fake drivers' folder (internal, --dry-run)
      esac
      shift 2
      ;;
    --with-cpu-control) cpu_control=1; shift ;;
    --dry-run) dry=1; shift ;;
    -h | --help) usage 0 ;;
    *) echo "gpu-acceptance: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu-acceptance: --budget expects seconds, got '$budget'" >&2; exit 2; }

if [ ! -x "$here/bin/tessera" ]; then
  if [ -z "$dry" ]; then
    echo "gpu-acceptance: run from an unpacked bundle ($here/bin/tessera missing), or give the archive" >&2
    exit 2
  fi
  # --dry-run from the source tree: lay the bundle out from the build (links,
  # nothing copied or packed) and run the kit it holds.
  repo=$(cd "$here/.." && pwd)
  build=$(cd "${build:-${TESSERA_BUILD_DIR:-$repo/build}}" 2>/dev/null && pwd) || {
    echo "gpu-acceptance: --dry-run: no build folder (--build DIR)" >&2
    exit 2
  }
  stage=$(mktemp -d)
  TESSERA_BUILD_DIR=$build bash "$here/gpu-bundle.sh" --stage "$stage" --link >&2 || exit 2
  args=(--dry-run --started "$started" --fakes "$build/tests" --budget "$budget" --python "$py")
  [ -n "$cpu_control" ] && args+=(--with-cpu-control)
  bash "$stage/tessera-gpu/gpu-acceptance.sh" "${args[@]}" --out "${out:-$build/tessera-gpu-results-dry-run}"
  rc=$?
  rm -rf "$stage"
  exit $rc
fi

bin=$here/bin
if [ -z "$out" ]; then
  if [ -n "$archive" ]; then out=$(dirname "$archive")/tessera-gpu-results; else out=$(dirname "$here")/tessera-gpu-results; fi
fi
mkdir -p "$out/logs" || { echo "gpu-acceptance: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
logs=$out/logs
rm -f "$out"/report.md "$out"/results.json "$out"/steps.tsv "$out"/bench-*.json "$out"/peers.json "$logs"/*.log
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/jobs" "$work/model"
: > "$work/plan.tsv"
: > "$work/sources.tsv"
: > "$work/notes.tsv"
: > "$work/model.tsv"
: > "$work/info.tsv"
steps_tsv=$out/steps.tsv
: > "$steps_tsv"
# Compiled kernels are kept for the run (the host's peaks are measured once).
export TESSERA_CACHE_DIR=${TESSERA_CACHE_DIR:-$work/cache}
deadline=$((started + budget))
reserve=10 # seconds kept for the report
failed=0
nstep=0

# ---- helpers -----------------------------------------------------------------
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
oneline() { printf '%s' "$1" | tr '\t\n\r' '   ' | sed 's/  */ /g; s/^ //; s/ $//' | cut -c1-240; }
slug() { printf '%s' "$1" | tr -c 'A-Za-z0-9_.,=+-' '_' | cut -c1-90; }
last_line() { grep -v '^[[:space:]]*$' "$1" 2> /dev/null | tail -1; }
info() { printf '%s\t%s\n' "$1" "$(oneline "$2")" >> "$work/info.tsv"; }

# row NAME RESULT SECONDS LIMIT DETAIL: a line of the steps table.
row() {
  nstep=$((nstep + 1))
  local detail lim=$4
  detail=$(oneline "$5")
  [[ $lim =~ ^[0-9]+$ ]] && ((lim > 0)) || lim=-
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$nstep" "$1" "$2" "$3" "$lim" "$detail" >> "$steps_tsv"
  [ "$2" = FAIL ] && failed=1
  printf '%3d %-58s %-4s %6s s  %s\n' "$nstep" "$1" "$2" "$3" "$(printf '%s' "$detail" | cut -c1-110)"
}

# limit_for OWN: the seconds a step may run, its own limit (or
# TESSERA_ACCEPT_STEP_SECONDS) within what is left of the kit's budget.
limit_for() {
  local own=${TESSERA_ACCEPT_STEP_SECONDS:-$1} left=$((deadline - $(date +%s) - reserve))
  ((left < own)) && own=$left
  echo "$own"
}
spent() { echo "the kit's $budget s budget is spent ($(($(date +%s) - started)) s gone)"; }

# run NAME OWN CMD...: CMD under its limit, its output in the step's log. Sets
# RC, LOG, SECS, LIM; returns 1 without running it when the budget has no room.
run() {
  local name=$1 own=$2
  shift 2
  LOG=$logs/$(printf '%02d' $((nstep + 1)))-$(slug "$name").log
  LIM=$(limit_for "$own")
  SECS=0
  if ((LIM < 3)); then
    RC=-1
    return 1
  fi
  local t0=$EPOCHREALTIME
  timeout -k 5 "$LIM" "$@" > "$LOG" 2>&1
  RC=$?
  SECS=$(elapsed "$t0")
  return 0
}
# verdict NAME: the row of the last run: PASS, SKIP (a "SKIP: why" in a log
# that passed), or FAIL with the exit status or the timeout.
verdict() {
  local last
  last=$(last_line "$LOG")
  if ((RC == 124 || RC == 137)); then
    row "$1" FAIL "$SECS" "$LIM" "timed out after $LIM s: $last"
  elif ((RC == 0)) && grep -q 'SKIP: ' "$LOG"; then
    row "$1" SKIP "$SECS" "$LIM" "$(grep -m1 -o 'SKIP: .*' "$LOG" | sed 's/^SKIP: //')"
  elif ((RC == 0)); then
    # `tessera run`'s verdict line, where there is one.
    row "$1" PASS "$SECS" "$LIM" "$(grep -m1 -E ' -> (OK|MISMATCH)$' "$LOG" || echo "$last")"
  else
    row "$1" FAIL "$SECS" "$LIM" "exit $RC: $last"
  fi
}
# step NAME OWN CMD...: run, then its verdict (or a skip when out of budget).
step() {
  local name=$1
  if ! run "$@"; then
    row "$name" SKIP 0 0 "$(spent)"
    return 1
  fi
  verdict "$name"
  ((RC == 0))
}
skip() { row "$1" SKIP 0 0 "$2"; }

# plan PROBLEM VARIANT LABEL STEP: a row the measurements table will have.
plan() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$work/plan.tsv"; }
# problem SUBJECT: `tessera bench`'s name of it: gemm_f16:1,2,3,0 -> gemm_f16[1x2x3x0]
problem() { local s=${1/:/[}; echo "${s//,/x}]"; }
# source FILE VARIANT: a `tessera bench --json` report whose kernels are VARIANT.
source_json() { [ -s "$1" ] && printf '%s\t%s\n' "$1" "$2" >> "$work/sources.tsv"; }
# peer_notes: the bench log's "no GEMM/copy peer" notes, the reason of those rows.
peer_notes() {
  sed -n 's/^note: \([a-z0-9_]*\[[0-9x]*\]\): \(no \(GEMM\|copy\) peer.*\)$/\1\t\3\t\2/p' "$LOG" |
    sed 's/\tGEMM\t/\tblas\t/; s/\tcopy\t/\tcopy\t/' >> "$work/notes.tsv"
}

# pool P JOBLIMIT STEPLIMIT KEY CMD... lines on stdin: runs them P at a time,
# each under JOBLIMIT, none started after STEPLIMIT seconds; KEY.rc, KEY.secs
# and KEY.log land in $work/jobs (rc -1: not started).
pool() {
  local p=$1 joblim=$2 steplim=$3 t0=$SECONDS key line
  local -a cmd
  while IFS= read -r line; do
    read -r -a cmd <<< "$line"
    key=${cmd[0]}
    cmd=("${cmd[@]:1}")
    while (($(jobs -rp | wc -l) >= p)); do wait -n 2> /dev/null || true; done
    local left=$((steplim - (SECONDS - t0)))
    if ((left < 3)); then
      echo -1 > "$work/jobs/$key.rc"
      echo 0 > "$work/jobs/$key.secs"
      echo "not started: the step's $steplim s were spent" > "$work/jobs/$key.log"
      continue
    fi
    ((left < joblim)) || left=$joblim
    (
      s=$EPOCHREALTIME
      timeout -k 5 "$left" "${cmd[@]}" < /dev/null > "$work/jobs/$key.log" 2>&1
      echo $? > "$work/jobs/$key.rc"
      elapsed "$s" > "$work/jobs/$key.secs"
    ) &
  done
  wait
}
# Run a pool in a subshell of its own: its `jobs` and `wait` then see only
# its runs, not the model's background predictions.

echo "tessera GPU acceptance$([ -n "$dry" ] && echo ' (dry run: no GPU; see --help)'): $(cat "$here/VERSION" 2> /dev/null)"
echo "results: $out"
info version "$(cat "$here/VERSION" 2> /dev/null)"
info budget "$budget"
info dry_run "${dry:-0}"
if [ -n "$archive" ]; then
  row "unpack the bundle" PASS "$(($(date +%s) - started))" - "$archive"
else
  row "the bundle" PASS 0 - "$here"
fi
if ! "$bin/tessera" --version > "$logs/tessera-version.log" 2>&1; then
  row "the tessera tool runs" FAIL 0 - "$(last_line "$logs/tessera-version.log")"
fi

# ---- what the machine has: the GPU ---------------------------------------------
# T: the target of every kernel the kit runs; arch and machine: the GPU's
# architecture and its row of the machine table (the model's prediction).
T="" arch="" machine="" gpu="" ngpu=1
probe_gpu() {  # the CUDA device tessera opens, from its own error: "... the GPU present is NAME (nvptx:sm_XX)"
  local log=$work/probe.log
  timeout 60 "$bin/tessera" bench vector_add:1024 --target nvptx:sm_80 --no-check --budget-ms 0 --warmup-ms 0 \
    --min-reps 1 --max-reps 1 > "$log" 2>&1
  local rc=$?
  if ((rc == 0)); then
    gpu=$(sed -n 's/^tessera bench on \(.*\): .* budget per kernel.*/\1/p' "$log" | head -1)
    arch=sm_80
  else
    arch=$(grep -o 'the GPU present is .*(nvptx:sm_[0-9a-z]*)' "$log" | sed 's/.*(nvptx:\(sm_[0-9a-z]*\))$/\1/')
    gpu=$(grep -o 'the GPU present is .*(nvptx' "$log" | sed 's/the GPU present is \(.*\) (nvptx/\1/')
  fi
  [ -n "$arch" ]
}
t0=$EPOCHREALTIME
if [ -n "$dry" ]; then
  export TESSERA_CUDA_LIBRARY=$fakes/libfake_cuda.so
  if [ -f "$TESSERA_CUDA_LIBRARY" ] && probe_gpu; then
    row "GPU detection" PASS "$(elapsed "$t0")" 60 "dry run: the fake driver answers as $gpu (nvptx:$arch); the kernels run on the emulator, emu:nvptx:sm_90a"
  else
    row "GPU detection" FAIL "$(elapsed "$t0")" 60 "dry run: the fake driver $fakes/libfake_cuda.so: $(last_line "$work/probe.log")"
  fi
  T=emu:nvptx:sm_90a arch=sm_90a machine=h200 gpu="emulated sm_90a (dry run)"
else
  cap=""
  if command -v nvidia-smi > /dev/null; then
    cap=$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -1 | tr -d ' ')
    gpu=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)
    ngpu=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | grep -c .)
    drv=$(timeout 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2> /dev/null | head -1)
    case "$cap" in
      8.0) arch=sm_80 ;; 8.6) arch=sm_86 ;; 8.9) arch=sm_89 ;; 9.0) arch=sm_90a ;;
    esac
    info driver "${drv:-unknown}"
  fi
  [ -n "$arch" ] || probe_gpu || true
  case "$arch" in
    sm_80 | sm_86 | sm_89 | sm_90a)
      T=nvptx:$arch
      row "GPU detection" PASS "$(elapsed "$t0")" 60 "${gpu:-unknown} (compute capability ${cap:-?}, $ngpu GPU(s)): --target $T"
      ;;
    *)
      row "GPU detection" FAIL "$(elapsed "$t0")" 60 \
        "no supported NVIDIA GPU (sm_80, sm_86, sm_89, sm_90a): ${gpu:-none} ${cap:+(compute capability $cap)}$(last_line "$work/probe.log" | sed 's/^/; /')"
      ;;
  esac
  case "$gpu" in
    *H200*) machine=h200 ;; *H100*) machine=h100_sxm ;; *A100*) machine=a100_sxm ;; *B200*) machine=b200 ;;
  esac
fi
info gpu "$gpu"
info target "$T"
info machine "$machine"

# ---- what the machine has: cuBLAS, NCCL, Python --------------------------------
# The system's libraries first (the loader's cache, the CUDA toolkit's
# folders), then a Python environment's: the pip wheels put them in
# site-packages/nvidia/<package>/lib (CUDA 12) or nvidia/cu13/lib (CUDA 13),
# and `nvidia` is a namespace package, so its __path__ names every such folder.
sys_dirs=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/lib64)
if [ -n "$dry" ]; then
  # A stand-in Python environment holding the fake libraries under the
  # wheels' names; the system's folders are not searched.
  sys_dirs=()
  pyenv=$work/pyenv
  mkdir -p "$pyenv/nvidia/cu13/lib" "$pyenv/nvidia/nccl/lib"
  ln -sf "$fakes/libfake_cublas.so" "$pyenv/nvidia/cu13/lib/libcublas.so.13"
  ln -sf "$fakes/libfake_nccl.so" "$pyenv/nvidia/nccl/lib/libnccl.so.2"
  export PYTHONPATH=$pyenv${PYTHONPATH:+:$PYTHONPATH}
fi
python_lib_dirs() {  # the folders of the Python environment's NVIDIA wheels (and torch/lib)
  command -v "$py" > /dev/null || return 0
  timeout 30 "$py" - << 'PY' 2> /dev/null
import importlib.util, os, site, sysconfig
roots = []
try:
    import nvidia
    roots += list(getattr(nvidia, "__path__", []))
except Exception:
    pass
sites = list(getattr(site, "getsitepackages", lambda: [])())
try:
    sites.append(site.getusersitepackages())
except Exception:
    pass
sites += [sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")]
roots += [os.path.join(s, "nvidia") for s in sites if s]
dirs = []
for r in roots:
    if os.path.isdir(r):
        dirs += sorted(os.path.join(r, d, "lib") for d in os.listdir(r) if os.path.isdir(os.path.join(r, d, "lib")))
spec = importlib.util.find_spec("torch")
if spec and spec.origin:
    dirs.append(os.path.join(os.path.dirname(spec.origin), "lib"))
seen = set()
for d in dirs:
    d = os.path.realpath(d)
    if d not in seen and os.path.isdir(d):
        seen.add(d)
        print(d)
PY
}
mapfile -t py_dirs < <(python_lib_dirs)
# find_lib SONAME...: FOUND (a path) and FROM (where it was found).
find_lib() {
  FOUND="" FROM=""
  local n d
  if [ -z "$dry" ]; then
    for n in "$@"; do
      FOUND=$(ldconfig -p 2> /dev/null | awk -v n="$n" '$1 == n { print $NF; exit }')
      [ -n "$FOUND" ] && { FROM="the system (ldconfig)"; return 0; }
    done
  fi
  for n in "$@"; do
    for d in "${sys_dirs[@]}"; do
      [ -f "$d/$n" ] && { FOUND=$d/$n FROM="the system ($d)"; return 0; }
    done
  done
  for n in "$@"; do
    for d in "${py_dirs[@]}"; do
      [ -f "$d/$n" ] && { FOUND=$d/$n FROM="the Python environment of $py ($d)"; return 0; }
    done
  done
  return 1
}
t0=$EPOCHREALTIME
if [ -n "${TESSERA_CUBLAS_LIBRARY:-}" ]; then
  row "cuBLAS" PASS "$(elapsed "$t0")" - "TESSERA_CUBLAS_LIBRARY=$TESSERA_CUBLAS_LIBRARY (given)"
elif find_lib libcublas.so.13 libcublas.so.12; then
  export TESSERA_CUBLAS_LIBRARY=$FOUND
  lt=$(dirname "$FOUND")/libcublasLt.so.${FOUND##*.so.}
  [ -f "$lt" ] && lt="cuBLASLt beside it" || lt="no libcublasLt beside it"
  row "cuBLAS" PASS "$(elapsed "$t0")" - "$FOUND, from $FROM; $lt"
else
  row "cuBLAS" SKIP "$(elapsed "$t0")" - "no libcublas.so.13/.12 in the system's folders nor in a Python environment's nvidia/*/lib: the GEMMs' cuBLAS rows are empty"
fi
info cublas "${TESSERA_CUBLAS_LIBRARY:-none}"
t0=$EPOCHREALTIME
if [ -n "${TESSERA_NCCL_LIBRARY:-}" ]; then
  row "NCCL" PASS "$(elapsed "$t0")" - "TESSERA_NCCL_LIBRARY=$TESSERA_NCCL_LIBRARY (given)"
elif find_lib libnccl.so.2; then
  export TESSERA_NCCL_LIBRARY=$FOUND
  row "NCCL" PASS "$(elapsed "$t0")" - "$FOUND, from $FROM"
else
  row "NCCL" SKIP "$(elapsed "$t0")" - "no libnccl.so.2 in the system's folders nor in a Python environment's nvidia/*/lib: tp_mlp and sp_rmsnorm will say so"
fi
info nccl "${TESSERA_NCCL_LIBRARY:-none}"
torch_ok=""
if ! command -v "$py" > /dev/null; then
  skip "Python peers' environment" "no $py on the PATH: the PyTorch and Triton rows are empty"
elif run "Python peers' environment" 60 "$py" -c '
import sys
print("python", sys.version.split()[0])
try:
    import torch
    print("torch", torch.__version__, "CUDA", torch.version.cuda, "device:", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
except Exception as e:
    print("SKIP: torch not importable (%s: %s)" % (type(e).__name__, e))
    sys.exit(0)
try:
    import triton
    print("triton", triton.__version__)
except Exception as e:
    print("triton not importable (%s: %s)" % (type(e).__name__, e))
'; then
  if ((RC == 0)) && ! grep -q 'SKIP: ' "$LOG"; then
    torch_ok=1
    row "Python peers' environment" PASS "$SECS" "$LIM" "$(tr '\n' ';' < "$LOG" | sed 's/;$//; s/;/; /g')"
  else
    verdict "Python peers' environment"
  fi
  info python "$(tr '\n' ';' < "$LOG")"
else
  skip "Python peers' environment" "$(spent)"
fi

# ---- the problems -----------------------------------------------------------------
# The GPU run's shapes. FlashAttention's benchmark convention for attention:
# 16k tokens per batch, heads = batch x 2048 / D.
ws_cfg="BLOCK_M=128,BLOCK_N=256,BLOCK_K=32,num_warps=8,STAGES=2,WARP_SPECIALIZE=1" # the model's pick (docs/model.md)
gemms=(gemm_f16:4096,4096,4096,0 gemm_bf16:4096,4096,4096,0 gemm_f16:8192,8192,8192,0 gemm_bf16:8192,8192,8192,0)
fp8s=(gemm_fp8:4096,4096,4096 gemm_fp8:8192,8192,8192)
attns=()
for c in flash_attention flash_attention_causal; do
  for d in 64 128; do
    for n in 4096 8192 16384; do attns+=("$c:$((16384 * 2048 / n / d)),$n,$d"); done
  done
done
rowsk=(softmax:8192,8192 layernorm:8192,8192 rmsnorm:8192,8192)
tma_off=(gemm_f16:4096,4096,4096,0)
timing=(--budget-ms 200 --warmup-ms 30)
san_gemm=gemm_f16:512,512,256,0
gpu_shapes=("${gemms[@]}" "${fp8s[@]}" "${attns[@]}" "${rowsk[@]}")
if [ -n "$dry" ]; then
  # Small, for the emulator (the model also predicts the GPU run's shapes, to time it).
  gemms=(gemm_f16:256,256,128,0 gemm_bf16:256,256,128,0)
  fp8s=(gemm_fp8:128,128,128)
  attns=(flash_attention:2,256,64 flash_attention:1,256,128 flash_attention_causal:2,256,64 flash_attention_causal:1,256,128)
  rowsk=(softmax:64,1024 layernorm:64,1024 rmsnorm:64,1024)
  tma_off=(gemm_f16:256,256,128,0)
  timing=(--budget-ms 1 --warmup-ms 0 --min-reps 1 --max-reps 2)
  san_gemm=gemm_f16:256,256,128,0
fi
[ "$arch" = sm_89 ] || [ "$arch" = sm_90a ] || fp8s=()
[ "$arch" = sm_90a ] || { ws_cfg="" tma_off=(); }
ws_label="Tessera, 128x256x32 tiles, 8 warps, 2 stages, warp-specialised"
S_GEMM="GEMMs f16/bf16 at the defaults, against cuBLAS"
S_WS="GEMMs f16/bf16 warp-specialised (${ws_cfg:-none})"
S_TMA="GEMM f16 without TMA (TESSERA_TENSOR_COPIES=0)"
S_FP8="GEMMs fp8 (e4m3) at the defaults"
S_ATTN="flash attention forward, ${#attns[@]} shapes"
S_ROWS="softmax/layernorm/rmsnorm against a device-to-device copy"
S_PY="Python peers (PyTorch, cuBLASLt, cuDNN, Triton)"
for s in "${gemms[@]}"; do
  p=$(problem "$s")
  plan "$p" default "Tessera, $arch defaults" "$S_GEMM"
  [ -n "$ws_cfg" ] && plan "$p" ws "$ws_label" "$S_WS"
  for t in "${tma_off[@]}"; do [ "$t" = "$s" ] && plan "$p" tma-off "Tessera, $arch defaults, TMA off" "$S_TMA"; done
  plan "$p" blas "cuBLAS (cublasGemmEx, tessera bench --peers)" "$S_GEMM"
  plan "$p" py:torch-matmul "torch.matmul (cuBLAS)" "$S_PY"
done
for s in "${fp8s[@]}"; do
  plan "$(problem "$s")" default "Tessera, $arch defaults" "$S_FP8"
  plan "$(problem "$s")" py:torch-scaled-mm "torch._scaled_mm (cuBLASLt fp8)" "$S_PY"
done
for s in "${attns[@]}"; do
  p=$(problem "$s")
  plan "$p" default "Tessera, $arch defaults" "$S_ATTN"
  plan "$p" py:sdpa-flash "PyTorch SDPA, flash backend" "$S_PY"
  plan "$p" py:sdpa-cudnn "PyTorch SDPA, cuDNN backend" "$S_PY"
  plan "$p" py:triton "Triton fused attention (tutorial style)" "$S_PY"
done
for s in "${rowsk[@]}"; do
  p=$(problem "$s")
  plan "$p" default "Tessera, $arch defaults" "$S_ROWS"
  plan "$p" copy "device-to-device copy (tessera bench --peers)" "$S_ROWS"
  plan "$p" py:triton "Triton (tutorial style)" "$S_PY"
  plan "$p" py:torch "PyTorch eager" "$S_PY"
done

# ---- the performance model, beside the examples (both need no timing) -----------
# `tessera sol --model` for every kernel the kit times, on the GPU's machine
# row, in the background while the examples run; its notes say why a row has none.
model_pid=""
S_MODEL="performance model predictions (tessera sol --model${machine:+, $machine})"
if [ -n "$T" ] && [ -n "$machine" ]; then
  {
    for s in "${gemms[@]}" "${fp8s[@]}" "${attns[@]}" "${rowsk[@]}"; do
      echo "default-$(slug "$s") $bin/tessera sol $s --model --machines $machine --target nvptx:$arch"
    done
    if [ -n "$ws_cfg" ]; then
      for s in "${gemms[@]}"; do
        echo "ws-$(slug "$s") $bin/tessera sol $s --model --machines $machine --target nvptx:$arch --config $ws_cfg"
      done
    fi
    for s in "${tma_off[@]}"; do
      echo "tma-off-$(slug "$s") env TESSERA_TENSOR_COPIES=0 $bin/tessera sol $s --model --machines $machine --target nvptx:$arch"
    done
  } > "$work/model.jobs"
  mlim=$(limit_for 150)
  (
    s=$EPOCHREALTIME
    pool "$(($(nproc) > 2 ? $(nproc) / 2 : 1))" 60 "$mlim" < "$work/model.jobs"
    elapsed "$s" > "$work/model.secs"
  ) > /dev/null 2>&1 &
  model_pid=$!
else
  skip "$S_MODEL" "${T:+no machine row for ${gpu:-this GPU}}${T:-no GPU}"
fi

# ---- every example on the GPU against its reference --------------------------------
# Accurate and approximate math, several at a time (each its own process and
# context); two larger attention launches checked too. The multi-rank
# examples take one rank per GPU here.
if [ -n "$T" ]; then
  mapfile -t examples < <("$bin/tessera" list | cut -f1)
  {
    for k in "${examples[@]}"; do
      shape=()
      if [ -z "$dry" ] && ((ngpu < 2)) && { [ "$k" = tp_mlp ] || [ "$k" = sp_rmsnorm ]; }; then shape=(--shape 256,256,1024,1,4); fi
      if [ -n "$dry" ]; then
        # The emulator's slowest at their defaults: a ragged test shape each.
        case $k in
          tp_mlp) shape=(--shape 48,40,96,3,3) ;;
          sp_rmsnorm) shape=(--shape 36,40,96,3,3) ;;
          paged_decode_attention) shape=(--shape 3,2,77,32) ;;
          gemm_f32) shape=(--shape 100,77,33,1) ;;
        esac
      fi
      echo "$k.acc $bin/tessera run $k --target $T ${shape[*]}"
      echo "$k.approx $bin/tessera run $k --target $T --precision approx ${shape[*]}"
    done
    if [ -z "$dry" ]; then
      echo "flash_attention@2,1024,128.acc $bin/tessera run flash_attention --target $T --shape 2,1024,128"
      echo "flash_attention_causal@2,1024,64.acc $bin/tessera run flash_attention_causal --target $T --shape 2,1024,64"
    fi
  } > "$work/examples.jobs"
  elim=$(limit_for 150)
  t0=$EPOCHREALTIME
  par=$(($(nproc) > 2 ? $(nproc) / 2 : 2))
  ((par > 8)) && par=8
  if ((elim >= 3)); then
    (pool "$par" 90 "$elim" < "$work/examples.jobs")
    row "examples on $T: $(wc -l < "$work/examples.jobs") runs, $par at a time" INFO "$(elapsed "$t0")" "$elim" \
      "accurate and approximate math, each against the example's reference; one row each below"
  fi
  while read -r key cmd; do
    k=${key%.*}
    [ "${key##*.}" = acc ] || continue
    res=PASS detail="" secs=0
    [[ $cmd == *--shape* ]] && detail="shape ${cmd##*--shape }: "
    for v in acc approx; do
      f=$work/jobs/$k.$v
      [ -f "$f.rc" ] || { [ "$v" = approx ] && continue; echo -1 > "$f.rc"; echo 0 > "$f.secs"; spent > "$f.log"; }
      rc=$(cat "$f.rc") s=$(cat "$f.secs")
      secs=$(awk -v a="$secs" -v b="$s" 'BEGIN { printf "%.1f", a + b }')
      cp "$f.log" "$logs/example-$(slug "$k").$v.log" 2> /dev/null
      what=$([ $v = acc ] && echo accurate || echo approx)
      if ((rc == 0)); then
        detail+="$what OK ($s s); "
      elif grep -q "NCCL not available" "$f.log"; then
        [ $res = FAIL ] || res=SKIP
        detail+="$what: no NCCL (libnccl.so.2) on this host; "
      elif ((rc == -1)); then
        [ $res = FAIL ] || res=SKIP
        detail+="$what not run: $(cat "$f.log"); "
      elif ((rc == 124 || rc == 137)); then
        res=FAIL detail+="$what timed out ($s s); "
      else
        res=FAIL detail+="$what exit $rc: $(grep -v '^time:' "$f.log" | last_line /dev/stdin); "
      fi
    done
    row "example ${k/@/ at }" "$res" "$secs" 90 "${detail%; }"
  done < "$work/examples.jobs"
else
  skip "examples on the GPU" "no GPU"
fi

# The model's predictions: parsed into problem, variant, predicted, bound, speed of light.
to_seconds() { awk -v v="$1" -v u="$2" 'BEGIN { f = u == "s" ? 1 : u == "ms" ? 1e-3 : u == "us" ? 1e-6 : 1e-9; printf "%.6g", v * f }'; }
if [ -n "$model_pid" ]; then
  t0=$EPOCHREALTIME
  wait "$model_pid" 2> /dev/null
  nok=0 nall=0 why=""
  : > "$logs/model.log"
  while read -r key cmd; do
    nall=$((nall + 1))
    f=$work/jobs/$key
    case $key in default-*) variant=default ;; ws-*) variant=ws ;; tma-off-*) variant="tma-off" ;; esac
    { echo "== $key (exit $(cat "$f.rc" 2> /dev/null), $(cat "$f.secs" 2> /dev/null) s)"; cat "$f.log" 2> /dev/null; } >> "$logs/model.log"
    id=$(sed -n 's/^\([a-z0-9_]*\[[0-9x]*\]\), grid .*/\1/p' "$f.log" 2> /dev/null | head -1)
    # "  predicted 348.115 us, L2 bound; speed of light 138.911 us"
    line=$(sed -n 's/^  predicted \([0-9.e+-]*\) \([a-z]*\), \(.*\) bound; speed of light \([0-9.e+-]*\) \([a-z]*\)$/\1 \2|\3|\4 \5/p' \
      "$f.log" 2> /dev/null | head -1)
    if [ -n "$id" ] && [ -n "$line" ]; then
      IFS='|' read -r pred bound sol <<< "$line"
      printf '%s\t%s\t%s\t%s\t%s\t\n' "$id" "$variant" "$(to_seconds "${pred% *}" "${pred#* }")" "$bound" \
        "$(to_seconds "${sol% *}" "${sol#* }")" >> "$work/model.tsv"
      nok=$((nok + 1))
    else
      reason=$(grep -m1 -E 'cannot run on|error|unknown option' "$f.log" 2> /dev/null || last_line "$f.log")
      [ "$variant" = ws ] && grep -q 'unknown option --config\|does not take --config' "$f.log" 2> /dev/null &&
        reason="this tessera's sol takes no --config"
      [ "$(cat "$f.rc" 2> /dev/null)" = -1 ] && reason="" # not started: the step's row says why
      [ -n "$why" ] || [ -z "$reason" ] || why="$variant: $(oneline "$reason")"
      # The subject's id for the row: its problem.
      subj=$(sed -n 's/.* sol \([^ ]*\) .*/\1/p' <<< "$cmd")
      printf '%s\t%s\t\t\t\t%s\n' "$(problem "$subj")" "$variant" "$(oneline "${reason:+model: $reason}" | cut -c1-120)" \
        >> "$work/model.tsv"
    fi
  done < "$work/model.jobs"
  msecs=$(cat "$work/model.secs" 2> /dev/null || echo "?")
  nstarted=$(cat "$work"/jobs/{default,ws,tma-off}-*.rc 2> /dev/null | grep -vc '^-1$')
  with="in the background, beside the examples"
  if ((nstarted == 0)); then
    row "$S_MODEL" SKIP "$msecs" "$mlim" "$(spent)"
  elif ((nok == nall)); then
    row "$S_MODEL" PASS "$msecs" "$mlim" "$nok predictions, $with"
  elif ((nok > 0)); then
    row "$S_MODEL" INFO "$msecs" "$mlim" "$nok of $nall predictions, $with; first reason missing: $why"
  else
    row "$S_MODEL" FAIL "$msecs" "$mlim" "no prediction: $why"
  fi
fi
# The dry run's shapes are small: the model's time at the GPU run's shapes
# (a step that needs no GPU) is measured here, all cores at a time.
if [ -n "$dry" ] && [ -n "$machine" ]; then
  name="performance model at the GPU run's shapes (dry run: their time)"
  for s in "${gpu_shapes[@]}"; do
    echo "gpu-shape-$(slug "$s") $bin/tessera sol $s --model --machines $machine --target nvptx:$arch"
  done > "$work/model-gpu.jobs"
  glim=$(limit_for 120)
  if ((glim < 3)); then
    skip "$name" "$(spent)"
  else
    t0=$EPOCHREALTIME
    (pool "$(nproc)" 60 "$glim" < "$work/model-gpu.jobs")
    n=0 late=0 bad="" slow="" slowest=0
    while read -r key _; do
      rc=$(cat "$work/jobs/$key.rc" 2> /dev/null || echo -1)
      if ((rc == 0)) && grep -q '^  predicted ' "$work/jobs/$key.log"; then
        n=$((n + 1))
      elif ((rc == -1 || rc == 124 || rc == 137)); then
        late=$((late + 1))
      else
        bad="${key#gpu-shape-}: $(last_line "$work/jobs/$key.log")"
      fi
      s=$(cat "$work/jobs/$key.secs" 2> /dev/null || echo 0)
      if awk -v a="$s" -v b="$slowest" 'BEGIN { exit !(a > b) }'; then slowest=$s slow=${key#gpu-shape-}; fi
    done < "$work/model-gpu.jobs"
    ng=$(wc -l < "$work/model-gpu.jobs")
    detail="$n of $ng predictions, $(nproc) at a time on $(nproc) cores; the slowest $slow, $slowest s"
    if [ -n "$bad" ]; then
      row "$name" FAIL "$(elapsed "$t0")" "$glim" "$detail; $bad"
    elif ((late > 0)); then
      # A slow host, not a defect: the time is what this step measures.
      row "$name" INFO "$(elapsed "$t0")" "$glim" "$detail; $late not done within the limit"
    else
      row "$name" PASS "$(elapsed "$t0")" "$glim" "$detail"
    fi
  fi
fi

# ---- the tests that need a real device, and the PTX of the Hopper paths ---------
if [ -x "$bin/test_runtime" ]; then
  step "tests needing a real CUDA device (test_runtime [cuda][hardware])" 90 \
    "$bin/test_runtime" "[cuda][hardware]"
else
  skip "tests needing a real CUDA device" "test_runtime not in the bundle"
fi
if [ "$arch" = sm_90a ]; then
  # Compile-only: wgmma in the GEMM, TMA (cp.async.bulk.tensor) in its aligned variant.
  for chk in "wgmma.mma_async:" "cp.async.bulk.tensor:--assume-aligned"; do
    ins=${chk%%:*} flag=${chk#*:}
    name="$ins in gemm_f16's sm_90a PTX${flag:+ (aligned)}"
    if run "$name" 30 "$bin/tessera" compile gemm_f16 --target nvptx:sm_90a ${flag:+"$flag"} --emit ptx; then
      n=$(grep -c "$ins" "$LOG")
      if ((RC == 0 && n > 0)); then
        row "$name" PASS "$SECS" "$LIM" "$n instructions"
      elif ((RC == 0)); then
        row "$name" FAIL "$SECS" "$LIM" "none in the PTX ($(wc -l < "$LOG") lines)"
      else
        verdict "$name"
      fi
    else
      skip "$name" "$(spent)"
    fi
  done
fi

# ---- Tessera's side, timed by its own harness -------------------------------------------
# bench BASENAME VARIANT NAME LIMIT ARGS...: `tessera bench` with a JSON report
# in the results folder, the report's kernels being VARIANT.
bench() {
  local base=$1 variant=$2 name=$3 lim=$4
  shift 4
  if [ -z "$T" ]; then
    skip "$name" "no GPU"
    return
  fi
  local json=$out/bench-$base.json
  if run "$name" "$lim" "$@" --target "$T" --json "$json"; then
    if ((RC == 0)) && [ -s "$json" ] && [ -x "$bin/jq" ]; then
      # The medians, as the row's detail.
      row "$name" PASS "$SECS" "$LIM" "$("$bin/jq" -r '.results[] | [.name + "[" + .shape + "]", .seconds.median] | @tsv' "$json" |
        awk -F'\t' '{ s = $2; u = "s"; if (s < 1e-3) { s *= 1e6; u = "us" } else if (s < 1) { s *= 1e3; u = "ms" }
                      printf "%s%s %.3g %s", (NR > 1 ? "; " : ""), $1, s, u }')"
    else
      verdict "$name"
    fi
    source_json "$json" "$variant"
    peer_notes
  else
    skip "$name" "$(spent)"
  fi
}
if ((${#gemms[@]})); then
  bench gemm default "$S_GEMM" 90 "$bin/tessera" bench "${gemms[@]}" --no-check --peers "${timing[@]}"
fi
if [ -n "$ws_cfg" ]; then
  bench gemm-ws ws "$S_WS" 90 "$bin/tessera" bench "${gemms[@]}" --no-check --config "$ws_cfg" "${timing[@]}"
fi
if ((${#tma_off[@]})); then
  bench gemm-tma-off tma-off "$S_TMA" 45 env TESSERA_TENSOR_COPIES=0 "$bin/tessera" bench "${tma_off[@]}" \
    --no-check "${timing[@]}"
fi
if ((${#fp8s[@]})); then
  bench gemm-fp8 default "$S_FP8" 60 "$bin/tessera" bench "${fp8s[@]}" --no-check "${timing[@]}"
else
  skip "GEMMs fp8" "the fp8 tensor cores are sm_89's and sm_90a's; this GPU is ${arch:-none}"
fi
bench attention default "$S_ATTN" 120 "$bin/tessera" bench "${attns[@]}" --no-check "${timing[@]}"
bench rows default "$S_ROWS" 60 "$bin/tessera" bench "${rowsk[@]}" --peers "${timing[@]}"
if [ -n "$dry" ] && [ -f "$fakes/libfake_cuda.so" ]; then
  # The GEMM peer's plumbing on the fake driver: cuBLAS as found above.
  name="cuBLAS peer through the fake driver (dry run)"
  if run "$name" 30 "$bin/tessera" bench gemm_f16:64,64,64,0 --target nvptx:sm_80 --no-check --peers --budget-ms 2 \
    --warmup-ms 0 --min-reps 1 --max-reps 3; then
    line=$(grep -m1 'against cuBLAS' "$LOG")
    if ((RC == 0)) && [ -n "$line" ] && grep -qF "${TESSERA_CUBLAS_LIBRARY:-//}" <<< "$line"; then
      row "$name" PASS "$SECS" "$LIM" "$line"
    elif ((RC == 0)); then
      row "$name" FAIL "$SECS" "$LIM" "no line against the cuBLAS found (${TESSERA_CUBLAS_LIBRARY:-none}): $(last_line "$LOG")"
    else
      verdict "$name"
    fi
  else
    skip "$name" "$(spent)"
  fi
fi

# ---- the Python peers ---------------------------------------------------------------------
if [ -z "$T" ]; then
  skip "$S_PY" "no GPU"
elif ! command -v "$py" > /dev/null; then
  skip "$S_PY" "no $py on the PATH"
else
  py_limit=180
  [ -n "$torch_ok" ] || py_limit=30
  py_timing=(--budget-ms 200 --warmup-ms 30)
  [ -n "$dry" ] && py_timing=(--budget-ms 1 --warmup-ms 0)
  if run "$S_PY" "$py_limit" "$py" "$here/bench/gpu/peers.py" --json "$out/peers.json" \
    --deadline-s $(($(limit_for "$py_limit") > 30 ? $(limit_for "$py_limit") - 20 : 10)) \
    "${py_timing[@]}" "${gemms[@]}" "${fp8s[@]}" "${attns[@]}" "${rowsk[@]}"; then
    counts=""
    [ -s "$out/peers.json" ] && [ -x "$bin/jq" ] && counts=$("$bin/jq" -r '[.results[].status] as $s
      | "\($s | map(select(. == "ok")) | length) timed, \($s | map(select(. == "skip")) | length) skipped, \($s | map(select(. == "fail")) | length) failed their check"' "$out/peers.json")
    if ((RC == 0)) && [ -z "$torch_ok" ]; then
      row "$S_PY" SKIP "$SECS" "$LIM" "${counts:+$counts: }$(grep -m1 -o 'skip: .*' "$LOG" | sed 's/^skip: //')"
    elif ((RC == 0 || RC == 1)) && [ -n "$counts" ]; then
      row "$S_PY" "$([ $RC = 0 ] && echo PASS || echo FAIL)" "$SECS" "$LIM" "$counts (peers.json)"
    else
      verdict "$S_PY"
    fi
  else
    skip "$S_PY" "$(spent)"
  fi
fi

# ---- compute-sanitizer: memcheck and racecheck -----------------------------------------
# On the warp-specialised GEMM (TMA copies by a producer warp, aligned) and
# the attention kernel (the example's ragged default shape). The dry run
# runs the same launches on the emulator, whose shared-memory race and
# bounds checks stand in.
san_runs=()
if [ -n "$ws_cfg" ]; then
  san_runs+=("gemm_f16 warp-specialised ${san_gemm#*:}|bench $san_gemm --config $ws_cfg --budget-ms 0 --warmup-ms 0 --min-reps 1 --max-reps 1")
else
  san_runs+=("gemm_f16 ${san_gemm#*:}|bench $san_gemm --budget-ms 0 --warmup-ms 0 --min-reps 1 --max-reps 1")
fi
san_runs+=("flash_attention (ragged default shape)|run flash_attention")
if [ -z "$T" ]; then
  skip "compute-sanitizer" "no GPU"
elif [ -n "$dry" ]; then
  for r in "${san_runs[@]}"; do
    read -r -a a <<< "${r#*|}"
    step "memcheck/racecheck ${r%%|*} (dry run: the emulator's checks)" 60 "$bin/tessera" "${a[@]}" --target "$T"
  done
elif ! command -v compute-sanitizer > /dev/null; then
  skip "compute-sanitizer" "not on the PATH (the CUDA toolkit has it)"
else
  san_end=$(($(date +%s) + 150)) # the four runs together
  for tool in memcheck racecheck; do
    for r in "${san_runs[@]}"; do
      read -r -a a <<< "${r#*|}"
      own=$((san_end - $(date +%s)))
      ((own < 90)) || own=90
      if ((own < 5)); then
        skip "compute-sanitizer $tool: ${r%%|*}" "the sanitizer's 150 s were spent"
        continue
      fi
      step "compute-sanitizer $tool: ${r%%|*}" "$own" compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$here/lib/ld-linux-x86-64.so.2" --library-path "$here/lib" "$here/libexec/tessera" "${a[@]}" --target "$T"
      if ((RC != 0)) && [ -s "$LOG" ]; then grep -m3 -E '=+ (ERROR|Error|Race|Warning)' "$LOG" | sed 's/^/    /'; fi
    done
  done
fi

# ---- the CPU and emulator control (optional) -------------------------------------------
if [ -n "$cpu_control" ]; then
  if [ -x "$bin/test_examples" ]; then
    step "CPU and emulator examples (test_examples)" 300 "$bin/test_examples" "~[hardware]"
  else
    skip "CPU and emulator examples" "test_examples not in the bundle"
  fi
else
  skip "CPU and emulator examples" "not asked for (--with-cpu-control; 2-3 minutes on 16 cores)"
fi

# ---- the report ----------------------------------------------------------------------------
# The measurements: one row per planned (problem, implementation), from the
# bench reports, the Python peers' report and the model's predictions; a row
# without a measurement says why.
fmt_md() {  # TSV rows on stdin -> the measurements table
  awk -F'\t' '
    function pct(x) { return x >= 0.1 ? sprintf("%.0f%%", 100 * x) : sprintf("%.2g%%", 100 * x) }
    function t(s) { if (s == "") return "-"; if (s >= 1) return sprintf("%.3g s", s); if (s >= 1e-3) return sprintf("%.3g ms", s * 1e3); if (s >= 1e-6) return sprintf("%.3g us", s * 1e6); return sprintf("%.3g ns", s * 1e9) }
    function work(p,   name, d, n, i, f) {
      name = p; sub(/\[.*/, "", name); d = p; sub(/^[^[]*\[/, "", d); sub(/\]$/, "", d); n = split(d, x, "x")
      if (name ~ /^gemm/) return 2 * x[1] * x[2] * x[3]
      if (name ~ /^flash_attention/) { f = 4 * x[1] * x[2] * x[2] * x[3]; return name ~ /causal/ ? f / 2 : f }
      return 0
    }
    function bytes(p,   name, d) {
      name = p; sub(/\[.*/, "", name); d = p; sub(/^[^[]*\[/, "", d); sub(/\]$/, "", d); split(d, x, "x")
      if (name == "softmax") return 8 * x[1] * x[2]
      if (name == "layernorm") return 4 * (2 * x[1] * x[2] + 2 * x[2] + 2 * x[1])
      if (name == "rmsnorm") return 4 * (2 * x[1] * x[2] + x[2])
      return 0
    }
    { n++; P[n] = $1; L[n] = $2; S[n] = $3; M[n] = $4; MI[n] = $5; MX[n] = $6; R[n] = $7; PR[n] = $8; B[n] = $9; SOL[n] = $10; N[n] = $11
      if (S[n] == "ok" && M[n] > 0 && (!(P[n] in best) || M[n] < best[P[n]])) best[P[n]] = M[n] }
    END {
      print "| problem | implementation | median | min - max | reps | throughput | of fastest | model | model / measured | of SOL | note |"
      print "|---|---|---|---|---|---|---|---|---|---|---|"
      for (i = 1; i <= n; i++) {
        thr = "-"; of = "-"; ratio = "-"; ofsol = "-"
        if (S[i] == "ok" && M[i] > 0) {
          w = work(P[i]); b = bytes(P[i])
          if (w > 0) thr = sprintf("%.3g TFLOP/s", w / M[i] / 1e12); else if (b > 0) thr = sprintf("%.3g GB/s", b / M[i] / 1e9)
          of = pct(best[P[i]] / M[i])
          if (PR[i] != "") ratio = sprintf("%.3g", PR[i] / M[i])
          if (SOL[i] != "") ofsol = pct(SOL[i] / M[i])
        } else if (S[i] == "ok") N[i] = "a median of 0 (the clock did not advance)" (N[i] == "" ? "" : "; " N[i])
        med = S[i] == "ok" ? t(M[i]) : (S[i] == "" ? "-" : S[i])
        mm = S[i] == "ok" ? t(MI[i]) " - " t(MX[i]) : "-"
        model = PR[i] == "" ? "-" : t(PR[i]) " (" B[i] ")"
        gsub(/\|/, "/", N[i])
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", P[i], L[i], med, mm, (R[i] == "" ? "-" : R[i]), thr, of, model, ratio, ofsol, N[i]
      }
    }'
}
report() {
  local jqb="" now total verdict_line
  [ -x "$bin/jq" ] && "$bin/jq" --version > /dev/null 2>&1 && jqb=$bin/jq
  now=$(date +%s)
  total=$((now - started))
  local nfail nskip
  nfail=$(awk -F'\t' '$3 == "FAIL"' "$steps_tsv" | wc -l)
  nskip=$(awk -F'\t' '$3 == "SKIP"' "$steps_tsv" | wc -l)
  verdict_line="$([ $failed = 0 ] && echo PASS || echo FAIL): $nstep steps, $nfail failed, $nskip skipped; $total s of the $budget s budget"
  {
    echo "# Tessera GPU acceptance$([ -n "$dry" ] && echo ' (dry run)')"
    echo
    awk -F'\t' '{ printf "- %s: %s\n", $1, $2 }' "$work/info.tsv"
    echo "- result: $verdict_line"
    echo
    echo "## Measurements"
    echo
    echo "One run on one device: Tessera and its peers by \`tessera bench\` (device events), the Python"
    echo "peers by bench/gpu/peers.py (CUDA events, the same rules); each row beside the model's prediction."
    echo
    if [ -n "$jqb" ]; then
      {
        while IFS=$'\t' read -r f v; do
          "$jqb" -c --arg v "$v" '.results[] | {problem: ((.name | sub("/.*"; "")) + "[" + .shape + "]"),
            variant: (if (.name | endswith("/blas")) then "blas" elif (.name | endswith("/copy")) then "copy" else $v end),
            status: "ok", median: .seconds.median, min: .seconds.min, max: .seconds.max, reps: .seconds.count,
            roofline: (.roofline.seconds // null), why: ""}' "$f"
        done < "$work/sources.tsv"
        [ -s "$out/peers.json" ] && "$jqb" -c '.results[] | {problem: .id, variant: ("py:" + .impl), status,
            median: (.seconds.median // null), min: (.seconds.min // null), max: (.seconds.max // null),
            reps: (.seconds.count // null), roofline: null, why}' "$out/peers.json"
      } > "$work/measured.jsonl" 2> "$work/report-jq.log"
      "$jqb" -r -n --rawfile plan "$work/plan.tsv" --rawfile model "$work/model.tsv" --rawfile notes "$work/notes.tsv" \
        --rawfile steps "$steps_tsv" --slurpfile meas "$work/measured.jsonl" '
        def tsv($s): $s | split("\n") | map(select(length > 0) | split("\t"));
        (reduce $meas[] as $m ({}; .[$m.problem + "|" + $m.variant] = $m)) as $M
        | (reduce tsv($model)[] as $r ({}; .[$r[0] + "|" + $r[1]] = $r)) as $P
        | (reduce tsv($notes)[] as $r ({}; .[$r[0] + "|" + $r[1]] = $r[2])) as $N
        | (reduce tsv($steps)[] as $r ({}; .[$r[1]] = ($r[2] + ": " + $r[5]))) as $S
        | tsv($plan)[] as [$p, $v, $lab, $step]
        | ($M[$p + "|" + $v]) as $m
        | ($P[$p + "|" + $v]) as $pr
        | (($P[$p + "|default"] // [])[4] // "") as $sol0
        | (if $sol0 != "" then $sol0 else ((($M[$p + "|default"] // {}).roofline // "") | tostring) end) as $sol
        | (if $m == null then "" else $m.status end) as $status
        | [$p, $lab, $status,
           (if $status == "ok" then ($m.median | tostring) else "" end),
           (if $status == "ok" then ($m.min | tostring) else "" end),
           (if $status == "ok" then ($m.max | tostring) else "" end),
           (if $status == "ok" then ($m.reps | tostring) else "" end),
           (if $pr != null then $pr[2] else "" end), (if $pr != null then $pr[3] else "" end),
           (if $sol == "null" then "" else $sol end),
           ([(if $m == null then ($N[$p + "|" + $v] // ("not measured: " + ($S[$step] // "step not run"))) elif $status != "ok" then $m.why else empty end),
             (if ($v | test("^(default|ws|tma-off)$")) and $pr != null and $pr[5] != "" then $pr[5] else empty end)]
            | map(select(. != "")) | join("; "))]
        | @tsv' > "$work/perf.tsv" 2>> "$work/report-jq.log"
      fmt_md < "$work/perf.tsv"
      echo
      echo "model: the performance model's prediction for the machine row (docs/model.md) and its bound;"
      echo "model / measured is what recalibrates ModelArchs.def. of SOL: the problem's speed of light"
      echo "(the roofline of its compulsory work, tessera sol) over the median. of fastest: the row's"
      echo "speed against the problem's fastest row. Throughput: 2MNK for GEMMs, 4 n^2 D heads (half of"
      echo "it causal) for attention, the compulsory bytes for the row kernels, for every row alike."
    else
      echo "(jq missing from the bundle: the measurements are in bench-*.json and peers.json)"
    fi
    echo
    echo "## Steps"
    echo
    echo "| # | step | result | time | limit | detail |"
    echo "|---|---|---|---|---|---|"
    awk -F'\t' '{ d = $6; gsub(/\|/, "/", d); printf "| %s | %s | %s | %s s | %s | %s |\n", $1, $2, $3, $4, ($5 == "-" || $5 == 0 ? "-" : $5 " s"), d }' "$steps_tsv"
    echo
    echo "total: $total s (budget $budget s). Logs: $logs"
  } > "$out/report.md"
  if [ -n "$jqb" ]; then
    "$jqb" -n --rawfile info "$work/info.tsv" --rawfile steps "$steps_tsv" --rawfile perf "$work/perf.tsv" \
      --arg total "$total" --arg failed "$failed" '
      def tsv($s): $s | split("\n") | map(select(length > 0) | split("\t"));
      def num: if . == "" then null else tonumber end;
      {format: "tessera-gpu-acceptance", version: 1, seconds: ($total | tonumber), passed: ($failed == "0"),
       machine: (reduce tsv($info)[] as $r ({}; .[$r[0]] = $r[1])),
       steps: [tsv($steps)[] | {index: (.[0] | tonumber), step: .[1], result: .[2], seconds: (.[3] | num),
                                limit_seconds: (if .[4] == "-" then null else (.[4] | num) end), detail: .[5]}],
       measurements: [tsv($perf)[] | {problem: .[0], implementation: .[1], status: .[2], median_s: (.[3] | num),
                                       min_s: (.[4] | num), max_s: (.[5] | num), reps: (.[6] | num),
                                       predicted_s: (.[7] | num), bound: .[8], speed_of_light_s: (.[9] | num),
                                       note: .[10]}]}' > "$out/results.json" 2>> "$work/report-jq.log" ||
      echo "gpu-acceptance: results.json not written: $(last_line "$work/report-jq.log")" >&2
  fi
  cp "$work"/*.tsv "$work"/measured.jsonl "$work"/report-jq.log "$logs/" 2> /dev/null
  echo
  cat "$out/report.md"
}
report
exit $failed
