// The C++ header of an exported kernel (tessera/codegen/Export.h): text
// generation only, no LLVM. Private to codegen.
#pragma once

#include <string>
#include <vector>

#include "tessera/support/Binary.h"

namespace tessera::codegen {

struct HeaderSpec {
  std::string stem;                       // struct name and file stem
  std::string target;                     // "cpu:x86-64-v3", "nvptx:sm_90a", ...
  std::string hostCpu;                    // cpu targets: the LLVM cpu the code is for
  std::vector<std::string> hostFeatures;  // cpu targets: the ISA features it may use
  std::string entrySymbol;                // cpu targets: the host entry in <stem>.o
};

/// The header: `b`'s signature, and for GPU formats its code, embedded.
std::string exportHeader(const KernelBinary& b, const HeaderSpec& s);

}  // namespace tessera::codegen
