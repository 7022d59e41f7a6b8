// Linking an AMDGPU relocatable object into a .hsaco code object, and
// reading the code object's kernel metadata back. Private to codegen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::codegen {

/// `ld.lld -shared` of one object: in-process when LLD's libraries are
/// linked (TESSERA_HAVE_LLD), otherwise by running ld.lld. Throws
/// DeviceError if no linker is available or the link fails.
std::string linkHsaco(const std::string& object);

struct HsacoInfo {
  int sgprs = -1, vgprs = -1, wavefrontSize = -1;
  int64_t groupSegment = -1, privateSegment = -1;
};
/// The `amdhsa.kernels` entry of `kernel` in the NT_AMDGPU_METADATA note.
HsacoInfo readHsacoMetadata(const std::vector<char>& hsaco, const std::string& kernel);

}  // namespace tessera::codegen
