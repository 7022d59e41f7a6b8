#!/usr/bin/env bash
# `tessera tune` across real processes:
#
#   tune_test.sh MODE BUILD_DIR
#
#   persist     tune twice in a fresh store: the second run measures nothing,
#               says so and is quick; --export writes a table of the result;
#               TESSERA_DETERMINISTIC=1 pins the choice across a --retune
#   concurrent  two processes tuning the same kernel at once: both finish,
#               every config is stored whole, a third run measures nothing
#   cli         --help, and bad flags answered with what was expected
#
# Each mode uses a store of its own under BUILD_DIR/tune-test/MODE.
set -euo pipefail
mode=$1
build=$2
tool=$build/bin/tessera
work=$build/tune-test/sh-$mode
rm -rf "$work"
mkdir -p "$work"
unset TESSERA_CACHE TESSERA_CACHE_MAX_SIZE TESSERA_DETERMINISTIC
export TESSERA_CACHE_DIR=$work/store

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
has() { # has FILE TEXT
  grep -F -- "$2" "$1" >/dev/null || {
    echo "--- $1:" >&2
    cat "$1" >&2
    fail "'$2' not in $1"
  }
}
# A 64 x 64 x 64 GEMM: the space's constraints leave 4 of its 24 configs
# (BLOCK_M 32 or 64, BLOCK_N 64, BLOCK_K 32 or 64: gemmTuneSpace).
tune() { "$tool" tune gemm_f32 --shape 64x64x64x0 --budget-ms 1 "$@"; }
entries() { find "$TESSERA_CACHE_DIR/tune" -name '*.tce' | wc -l; }
temps() { find "$TESSERA_CACHE_DIR/tune" -name '.tmp.*' | wc -l; }
ms() { date +%s%3N; }

case $mode in
persist)
  tune --quiet >"$work/first.out" 2>"$work/first.err" || {
    cat "$work/first.out" "$work/first.err" >&2
    fail "first run failed"
  }
  has "$work/first.out" "best: BLOCK_M="
  has "$work/first.out" "measured 4 configs, 0 taken from the store, 20 pruned"
  has "$work/first.out" "violates BLOCK_M <= M rounded up to a power of two, or the smallest BLOCK_M (64)"
  stored=$(entries)
  [ "$stored" = 4 ] || fail "$stored entries stored in $TESSERA_CACHE_DIR/tune, expected 4"
  t0=$(ms)
  tune --quiet --export "$work/table.json" >"$work/second.out" 2>"$work/second.err" || fail "second run failed"
  t1=$(ms)
  has "$work/second.out" "measured 0 configs, $stored taken from the store"
  # The best config of both runs is the same stored measurement.
  [ "$(grep '^best:' "$work/first.out")" = "$(grep '^best:' "$work/second.out")" ] || fail "the best config changed"
  # Generous: nothing is compiled or run; a loaded 2-core machine still takes well under this.
  [ $((t1 - t0)) -lt 10000 ] || fail "the second run took $((t1 - t0)) ms"
  echo "second run: $((t1 - t0)) ms"
  has "$work/second.out" "written to $work/table.json"
  has "$work/table.json" '"format": "tessera-tune-table"'
  has "$work/table.json" '"kernel": "gemm_f32"'
  has "$work/table.json" '"bucket": "64x64x64x0"'
  # Non-terminal standard error: no progress bar (no carriage returns).
  if grep -q $'\r' "$work/first.err"; then fail "a progress bar was drawn to a file"; fi
  # --retune measures again.
  tune --quiet --retune >"$work/third.out" 2>&1 || fail "--retune failed"
  has "$work/third.out" "measured $stored config"
  # Deterministic mode pins its first choice in the store (one entry more)
  # and keeps it across runs, however the measurements change in between.
  TESSERA_DETERMINISTIC=1 tune --quiet >"$work/det1.out" 2>&1 || fail "deterministic run failed"
  has "$work/det1.out" "best, pinned (deterministic)"
  has "$work/det1.out" "measured 0 configs, $stored taken from the store"
  [ "$(entries)" = $((stored + 1)) ] || fail "$(entries) entries after pinning, expected $((stored + 1))"
  tune --quiet --retune >/dev/null 2>&1 || fail "--retune failed"
  TESSERA_DETERMINISTIC=1 tune --quiet >"$work/det2.out" 2>&1 || fail "second deterministic run failed"
  has "$work/det2.out" "pinned (deterministic)"
  [ "$(grep '^best:' "$work/det1.out" | cut -d' ' -f2)" = "$(grep '^best:' "$work/det2.out" | cut -d' ' -f2)" ] ||
    fail "the pinned config changed"
  # No store to pin in: the space's first valid config.
  TESSERA_DETERMINISTIC=1 TESSERA_CACHE=0 tune --quiet >"$work/det3.out" 2>&1 || fail "run without a store failed"
  has "$work/det3.out" "first valid config (deterministic, no store to pin it)"
  set +e
  TESSERA_DETERMINISTIC=yes tune --quiet >"$work/det4.out" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "TESSERA_DETERMINISTIC=yes exited $rc, expected 2"
  has "$work/det4.out" "TESSERA_DETERMINISTIC='yes' (expected 0 or 1)"
  ;;
concurrent)
  tune --quiet >"$work/a.out" 2>"$work/a.err" &
  a=$!
  tune --quiet >"$work/b.out" 2>"$work/b.err" &
  b=$!
  wait $a || fail "process A failed: $(cat "$work/a.out" "$work/a.err")"
  wait $b || fail "process B failed: $(cat "$work/b.out" "$work/b.err")"
  has "$work/a.out" "best: "
  has "$work/b.out" "best: "
  [ "$(temps)" = 0 ] || fail "temporary files left behind"
  n=$(entries)
  [ "$n" = 4 ] || fail "$n entries stored, expected one per config (4)"
  tune --quiet >"$work/c.out" 2>&1 || fail "third run failed"
  has "$work/c.out" "measured 0 configs, $n taken from the store"
  # A store entry damaged on disk is reported, ignored and measured again.
  victim=$(find "$TESSERA_CACHE_DIR/tune" -name '*.tce' | head -n 1)
  printf 'garbage' >"$victim"
  tune --quiet >"$work/d.out" 2>"$work/d.err" || fail "run after corruption failed"
  has "$work/d.out" "measured 1 config, $((n - 1)) taken from the store"
  has "$work/d.err" "ignored"
  ;;
cli)
  "$tool" tune --help >"$work/help.out"
  has "$work/help.out" "--retune"
  has "$work/help.out" "gemm_f32"
  "$tool" help tune >"$work/help2.out"
  has "$work/help2.out" "--export FILE.json"
  expect() { # expect TEXT ARGS...: exit status 2 and TEXT on stderr
    local text=$1
    shift
    set +e
    "$tool" tune "$@" >"$work/e.out" 2>"$work/e.err"
    local rc=$?
    set -e
    [ "$rc" = 2 ] || fail "tessera tune $* exited $rc, expected 2"
    has "$work/e.err" "$text"
  }
  expect "tune: needs a KERNEL"
  expect "unknown option --bogus" gemm_f32 --bogus
  expect "--budget-ms expects a time in milliseconds" gemm_f32 --budget-ms fast
  expect "--budget-ms needs a value" gemm_f32 --budget-ms
  expect "--shape expects A,B,... or AxBx... (non-negative integers), got '3xq'" gemm_f32 --shape 3xq
  expect "tune: does not take --threads" gemm_f32 --threads 2
  expect "vector_add declares no config space" vector_add
  expect "'nope' is not a bundled kernel" nope
  expect "unexpected argument 'gemm_f16' (it takes a KERNEL to tune" gemm_f32 gemm_f16
  expect "unknown target" gemm_f32 --device gpu
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo "PASS: tune $mode"
