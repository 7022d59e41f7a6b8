#!/usr/bin/env bash
# Packs what must travel to a machine with an NVIDIA GPU but no Debian
# packages and no network into one archive:
#   bin/      wrappers that run each program through the bundled loader
#   libexec/  the tessera tool, the benchmarks and the test programs the
#             acceptance script runs
#   lib/      every shared library they load (LLVM 22, libstdc++, glibc and
#             its loader included), so nothing depends on the host's versions
#   gpu-acceptance.sh, the checks to run there
# The GPU driver (libcuda.so.1) is the host's: the programs dlopen it at run
# time through the host's library search path.
#
# usage: scripts/gpu-bundle.sh [OUT.tar.xz]   (default: build/tessera-gpu-bundle.tar.xz)
# Builds what it packs (scripts/build.sh plus the benchmark targets) first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSERA_BUILD_DIR:-$root/build}
out=${1:-$build/tessera-gpu-bundle.tar.xz}
limit_mib=60

"$root/scripts/build.sh"
cmake --build "$build" --target tessera_bench tessera_gemm_bench

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
b=$stage/tessera-gpu
mkdir -p "$b/bin" "$b/libexec" "$b/lib"

# What gpu-acceptance.sh runs (every example goes through `tessera run`), so
# the archive stays under the limit as the test suite grows.
progs=("$build/bin/tessera" "$build/bin/tessera_bench" "$build/bin/tessera_gemm_bench" "$build/tests/test_runtime"
  "$build/tests/test_examples")

for p in "${progs[@]}"; do
  name=$(basename "$p")
  cp "$p" "$b/libexec/$name"
  strip --strip-debug "$b/libexec/$name" 2>/dev/null || true
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
    [ -e "$b/lib/$base" ] || cp -L "$lib" "$b/lib/$base"
  done
done
cp -L /lib64/ld-linux-x86-64.so.2 "$b/lib/ld-linux-x86-64.so.2"
strip --strip-unneeded "$b"/lib/*.so* 2>/dev/null || true
cp "$root/scripts/gpu-acceptance.sh" "$b/gpu-acceptance.sh"
git -C "$root" log -1 --format='%H %s' > "$b/VERSION" 2>/dev/null || echo unknown > "$b/VERSION"

tar -C "$stage" -cf - tessera-gpu | xz -T2 -9 > "$out"
size=$(stat -c %s "$out")
echo "gpu-bundle: $out, $((size / 1024 / 1024)) MiB ($(ls "$b/libexec" | wc -l) programs, $(ls "$b/lib" | wc -l) libraries)"
if ((size > limit_mib * 1024 * 1024)); then
  echo "gpu-bundle: larger than $limit_mib MiB" >&2
  exit 1
fi
