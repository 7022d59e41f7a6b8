#!/usr/bin/env bash
# The README's main-example command: set-up, build, run softmax on the CPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh" example_softmax
build=${TESSERA_BUILD_DIR:-$root/build}
exec "$build/examples/softmax" --dump "$@"
