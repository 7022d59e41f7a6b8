// exportKernel: the compile driver's artifact (through the compile caches),
// written out by codegen. An artifact from the persistent cache carries the
// code export writes (the CPU object, the PTX, the code object).
#include "tessera/Export.h"

#include "CompileInternal.h"

namespace tessera {

ExportResult exportKernel(const Kernel& k, const Target& target, const std::string& dir, const CompileOptions& opts) {
  return codegen::exportArtifact(*detail::compiledArtifact(k, target, opts), dir);
}

}  // namespace tessera
