// Text of an exported kernel's header. The header includes only the
// runtime's public header: the launcher builds the KernelBinary the JIT
// would have produced (signature, format, code) and hands it to
// rt::Device::load, so argument checking, the CPU thread pool and the GPU
// launches are the runtime's own.
#include "codegen/ExportHeader.h"

#include <cctype>
#include <cstdio>
#include <set>

#include "tessera/support/Error.h"

namespace tessera::codegen {
namespace {

const char* dtypeEnum(DType t) {
  switch (t) {
    case DType::I1: return "I1";
    case DType::I8: return "I8";
    case DType::I16: return "I16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::U16: return "U16";
    case DType::U32: return "U32";
    case DType::U64: return "U64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F8E4M3: return "F8E4M3";
    case DType::F8E5M2: return "F8E5M2";
    case DType::F8E4M3FNUZ: return "F8E4M3FNUZ";
    case DType::F8E5M2FNUZ: return "F8E5M2FNUZ";
    case DType::F4E2M1: return "F4E2M1";
    case DType::F6E2M3: return "F6E2M3";
    case DType::F6E3M2: return "F6E3M2";
    case DType::E8M0: return "E8M0";
  }
  return "I32";
}

bool isIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// Parameter names of the launcher: the kernel's own where they are usable
// C++ names, "argN" otherwise; never one of the launcher's other names.
std::vector<std::string> paramNames(const KernelSignature& sig) {
  static const std::set<std::string> taken = {
      "kernel", "grid",     "options",  "auto",     "bool",   "case",     "char",   "class",  "const",    "default",
      "delete", "do",       "double",   "else",     "enum",   "float",    "for",    "if",     "int",      "long",
      "new",    "operator", "private",  "public",   "return", "short",    "signed", "sizeof", "static",   "struct",
      "switch", "this",     "template", "typename", "union",  "unsigned", "using",  "void",   "volatile", "while"};
  std::vector<std::string> r;
  std::set<std::string> used;
  for (size_t i = 0; i < sig.args.size(); ++i) {
    std::string n = sig.args[i].name;
    if (!isIdentifier(n) || taken.count(n) || used.count(n) || n.rfind("__", 0) == 0) n = "arg" + std::to_string(i);
    used.insert(n);
    r.push_back(n);
  }
  return r;
}

std::string quoted(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r + "\"";
}

// Code bytes as a brace list, 16 to a line.
std::string byteList(const char* data, size_t n) {
  std::string r;
  char buf[8];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "0x%02x,", static_cast<unsigned char>(data[i]));
    r += (i % 16 == 0 ? "\n      " : " ") + std::string(buf);
  }
  return r;
}

std::string signatureBody(const KernelSignature& sig) {
  std::string r = "    tessera::KernelSignature s;\n    s.kernelName = " + quoted(sig.kernelName) + ";\n";
  for (const ArgSpec& a : sig.args)
    r += std::string("    s.args.push_back({tessera::ArgSpec::Kind::") +
         (a.kind == ArgSpec::Kind::Pointer ? "Pointer" : "Scalar") + ", tessera::DType::" + dtypeEnum(a.dtype) + ", " +
         quoted(a.name) + "});\n";
  // Tensor maps the launch encodes (hidden parameters; docs/runtime.md).
  auto ext = [](const TensorMapSpec::Extent& e) {
    return "{" + std::to_string(e.arg) + ", " + std::to_string(e.scale) + ", " + std::to_string(e.value) + "}";
  };
  for (const TensorMapSpec& t : sig.tensorMaps) {
    r += "    {\n      tessera::TensorMapSpec t;\n      t.source = " + std::to_string(t.source) +
         ";\n      t.dtype = tessera::DType::" + dtypeEnum(t.dtype) + ";\n      t.rank = " + std::to_string(t.rank) +
         ";\n";
    for (unsigned d = 0; d < 3; ++d)
      r += "      t.dims[" + std::to_string(d) + "] = " + ext(t.dims[d]) + ";\n      t.strides[" + std::to_string(d) +
           "] = " + ext(t.strides[d]) + ";\n      t.box[" + std::to_string(d) + "] = " + std::to_string(t.box[d]) +
           ";\n";
    r += "      t.swizzleBytes = " + std::to_string(t.swizzleBytes) + ";\n      s.tensorMaps.push_back(t);\n    }\n";
  }
  return r + "    return s;\n";
}

std::string binaryBody(const KernelBinary& b, const HeaderSpec& s) {
  std::string r =
      "    tessera::KernelBinary b;\n    b.signature = signature();\n    b.symbol = " + quoted(b.symbol) + ";\n";
  switch (b.format) {
    case KernelBinary::Format::HostFunction:
      r += "    b.format = tessera::KernelBinary::Format::HostFunction;\n    b.hostEntry = &" + s.entrySymbol + ";\n" +
           "    b.hostStackBytes = " + std::to_string(b.hostStackBytes) + ";\n";
      break;
    case KernelBinary::Format::PTX:
      // Bytes, not a string literal: PTX may be longer than a compiler's
      // literal limit, and no delimiter can clash with its text.
      r += "    static const unsigned char kPtx[] = {" + byteList(b.ptx.data(), b.ptx.size()) + "\n    };\n" +
           "    b.format = tessera::KernelBinary::Format::PTX;\n"
           "    b.ptx.assign(reinterpret_cast<const char*>(kPtx), sizeof kPtx);\n";
      break;
    case KernelBinary::Format::HSACO:
      r += "    static const unsigned char kCode[] = {" + byteList(b.codeObject.data(), b.codeObject.size()) +
           "\n    };\n    b.format = tessera::KernelBinary::Format::HSACO;\n"
           "    b.codeObject.assign(kCode, kCode + sizeof kCode);\n";
      break;
    case KernelBinary::Format::EmulatedGpu: throw InternalError("an emulated GPU binary cannot be exported");
  }
  r += "    b.threadsPerBlock = " + std::to_string(b.threadsPerBlock) +
       ";\n    b.sharedBytes = " + std::to_string(b.sharedBytes) + ";\n";
  if (b.clusterBlocks() > 1)
    r += "    b.cluster[0] = " + std::to_string(b.cluster[0]) +
         ";\n    b.cluster[1] = " + std::to_string(b.cluster[1]) +
         ";\n    b.cluster[2] = " + std::to_string(b.cluster[2]) + ";\n";
  r += "    return b;\n";
  return r;
}

}  // namespace

std::string exportHeader(const KernelBinary& b, const HeaderSpec& s) {
  const KernelSignature& sig = b.signature;
  const bool cpu = b.format == KernelBinary::Format::HostFunction;
  std::vector<std::string> names = paramNames(sig);
  std::string h = "// " + sig.str() + " for " + s.target + ", exported by `tessera export`.\n";
  h += cpu ? "// Link " + s.stem + ".o into the program" : "// The code is embedded below";
  h += "; the launcher needs only the runtime library\n// (libtessera_runtime.so, CMake: Tessera::runtime). See "
       "docs/aot.md.\n";
  h += "#pragma once\n\n#include <cstdint>\n#include <string>\n#include <vector>\n\n#include "
       "\"tessera/runtime/Runtime.h\"\n";
  if (cpu) {
    h += "#include \"tessera/runtime/HostFeatures.h\"\n\n";
    h += "extern \"C\" void " + s.entrySymbol +
         "(void* const* args, int64_t begin, int64_t end, const int32_t* grid);\n";
  }
  h += "\nnamespace tessera_aot {\n\nstruct " + s.stem + " {\n";
  h += "  static constexpr const char* kTarget = " + quoted(s.target) + ";\n";
  if (cpu) {
    h += "  /// The LLVM cpu the code was compiled for and the ISA features it may use.\n";
    h += "  static constexpr const char* kHostCpu = " + quoted(s.hostCpu) + ";\n";
    h += "  static std::vector<std::string> hostFeatures() {\n    return {";
    for (size_t i = 0; i < s.hostFeatures.size(); ++i) h += (i ? ", " : "") + quoted(s.hostFeatures[i]);
    h += "};\n  }\n";
  }
  h += "\n  /// The kernel's parameters as the compiler declared them: " + sig.str() + ".\n";
  h += "  static tessera::KernelSignature signature() {\n" + signatureBody(sig) + "  }\n\n";
  h += "  /// What Device::load takes: the signature and the code.\n";
  h += "  static tessera::KernelBinary binary() {\n" + binaryBody(b, s) + "  }\n\n";
  h += cpu ? "  /// Loads the kernel on a CPU device; a DeviceError names the ISA features\n"
             "  /// this host lacks, if any.\n"
           : "  /// Loads the kernel on a " + std::string(b.format == KernelBinary::Format::PTX ? "CUDA" : "HIP") +
                 " device (a DeviceError if the driver rejects it).\n";
  h += "  static tessera::rt::Kernel load(const tessera::rt::Device& device) {\n";
  if (cpu) h += "    tessera::rt::requireHostFeatures(" + quoted(sig.kernelName) + ", kHostCpu, hostFeatures());\n";
  h += "    return device.load(binary());\n  }\n\n";
  h += "  /// Launches on `grid`; the runtime checks every argument against signature().\n";
  h += "  static void launch(const tessera::rt::Kernel& kernel, tessera::rt::Dim3 grid";
  for (size_t i = 0; i < sig.args.size(); ++i)
    h += std::string(", ") +
         (sig.args[i].kind == ArgSpec::Kind::Pointer ? "const tessera::rt::Buffer&" : scalarCType(sig.args[i].dtype)) +
         " " + names[i];
  h += ",\n                     const tessera::rt::LaunchOptions& options = {}) {\n    kernel.launch(grid, {";
  for (size_t i = 0; i < names.size(); ++i) h += (i ? ", " : "") + names[i];
  h += "}, options);\n  }\n};\n\n}  // namespace tessera_aot\n";
  return h;
}

}  // namespace tessera::codegen
