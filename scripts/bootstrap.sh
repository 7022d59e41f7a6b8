#!/usr/bin/env bash
# Installs, with apt-get, whatever Tessera needs that this Debian 12 machine
# lacks, plus any packages named as arguments (scripts/sanitize.sh adds
# clang-22 and its runtimes). Idempotent: a machine that has everything
# installs nothing.
set -euo pipefail

# llvm-22-dev: the LLVM libraries (ORC, X86, NVPTX, AMDGPU); lld-22 and
# liblld-22-dev: linking AMDGPU code objects; llvm-22-tools: lit, FileCheck
# and llvm-readelf for the golden tests; openmpi-bin and libopenmpi-dev:
# the collectives' MPI engine (libmpi.so.40, loaded at run time), mpirun for
# their multi-process tests, and mpi.h for the ABI check and the benchmark.
pkgs=(cmake ninja-build ccache g++ llvm-22-dev llvm-22-tools lld-22 liblld-22-dev libfmt-dev catch2 openmpi-bin
  libopenmpi-dev "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
