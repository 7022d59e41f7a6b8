// Shared-memory accesses through the machine's hook, as the rewritten
// module makes them (codegen/emu/EmuMemory.cpp), for the kernels the
// emulator's tests write in C++.
#pragma once

#include <string>
#include <vector>

#include "tessera/runtime/Emulator.h"
#include "tessera/support/EmuAbi.h"

namespace tessera::emu::test {

template <class T>
T sload(T* p, int op) {
  return *static_cast<T*>(tessera_emu_shared_access(p, sizeof(T), TESSERA_EMU_LOAD, op));
}
template <class T>
void sstore(T* p, T v, int op) {
  *static_cast<T*>(tessera_emu_shared_access(p, sizeof(T), TESSERA_EMU_STORE, op)) = v;
}

/// One NVIDIA block of 128 threads running `kernel(args)` with `sharedBytes`
/// of shared memory, the ops named `ops`, `out` its one global buffer;
/// errors reported, not thrown (the tcgen05 tests' launch).
inline LaunchReport launchOneBlock(void (*kernel)(void* const*), void** args, const char* name, uint64_t sharedBytes,
                                   const std::vector<std::string>& ops, std::vector<float>& out) {
  LaunchConfig cfg;
  cfg.vendor = Vendor::NVIDIA;
  cfg.warpSize = 32;
  cfg.grid[0] = cfg.grid[1] = cfg.grid[2] = 1;
  cfg.block[0] = 128;
  cfg.block[1] = cfg.block[2] = 1;
  cfg.kernelName = name;
  cfg.sharedBytes = sharedBytes;
  cfg.throwOnError = false;
  cfg.opNames = ops;
  cfg.globalBuffers = {{out.data(), out.size() * sizeof(float)}};
  return launch(kernel, args, cfg);
}

/// "" where `rep`'s first issue is of kind `k`, at op `op`, and its message
/// holds `text`; else what it is instead (the misuse tests' check).
inline std::string firstIssueMismatch(const LaunchReport& rep, IssueKind k, int32_t op, const std::string& text) {
  if (rep.count(k) < 1 || rep.issues.empty()) return "no issue of the kind expected: " + rep.summary();
  const auto& i = rep.issues[0];
  if (i.opId != op || i.message.find(text) == std::string::npos)
    return "op " + std::to_string(i.opId) + ": " + i.message + " (expected op " + std::to_string(op) + ", \"" + text +
           "\")";
  return "";
}

}  // namespace tessera::emu::test
