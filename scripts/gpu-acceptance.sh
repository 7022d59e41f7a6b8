#!/usr/bin/env bash
# Run on a machine with an NVIDIA GPU, from an unpacked bundle (or given the
# archive: gpu-acceptance.sh tessera-gpu-bundle.tar.xz). In under ten minutes
# it runs every bundled example on the GPU against its C++ reference, the
# tests that need a real device, compute-sanitizer's memcheck and racecheck on
# a few kernels where the tool exists, and the benchmarks, then prints one
# table. Every step has a time limit and says why it was skipped; the exit
# status is non-zero when any check failed.
set -uo pipefail
if [ $# -ge 1 ] && [ -f "$1" ]; then
  dest=${2:-$(mktemp -d)}
  tar -C "$dest" -xJf "$1" || { echo "gpu-acceptance: cannot unpack $1" >&2; exit 2; }
  exec bash "$dest/tessera-gpu/gpu-acceptance.sh"
fi
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/bin
[ -x "$bin/tessera" ] || { echo "gpu-acceptance: run from an unpacked bundle ($bin/tessera missing)" >&2; exit 2; }
limit=${TESSERA_ACCEPT_STEP_SECONDS:-120}
rows=()
failed=0
row() { rows+=("$(printf '%-44s %-8s %s' "$1" "$2" "$3")"); [ "$2" = FAIL ] && failed=1; return 0; }
step() {  # name, command...: PASS/FAIL with the last line of output
  local name=$1; shift
  local log
  log=$(timeout "$limit" "$@" 2>&1); local rc=$?
  local last=$(printf '%s\n' "$log" | grep -v '^$' | tail -1 | cut -c1-90)
  if [ $rc -eq 0 ]; then row "$name" PASS "$last"
  elif [ $rc -eq 124 ]; then row "$name" FAIL "timed out after ${limit} s"
  # The multi-GPU examples need NCCL, which the bundle does not carry (the
  # host's libnccl.so.2 is used where it has one): not a failure of Tessera.
  elif printf '%s\n' "$log" | grep -q "NCCL not available"; then row "$name" SKIP "no libnccl.so.2 on this host"
  else row "$name" FAIL "exit $rc: $last"; fi
  printf '%s\n' "$log" > "$here/$(echo "$name" | tr ' /:' '___').log"
}

echo "tessera GPU acceptance: $(cat "$here/VERSION" 2>/dev/null)"
"$bin/tessera" --version

# The GPU and its architecture.
sm=""
if command -v nvidia-smi > /dev/null; then
  cap=$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
  gpu=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  case "$cap" in
    8.0) sm=sm_80 ;; 8.6) sm=sm_86 ;; 8.9) sm=sm_89 ;; 9.0) sm=sm_90a ;;
  esac
  echo "GPU: ${gpu:-unknown} (compute capability ${cap:-unknown})"
else
  echo "GPU: nvidia-smi not found"
fi
if [ -z "$sm" ]; then
  row "GPU detection" FAIL "no supported NVIDIA GPU found (sm_80, sm_86, sm_89, sm_90a)"
else
  row "GPU detection" PASS "nvptx:$sm"
  for k in $("$bin/tessera" list | cut -f1); do
    step "example $k" "$bin/tessera" run "$k" --target "nvptx:$sm"
    step "example $k (approx math)" "$bin/tessera" run "$k" --target "nvptx:$sm" --precision approx
  done
  step "tests needing a real CUDA device" "$bin/test_runtime" "[cuda][hardware]"
  if [ "$sm" = sm_90a ]; then
    # The examples' GEMMs and flash attention take wgmma on sm_90a (checked
    # against their references above): say so in the log, and time the GEMM
    # at a size where the tensor cores dominate (the example's own check).
    step "wgmma in gemm_f16's PTX" sh -c "\"$bin/tessera\" compile gemm_f16 --target nvptx:sm_90a --emit ptx | grep -c wgmma.mma_async"
    step "gemm_f16 / gemm_bf16 2048^3 with wgmma" "$bin/tessera" bench gemm_f16:2048,2048,2048 gemm_bf16:2048,2048,2048 \
      --target nvptx:sm_90a
    # Aligned launches fill the slots by TMA (tensor maps the launch encodes
    # with cuTensorMapEncodeTiled): the GEMMs and attention again with TMA
    # off, so a TMA-only failure above shows as such, and both timed.
    step "TMA in the aligned gemm_f16's PTX" sh -c "\"$bin/tessera\" compile gemm_f16 --target nvptx:sm_90a --assume-aligned --emit ptx | grep -c cp.async.bulk.tensor"
    for k in gemm_f16 gemm_bf16 flash_attention; do
      step "example $k without TMA" env TESSERA_TENSOR_COPIES=0 "$bin/tessera" run "$k" --target nvptx:sm_90a
    done
    step "gemm_f16 2048^3 without TMA" env TESSERA_TENSOR_COPIES=0 "$bin/tessera" bench gemm_f16:2048,2048,2048 \
      --target nvptx:sm_90a
  fi
  if command -v compute-sanitizer > /dev/null; then
    for k in vector_add softmax gemm_f16; do
      step "memcheck $k" compute-sanitizer --tool memcheck --error-exitcode 1 "$here/lib/ld-linux-x86-64.so.2" \
        --library-path "$here/lib" "$here/libexec/tessera" run "$k" --target "nvptx:$sm"
      step "racecheck $k" compute-sanitizer --tool racecheck --error-exitcode 1 "$here/lib/ld-linux-x86-64.so.2" \
        --library-path "$here/lib" "$here/libexec/tessera" run "$k" --target "nvptx:$sm"
    done
  else
    row "compute-sanitizer" SKIP "not on PATH (CUDA toolkit images have it)"
  fi
fi
# The CPU and emulator paths from the same bundle, as a control.
# Every example on the CPU and both emulated vendors: the longest step (about
# 2-3 minutes on 16 cores), so it gets a longer limit.
limit=$((limit > 300 ? limit : 300)) step "CPU and emulator examples" "$bin/test_examples" "~[hardware]"
step "CPU benchmark (GEMM vs peers)" "$bin/tessera_gemm_bench" --sizes 1024 --reps 3

# The GPU benchmark beside its peers (`tessera bench --peers`, docs/bench.md):
# the GEMMs' plain product (act 0) against cuBLAS, softmax and layernorm
# against a device-to-device copy of the bytes they move. The bundle carries
# no cuBLAS (hundreds of MiB): the host's is used, found here where the CUDA
# images and the pip wheels put it; without one the GEMM rows say so.
peer_rows() {  # the "against the peers" lines of a step's log, one row each
  local log=$here/$(echo "$1" | tr ' /:' '___').log line
  while read -r line; do
    row "  ${line%%:*}" INFO "$(echo "${line#*: }" | cut -c1-90)"
  done < <(grep -E '^  [a-z0-9_]+\[[0-9x]+\]: .* against ' "$log" 2>/dev/null)
  while read -r line; do
    line=${line#note: }
    row "  ${line%%:*}" SKIP "$(echo "${line#*: }" | cut -c1-90)"
  done < <(grep -E '^note: [a-z0-9_]+\[[0-9x]+\]: no (GEMM|copy) peer' "$log" 2>/dev/null)
}
if [ -n "$sm" ]; then
  if [ -z "${TESSERA_CUBLAS_LIBRARY:-}" ]; then
    wheel=$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null)
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu $wheel; do
      for v in 13 12; do
        if [ -f "$d/libcublas.so.$v" ]; then export TESSERA_CUBLAS_LIBRARY=$d/libcublas.so.$v; break 2; fi
      done
    done
  fi
  echo "cuBLAS for the GEMM peer: ${TESSERA_CUBLAS_LIBRARY:-searched for by the loader as libcublas.so.13 or .12}"
  # Tiles for the hardware, not the examples' emulator-friendly defaults.
  if [ "$sm" = sm_90a ]; then
    cfgs=("BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,num_warps=8,STAGES=3,WARP_SPECIALIZE=1"
          "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,num_warps=8,STAGES=3,WARP_SPECIALIZE=0")
  else
    cfgs=("BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,num_warps=4,STAGES=3")
  fi
  for cfg in "${cfgs[@]}"; do
    name="GPU GEMMs vs cuBLAS ($cfg)"
    step "$name" "$bin/tessera" bench gemm_f16:4096,4096,4096,0 gemm_bf16:4096,4096,4096,0 --target "nvptx:$sm" \
      --no-check --peers --config "$cfg"
    peer_rows "$name"
  done
  step "GPU softmax/layernorm vs copy bandwidth" "$bin/tessera" bench softmax:8192,8192 layernorm:8192,8192 \
    --target "nvptx:$sm" --peers
  peer_rows "GPU softmax/layernorm vs copy bandwidth"
fi

echo
printf '%-44s %-8s %s\n' "check" "result" "detail"
printf '%s\n' "${rows[@]}"
echo "logs: $here/*.log"
exit $failed
