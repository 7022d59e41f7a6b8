#!/usr/bin/env bash
# The shared libraries export namespace tessera only: no symbol naming an LLVM
# type, nothing outside tessera, and libtessera_runtime.so needs no LLVM.
# usage: exports_test.sh LIBRARY...
set -euo pipefail
for lib in "$@"; do
  syms=$(nm -D --defined-only "$lib" | c++filt | cut -d' ' -f3-)
  total=$(grep -c . <<< "$syms" || true)
  llvm=$(grep -c 'llvm::' <<< "$syms" || true)
  other=$(grep -Evc '^((typeinfo name|typeinfo|vtable|VTT|guard variable|non-virtual thunk|virtual thunk)( for| to)? )?tessera::' <<< "$syms" || true)
  echo "$(basename "$lib"): $total exported symbols, $llvm naming llvm::, $other outside namespace tessera"
  if ((total == 0 || llvm != 0 || other != 0)); then
    grep -E 'llvm::' <<< "$syms" | head -5 || true
    grep -Ev '^((typeinfo name|typeinfo|vtable|VTT|guard variable|non-virtual thunk|virtual thunk)( for| to)? )?tessera::' <<< "$syms" | head -5 || true
    echo "FAIL: $lib exports more than namespace tessera"
    exit 1
  fi
  if [[ $(basename "$lib") == libtessera_runtime.so* ]] && grep -q 'NEEDED.*libLLVM' <<< "$(readelf -d "$lib")"; then
    echo "FAIL: $lib needs LLVM"
    exit 1
  fi
done
