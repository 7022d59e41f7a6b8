// Targets a kernel can be compiled for, spelled as on the command line:
//   cpu                      the host (AVX-512 or AVX2 chosen at run time)
//   nvptx:sm_80 ... sm_90a   PTX for NVIDIA GPUs
//   amdgpu:gfx90a|gfx942|gfx1100   AMDGCN code objects
//   emu:nvptx:sm_80, emu:amdgpu:gfx942   the GPU lowering run by the SIMT emulator
#pragma once

#include <string>

namespace tessera::codegen {

struct Target {
  enum class Kind { CPU, NVPTX, AMDGPU, EmuNVPTX, EmuAMDGPU };
  Kind kind = Kind::CPU;
  std::string arch;  // "" for cpu, "sm_80", "gfx942", ...

  /// Parses a target spelling; throws CompileError naming the spelling and
  /// the accepted forms if it is unknown.
  static Target parse(const std::string& spelling);
  static Target cpu() { return {}; }
  std::string str() const;
  bool isGPU() const { return kind != Kind::CPU; }
  bool operator==(const Target& o) const { return kind == o.kind && arch == o.arch; }
};

}  // namespace tessera::codegen
