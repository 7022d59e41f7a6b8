// The driver's GPU targets: each target's vendor hooks (the one place that
// names codegen/nvptx and codegen/amdgpu), handed to the shared GPU compile
// (codegen/gpu/GpuCompile.h), and the public GPU entry points of
// tessera/codegen/Compiler.h.
#include "codegen/GpuTargets.h"

#include <llvm/Config/llvm-config.h>

#include "codegen/amdgpu/AMDGPUTargetInfo.h"
#include "codegen/gpu/GpuTargetInfo.h"
#include "codegen/llvm/GpuToolchain.h"
#include "codegen/nvptx/NVPTXTargetInfo.h"
#include "tessera/support/Error.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

Target gpuDevice(const Target& t) {
  if (t.kind == Target::Kind::EmuNVPTX) return {Target::Kind::NVPTX, t.arch};
  if (t.kind == Target::Kind::EmuAMDGPU) return {Target::Kind::AMDGPU, t.arch};
  return t;
}

std::unique_ptr<GpuTargetInfo> createGpuTargetInfo(const Target& t, const GpuOptions& g) {
  const Target device = gpuDevice(t);
  if (device.kind == Target::Kind::NVPTX) {
    const GpuArch* row = findGpuArch(GpuArch::Vendor::NVIDIA, device.arch);
    if (!row)
      throw CompileError("unknown NVPTX architecture '" + device.arch +
                         "'; valid: " + gpuArchList(GpuArch::Vendor::NVIDIA, ", "));
    return createNVPTXTargetInfo(*row, g);
  }
  if (device.kind == Target::Kind::AMDGPU) {
    const GpuArch* row = findGpuArch(GpuArch::Vendor::AMD, device.arch);
    if (!row)
      throw CompileError("unknown AMDGPU architecture '" + device.arch +
                         "'; valid: " + gpuArchList(GpuArch::Vendor::AMD, ", "));
    return createAMDGPUTargetInfo(*row, g);
  }
  throw CompileError("target " + t.str() + " is not a GPU target");
}

std::shared_ptr<Artifact> compileGpu(const ir::Function& fn, const Target& t, const CompileOptions& o, StageDumps dumps,
                                     const GpuOptions& g) {
  return compileGpu(createGpuTargetInfo, fn, t, o, std::move(dumps), g);
}

bool gpuTensorCoreTakes(const Target& t, DType a, DType b, DType acc) {
  return gpuTensorCoreTakes(createGpuTargetInfo, t, a, b, acc);
}

bool gpuKeepsDotInFlight(const Target& t, int numWarps, const ir::Op& dot) {
  return gpuKeepsDotInFlight(createGpuTargetInfo, t, numWarps, dot);
}

std::string gpuWarpSpecializeRefusal(const Target& t, const CompileOptions& o, const ir::Function& f,
                                     const ir::Op& loop) {
  return gpuWarpSpecializeRefusal(createGpuTargetInfo, t, o, f, loop);
}

std::string amdgpuAssembly(const Artifact& a) { return gpuAssembly(createGpuTargetInfo, a); }

void annotateGpuLayouts(ir::Function& f, const Target& target, const CompileOptions& opts) {
  annotateGpuLayouts(createGpuTargetInfo, f, target, opts);
}

GpuResources gpuResources(const Artifact& a) { return gpuResources(createGpuTargetInfo, a); }

std::string resourceReport(const Artifact& a) { return resourceReport(createGpuTargetInfo, a); }

std::string sass(const Artifact& a) {
  const Target t = gpuDevice(a.target);
  if (t.kind != Target::Kind::NVPTX) throw CompileError("SASS exists only for NVPTX targets, not " + a.target.str());
  // The PTX a launch loads: an artifact from the disk cache carries it but
  // no stage dumps.
  return nvptx::sass(a.binary.ptx, t.arch, a.kernelName());
}

// f64 transcendentals call CUDA's libdevice where it is found.
std::string deviceMathLibrary(const Target& t) {
  return gpuDevice(t).kind == Target::Kind::NVPTX ? findLibdevice() : std::string();
}

std::string toolchainVersions() { return "LLVM " LLVM_VERSION_STRING "\n" + nvptx::toolchainLines(); }

}  // namespace tessera::codegen
