#!/usr/bin/env bash
# The persistent compile cache across real processes (the `tessera` tool):
#
#   cache_test.sh MODE BUILD_DIR
#
#   cli         `tessera cache stats|explain|clear`, --help, bad flags
#   concurrent  several processes compiling the same kernels at once
#   kill        a process killed (kill -9) between writing an entry and
#               renaming it into place
#   corrupt     corrupt, truncated and foreign entries
#   readonly    read-only, missing and uncreatable folders
#   full        a size limit of one byte, and a full file system
#
# Each mode uses folders of its own under BUILD_DIR/cache-test/MODE, never
# the user's cache. Never a crash, never a wrong result (`tessera run`
# checks every result against its C++ reference), nothing lost that was
# written completely. A part this machine cannot set up prints SKIP.
set -euo pipefail
mode=$1
build=$2
tool=$build/bin/tessera
work=$build/cache-test/$mode
rm -rf "$work"
mkdir -p "$work"
unset TESSERA_CACHE TESSERA_CACHE_MAX_SIZE TESSERA_CACHE_LOG TESSERA_CACHE_TEST_PAUSE_MS

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# fresh NAME: an empty cache folder, in force for what follows.
fresh() {
  export TESSERA_CACHE_DIR=$work/$1
  rm -rf "$TESSERA_CACHE_DIR"
}
entries() { find "$TESSERA_CACHE_DIR/kernels" -name '*.tce' 2>/dev/null | wc -l; }
temps() { find "$TESSERA_CACHE_DIR/kernels" -name '.tmp.*' 2>/dev/null | wc -l; }
has() { # has FILE TEXT: FILE contains TEXT (no pipe: pipefail and SIGPIPE)
  grep -F -- "$2" "$1" >/dev/null || {
    echo "--- $1:" >&2
    cat "$1" >&2
    fail "'$2' not in $1"
  }
}
times_in() { grep -c -F -- "$2" "$1" || true; }
# run_ok NAME ARGS...: the tool succeeds; stdout in $work/NAME.out, stderr in $work/NAME.err.
run_ok() {
  local name=$1
  shift
  "$tool" "$@" >"$work/$name.out" 2>"$work/$name.err" || {
    cat "$work/$name.out" "$work/$name.err" >&2
    fail "tessera $* exited $?"
  }
}
# run_kernel NAME KERNEL: `tessera run KERNEL` on the CPU, the result checked, lookups logged.
run_kernel() {
  TESSERA_CACHE_LOG=1 run_ok "$1" run "$2" --target cpu
  has "$work/$1.out" "-> OK"
}
# expect_usage TEXT ARGS...: exit code 2 and TEXT on stderr.
expect_usage() {
  local text=$1
  shift
  set +e
  "$tool" "$@" >"$work/usage.out" 2>"$work/usage.err"
  local rc=$?
  set -e
  [ "$rc" = 2 ] || fail "tessera $* exited $rc, expected 2"
  has "$work/usage.err" "$text"
}
# The hash prefix a logged lookup of KERNEL printed into FILE.
logged_hash() { sed -n "s/^tessera: cache: \(hit\|miss\) $2 for [^ ]* (\([0-9a-f]*\)).*/\2/p" "$1" | head -n 1; }
entry_of() { # entry_of LOGFILE KERNEL: the entry file of that lookup
  local h
  h=$(logged_hash "$1" "$2")
  [ -n "$h" ] || fail "no lookup of $2 logged in $1"
  echo "$TESSERA_CACHE_DIR/kernels/$h"*.tce
}

case $mode in
cli)
  run_ok help cache --help
  has "$work/help.out" "tessera cache explain KERNEL|FILE.tir"
  has "$work/help.out" "TESSERA_CACHE_MAX_SIZE"
  run_ok help2 help cache
  cmp "$work/help.out" "$work/help2.out" || fail "tessera help cache differs from tessera cache --help"
  run_ok help3 cache explain --help
  cmp "$work/help.out" "$work/help3.out" || fail "tessera cache explain --help differs"
  run_ok usage --help
  has "$work/usage.out" "tessera cache stats"
  expect_usage "cache stats: unknown option --bogus (it takes --entries, --json, --dir)" cache stats --bogus
  expect_usage "cache: unknown subcommand 'frob' (expected stats, explain or clear)" cache frob
  expect_usage "cache: needs a subcommand: stats, explain or clear" cache
  expect_usage "cache explain: needs a KERNEL name or a FILE.tir" cache explain
  expect_usage "cache explain: does not take --json (it takes --target, --kernel" cache explain vector_add --json
  expect_usage "cache clear: unexpected argument 'now' (it takes none)" cache clear now
  expect_usage "cache clear: does not take --entries (it takes --dir)" cache clear --entries
  expect_usage "cache stats: --dir needs a value: a folder" cache stats --dir
  expect_usage "--num-warps expects an integer (the number of warps), got 'many'" cache explain vector_add --num-warps many
  expect_usage "unknown precision 'fast' (expected accurate or approx)" cache explain vector_add --precision fast
  expect_usage "unknown target" cache explain vector_add --target tpu
  expect_usage "nor a bundled kernel" cache explain no_such_kernel

  fresh cli
  run_ok stats0 cache stats
  has "$work/stats0.out" "entries:  0 kernels"
  has "$work/stats0.out" "not created yet"
  run_ok ptx1 compile vector_add --target nvptx:sm_80 --emit ptx
  [ "$(entries)" = 1 ] || fail "expected 1 entry after a compile, found $(entries)"
  TESSERA_CACHE_LOG=1 run_ok ptx2 compile vector_add --target nvptx:sm_80 --emit ptx
  has "$work/ptx2.err" "tessera: cache: hit vector_add for nvptx:sm_80"
  cmp "$work/ptx1.out" "$work/ptx2.out" || fail "the PTX of a hit differs from the compiled one"
  run_ok explain cache explain vector_add --target nvptx:sm_80
  has "$work/explain.out" "cached: $TESSERA_CACHE_DIR/kernels/"
  set +e
  "$tool" cache explain vector_add --target nvptx:sm_80 --num-warps 8 >"$work/explain8.out" 2>&1
  rc=$?
  set -e
  [ "$rc" = 1 ] || fail "explain of an uncached compile exited $rc, expected 1"
  has "$work/explain8.out" "nearest entry: $TESSERA_CACHE_DIR/kernels/"
  has "$work/explain8.out" "  options: num-warps 4 -> 8"
  "$tool" cache explain vector_add --target nvptx:sm_80 --precision approx >"$work/explain-p.out" || true
  has "$work/explain-p.out" "  options: precision accurate -> approx"
  "$tool" cache explain vector_add --target nvptx:sm_90a >"$work/explain-t.out" || true
  has "$work/explain-t.out" "  target: 'nvptx:sm_80' -> 'nvptx:sm_90a'"
  "$tool" cache explain softmax --target nvptx:sm_80 >"$work/explain-k.out" || true
  has "$work/explain-k.out" "no entry of kernel 'softmax'"
  run_ok json cache stats --json
  has "$work/json.out" '"entries": 1'
  has "$work/json.out" '"kernel": "vector_add", "target": "nvptx:sm_80"'
  run_ok list cache stats --entries
  has "$work/list.out" "vector_add  nvptx:sm_80  opt-level=3"
  # Turned off: nothing read, nothing written.
  TESSERA_CACHE=0 TESSERA_CACHE_LOG=1 run_ok off compile vector_add --target nvptx:sm_86 --emit ptx
  [ "$(times_in "$work/off.err" "tessera: cache:")" = 0 ] || fail "a lookup with TESSERA_CACHE=0"
  [ "$(entries)" = 1 ] || fail "TESSERA_CACHE=0 wrote an entry"
  TESSERA_CACHE=0 run_ok offstats cache stats
  has "$work/offstats.out" "state:    off (TESSERA_CACHE=0)"
  # --dir: another folder for this command.
  run_ok other cache stats --dir "$work/elsewhere"
  has "$work/other.out" "folder:   $work/elsewhere (from --dir)"
  run_ok clear cache clear
  has "$work/clear.out" "removed 1 entry from $TESSERA_CACHE_DIR"
  [ "$(entries)" = 0 ] || fail "entries left after clear"
  ;;

concurrent)
  fresh concurrent
  n=8
  pids=()
  for i in $(seq $n); do
    TESSERA_CACHE_LOG=1 "$tool" run vector_add --target cpu >"$work/run.$i.out" 2>"$work/run.$i.err" &
    pids+=($!)
    TESSERA_CACHE_LOG=1 "$tool" compile softmax --target nvptx:sm_90a --emit ptx >"$work/ptx.$i.out" 2>"$work/ptx.$i.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "a concurrent process exited $?"; done
  for i in $(seq $n); do
    has "$work/run.$i.out" "-> OK"
    cmp "$work/ptx.1.out" "$work/ptx.$i.out" || fail "concurrent compiles gave different PTX"
  done
  TESSERA_CACHE=0 run_ok ref compile softmax --target nvptx:sm_90a --emit ptx
  cmp "$work/ref.out" "$work/ptx.1.out" || fail "the PTX differs from an uncached compile"
  [ "$(entries)" = 2 ] || fail "expected 2 entries, found $(entries)"
  [ "$(temps)" = 0 ] || fail "temporary files left: $(temps)"
  run_ok json cache stats --json
  [ "$(times_in "$work/json.out" '"valid": false')" = 0 ] || fail "a torn or bad entry: $(cat "$work/json.out")"
  misses=$(cat "$work"/run.*.err | grep -c "cache: miss vector_add" || true)
  echo "concurrent: $misses of $n processes compiled vector_add, the rest loaded it"
  run_kernel again vector_add
  has "$work/again.err" "tessera: cache: hit vector_add for cpu"
  for i in $(seq $n); do
    [ "$(times_in "$work/run.$i.err" "warning")" = 0 ] || fail "a warning in process $i: $(cat "$work/run.$i.err")"
  done
  ;;

kill)
  fresh kill
  run_kernel softmax softmax
  [ "$(entries)" = 1 ] || fail "softmax was not stored"
  TESSERA_CACHE_TEST_PAUSE_MS=120000 TESSERA_CACHE_LOG=1 "$tool" run vector_add --target cpu >"$work/paused.out" \
    2>"$work/paused.err" &
  pid=$!
  for _ in $(seq 600); do
    grep -F "pausing before the rename" "$work/paused.err" >/dev/null && break
    kill -0 "$pid" 2>/dev/null || fail "the writer exited before its pause: $(cat "$work/paused.err")"
    sleep 0.1
  done
  has "$work/paused.err" "pausing before the rename"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null && fail "the killed writer exited 0"
  [ "$(entries)" = 1 ] || fail "the interrupted entry is visible: $(entries) entries"
  [ "$(temps)" = 1 ] || fail "expected the killed writer's temporary file, found $(temps)"
  run_kernel after vector_add
  has "$work/after.err" "tessera: cache: miss vector_add"
  [ "$(times_in "$work/after.err" "warning")" = 0 ] || fail "a warning after the kill: $(cat "$work/after.err")"
  [ "$(entries)" = 2 ] || fail "vector_add was not stored after the kill"
  run_kernel softmax2 softmax
  has "$work/softmax2.err" "tessera: cache: hit softmax for cpu"
  run_kernel again vector_add
  has "$work/again.err" "tessera: cache: hit vector_add for cpu"
  run_ok stats cache stats
  has "$work/stats.out" "temporary files: 1"
  run_ok clear cache clear
  [ "$(temps)" = 0 ] || fail "clear left the temporary file"
  ;;

corrupt)
  fresh corrupt
  run_kernel v vector_add
  run_kernel s softmax
  run_kernel v2 vector_add
  entry=$(entry_of "$work/v2.err" vector_add)
  run_kernel s2 softmax
  other=$(entry_of "$work/s2.err" softmax)
  [ -f "$entry" ] && [ -f "$other" ] || fail "entries not found: $entry $other"
  cp "$entry" "$work/good"
  size=$(stat -c %s "$entry")
  damage() {
    case $1 in
    flip) printf '\x5a' | dd of="$entry" bs=1 seek=$((size / 2)) conv=notrunc status=none ;;
    truncate) truncate -s $((size / 2)) "$entry" ;;
    empty) : >"$entry" ;;
    foreign) cp "$other" "$entry" ;;
    garbage) echo "not a cache entry" >"$entry" ;;
    esac
  }
  for d in flip truncate empty foreign garbage; do
    cp "$work/good" "$entry"
    damage $d
    run_kernel "$d" vector_add
    [ "$(times_in "$work/$d.err" "tessera: warning: compile cache:")" = 1 ] ||
      fail "$d: expected one warning, got: $(cat "$work/$d.err")"
    has "$work/$d.err" "$entry"
    has "$work/$d.err" "ignored, the kernel is recompiled"
    has "$work/$d.err" "tessera: cache: miss vector_add"
    run_kernel "$d.next" vector_add
    has "$work/$d.next.err" "tessera: cache: hit vector_add"
    cmp "$work/good" "$entry" || fail "$d: the recompile did not restore the entry"
  done
  has "$work/flip.err" "checksum mismatch"
  has "$work/truncate.err" "checksum mismatch (corrupt or truncated)"
  has "$work/empty.err" "empty file (truncated)"
  has "$work/foreign.err" "foreign entry"
  has "$work/garbage.err" "not a Tessera cache entry"
  run_kernel s3 softmax
  has "$work/s3.err" "tessera: cache: hit softmax"
  ;;

readonly)
  # Missing, several levels deep: created.
  fresh missing/a/b
  run_kernel missing vector_add
  [ "$(entries)" = 1 ] || fail "the missing folder was not created and used"
  # Under a regular file, and on a read-only file system: reported once, compiles go on.
  : >"$work/afile"
  for dir in "$work/afile/cache" /proc/self/tessera-cache; do
    export TESSERA_CACHE_DIR=$dir
    run_kernel bad vector_add
    has "$work/bad.err" "tessera: warning: compile cache: cannot create the folder"
    [ "$(times_in "$work/bad.err" "warning")" = 1 ] || fail "expected one warning: $(cat "$work/bad.err")"
  done
  # A read-only folder with entries: hits still load, new kernels compile and
  # are not kept. Root writes through permissions: a read-only bind mount in a
  # mount namespace of its own then.
  fresh ro
  run_kernel ro0 vector_add
  chmod -R a-w "$TESSERA_CACHE_DIR"
  script="TESSERA_CACHE_LOG=1 '$tool' run vector_add --target cpu >'$work/ro1.out' 2>'$work/ro1.err' &&
          TESSERA_CACHE_LOG=1 '$tool' run softmax --target cpu >'$work/ro2.out' 2>'$work/ro2.err'"
  if [ "$(id -u)" != 0 ]; then
    sh -c "$script" || fail "a run in the read-only folder failed: $(cat "$work"/ro*.err)"
  elif unshare -m true 2>/dev/null; then
    unshare -m sh -c "mount --bind '$TESSERA_CACHE_DIR' '$TESSERA_CACHE_DIR' &&
                      mount -o remount,ro,bind '$TESSERA_CACHE_DIR' && $script" ||
      fail "a run in the read-only folder failed: $(cat "$work"/ro*.err)"
  else
    chmod -R u+w "$TESSERA_CACHE_DIR"
    echo "SKIP: running as root without mount namespaces: no folder is read-only here"
    exit 0
  fi
  chmod -R u+w "$TESSERA_CACHE_DIR"
  has "$work/ro1.out" "-> OK"
  has "$work/ro1.err" "tessera: cache: hit vector_add"
  has "$work/ro2.out" "-> OK"
  has "$work/ro2.err" "tessera: warning: compile cache: cannot create a file in"
  [ "$(entries)" = 1 ] || fail "an entry was written into the read-only folder"
  ;;

full)
  # A limit of one byte: every entry is evicted as soon as it is written.
  fresh limit
  for i in 1 2; do
    TESSERA_CACHE_MAX_SIZE=1 run_kernel "limit$i" vector_add
    has "$work/limit$i.err" "tessera: cache: miss vector_add"
  done
  [ "$(entries)" = 0 ] || fail "a limit of 1 byte kept $(entries) entries"
  TESSERA_CACHE_MAX_SIZE=lots run_kernel badlimit vector_add
  has "$work/badlimit.err" "TESSERA_CACHE_MAX_SIZE: 'lots' is not a size"
  # A file system with no room: the write fails, is reported once, and
  # leaves no temporary file.
  fresh nospace
  mkdir -p "$TESSERA_CACHE_DIR/kernels"
  if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    unshare -m sh -c "mount -t tmpfs -o size=4k tmpfs '$TESSERA_CACHE_DIR/kernels' &&
                      head -c 4096 /dev/zero >'$TESSERA_CACHE_DIR/kernels/filler' 2>/dev/null;
                      TESSERA_CACHE_LOG=1 '$tool' run vector_add --target cpu >'$work/full.out' 2>'$work/full.err' &&
                      TESSERA_CACHE_LOG=1 '$tool' run softmax --target cpu >>'$work/full.out' 2>'$work/full2.err' &&
                      find '$TESSERA_CACHE_DIR/kernels' -name '.tmp.*' >'$work/full.temps'" ||
      fail "a run on the full file system failed: $(cat "$work/full.err")"
    [ "$(times_in "$work/full.out" "-> OK")" = 2 ] || fail "wrong results on a full file system"
    for e in full full2; do
      has "$work/$e.err" "No space left on device"
      [ "$(times_in "$work/$e.err" "warning")" = 1 ] || fail "expected one warning: $(cat "$work/$e.err")"
    done
    [ ! -s "$work/full.temps" ] || fail "temporary files left on the full file system: $(cat "$work/full.temps")"
  else
    echo "SKIP: a full file system needs root and mount namespaces (the 1-byte limit ran)"
  fi
  ;;

*) fail "unknown mode $mode" ;;
esac
echo "cache/$mode: passed"
