#!/usr/bin/env bash
# codegen's folders include each other only by their spelling from the root
# ("codegen/llvm/Jit.h"), which the build's per-library views check
# (cmake/CodegenLayers.cmake). An include relative to the file
# ("../nvptx/NVPTXDot.h") would pass them by: refused here, but for the
# LLVM-free headers tests include by path, which reach llvm/LLVMForward.h so.
# usage: codegen_layering.sh SOURCE_DIR
set -euo pipefail
bad=$(grep -rnE '#include "\.\./' "$1/codegen" | grep -v '#include "\.\./llvm/LLVMForward\.h"' || true)
if [[ -n $bad ]]; then
  echo "codegen includes relative to the file (spell them from the root, \"codegen/<folder>/...\"):"
  echo "$bad"
  exit 1
fi
echo "codegen: no relative includes"
