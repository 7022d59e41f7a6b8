// Runs the bundled vector_add kernel exported ahead of time,
//
//   tessera export vector_add --target cpu:x86-64-v3 -o DIR
//
// with the runtime library alone (linked with DIR/vector_add.o and
// libtessera_runtime.so; see docs/aot.md). Checks each result against plain
// C++ on aligned and ragged sizes, shows that the runtime still checks the
// arguments of a launch, and fails if LLVM is loaded in the process.
// Exit status: 0 all correct, 1 a mismatch or LLVM loaded, 2 a Tessera error
// (e.g. a host lacking the ISA the kernel was exported for).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "vector_add.h"

namespace rt = tessera::rt;

namespace {

// The bundled vector_add's BLOCK: elements per program (examples/vector_add.cpp).
constexpr int kBlock = 1024;

// Whether any LLVM library is mapped into this process.
bool llvmLoaded() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("libLLVM") != std::string::npos) return true;
  return false;
}

// One launch of n elements; the number of wrong elements.
int runOnce(const rt::Device& cpu, const rt::Kernel& k, int n) {
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) a[i] = 0.25f * float(i % 977) - 3.0f, b[i] = 1.5f - 0.125f * float(i % 101);
  rt::Buffer da = cpu.upload(tessera::DType::F32, a), db = cpu.upload(tessera::DType::F32, b);
  rt::Buffer out = cpu.alloc(tessera::DType::F32, size_t(n));
  tessera_aot::vector_add::launch(k, rt::Dim3(uint32_t((n + kBlock - 1) / kBlock)), out, da, db, n);
  std::vector<float> got = out.read<float>();
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (got[i] != a[i] + b[i]) ++bad;  // one f32 addition: exact agreement
  std::printf("vector_add n=%d: %s\n", n, bad ? "MISMATCH" : "OK");
  return bad;
}

}  // namespace

int main() {
  try {
    rt::Device cpu = rt::Device::cpu();
    rt::Kernel k = tessera_aot::vector_add::load(cpu);
    std::printf("exported for %s: %s\n", tessera_aot::vector_add::kTarget, k.signature().str().c_str());
    int bad = 0;
    for (int n : {1024, 64 * 1024, 1, 1000, 100003}) bad += runOnce(cpu, k, n);
    // The launcher goes through the runtime: a wrong argument is its LaunchError.
    try {
      rt::Buffer x = cpu.alloc(tessera::DType::F32, 4);
      k.launch(rt::Dim3(1), {x, x, x, 2.5f});
      std::printf("FAIL: a float passed for 'n' was accepted\n");
      ++bad;
    } catch (const tessera::LaunchError& e) {
      std::printf("wrong argument refused: %s\n", e.what());
    }
    if (llvmLoaded()) {
      std::printf("FAIL: LLVM is loaded in this process\n");
      return 1;
    }
    std::printf("no LLVM library loaded\n");
    return bad ? 1 : 0;
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
