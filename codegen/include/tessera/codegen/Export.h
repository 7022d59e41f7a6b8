// Ahead-of-time export (docs/aot.md): a compiled artifact written out as
// files a program uses with the runtime library alone, no LLVM at run time.
//
//   DIR/<kernel>.h      a typed launcher: tessera_aot::<kernel>::load(device)
//                       and ::launch(kernel, grid, args...), the signature
//                       embedded, GPU code embedded
//   DIR/<kernel>.o      cpu targets: the host code, to link into the program
//   DIR/<kernel>.ptx    nvptx targets: the PTX (embedded in the header too)
//   DIR/<kernel>.cubin  nvptx targets, where ptxas is found
//   DIR/<kernel>.hsaco  amdgpu targets: the code object (embedded too)
#pragma once

#include <string>
#include <vector>

#include "tessera/codegen/Compiler.h"

namespace tessera::codegen {

struct ExportResult {
  std::string header;                // DIR/<kernel>.h
  std::vector<std::string> files;    // every file written, the header last
  std::vector<std::string> skipped;  // what was not written and why ("no cubin: ptxas not found ...")
};

/// Writes `a` (compiled for a cpu, nvptx: or amdgpu: target, without bounds
/// checks) into `dir`, creating it if missing. UsageError for an emu: target,
/// a bounds-checked artifact or a directory that cannot be written.
ExportResult exportArtifact(const Artifact& a, const std::string& dir);

/// The file stem of an exported kernel (and the launcher's struct name): the
/// kernel name restricted to [A-Za-z0-9_].
std::string exportStem(const std::string& kernelName);

}  // namespace tessera::codegen
