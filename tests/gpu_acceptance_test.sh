#!/usr/bin/env bash
# The GPU acceptance kit without a GPU (scripts/gpu-acceptance.sh, docs/bench.md).
# usage: gpu_acceptance_test.sh MODE SOURCE_DIR BUILD_DIR
#   dry-run  the whole kit with --dry-run (kernels on the emulator, the fake
#            CUDA driver, cuBLAS and NCCL found through a stand-in Python
#            environment): exit 0; every step in the steps table with its
#            time; every planned measurement row, the Tessera ones measured
#            and predicted by the model; results.json; within the budget
#   peers    bench/gpu/peers.py where torch is absent: the --dry-run plan and
#            its JSON, every row skipped naming why, bad arguments (exit 2)
#   archive  the archive path: a staged bundle packed, unpacked by the kit
#            and run with no time budget: every step skipped naming the
#            budget, the report written, exit 0
set -euo pipefail
mode=$1 src=$2 build=$3
kit=$src/scripts/gpu-acceptance.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# ctest takes "SKIP: " in the output for a skipped test: the kit's own
# skips (its rows, the hardware tests' logs) are shown without it.
show() { sed 's/SKIP: /SKIP - /g' "$@"; }
fail() { echo "FAIL: $*" | show; exit 1; }
command -v jq > /dev/null || { echo "SKIP: jq is not installed (the kit reads the reports with it)"; exit 0; }
# The steps table of a report: "| # | step | result | time | limit | detail |".
steps() { sed -n '/^## Steps/,$p' "$1" | grep '^| [0-9]'; }
step_row() {  # REPORT NAME-PREFIX: the row of the step whose name starts so, or a failure
  local r
  r=$(steps "$1" | awk -F' [|] ' -v n="$2" 'index($2, n) == 1' | head -1)
  [ -n "$r" ] || fail "no step '$2' in the table of $1"
  echo "$r"
}
expect() {  # REPORT NAME-PREFIX RESULT...: the step's result is one of RESULT
  local r res
  r=$(step_row "$1" "$2")
  res=$(awk -F' [|] ' '{ print $3 }' <<< "$r")
  shift 2
  for want in "$@"; do [ "$res" = "$want" ] && return 0; done
  fail "step: $r (expected $*)"
}

case $mode in
  dry-run)
    out=$work/out
    set +e
    bash "$kit" --dry-run --build "$build" --out "$out" > "$work/kit.log" 2>&1
    rc=$?
    set -e
    show "$work/kit.log"
    ((rc == 0)) || fail "the dry run exited with $rc"
    report=$out/report.md
    [ -s "$report" ] || fail "no report.md"
    # Every step named, each with its time.
    steps "$report" | awk -F' [|] ' '$4 !~ /^[0-9.]+ s$/ { print "FAIL: no time: " $0; bad = 1 } END { exit bad }' ||
      fail "a step without its time"
    for s in "GPU detection" cuBLAS NCCL "wgmma.mma_async in gemm_f16" \
      "cp.async.bulk.tensor in gemm_f16" "GEMMs f16/bf16 at the defaults, against cuBLAS" \
      "GEMMs f16/bf16 warp-specialised" "GEMM f16 without TMA" "GEMMs fp8" "flash attention forward" \
      "softmax/layernorm/rmsnorm against a device-to-device copy" "cuBLAS peer through the fake driver" \
      "memcheck/racecheck gemm_f16 warp-specialised" "memcheck/racecheck flash_attention"; do
      expect "$report" "$s" PASS
    done
    # Without a GPU the hardware tests say so: skipped, never passed.
    expect "$report" "tests needing a real CUDA device" SKIP
    expect "$report" "Python peers' environment" PASS SKIP
    expect "$report" "Python peers (PyTorch" PASS SKIP
    expect "$report" "performance model predictions" PASS
    expect "$report" "performance model at the GPU run's shapes" PASS INFO
    expect "$report" "examples on emu:nvptx:sm_90a" INFO
    expect "$report" "CPU and emulator examples" SKIP
    # cuBLAS and NCCL came from the (stand-in) Python environment's wheels.
    step_row "$report" cuBLAS | grep -q 'nvidia/cu13/lib/libcublas.so.13, from the Python environment' ||
      fail "cuBLAS not found in the Python environment: $(step_row "$report" cuBLAS)"
    step_row "$report" NCCL | grep -q 'nvidia/nccl/lib/libnccl.so.2, from the Python environment' ||
      fail "NCCL not found in the Python environment"
    # One row per example, each run with both precisions.
    for k in $("$build/bin/tessera" list | cut -f1); do
      step_row "$report" "example $k" | grep -q 'accurate OK .*approx OK' || fail "example $k: $(step_row "$report" "example $k")"
    done
    # The measurements: every planned row; Tessera's measured, and at the
    # defaults beside the model's prediction and the speed of light.
    json=$out/results.json
    jq -e '.format == "tessera-gpu-acceptance" and .passed and (.steps | length) > 40' "$json" > /dev/null ||
      fail "results.json: $(head -c 300 "$json")"
    n=$(jq '.measurements | length' "$json")
    ((n == 39)) || fail "$n measurement rows, 39 planned (2 GEMMs x 4-5, fp8, 4 attention x 4, 3 row kernels x 4)"
    jq -e '[.measurements[] | select(.implementation | startswith("Tessera"))] | length == 13 and
           all(.status == "ok" and .median_s > 0)' "$json" > /dev/null || fail "a Tessera row without its median"
    jq -e '[.measurements[] | select(.implementation | startswith("Tessera"))] |
           all(.predicted_s > 0 and .speed_of_light_s > 0 and (.bound | length) > 0)' "$json" > /dev/null ||
      fail "a Tessera row without the model's prediction (the warp-specialised ones: tessera sol --config)"
    jq -e '[.measurements[] | select(.implementation | test("^(PyTorch|torch|Triton)"))] |
           all(.status == "skip" and (.note | length) > 0)' "$json" > /dev/null ||
      fail "a Python peer's row without the reason it was skipped"
    jq -e '[.measurements[] | select(.implementation | startswith("cuBLAS"))] | all(.note | test("no GEMM peer"))' \
      "$json" > /dev/null || fail "a cuBLAS row on the emulator without its reason"
    grep -q '^| flash_attention_causal\[1x256x128\] | PyTorch SDPA, cuDNN backend | skip |' "$out/report.md" ||
      fail "the measurements table lacks the SDPA rows"
    secs=$(jq .seconds "$json")
    ((secs < 480)) || fail "the dry run took $secs s, more than the kit's 480 s budget"
    for f in bench-gemm.json bench-gemm-ws.json bench-gemm-fp8.json bench-attention.json bench-rows.json peers.json; do
      [ -s "$out/$f" ] || fail "no $f in the results folder"
    done
    echo "dry run: $(steps "$report" | wc -l) steps, $n measurement rows, $secs s"
    ;;
  peers)
    command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 0; }
    peers=$src/bench/gpu/peers.py
    python3 "$peers" --dry-run --json "$work/p.json" gemm_f16:64,64,64,0 gemm_fp8:64,64,64 \
      flash_attention_causal:2,128,64 rmsnorm:4,100 > "$work/p.txt"
    jq -e '.format == "tessera-gpu-peers" and .dry_run and (.results | length) == 7 and
           all(.results[]; .status == "skip" and (.why | test("dry run")))' "$work/p.json" > /dev/null ||
      fail "peers.py --dry-run: $(cat "$work/p.json")"
    jq -e '[.results[].id] == ["gemm_f16[64x64x64x0]", "gemm_fp8[64x64x64]", "flash_attention_causal[2x128x64]",
           "flash_attention_causal[2x128x64]", "flash_attention_causal[2x128x64]", "rmsnorm[4x100]", "rmsnorm[4x100]"]' \
      "$work/p.json" > /dev/null || fail "peers.py ids: $(jq -c '[.results[].id]' "$work/p.json")"
    jq -e '.results[2].flops == 4 * 2 * 128 * 128 * 64 / 2' "$work/p.json" > /dev/null || fail "causal attention's flops"
    if ! python3 -c 'import torch' 2> /dev/null; then
      python3 "$peers" --json "$work/q.json" softmax:8,8 > /dev/null
      jq -e 'all(.results[]; .status == "skip" and (.why | test("torch not importable")))' "$work/q.json" > /dev/null ||
        fail "peers.py without torch: $(cat "$work/q.json")"
    fi
    for bad in "gemm_f16:1,2" "nothing:1,2" "softmax:a,b" "flash_attention:0,1,64"; do
      set +e
      python3 "$peers" --dry-run "$bad" > /dev/null 2> "$work/err"
      rc=$?
      set -e
      ((rc == 2)) || fail "peers.py $bad: exit $rc, expected 2"
      grep -q "$bad" "$work/err" || fail "peers.py $bad: the message does not name it: $(cat "$work/err")"
    done
    echo "peers.py: plan, JSON and errors as expected"
    ;;
  archive)
    TESSERA_BUILD_DIR=$build bash "$src/scripts/gpu-bundle.sh" --stage "$work/stage" --link
    for f in bin/tessera bin/jq gpu-acceptance.sh bench/gpu/peers.py bench/gpu/triton_kernels.py VERSION; do
      [ -e "$work/stage/tessera-gpu/$f" ] || fail "the staged bundle lacks $f"
    done
    tar -C "$work/stage" -cf - tessera-gpu | xz -0 -T2 > "$work/bundle.tar.xz"
    set +e
    bash "$kit" "$work/bundle.tar.xz" "$work/unpacked" --dry-run --fakes "$build/tests" --budget 0 --out "$work/out" \
      > "$work/kit.log" 2>&1
    rc=$?
    set -e
    show "$work/kit.log"
    ((rc == 0)) || fail "exit $rc"
    report=$work/out/report.md
    expect "$report" "unpack the bundle" PASS
    expect "$report" "GEMMs f16/bf16 at the defaults" SKIP
    step_row "$report" "flash attention forward" | grep -q "budget is spent" || fail "no reason for the skip"
    expect "$report" "example softmax" SKIP
    grep -q '^| softmax\[64x1024\] | Tessera, sm_90a defaults | - |' "$report" || fail "the planned rows are missing"
    echo "archive: unpacked, run, every step skipped naming the budget"
    ;;
  *) fail "unknown mode $mode" ;;
esac
