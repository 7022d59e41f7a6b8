// The symbol of a CPU kernel's host entry (KernelBinary::HostEntry ABI):
// the JIT looks it up, exported objects define it and their generated
// headers declare it. Private to codegen.
#pragma once

#include <cctype>
#include <string>

namespace tessera::codegen::cpu {

/// "tessera_entry_" + the kernel name restricted to [A-Za-z0-9_].
inline std::string entrySymbol(const std::string& kernel) {
  std::string s = "tessera_entry_";
  for (char ch : kernel) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  return s;
}

}  // namespace tessera::codegen::cpu
