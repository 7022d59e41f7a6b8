#include "shared/HostIsa.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>

#include "tessera/codegen/Compiler.h"
#include "tessera/support/Error.h"

namespace tessera::codegen {

namespace {
struct HostInfo {
  std::string triple, cpu;
  llvm::StringMap<bool> features;
  std::string isa;
};

const HostInfo& host() {
  // Detection reads cpuid once; the answer never changes within a process.
  static const HostInfo info = [] {
    HostInfo h;
    h.triple = llvm::sys::getProcessTriple();
    h.cpu = llvm::sys::getHostCPUName().str();
    for (auto& kv : llvm::sys::getHostCPUFeatures()) h.features[kv.getKey()] = kv.getValue();
    auto has = [&](const char* f) {
      auto it = h.features.find(f);
      return it != h.features.end() && it->getValue();
    };
    h.isa = has("avx512f") ? "avx512" : has("avx2") ? "avx2" : "sse2";
    return h;
  }();
  return info;
}

int rank(const std::string& isa) { return isa == "avx512" ? 2 : isa == "avx2" ? 1 : 0; }

// Features whose presence would let LLVM use 512-bit or newer-than-AVX2
// vector instructions; cleared when AVX2 is forced on an AVX-512 host.
bool isAvx512Family(llvm::StringRef f) {
  return f.starts_with("avx512") || f.starts_with("avx10") || f.starts_with("amx") ||
         f == "evex512";
}
}  // namespace

CpuTargetInfo selectCpuTarget(const std::string& isaOverride) {
  const HostInfo& h = host();
  std::string isa = isaOverride.empty() ? h.isa : isaOverride;
  if (isa != "avx512" && isa != "avx2" && isa != "sse2")
    throw CompileError("unknown cpu ISA '" + isaOverride + "'; accepted: avx512, avx2, sse2 (or empty to detect)");
  CpuTargetInfo t;
  t.triple = h.triple;
  t.isa = isa;
  t.runnable = rank(isa) <= rank(h.isa);
  t.lanes = isa == "avx512" ? 16 : isa == "avx2" ? 8 : 4;
  t.vectorBits = isa == "avx512" ? 512 : isa == "avx2" ? 256 : 128;
  if (isa == h.isa) {
    t.cpu = h.cpu;
    for (auto& kv : h.features) {
      if (!t.features.empty()) t.features += ",";
      t.features += (kv.getValue() ? "+" : "-") + kv.getKey().str();
    }
    return t;
  }
  if (rank(isa) > rank(h.isa)) {
    // Cross-compiling for a wider ISA than the host has (inspection only:
    // such code cannot run here, see `runnable`).
    t.cpu = isa == "avx512" ? "x86-64-v4" : "x86-64-v3";
    t.features = isa == "avx512" ? "+evex512" : "";
    return t;
  }
  if (isa == "sse2") {
    t.cpu = "x86-64";
    return t;
  }
  // AVX2 on an AVX-512 host: the host's cpu and features minus the AVX-512
  // family, so both code paths can be tested on one machine.
  t.cpu = h.cpu;
  for (auto& kv : h.features) {
    bool on = kv.getValue() && !isAvx512Family(kv.getKey());
    if (!t.features.empty()) t.features += ",";
    t.features += (on ? "+" : "-") + kv.getKey().str();
  }
  return t;
}

std::string hostIsa() { return host().isa; }

}  // namespace tessera::codegen
