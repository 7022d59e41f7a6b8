#!/usr/bin/env bash
# Collectives across processes: real mpirun runs of tests/collectives/mpi_worker.cpp
# on this machine (loopback and shared memory only), each bounded in time.
# usage: collectives_test.sh MODE NP WORKER [mpirun options...]
# Every rank must print "rank R: PASS MODE"; in dead-peer and no-call
# (run with --enable-recovery, so that mpirun lets the others run on) every
# rank but the last must; dead-peer-abort is dead-peer under mpirun's
# default, which ends the whole job when a rank dies: it must end, in time,
# with a failure status. MODE "example" runs WORKER (an example program)
# with the arguments after "--", and every rank must print its PASS line.
set -uo pipefail
mode=$1
np=$2
worker=$3
shift 3
args=()
if [ "$mode" = example ]; then
  while (($#)) && [ "$1" != -- ]; do shift; done
  (($#)) && shift
  args=("$@")
  set --
else
  args=("${mode%-abort}")
fi
if ! command -v mpirun > /dev/null; then
  echo "SKIP: mpirun not found (Open MPI: apt-get install openmpi-bin libopenmpi-dev)"
  exit 0
fi
if [ ! -e /usr/lib/x86_64-linux-gnu/libmpi.so.40 ] && ! ldconfig -p 2> /dev/null | grep -q 'libmpi\.so\.40'; then
  echo "SKIP: libmpi.so.40 not found (Open MPI: apt-get install libopenmpi-dev)"
  exit 0
fi
# Root in CI; more ranks than cores; loopback only; no stray warnings about
# missing high-speed networks.
mpi=(mpirun --allow-run-as-root --oversubscribe -np "$np" --mca btl self,vader,tcp --mca btl_tcp_if_include lo
  --mca oob_tcp_if_include lo --mca btl_base_warn_component_unused 0 "$@")
# In a sanitized build (scripts/sanitize.sh sets ASAN_OPTIONS) the ranks
# keep AddressSanitizer's checks but not its leak report: Open MPI leaves
# allocations of plugins it has unloaded at exit, whose frames no
# suppression can name. Tessera's own paths are leak-checked in test_runtime.
if [ -n "${ASAN_OPTIONS:-}" ]; then
  export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
fi
bound=${COLLECTIVES_TEST_BOUND:-240}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout -k 10 "$bound" "${mpi[@]}" "$worker" "${args[@]}" > "$out" 2>&1
rc=$?
took=$(($(date +%s) - start))
cat "$out"
echo "mpirun exited with status $rc after ${took} s"
# timeout's own statuses (124, 137 after -k) are also mpirun's for a rank
# killed by a signal: the clock tells them apart.
if (((rc == 124 || rc == 137) && took >= bound)); then
  echo "FAIL: the job did not end within ${bound} s"
  exit 1
fi
case $mode in
  dead-peer | no-call)
    # The last rank is gone (killed, or never called); every other rank
    # must report the failure itself.
    for ((r = 0; r < np - 1; ++r)); do
      if ! grep -q "^rank $r: PASS $mode" "$out"; then
        echo "FAIL: rank $r did not report the failure"
        exit 1
      fi
    done
    ;;
  dead-peer-abort)
    if ((rc == 0)) || ! grep -q "^rank $((np - 1)): dying" "$out"; then
      echo "FAIL: want the job to fail after rank $((np - 1)) died (status $rc)"
      exit 1
    fi
    ;;
  example)
    got=$(grep -c ": PASS$" "$out" || true)
    if ((rc != 0 || got != np)); then
      echo "FAIL: $got of $np ranks passed (mpirun status $rc)"
      exit 1
    fi
    ;;
  *)
    got=$(grep -c "^rank [0-9]*: PASS $mode" "$out" || true)
    if ((rc != 0 || got != np)); then
      echo "FAIL: $got of $np ranks passed (mpirun status $rc)"
      exit 1
    fi
    ;;
esac
echo "OK"
