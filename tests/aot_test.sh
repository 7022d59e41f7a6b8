#!/usr/bin/env bash
# Ahead-of-time export (docs/aot.md), end to end.
# usage: aot_test.sh MODE SOURCE_DIR BUILD_DIR [FAKE_CUDA]
#   cpu     the example built from an export for cpu:x86-64-v3 links the
#           runtime library and no LLVM, runs correctly with no LLVM mapped,
#           and the x86-64-v4 export is a DeviceError on a narrowed host
#   ptx     exports for nvptx:sm_80 and sm_90a: PTX files, headers whose
#           embedded code and signature are the compile's
#   cuda    an nvptx:sm_80 export loaded and launched through its header on
#           the CUDA device, driven by the fake driver FAKE_CUDA (4th
#           argument; tests/runtime/fake: it carries out a kernel named vadd,
#           out[i] = a[i] + b[i], one element per thread)
#   cubin   the cubin next to the PTX, where ptxas is found
#   hsaco   an export for amdgpu:gfx942: an AMDGPU ELF defining the kernel
#   errors  bad input: each a message and exit status 2
# (No `producer | grep -q` here: grep -q exits at the first match, and with
# pipefail the producer's SIGPIPE would fail the check at random.)
set -euo pipefail
mode=$1 src=$2 build=$3
tool=$build/bin/tessera
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A program including an exported header: prints the embedded signature and
# writes the embedded code, to compare with the exported files.
embedded_check() { # DIR TARGET
  local dir=$1
  cat > "$work/embedded.cpp" <<'CPP'
#include <cstdio>
#include <fstream>
#include "vector_add.h"
int main(int, char** argv) {
  tessera::KernelBinary b = tessera_aot::vector_add::binary();
  std::printf("%s\n", tessera_aot::vector_add::signature().str().c_str());
  std::ofstream out(argv[1], std::ios::binary);
  if (b.format == tessera::KernelBinary::Format::PTX) out << b.ptx;
  else out.write(b.codeObject.data(), std::streamsize(b.codeObject.size()));
  return b.threadsPerBlock > 0 ? 0 : 1;
}
CPP
  c++ -std=c++20 -Wall -Wextra -Werror -I"$dir" -I"$src/runtime/include" -I"$src/support/include" \
    "$work/embedded.cpp" -L"$build" -ltessera_runtime -Wl,-rpath,"$build" -o "$work/embedded"
  "$work/embedded" "$work/embedded.bin" > "$work/sig.txt"
  grep -qF "// $(cat "$work/sig.txt") for $2," <<< "$(head -1 "$dir/vector_add.h")" || fail "signature $(cat "$work/sig.txt") differs from the header's"
  grep -qxF "vector_add(ptr<f32> out, ptr<f32> a, ptr<f32> b, i32 n)" "$work/sig.txt" || fail "signature: $(cat "$work/sig.txt")"
}

case $mode in
cpu)
  exe=$build/examples/aot_vector_add
  deps=$(ldd "$exe")
  grep -q "libtessera_runtime.so" <<< "$deps" || fail "aot_vector_add does not link libtessera_runtime.so"
  if grep -Eq "libLLVM|libtessera\.so" <<< "$deps"; then fail "aot_vector_add links LLVM or libtessera.so:"$'\n'"$deps"; fi
  out=$("$exe") || fail "aot_vector_add failed:"$'\n'"$out"
  echo "$out"
  grep -q "no LLVM library loaded" <<< "$out" || fail "no LLVM check in the output"
  grep -q "vector_add n=100003: OK" <<< "$out" || fail "ragged size not run"
  grep -qF "exported for cpu:x86-64-v3: vector_add(ptr<f32> out, ptr<f32> a, ptr<f32> b, i32 n)" <<< "$out" ||
    fail "signature"
  # The x86-64-v3 export runs on a host narrowed to x86-64-v3; the v4 one is refused there.
  TESSERA_HOST_CPU=x86-64-v3 "$exe" > /dev/null || fail "the x86-64-v3 export fails on an x86-64-v3 host"
  set +e
  err=$(TESSERA_HOST_CPU=x86-64-v3 "$build/examples/aot_vector_add_v4" 2>&1)
  rc=$?
  set -e
  echo "$err"
  [[ $rc -eq 2 ]] || fail "the x86-64-v4 export on an x86-64-v3 host: exit $rc, expected 2"
  grep -q "cpu device cannot load kernel 'vector_add'.*x86-64-v4.*lacks .*avx512f" <<< "$err" ||
    fail "no DeviceError naming the missing features"
  ;;
ptx)
  for arch in sm_80 sm_90a; do
    "$tool" export vector_add --target nvptx:$arch -o "$work/$arch" > "$work/files.txt" 2> "$work/notes.txt"
    grep -q "^\.target $arch" "$work/$arch/vector_add.ptx" || fail "$arch: no .target $arch in the PTX"
    grep -q "\.entry vector_add" "$work/$arch/vector_add.ptx" || fail "$arch: no .entry vector_add in the PTX"
    embedded_check "$work/$arch" nvptx:$arch
    cmp "$work/embedded.bin" "$work/$arch/vector_add.ptx" || fail "$arch: the embedded PTX differs from the file"
    echo "nvptx:$arch: $(tr '\n' ' ' < "$work/files.txt")OK"
  done
  # sm_90a's TMA copies: the tensor maps the launch builds travel in the
  # exported signature (hidden parameters after the user's).
  "$tool" export gemm_f16 --target nvptx:sm_90a --assume-aligned -o "$work/tma" > /dev/null 2>&1
  cat > "$work/tma.cpp" <<'CPP'
#include <cstdio>
#include "gemm_f16.h"
int main() {
  std::printf("%s\n", tessera_aot::gemm_f16::binary().signature.str().c_str());
  return 0;
}
CPP
  c++ -std=c++20 -Wall -Wextra -Werror -I"$work/tma" -I"$src/runtime/include" -I"$src/support/include" \
    "$work/tma.cpp" -L"$build" -ltessera_runtime -Wl,-rpath,"$build" -o "$work/tma_sig"
  "$work/tma_sig" > "$work/tma_sig.txt"
  grep -qF "tma(a: f16 dims [K, M] strides [1, K] box [32, 8] swizzle 64)" "$work/tma_sig.txt" ||
    fail "sm_90a export: no tensor map of a in $(cat "$work/tma_sig.txt")"
  grep -qF "tma(b: f16 dims [N, K] strides [1, N] box [64, 32] swizzle 128)" "$work/tma_sig.txt" ||
    fail "sm_90a export: no tensor map of b in $(cat "$work/tma_sig.txt")"
  echo "nvptx:sm_90a tensor maps: OK"
  ;;
cuda)
  # vector_add's tile IR as vadd(a, b, out, n); 32 warps = 1024 threads per
  # block, one per element of a program's tile, as the fake driver computes.
  "$tool" compile vector_add --emit tile-ir |
    sed '1s/.*/kernel @vadd(%a: ptr<f32, global>, %b: ptr<f32, global>, %out: ptr<f32, global>, %n: i32) {/' \
      > "$work/vadd.tir"
  "$tool" export "$work/vadd.tir" --target nvptx:sm_80 --num-warps 32 -o "$work/vadd" > /dev/null
  cat > "$work/launch.cpp" <<'CPP'
#include <cstdio>
#include <vector>
#include "vadd.h"
int main() {
  tessera::rt::Device gpu = tessera::rt::Device::cuda(0);
  tessera::rt::Kernel k = tessera_aot::vadd::load(gpu);
  int bad = 0;
  for (int n : {1024, 3000}) {
    std::vector<float> a(n), b(n);
    for (int i = 0; i < n; ++i) a[i] = float(i), b[i] = 0.5f - float(i % 7);
    tessera::rt::Buffer da = gpu.upload(tessera::DType::F32, a), db = gpu.upload(tessera::DType::F32, b);
    tessera::rt::Buffer out = gpu.alloc(tessera::DType::F32, n);
    tessera_aot::vadd::launch(k, tessera::rt::Dim3((n + 1023) / 1024), da, db, out, n);
    std::vector<float> got = out.read<float>();
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += got[i] != a[i] + b[i];
    std::printf("%s on %s, n=%d: %s\n", tessera_aot::vadd::kTarget, gpu.name().c_str(), n, wrong ? "MISMATCH" : "OK");
    bad += wrong;
  }
  return bad != 0;
}
CPP
  c++ -std=c++20 -Wall -Wextra -Werror -I"$work/vadd" -I"$src/runtime/include" -I"$src/support/include" \
    "$work/launch.cpp" -L"$build" -ltessera_runtime -Wl,-rpath,"$build" -o "$work/launch"
  TESSERA_CUDA_LIBRARY=$4 "$work/launch" || fail "the exported kernel's launch on the CUDA device"
  ;;
cubin)
  ptxas=${TESSERA_PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
  [[ -x $ptxas ]] || { echo "SKIP: ptxas not found"; exit 0; }
  for arch in sm_80 sm_90a; do
    "$tool" export vector_add --target nvptx:$arch -o "$work/$arch" > /dev/null
    cubin=$work/$arch/vector_add.cubin
    [[ -s $cubin ]] || fail "$arch: no cubin although ptxas is $ptxas"
    grep -q "NVIDIA CUDA" <<< "$(readelf -h "$cubin")" || fail "$arch: the cubin is not a CUDA ELF"
    grep -q " vector_add$" <<< "$(readelf -sW "$cubin")" || fail "$arch: the cubin does not define vector_add"
    echo "nvptx:$arch cubin: OK"
  done
  ;;
hsaco)
  readelf=$(command -v llvm-readelf || command -v readelf || true)
  [[ -n $readelf ]] || { echo "SKIP: llvm-readelf / readelf not found"; exit 0; }
  "$tool" export vector_add --target amdgpu:gfx942 -o "$work/gfx942" > /dev/null
  hsaco=$work/gfx942/vector_add.hsaco
  grep -Eq "AMD GPU|AMDGPU" <<< "$("$readelf" -h "$hsaco")" || fail "the .hsaco is not an AMDGPU ELF"
  grep -q " vector_add$" <<< "$("$readelf" -sW "$hsaco")" || fail "the .hsaco does not define vector_add"
  embedded_check "$work/gfx942" amdgpu:gfx942
  cmp "$work/embedded.bin" "$hsaco" || fail "the embedded code object differs from the file"
  echo "amdgpu:gfx942 hsaco: OK"
  ;;
errors)
  expect() { # STATUS PATTERN COMMAND...
    local want=$1 pattern=$2 rc=0
    shift 2
    "$@" > "$work/out.txt" 2>&1 || rc=$?
    [[ $rc -eq $want ]] || fail "'$*': exit $rc, expected $want:"$'\n'"$(cat "$work/out.txt")"
    grep -q -- "$pattern" "$work/out.txt" || fail "'$*': no '$pattern' in:"$'\n'"$(cat "$work/out.txt")"
    echo "ok: $* -> $rc: $(head -1 "$work/out.txt")"
  }
  expect 2 "nor a bundled kernel" "$tool" export no_such_kernel --target cpu -o "$work/a"
  expect 2 "unknown target" "$tool" export vector_add --target tpu:v5 -o "$work/a"
  expect 2 "export: needs -o DIR" "$tool" export vector_add --target cpu
  expect 2 "runs only inside the SIMT emulator" "$tool" export vector_add --target emu:nvptx:sm_80 -o "$work/a"
  touch "$work/file"
  expect 2 "cannot create the directory" "$tool" export vector_add --target cpu -o "$work/file/sub"
  mkdir -p "$work/clash/vector_add.o"  # a directory where the object goes
  expect 2 "cannot write '$work/clash/vector_add.o'" "$tool" export vector_add --target cpu -o "$work/clash"
  mkdir "$work/ro" && chmod a-w "$work/ro"
  if [[ -w $work/ro ]]; then
    echo "note: this user writes read-only directories; the clash above stands for that case"
  else
    expect 2 "cannot write" "$tool" export vector_add --target cpu -o "$work/ro"
  fi
  expect 0 "tessera export KERNEL" "$tool" help export
  expect 0 "tessera export KERNEL" "$tool" export --help
  ;;
*) fail "unknown mode $mode" ;;
esac
