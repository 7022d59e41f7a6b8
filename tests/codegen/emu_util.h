// Helpers for the emulator compile tests: read a hand-written GPU module
// from tests/codegen/emu/inputs, compile it with compileForEmulator and launch
// it on the SIMT machine.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../../codegen/emu/EmuCompile.h"
#include "../../codegen/GpuTargets.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/support/Targets.h"

namespace emutest {

inline std::vector<std::pair<std::string, void*>> hooks() {
  std::vector<std::pair<std::string, void*>> v;
  for (auto [name, addr] : tessera::emu::hookSymbols()) v.emplace_back(name, addr);
  return v;
}

inline std::string readInput(const std::string& name) {
  std::string path = std::string(TESSERA_SOURCE_DIR) + "/tests/codegen/emu/inputs/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open test input " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline tessera::codegen::EmuKernel compileFile(const std::string& name, bool amd = false, unsigned warp = 32) {
  return tessera::codegen::compileForEmulator(readInput(name), amd, warp, hooks());
}

/// A tile-IR function compiled for a GPU target, and the module the backend
/// was handed (its llvm-gpu dump, as text) compiled for the emulator.
struct Lowered {
  std::shared_ptr<tessera::codegen::Artifact> art;
  tessera::codegen::EmuKernel k;
};

inline Lowered lowerForEmulator(const tessera::ir::Function& f, const std::string& target, int numWarps = 4) {
  using tessera::codegen::Target;
  Target t = Target::parse(target);
  Lowered r;
  tessera::codegen::CompileOptions o;
  o.numWarps = numWarps;
  r.art = tessera::codegen::compileGpu(f, t, o, {});
  bool amd = t.kind == Target::Kind::AMDGPU;
  const tessera::GpuArch* row =
      tessera::findGpuArch(amd ? tessera::GpuArch::Vendor::AMD : tessera::GpuArch::Vendor::NVIDIA, t.arch);
  if (!row) throw std::runtime_error("no Targets.def row for " + target);
  r.k = tessera::codegen::compileForEmulator(r.art->dumps.extra.at("llvm-gpu"), amd, row->warpSize, hooks(), row);
  return r;
}

/// Kernel arguments as CUDA kernelParams: args()[i] points at the i-th value.
class Args {
 public:
  template <class T>
  Args& add(T v) {
    static_assert(sizeof(T) <= sizeof(uint64_t));
    auto s = std::make_unique<uint64_t>(0);
    std::memcpy(s.get(), &v, sizeof(T));
    ptrs_.push_back(s.get());
    store_.push_back(std::move(s));
    return *this;
  }
  void* const* args() const { return ptrs_.data(); }

 private:
  std::vector<std::unique_ptr<uint64_t>> store_;
  std::vector<void*> ptrs_;
};

inline tessera::emu::LaunchConfig config(const tessera::codegen::EmuKernel& k, uint32_t grid, uint32_t block) {
  tessera::emu::LaunchConfig c;
  c.vendor = k.amd ? tessera::emu::Vendor::AMD : tessera::emu::Vendor::NVIDIA;
  c.warpSize = k.warpSize;
  c.grid[0] = grid;
  c.block[0] = block;
  c.kernelName = k.kernelName;
  c.opNames = k.opNames;
  c.sharedBytes = k.dynamicSharedOffset;
  c.hostThreads = 2;
  return c;
}

template <class T>
void addBuffer(tessera::emu::LaunchConfig& c, const std::vector<T>& v) {
  c.globalBuffers.emplace_back(v.data(), v.size() * sizeof(T));
}

}  // namespace emutest
