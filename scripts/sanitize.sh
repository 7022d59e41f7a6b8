#!/usr/bin/env bash
# The sanitizer runs of CI, each with clang 22:
#   1. ./build-asan, ASan + UBSan (+ LeakSanitizer): the whole ctest suite,
#      the tests of generated CPU code as an AVX2-only host runs them;
#   2. ./build-tsan, ThreadSanitizer: the dsl, runtime and emu tests (the code
#      that runs host threads: the CPU thread pool, the emulator's workers);
#   3. the IR fuzzer (tests/fuzz) from a fixed seed over a copy of its seed corpus.
# Any sanitizer report fails the run: reports abort the process that makes
# them and are also written under $TESSERA_SANITIZE_LOGS (default
# ./build-asan/sanitizer-logs), so one printed by a child process whose
# output a test swallows still counts. Exits non-zero on any report or test
# failure. TESSERA_FUZZ_SECONDS overrides the fuzzing time.
#
# The fuzzer runs from a fixed seed (TESSERA_FUZZ_SEED, default 1) and for at
# most TESSERA_FUZZ_RUNS inputs, so a CI verdict is reproducible: the same
# commit mutates the same inputs in the same order on every machine (a
# slower one a prefix of them, cut by the time limit), as far as coverage
# feedback is deterministic. TESSERA_FUZZ_SEED=0 draws a new seed, for
# exploring by hand; what it finds becomes a seed in tests/fuzz/corpus and a
# regression test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# clang-22 and its compiler-rt (the sanitizer runtimes and libFuzzer).
"$root/scripts/bootstrap.sh" clang-22 libclang-rt-22-dev

asan_dir=$root/build-asan
tsan_dir=$root/build-tsan
logs=${TESSERA_SANITIZE_LOGS:-$asan_dir/sanitizer-logs}
fuzz_seconds=${TESSERA_FUZZ_SECONDS:-60}
fuzz_seed=${TESSERA_FUZZ_SEED:-1}
fuzz_runs=${TESSERA_FUZZ_RUNS:-150000}
start=$(date +%s)
failed=()
phase() { echo; echo "==== sanitize: $* ($(($(date +%s) - start)) s in)"; }

# Line tables are all a sanitizer's stack trace needs: full debug info made
# these two builds a quarter slower to compile and their links several times
# larger. LLD links them (clang's -fuse-ld finds LLVM 22's).
configure() {  # dir, sanitizers
  if [ ! -f "$1/build.ninja" ]; then
    CC=clang-22 CXX=clang++-22 cmake -S "$root" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
      -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
      -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld \
      -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld -DTESSERA_SANITIZE="$2"
  fi
}

rm -rf "$logs"
mkdir -p "$logs"
# Common to all: reports abort (a test that expects its subject to fail,
# like lit's `not`, must not take a sanitizer's exit code for that failure),
# and go to a file per process as well as to stderr.
common="abort_on_error=1:print_summary=1"
export ASAN_OPTIONS="$common:log_path=$logs/asan:log_exe_name=1:detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1"
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="$common:log_path=$logs/ubsan:log_exe_name=1:halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="$common:log_path=$logs/tsan:log_exe_name=1:halt_on_error=1:second_deadlock_stack=1"
# The sanitizers symbolize stacks with llvm-symbolizer.
export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-22/bin/llvm-symbolizer
export TSAN_SYMBOLIZER_PATH=$ASAN_SYMBOLIZER_PATH

# ---- 1. ASan + UBSan: everything --------------------------------------------
phase "ASan+UBSan: configure and build $asan_dir"
configure "$asan_dir" address,undefined
cmake --build "$asan_dir" -j2
# The tests of generated CPU code run with the host narrowed to x86-64-v3,
# as an AVX2-only machine runs them: on an AVX-512 host the plain run of
# scripts/test.sh took the AVX-512 paths, so CI covers both vector paths
# without a third run of these tests (on an AVX2 host both runs take the same
# path). The rest run on the host as it is.
cpu_code='^(codegen|dsl|examples)/|^lit$'
phase "ASan+UBSan: the tests of generated CPU code, on the host narrowed to x86-64-v3"
(cd "$asan_dir" && TESSERA_HOST_CPU=x86-64-v3 ctest --output-on-failure -j2 --timeout 1800 -R "$cpu_code") ||
  failed+=("ASan+UBSan tests (x86-64-v3)")
phase "ASan+UBSan: the rest of the test suite"
(cd "$asan_dir" && ctest --output-on-failure -j2 --timeout 1800 -E "$cpu_code") || failed+=("ASan+UBSan tests")

# ---- 2. TSan: the tests that run host threads --------------------------------
phase "TSan: configure and build $tsan_dir (dsl, runtime and emu tests)"
configure "$tsan_dir" thread
cmake --build "$tsan_dir" -j2 --target test_dsl test_runtime test_emu
phase "TSan: dsl, runtime and emu tests"
(cd "$tsan_dir" && ctest --output-on-failure -j2 --timeout 1800 -R '^(dsl|runtime|emu)/') || failed+=("TSan tests")

# ---- 3. the IR fuzzer --------------------------------------------------------
phase "fuzz: tessera_ir_fuzz, seed ${fuzz_seed}, at most ${fuzz_runs} inputs or ${fuzz_seconds} s"
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp "$root"/tests/fuzz/corpus/* "$corpus/"
# -rss_limit_mb: each input builds LLVM modules and a JIT under ASan.
if ! "$asan_dir/bin/tessera_ir_fuzz" "$corpus" -dict="$root/tests/fuzz/tir.dict" \
    -seed="$fuzz_seed" -runs="$fuzz_runs" -max_total_time="$fuzz_seconds" -max_len=4096 -timeout=60 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$logs/fuzz-" 2> "$logs/fuzz.out"; then
  failed+=("fuzzer")
  tail -n 60 "$logs/fuzz.out"
fi
units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/fuzz.out" | tail -n 1)
echo "fuzz: ${units:-0} inputs executed in ${fuzz_seconds} s; corpus grew from" \
  "$(ls "$root/tests/fuzz/corpus" | wc -l) to $(ls "$corpus" | wc -l) inputs"

# ---- verdict -----------------------------------------------------------------
phase "done"
reports=$(find "$logs" -type f \( -name 'asan*' -o -name 'ubsan*' -o -name 'tsan*' -o -name 'fuzz-*' \) | sort)
if [ -n "$reports" ]; then
  for r in $reports; do
    echo "---- $r"
    head -n 80 "$r"
  done
  failed+=("$(echo "$reports" | wc -l) sanitizer report file(s)")
fi
if ((${#failed[@]})); then
  echo "sanitize: FAILED: ${failed[*]}"
  exit 1
fi
echo "sanitize: no sanitizer reports ($(($(date +%s) - start)) s)"
