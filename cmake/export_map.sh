#!/usr/bin/env bash
# Writes the linker version script of a Tessera shared library: the symbols
# the given static archives define in namespace tessera (with their vtables,
# typeinfo and guard variables) are global, everything else is local. Left
# out, so they stay private: any symbol whose signature names an LLVM type,
# and the namespaces only codegen's and the runtime's own sources use (CPU
# and GPU lowering, emulator rewrite, driver ABIs, detail helpers).
# usage: export_map.sh OUT.map ARCHIVE...
set -euo pipefail
out=$1
shift
mangled=$(nm -g --defined-only -P "$@" | awk 'NF >= 2 && $2 ~ /^[TDBRVWui]$/ { print $1 }' | sort -u)
{
  echo "{"
  echo "  global:"
  paste <(printf '%s\n' "$mangled") <(printf '%s\n' "$mangled" | c++filt) |
    awk -F'\t' '{
      d = $2
      sub(/^(typeinfo name|typeinfo|vtable|VTT|construction vtable|guard variable|TLS init function|thread-local wrapper routine|non-virtual thunk to|virtual thunk to) (for )?/, "", d)
      if (d !~ /^tessera::/) next
      if ($2 ~ /llvm::/) next
      if (d ~ /^tessera::(codegen::(cpu|emu|gpu_lower)|rt::(cuabi|driver|hipabi|mpiabi|ncclabi|comm)|ir::passutil)::/ || d ~ /::detail::/) next
      print "    " $1 ";"
    }'
  echo "  local: *;"
  echo "};"
} > "$out.tmp"
mv "$out.tmp" "$out"
