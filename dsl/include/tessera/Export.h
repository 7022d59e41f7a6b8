// Ahead-of-time export of a kernel (docs/aot.md): compiled once here, run
// later by a program linked with the runtime library alone.
//
//   tessera::exportKernel(softmax(1024), tessera::Target::parse("cpu:x86-64-v3"), "out/");
//   // out/softmax.h + out/softmax.o; the program includes the header and
//   // calls tessera_aot::softmax::load(device) and ::launch(...)
#pragma once

#include <string>

#include "tessera/Compile.h"
#include "tessera/codegen/Export.h"

namespace tessera {

using ExportResult = codegen::ExportResult;

/// Compiles `k` for `target` (cpu, cpu:CPU, nvptx:SM or amdgpu:GFX) and
/// writes the artifact and its launcher header into `dir`
/// (codegen::exportArtifact gives the files).
ExportResult exportKernel(const Kernel& k, const Target& target, const std::string& dir,
                          const CompileOptions& opts = {});

}  // namespace tessera
