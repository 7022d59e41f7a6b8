#include "codegen/llvm/HostIsa.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <llvm/ADT/StringMap.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/llvm/IsaFeatures.h"
#include "codegen/llvm/LLVMSupport.h"
#include "tessera/support/Error.h"
#include "tessera/support/HostTiles.h"
#include "tessera/support/Environment.h"

namespace tessera::codegen {

namespace {
using FeatureSet = std::set<std::string>;

// The ISA features an LLVM cpu name enables, implied ones included, read
// from the backend's own subtarget tables (so every cpu LLVM knows works and
// no feature list is copied here). nullopt-like empty pointer: unknown cpu.
std::shared_ptr<const FeatureSet> cpuFeatures(const std::string& triple, const std::string& cpu) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const FeatureSet>> memo;
  std::lock_guard<std::mutex> lock(mu);
  auto it = memo.find(cpu);
  if (it != memo.end()) return it->second;
  initLLVM();
  std::string err;
  llvm::Triple tt(triple);
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(tt, err);
  if (!target) throw InternalError("no LLVM target for host triple " + triple + ": " + err);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(tt, "", ""));
  std::shared_ptr<const FeatureSet> result;
  if (sti && sti->isCPUStringValid(cpu)) {
    sti.reset(target->createMCSubtargetInfo(tt, cpu, ""));
    auto set = std::make_shared<FeatureSet>();
    for (const llvm::SubtargetFeatureKV& kv : sti->getAllProcessorFeatures())
      if (sti->getFeatureBits().test(kv.Value)) set->insert(kv.Key);
    result = set;
  }
  memo.emplace(cpu, result);
  return result;
}

// Whether the host architecture's feature table has `feature` (names come
// and go between LLVM versions; asking for an unknown one prints a warning).
bool tableHas(const std::string& triple, const std::string& feature) {
  static const FeatureSet table = [&] {
    FeatureSet all;
    initLLVM();
    std::string err;
    llvm::Triple tt(triple);
    if (const llvm::Target* target = llvm::TargetRegistry::lookupTarget(tt, err)) {
      std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(tt, "", ""));
      for (const llvm::SubtargetFeatureKV& kv : sti->getAllProcessorFeatures()) all.insert(kv.Key);
    }
    return all;
  }();
  return table.count(feature) != 0;
}

std::string isaOf(const FeatureSet& on) { return on.count("avx512f") ? "avx512" : on.count("avx2") ? "avx2" : "sse2"; }

struct HostInfo {
  std::string triple, cpu, isa;
  llvm::StringMap<bool> features;  // every ISA feature the host detector knows, on or off
  std::string error;               // a bad TESSERA_HOST_CPU, reported at first use
};

const HostInfo& host() {
  // Detection reads cpuid once; the answer never changes within a process.
  // TESSERA_HOST_CPU=<cpu> narrows the host to what that cpu has (its
  // features intersected with the real ones): the suite run as if on an
  // AVX2-only machine, say, with TESSERA_HOST_CPU=x86-64-v3.
  static const HostInfo info = [] {
    HostInfo h;
    h.triple = llvm::sys::getProcessTriple();
    h.cpu = llvm::sys::getHostCPUName().str();
    for (auto& kv : llvm::sys::getHostCPUFeatures()) h.features[kv.getKey()] = kv.getValue();
    if (const char* env = tessera::env::get(tessera::env::Var::HostCpu); env && *env) {
      auto narrow = cpuFeatures(h.triple, env);
      if (!narrow) {
        h.error = std::string("TESSERA_HOST_CPU='") + env + "' is not a cpu LLVM knows for " + h.triple +
                  " (e.g. x86-64-v3, x86-64-v4, znver4, sapphirerapids)";
      } else {
        h.cpu = env;
        for (auto& kv : h.features) kv.getValue() = kv.getValue() && narrow->count(kv.getKey().str());
      }
    }
    FeatureSet on;
    for (auto& kv : h.features)
      if (kv.getValue()) on.insert(kv.getKey().str());
    h.isa = isaOf(on);
    return h;
  }();
  if (!info.error.empty()) throw CompileError(info.error);
  return info;
}
}  // namespace

bool isKnownCpu(const std::string& cpuName) {
  return !cpuName.empty() && cpuFeatures(llvm::sys::getProcessTriple(), cpuName) != nullptr;
}

CpuTargetInfo selectCpuTarget(const std::string& cpuName) {
  const HostInfo& h = host();
  CpuTargetInfo t;
  t.triple = h.triple;
  if (cpuName.empty()) {
    t.cpu = h.cpu;
    t.isa = h.isa;
    for (auto& kv : h.features) {
      if (!t.features.empty()) t.features += ",";
      t.features += (kv.getValue() ? "+" : "-") + kv.getKey().str();
    }
  } else {
    auto on = cpuFeatures(h.triple, cpuName);
    if (!on)
      throw CompileError("unknown cpu '" + cpuName + "' for " + h.triple +
                         "; use an LLVM cpu name such as x86-64-v3 (AVX2), x86-64-v4 (AVX-512), znver4 or "
                         "sapphirerapids (`llc -mcpu=help` lists them)");
    t.cpu = cpuName;
    t.isa = isaOf(*on);
    // LLVM versions that split AVX-512 into 256- and 512-bit halves need the
    // wide half asked for; the cpu name alone may not enable it.
    if (t.isa == "avx512" && !on->count("evex512") && tableHas(h.triple, "evex512")) t.features = "+evex512";
    // Runnable iff every ISA feature the cpu enables is one the host has. Only
    // features the host detector reports count: the rest are tuning flags.
    std::string missing;
    for (auto& kv : h.features)
      if (!kv.getValue() && on->count(kv.getKey().str())) missing += (missing.empty() ? "" : ", ") + kv.getKey().str();
    if (!missing.empty())
      t.notRunnable =
          "this host (" + h.cpu + ", " + h.isa + ") lacks " + missing + ", which cpu:" + cpuName + " code may use";
  }
  // f32 -> bf16 conversions must round to nearest even and keep denormals,
  // as PTX's cvt.rn.bf16.f32 does; x86's VCVTNEPS2BF16 (AVX512-BF16,
  // AVX-NE-CONVERT) flushes denormal inputs to zero whatever MXCSR says. With
  // those features off LLVM converts with integer rounding instead, so casts
  // give the same bits on every host (and in the emulator, which runs on it).
  for (const char* f : {"avx512bf16", "avxneconvert"})
    if (tableHas(h.triple, f)) t.features += std::string(t.features.empty() ? "" : ",") + "-" + f;
  // AMX: the cpu's tiles. Code that uses them runs only in a process the
  // OS granted the tile state, so that is asked here, before any such code
  // exists: on the host without the grant the tiles are not used; a pinned
  // cpu's code is then not runnable here.
  auto has = [&](const char* f) {
    if (!cpuName.empty()) return cpuFeatures(h.triple, cpuName)->count(f) != 0;
    auto it = h.features.find(f);
    return it != h.features.end() && it->getValue();
  };
  if (has("amx-tile")) {
    t.amxBf16 = has("amx-bf16");
    t.amxInt8 = has("amx-int8");
    if ((t.amxBf16 || t.amxInt8) && t.notRunnable.empty() && !requestHostTileState()) {
      if (cpuName.empty())
        t.amxBf16 = t.amxInt8 = false;
      else
        t.notRunnable =
            "the OS did not grant this process the AMX tile state (Linux 5.16 or later grants it "
            "on request), which cpu:" +
            cpuName + " code may use";
    }
  }
  t.lanes = t.isa == "avx512" ? 16 : t.isa == "avx2" ? 8 : 4;
  t.vectorBits = t.isa == "avx512" ? 512 : t.isa == "avx2" ? 256 : 128;
  return t;
}

std::vector<std::string> isaFeatures(const std::string& cpuName) {
  const HostInfo& h = host();
  std::shared_ptr<const FeatureSet> on;
  if (!cpuName.empty()) {
    selectCpuTarget(cpuName);  // the CompileError for an unknown cpu
    on = cpuFeatures(h.triple, cpuName);
  }
  std::vector<std::string> r;  // StringMap order is unspecified: sorted below
  for (auto& kv : h.features)
    if (on ? on->count(kv.getKey().str()) != 0 : kv.getValue()) r.push_back(kv.getKey().str());
  std::sort(r.begin(), r.end());
  return r;
}

std::string detectedHostIsa() { return host().isa; }

}  // namespace tessera::codegen
