// exportKernel: the compile driver's artifact (through the compile cache),
// written out by codegen.
#include "tessera/Export.h"

namespace tessera {

ExportResult exportKernel(const Kernel& k, const Target& target, const std::string& dir, const CompileOptions& opts) {
  return codegen::exportArtifact(compile(k, target, opts).artifact(), dir);
}

}  // namespace tessera
