// cpuid-based ISA feature tests for ahead-of-time CPU code
// (tessera/runtime/HostFeatures.h).
#include "tessera/runtime/HostFeatures.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tessera/support/Error.h"
#include "tessera/support/Environment.h"
#include "tessera/support/HostTiles.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tessera::rt {
namespace {

#if defined(__x86_64__) || defined(__i386__)
enum Reg { EAX, EBX, ECX, EDX };
struct FeatureBit {
  const char* name;  // LLVM's feature name
  unsigned leaf, subleaf;
  Reg reg;
  unsigned bit;
};
// The features the x86-64 micro-architecture levels and common server cpus
// enable (Intel SDM vol. 2A, CPUID; AMD APM vol. 3, CPUID Fn8000_0001).
constexpr FeatureBit kBits[] = {{"sse3", 1, 0, ECX, 0},
                                {"pclmul", 1, 0, ECX, 1},
                                {"ssse3", 1, 0, ECX, 9},
                                {"fma", 1, 0, ECX, 12},
                                {"cx16", 1, 0, ECX, 13},
                                {"sse4.1", 1, 0, ECX, 19},
                                {"sse4.2", 1, 0, ECX, 20},
                                {"movbe", 1, 0, ECX, 22},
                                {"popcnt", 1, 0, ECX, 23},
                                {"aes", 1, 0, ECX, 25},
                                {"xsave", 1, 0, ECX, 26},
                                {"avx", 1, 0, ECX, 28},
                                {"f16c", 1, 0, ECX, 29},
                                {"cmov", 1, 0, EDX, 15},
                                {"sse2", 1, 0, EDX, 26},
                                {"bmi", 7, 0, EBX, 3},
                                {"avx2", 7, 0, EBX, 5},
                                {"bmi2", 7, 0, EBX, 8},
                                {"avx512f", 7, 0, EBX, 16},
                                {"avx512dq", 7, 0, EBX, 17},
                                {"adx", 7, 0, EBX, 19},
                                {"avx512ifma", 7, 0, EBX, 21},
                                {"avx512cd", 7, 0, EBX, 28},
                                {"avx512bw", 7, 0, EBX, 30},
                                {"avx512vl", 7, 0, EBX, 31},
                                {"avx512vbmi", 7, 0, ECX, 1},
                                {"avx512vbmi2", 7, 0, ECX, 6},
                                {"gfni", 7, 0, ECX, 8},
                                {"vaes", 7, 0, ECX, 9},
                                {"vpclmulqdq", 7, 0, ECX, 10},
                                {"avx512vnni", 7, 0, ECX, 11},
                                {"avx512bitalg", 7, 0, ECX, 12},
                                {"avx512vpopcntdq", 7, 0, ECX, 14},
                                {"avxvnni", 7, 1, EAX, 4},
                                {"avx512bf16", 7, 1, EAX, 5},
                                {"sahf", 0x80000001, 0, ECX, 0},
                                {"lzcnt", 0x80000001, 0, ECX, 5},
                                {"amx-bf16", 7, 0, EDX, 22},
                                {"amx-tile", 7, 0, EDX, 24},
                                {"amx-int8", 7, 0, EDX, 25}};

// The x86-64 psABI levels' features, for TESSERA_HOST_CPU (cumulative).
constexpr const char* kV2[] = {"cx16", "sahf", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3"};
constexpr const char* kV3[] = {"avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"};
constexpr const char* kV4[] = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"};

bool cpuidBit(const FeatureBit& f) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(f.leaf, f.subleaf, &r[EAX], &r[EBX], &r[ECX], &r[EDX])) return false;
  return (r[f.reg] >> f.bit) & 1u;
}

// The register state the OS saves on a context switch (XCR0): AVX needs the
// YMM halves, AVX-512 the opmask and ZMM state too; without them the
// instructions fault even where cpuid lists them.
uint64_t osSavedState() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return 0;  // no OSXSAVE
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

bool inLevel(const std::string& f, const char* level) {
  auto has = [&](const auto& list) {
    for (const char* n : list)
      if (f == n) return true;
    return false;
  };
  const std::string l = level;
  if (l == "x86-64-v4" && has(kV4)) return true;
  if ((l == "x86-64-v4" || l == "x86-64-v3") && has(kV3)) return true;
  return (l == "x86-64-v4" || l == "x86-64-v3" || l == "x86-64-v2") && has(kV2);
}

// False only when the runtime knows the feature and the host lacks it.
bool hostHas(const std::string& f) {
  const FeatureBit* bit = nullptr;
  for (const FeatureBit& b : kBits)
    if (f == b.name) bit = &b;
  if (!bit) return true;
  if (!cpuidBit(*bit)) return false;
  const uint64_t xcr0 = osSavedState();
  const bool ymm = f.rfind("avx", 0) == 0 || f == "fma" || f == "f16c" || f == "vaes" || f == "vpclmulqdq";
  if (ymm && (xcr0 & 0x6) != 0x6) return false;
  if (f.rfind("avx512", 0) == 0 && (xcr0 & 0xe6) != 0xe6) return false;
  // AMX needs the OS's grant of the tile state as well (asked here, once).
  if (f.rfind("amx", 0) == 0 && !requestHostTileState()) return false;
  const char* narrow = tessera::env::get(tessera::env::Var::HostCpu);
  if (narrow && *narrow) {
    // The runtime has no LLVM to know what another cpu name (znver4, ...)
    // has: such a value is refused rather than ignored, which would load
    // code the narrowed host is said to lack (a compile refuses a cpu LLVM
    // does not know; here the psABI levels are what can be known).
    if (std::strcmp(narrow, "x86-64-v2") && std::strcmp(narrow, "x86-64-v3") && std::strcmp(narrow, "x86-64-v4"))
      throw DeviceError(std::string("TESSERA_HOST_CPU='") + narrow +
                        "': kernels exported ahead of time narrow the host only to x86-64-v2, x86-64-v3 or "
                        "x86-64-v4 (the runtime has no LLVM to know another cpu's features); set one of "
                        "those, or unset it");
    return f == "cmov" || f == "sse2" || inLevel(f, narrow);
  }
  return true;
}
#else
bool hostHas(const std::string&) { return true; }
#endif

}  // namespace

std::string missingHostFeatures(const std::vector<std::string>& features) {
  std::string missing;
  for (const std::string& f : features)
    if (!hostHas(f)) missing += (missing.empty() ? "" : ", ") + f;
  return missing;
}

void requireHostFeatures(const std::string& kernel, const std::string& cpu, const std::vector<std::string>& features) {
  std::string missing = missingHostFeatures(features);
  if (missing.empty()) return;
  const char* narrow = tessera::env::get(tessera::env::Var::HostCpu);
  throw DeviceError("cpu device cannot load kernel '" + kernel + "': it was compiled ahead of time for cpu:" + cpu +
                    " and this host" + (narrow && *narrow ? std::string(" (TESSERA_HOST_CPU=") + narrow + ")" : "") +
                    " lacks " + missing + "; export it again for a cpu this host has (e.g. --target cpu:x86-64-v3)");
}

}  // namespace tessera::rt
