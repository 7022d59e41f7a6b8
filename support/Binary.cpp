#include "tessera/support/Binary.h"

namespace tessera {

std::string ArgSpec::str() const {
  std::string type =
      kind == Kind::Pointer ? std::string("ptr<") + tessera::name(dtype) + ">" : std::string(tessera::name(dtype));
  return name.empty() ? type : type + " " + name;
}

std::string KernelSignature::str() const {
  std::string s = kernelName + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) s += ", ";
    s += args[i].str();
  }
  return s + ")";
}

const char* describe(KernelBinary::Format f) {
  switch (f) {
    case KernelBinary::Format::HostFunction: return "a host function (cpu target)";
    case KernelBinary::Format::PTX: return "PTX (for a CUDA device)";
    case KernelBinary::Format::HSACO: return "HSACO (an AMDGPU code object for a HIP device)";
    case KernelBinary::Format::EmulatedGpu: return "emulated GPU code (an emu: target)";
  }
  return "of an unknown format";
}

}  // namespace tessera
