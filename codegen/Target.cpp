#include "tessera/codegen/Target.h"

#include <array>

#include "codegen/llvm/HostIsa.h"
#include "tessera/codegen/Compiler.h"
#include "tessera/support/Error.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

namespace {
std::string acceptedForms() {
  std::string r = "accepted targets: cpu, cpu:<llvm cpu> (x86-64-v3, x86-64-v4, znver4, ...)";
  for (const GpuArch& a : gpuArchs()) r += ", " + a.spelling();
  r += ", emu:nvptx:<sm>, emu:amdgpu:<gfx>";
  return r;
}

[[noreturn]] void unknown(const std::string& spelling) {
  throw CompileError("unknown target '" + spelling + "'; " + acceptedForms());
}
}  // namespace

Target Target::parse(const std::string& spelling) {
  if (spelling == "cpu") return Target::cpu();
  if (spelling.rfind("cpu:", 0) == 0) {
    Target t;
    t.arch = spelling.substr(4);
    if (!isKnownCpu(t.arch))
      throw CompileError("unknown target '" + spelling + "': '" + t.arch +
                         "' is not a cpu LLVM knows for this host's architecture; " + acceptedForms());
    return t;
  }
  auto parseGpu = [&](const std::string& rest, bool emu) -> Target {
    Target t;
    if (rest.rfind("nvptx:", 0) == 0) {
      t.arch = rest.substr(6);
      if (!findGpuArch(GpuArch::Vendor::NVIDIA, t.arch)) unknown(spelling);
      t.kind = emu ? Kind::EmuNVPTX : Kind::NVPTX;
      return t;
    }
    if (rest.rfind("amdgpu:", 0) == 0) {
      t.arch = rest.substr(7);
      if (!findGpuArch(GpuArch::Vendor::AMD, t.arch)) unknown(spelling);
      t.kind = emu ? Kind::EmuAMDGPU : Kind::AMDGPU;
      return t;
    }
    unknown(spelling);
  };
  if (spelling.rfind("emu:", 0) == 0) return parseGpu(spelling.substr(4), true);
  return parseGpu(spelling, false);
}

std::string hostIsa() { return detectedHostIsa(); }

bool hostMatrixTiles() {
  CpuTargetInfo t = selectCpuTarget("");
  return t.amxBf16 || t.amxInt8;
}

std::string cannotRunOnHost(const Target& target) {
  if (target.kind != Target::Kind::CPU) return "";
  return selectCpuTarget(target.arch).notRunnable;
}

std::string Target::str() const {
  switch (kind) {
    case Kind::CPU: return arch.empty() ? "cpu" : "cpu:" + arch;
    case Kind::NVPTX: return "nvptx:" + arch;
    case Kind::AMDGPU: return "amdgpu:" + arch;
    case Kind::EmuNVPTX: return "emu:nvptx:" + arch;
    case Kind::EmuAMDGPU: return "emu:amdgpu:" + arch;
  }
  TS_UNREACHABLE("bad target kind");
}

}  // namespace tessera::codegen
