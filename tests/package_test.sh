#!/usr/bin/env bash
# Installs the build into an empty prefix, builds tests/package (an outside
# project using find_package(Tessera)) against it, once with libtessera.so and
# once with the static libraries, and runs its kernel. The shared build must
# load libtessera.so from the prefix; the static one must not load it at all.
# Then the installed tool exports vector_add and examples/aot, built on its
# own against Tessera::runtime, runs it: with the prefix's
# libtessera_runtime.so and no libtessera.so or LLVM.
# usage: package_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
# A build with TESSERA_SHARED=OFF installs the static libraries only: both
# consumers link them, and there is no runtime library for examples/aot.
shared=0
[[ -n $(find "$work/prefix" -name 'libtessera.so*' -print -quit) ]] && shared=1
# build NAME SOURCE CMAKE_ARGS...: configures and builds, printing the log on failure.
build() {
  local name=$1 source=$2
  shift 2
  cmake -S "$source" -B "$work/$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" "$@" \
    > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
  cmake --build "$work/$name" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
}
# loaded EXE PATTERN: how many of the libraries EXE loads match PATTERN.
loaded() { ldd "$1" | grep -Ec "$2" || true; }

for kind in shared static; do
  static=OFF
  [[ $kind == static ]] && static=ON
  build "$kind" "$src/tests/package" -DCONSUMER_STATIC=$static
  n=$(loaded "$work/$kind/consumer" "$work/prefix/.*libtessera")
  if [[ $kind == shared && $shared == 1 && $n -ne 2 ]] || [[ ($kind == static || $shared == 0) && $n -ne 0 ]]; then
    echo "FAIL: the $kind consumer loads $n of the prefix's Tessera libraries:"
    ldd "$work/$kind/consumer"
    exit 1
  fi
  echo "-- consumer linked with the $kind libraries"
  "$work/$kind/consumer"
done

if [[ $shared == 1 && $(uname -m) == x86_64 ]]; then
  "$work/prefix/bin/tessera" export vector_add --target cpu:x86-64-v3 -o "$work/exported" > /dev/null
  build aot "$src/examples/aot" -DTESSERA_EXPORT_DIR="$work/exported"
  exe=$work/aot/aot_vector_add
  if [[ $(loaded "$exe" "$work/prefix/.*libtessera_runtime") -ne 1 || $(loaded "$exe" "libLLVM|libtessera\.so") -ne 0 ]]; then
    echo "FAIL: the exported kernel's program must load the prefix's libtessera_runtime.so and nothing else of Tessera's:"
    ldd "$exe"
    exit 1
  fi
  echo "-- examples/aot against the installed Tessera::runtime"
  "$exe"
fi
