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

GpuConfig gpuConfig(const Target& t, int numWarps, const GpuOptions& g) {
  GpuConfig c;
  c.target = t;
  c.device = gpuDevice(t);
  c.numWarps = numWarps;
  c.options = g;
  const bool nvptx = c.device.kind == Target::Kind::NVPTX;
  if (!nvptx && c.device.kind != Target::Kind::AMDGPU) throw CompileError("target " + t.str() + " is not a GPU target");
  const GpuArch::Vendor vendor = nvptx ? GpuArch::Vendor::NVIDIA : GpuArch::Vendor::AMD;
  c.row = findGpuArch(vendor, c.device.arch);
  if (!c.row)
    throw CompileError(std::string("unknown ") + (nvptx ? "NVPTX" : "AMDGPU") + " architecture '" + c.device.arch +
                       "'; valid: " + gpuArchList(vendor, ", "));
  return c;
}

GpuOptions gpuOptions(const CompileOptions& o) {
  GpuOptions g;
  g.codeObjectVersion = o.codeObjectVersion;
  g.eagerAssembly = o.dumpAssembly;
  g.precision = o.precision;
  // A checked compile tests every access of its own: tensor copies, which
  // the hardware runs from a map, are off there.
  g.tensorCopies = o.tensorCopies && !o.checkBounds;
  g.checkBounds = o.checkBounds;
  g.profile = o.profile;
  g.predicatedAccesses = o.predicatedAccesses;
  g.cluster = o.cluster;
  return g;
}

std::unique_ptr<GpuTargetInfo> createGpuTargetInfo(const GpuConfig& c) {
  return c.row->vendor == GpuArch::Vendor::NVIDIA ? createNVPTXTargetInfo(c) : createAMDGPUTargetInfo(c);
}

std::shared_ptr<Artifact> compileGpu(const ir::Function& fn, const Target& t, const CompileOptions& o, StageDumps dumps,
                                     const GpuOptions& g) {
  const GpuConfig c = gpuConfig(t, o.numWarps, g);
  return compileGpu(createGpuTargetInfo, fn, c, o, std::move(dumps));
}

std::string checkSharedNeedsModel(const ir::Function& fn, const Target& t, const CompileOptions& o) {
  return checkSharedNeedsModel(createGpuTargetInfo, fn, gpuConfig(t, o.numWarps, gpuOptions(o)));
}

// An artifact's configuration for what is asked of it after the compile:
// its target with the default warps (the hooks read the threads it
// launches from the artifact).
std::string amdgpuAssembly(const Artifact& a) {
  return gpuAssembly(createGpuTargetInfo, gpuConfig(a.target, CompileOptions{}.numWarps), a);
}

void annotateGpuLayouts(ir::Function& f, const Target& target, const CompileOptions& opts) {
  if (!target.isGpu()) throw CompileError("layouts exist for GPU targets only, not " + target.str());
  annotateGpuLayouts(createGpuTargetInfo, f, gpuConfig(target, opts.numWarps));
}

GpuResources gpuResources(const Artifact& a) {
  return gpuResources(createGpuTargetInfo, gpuConfig(a.target, CompileOptions{}.numWarps), a);
}

std::string resourceReport(const Artifact& a) {
  if (a.target.kind == Target::Kind::CPU) {
    std::string r = "target: cpu";
    auto isa = a.dumps.extra.find("cpu");
    if (isa != a.dumps.extra.end()) r += " (" + isa->second + ")";
    auto t = a.dumps.extra.find("compile-times");
    if (t != a.dumps.extra.end()) r += "\ncompile stages:\n" + t->second;
    return r + "\n";
  }
  std::string r = gpuResources(a).text;
  // The TMA tensor maps the launch builds (hidden parameters).
  for (const TensorMapSpec& t : a.binary.signature.tensorMaps)
    r += "tensor map: " + t.str(a.binary.signature.args) + "\n";
  // The shared-memory plan (areas, offsets, the choices taken), where the
  // artifact was compiled here (one from the disk cache carries no dumps).
  if (auto plan = a.dumps.extra.find("shared-memory"); plan != a.dumps.extra.end())
    r += "shared memory: " + plan->second;
  return r;
}

std::string sass(const Artifact& a) {
  const Target t = gpuDevice(a.target);
  if (t.kind != Target::Kind::NVPTX) throw CompileError("SASS exists only for NVPTX targets, not " + a.target.str());
  // The PTX a launch loads: an artifact from the disk cache carries it but
  // no stage dumps.
  return nvptx::sass(a.binary.ptx, *gpuConfig(t, CompileOptions{}.numWarps).row, a.kernelName());
}

// f64 transcendentals call CUDA's libdevice where it is found.
std::string deviceMathLibrary(const Target& t) {
  return gpuDevice(t).kind == Target::Kind::NVPTX ? findLibdevice() : std::string();
}

std::string deviceAssemblerVersion(const Target& t) {
  if (gpuDevice(t).kind != Target::Kind::NVPTX) return "";
  const nvptx::Ptxas p = nvptx::findPtxas();
  return p.path.empty() ? "none" : p.line.empty() ? p.release : p.line;
}

std::string toolchainVersions() { return "LLVM " LLVM_VERSION_STRING "\n" + nvptx::toolchainLines(); }

}  // namespace tessera::codegen
