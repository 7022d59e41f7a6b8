// The CPU vector paths the test suite exercises, as pinned LLVM cpus, so that
// no test depends on the host's ISA: golden tests compile for a pinned cpu,
// and numerical tests run every path this host can execute.
#pragma once

#include <string>
#include <vector>

#include "tessera/codegen/Compiler.h"
#include "tessera/runtime/Runtime.h"

namespace testpaths {

/// x86-64-v3: AVX2, 8 lanes, 6x16 GEMM blocks. x86-64-v4: AVX-512, 16 lanes,
/// 14x32 blocks.
inline const char* const kAvx2Cpu = "x86-64-v3";
inline const char* const kAvx512Cpu = "x86-64-v4";

/// The CPU target pinned to the LLVM cpu `cpu` ("" = the host).
inline tessera::codegen::Target cpuTarget(const std::string& cpu) {
  return cpu.empty() ? tessera::codegen::Target::cpu() : tessera::codegen::Target::parse("cpu:" + cpu);
}

/// The vector paths this host can run, each as its pinned cpu: AVX2 on every
/// supported host, AVX-512 where the host has it.
inline std::vector<std::string> runnableCpus() {
  std::vector<std::string> r;
  for (const char* cpu : {kAvx2Cpu, kAvx512Cpu})
    if (tessera::codegen::cannotRunOnHost(cpuTarget(cpu)).empty()) r.push_back(cpu);
  return r;
}

/// sapphirerapids: AVX-512 plus the AMX tiles that bf16 and i8 dots use.
inline const char* const kAmxCpu = "sapphirerapids";

/// The host ("") where its bf16 and i8 dots run on AMX tiles (the cpu has
/// them and the OS granted the tile state), else nothing. Not a pinned cpu:
/// hosts with AMX often lack some feature a cpu name implies (a virtual
/// machine's ptwrite, say), which makes that cpu's code not runnable. Not
/// among runnableCpus(): only the dot tests add it (the host path of the
/// other tests takes the tiles too on such a host).
inline std::vector<std::string> runnableTileCpus() {
  if (tessera::codegen::hostMatrixTiles()) return {""};
  return {};
}

/// The host CPU device, then one device per runnable pinned path.
inline std::vector<tessera::rt::Device> cpuDevices() {
  std::vector<tessera::rt::Device> r{tessera::rt::Device::cpu()};
  for (const std::string& cpu : runnableCpus()) r.push_back(tessera::rt::Device::cpu(cpu));
  return r;
}

/// Every pinned CPU path this host can run, then the emulated GPUs of both
/// vendors (NVIDIA, AMD wave64 and wave32): where a test checks an op is
/// the same on every backend.
inline std::vector<tessera::rt::Device> cpuPathsAndEmulators() {
  std::vector<tessera::rt::Device> r;
  for (const std::string& cpu : runnableCpus()) r.push_back(tessera::rt::Device::cpu(cpu));
  for (const char* g : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"})
    r.push_back(tessera::rt::Device::emulator(g));
  return r;
}

}  // namespace testpaths
