#include "tessera/support/Binary.h"

namespace tessera {

std::string ArgSpec::str() const {
  std::string type = kind == Kind::Pointer ? std::string("ptr<") + tessera::name(dtype) + ">" : std::string(tessera::name(dtype));
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

}  // namespace tessera
