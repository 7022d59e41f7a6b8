#!/usr/bin/env bash
# Bootstraps, configures and builds Tessera into ./build (or $TESSERA_BUILD_DIR).
# Extra arguments are build targets (default: all).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/bootstrap.sh"
build=${TESSERA_BUILD_DIR:-$root/build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WERROR=ON
fi
if (($#)); then
  for t in "$@"; do cmake --build "$build" --target "$t"; done
else
  cmake --build "$build"
fi
