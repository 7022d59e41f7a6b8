#!/usr/bin/env bash
# Packs what must travel to a machine with an NVIDIA GPU but no Debian
# packages and no network into one archive:
#   bin/        wrappers that run each program through the bundled loader
#   libexec/    the tessera tool and the test programs the acceptance kit
#               runs, and jq (the kit reads the JSON reports with it)
#   lib/        every shared library they load (LLVM 22, libstdc++, glibc and
#               its loader included), so nothing depends on the host's versions
#   bench/gpu/  the kit's Python peers (PyTorch, Triton), run there with the
#               host's python3 where it has torch; never needed by Tessera
#   gpu-acceptance.sh, the kit (docs/bench.md, "The GPU acceptance kit")
# The GPU driver (libcuda.so.1) is the host's: the programs dlopen it at run
# time through the host's library search path; so are cuBLAS and NCCL, which
# the kit finds on the host (system folders or a Python environment's wheels).
#
# usage: scripts/gpu-bundle.sh [OUT.tar.xz]   (default: build/tessera-gpu-bundle.tar.xz)
#        Builds what it packs (scripts/build.sh) first; at most 60 MiB.
#        scripts/gpu-bundle.sh --stage DIR [--link]
#        Only lays the bundle's tree out in DIR/tessera-gpu from the build as it
#        is (nothing built, stripped or packed); --link makes symbolic links to
#        the libraries instead of copies. `gpu-acceptance.sh --dry-run` runs
#        such a tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSERA_BUILD_DIR:-$root/build}
limit_mib=60

stage_only="" link=""
out=$build/tessera-gpu-bundle.tar.xz
while (($#)); do
  case $1 in
    --stage)
      [ $# -ge 2 ] || { echo "gpu-bundle: --stage needs a folder" >&2; exit 2; }
      stage_only=$2
      shift 2
      ;;
    --link) link=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-bundle: unknown option $1 (--stage DIR [--link], or OUT.tar.xz)" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done

jq_bin=$(command -v jq || true)
if [ -z "$stage_only" ]; then
  "$root/scripts/build.sh"
  # jq reads the benchmark reports on the GPU machine (scripts/bootstrap.sh
  # installs the packages named).
  [ -n "$jq_bin" ] || { "$root/scripts/bootstrap.sh" jq && jq_bin=$(command -v jq); }
fi

if [ -n "$stage_only" ]; then
  mkdir -p "$stage_only"
  stage=$(cd "$stage_only" && pwd)
  rm -rf "$stage/tessera-gpu"
else
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
fi
b=$stage/tessera-gpu
mkdir -p "$b/bin" "$b/libexec" "$b/lib" "$b/bench/gpu"

# put SRC DST: a copy, or with --link a symbolic link to it (the programs are
# copied all the same, so that a rebuild during the run does not change them).
put() {
  if [ -n "$link" ]; then ln -sf "$(readlink -f "$1")" "$2"; else cp -L "$1" "$2"; fi
}

# What gpu-acceptance.sh runs: every example goes through `tessera run` and
# every benchmark through `tessera bench`, so the archive stays under the
# limit as the test suite grows. test_examples is the optional CPU and
# emulator control (--with-cpu-control).
progs=("$build/bin/tessera" "$build/tests/test_runtime" "$build/tests/test_examples")
[ -n "$jq_bin" ] && progs+=("$jq_bin")
missing=()
for p in "${progs[@]}"; do
  if [ ! -x "$p" ]; then
    missing+=("$p")
    continue
  fi
  name=$(basename "$p")
  cp -L "$p" "$b/libexec/$name"
  [ -n "$link" ] || strip --strip-debug "$b/libexec/$name" 2>/dev/null || true
  # Each wrapper runs its program with the bundled loader and libraries.
  cat > "$b/bin/$name" <<WRAP
#!/bin/sh
here=\$(cd "\$(dirname "\$0")/.." && pwd)
exec "\$here/lib/ld-linux-x86-64.so.2" --library-path "\$here/lib" "\$here/libexec/$name" "\$@"
WRAP
  chmod +x "$b/bin/$name"
  # Every library it loads, resolved on this machine (symlinks followed).
  ldd "$p" | awk '/=>/ && $3 ~ /^\// {print $3} /^\s*\/lib.*ld-linux/ {print $1}' | while read -r lib; do
    base=$(basename "$lib")
    [ -e "$b/lib/$base" ] || put "$lib" "$b/lib/$base"
  done
done
# The tool is required; a missing test program or jq leaves its steps
# skipped on the GPU machine, naming it, but a full bundle must have them.
if ((${#missing[@]})); then
  echo "gpu-bundle: not built: ${missing[*]}" >&2
  if [ -z "$stage_only" ] || [ ! -x "$build/bin/tessera" ]; then exit 1; fi
fi
[ -z "$jq_bin" ] && echo "gpu-bundle: jq not found: the kit's report will lack the benchmark tables" >&2
put /lib64/ld-linux-x86-64.so.2 "$b/lib/ld-linux-x86-64.so.2"
# glibc's other libraries, which the host's cuBLAS, NCCL and driver name
# (librt, libpthread, libdl): the bundle's, matching its libc, never the host's.
libc_dir=$(dirname "$(ldd "$build/bin/tessera" | awk '$1 == "libc.so.6" { print $3 }')")
for l in librt.so.1 libpthread.so.0 libdl.so.2; do
  [ -e "$b/lib/$l" ] || [ ! -e "$libc_dir/$l" ] || put "$libc_dir/$l" "$b/lib/$l"
done
[ -n "$link" ] || strip --strip-unneeded "$b"/lib/*.so* 2>/dev/null || true
put "$root/scripts/gpu-acceptance.sh" "$b/gpu-acceptance.sh"
for f in "$root"/bench/gpu/*.py; do put "$f" "$b/bench/gpu/$(basename "$f")"; done
git -C "$root" log -1 --format='%H %s' > "$b/VERSION" 2>/dev/null || echo unknown > "$b/VERSION"

if [ -n "$stage_only" ]; then
  echo "gpu-bundle: staged $b ($(find "$b/libexec" -mindepth 1 | wc -l) programs, $(find "$b/lib" -mindepth 1 | wc -l) libraries)"
  exit 0
fi
tar -C "$stage" -cf - tessera-gpu | xz -T2 -9 > "$out"
size=$(stat -c %s "$out")
echo "gpu-bundle: $out, $((size / 1024 / 1024)) MiB ($(find "$b/libexec" -mindepth 1 | wc -l) programs, $(find "$b/lib" -mindepth 1 | wc -l) libraries)"
if ((size > limit_mib * 1024 * 1024)); then
  echo "gpu-bundle: larger than $limit_mib MiB" >&2
  exit 1
fi
