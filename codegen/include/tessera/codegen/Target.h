// Targets a kernel can be compiled for, spelled as on the command line:
//   cpu                      the host (its cpu and features, detected at run time)
//   cpu:x86-64-v3, cpu:x86-64-v4, cpu:znver4, ...   a pinned LLVM cpu: the same
//                            code on every host (golden tests, inspection,
//                            running each ISA the host supports)
//   nvptx:sm_80 ... sm_90a   PTX for NVIDIA GPUs
//   amdgpu:gfx90a|gfx942|gfx1100   AMDGCN code objects
//   emu:nvptx:sm_80, emu:amdgpu:gfx942   the GPU lowering run by the SIMT emulator
#pragma once

#include <string>

namespace tessera::codegen {

struct Target {
  enum class Kind { CPU, NVPTX, AMDGPU, EmuNVPTX, EmuAMDGPU };
  Kind kind = Kind::CPU;
  std::string arch;  // "" for the host cpu, an LLVM cpu name ("x86-64-v3"), "sm_80", "gfx942", ...

  /// Parses a target spelling; throws CompileError naming the spelling and
  /// the accepted forms if it is unknown.
  static Target parse(const std::string& spelling);
  static Target cpu() { return {}; }
  std::string str() const;
  bool isGpu() const { return kind != Kind::CPU; }
  bool operator==(const Target& o) const { return kind == o.kind && arch == o.arch; }
};

}  // namespace tessera::codegen
