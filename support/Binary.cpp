#include "tessera/support/Binary.h"

#include <cstdint>

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
  s += ")";
  for (const TensorMapSpec& t : tensorMaps) s += " " + t.str(args);
  return s;
}

std::string TensorMapSpec::str(const std::vector<ArgSpec>& args) const {
  auto argName = [&](int i) {
    return i >= 0 && static_cast<size_t>(i) < args.size() && !args[i].name.empty() ? args[i].name
                                                                                   : "arg" + std::to_string(i);
  };
  auto extent = [&](const Extent& e) {
    if (e.arg < 0) return e.value == INT32_MAX ? std::string("unbounded") : std::to_string(e.value);
    return e.scale == 1 ? argName(e.arg) : std::to_string(e.scale) + "*" + argName(e.arg);
  };
  auto list = [&](auto&& item) {
    std::string l = "[";
    for (unsigned d = 0; d < rank; ++d) l += (d ? ", " : "") + item(d);
    return l + "]";
  };
  return "tma(" + argName(source) + ": " + tessera::name(dtype) + " dims " +
         list([&](unsigned d) { return extent(dims[d]); }) + " strides " +
         list([&](unsigned d) { return d == 0 ? std::string("1") : extent(strides[d]); }) + " box " +
         list([&](unsigned d) { return std::to_string(box[d]); }) + " swizzle " + std::to_string(swizzleBytes) + ")";
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
