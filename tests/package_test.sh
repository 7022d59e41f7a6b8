#!/usr/bin/env bash
# Installs the build into an empty prefix, builds tests/package (an outside
# project using find_package(Tessera)) against it, once with libtessera.so and
# once with the static libraries, and runs its kernel. The shared build must
# load libtessera.so from the prefix; the static one must not load it at all.
# usage: package_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
for kind in shared static; do
  static=OFF
  [[ $kind == static ]] && static=ON
  cmake -S "$src/tests/package" -B "$work/$kind" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONSUMER_STATIC=$static \
    -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
  cmake --build "$work/$kind" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
  loaded=$(ldd "$work/$kind/consumer" | grep -c "$work/prefix/.*libtessera" || true)
  if [[ $kind == shared && $loaded -ne 2 ]] || [[ $kind == static && $loaded -ne 0 ]]; then
    echo "FAIL: the $kind consumer loads $loaded of the prefix's Tessera libraries:"
    ldd "$work/$kind/consumer"
    exit 1
  fi
  echo "-- consumer linked with the $kind libraries"
  "$work/$kind/consumer"
done
