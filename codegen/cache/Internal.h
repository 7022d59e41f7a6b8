// Shared by the files of the persistent cache (codegen/cache/): the store,
// its settings, the explanation of a miss and the compile cache. Private to
// codegen.
#pragma once

#include <string>

namespace tessera::codegen::cache {

/// "tessera: warning: compile cache: MESSAGE" on stderr, the first time
/// `what` (a folder, an entry) has a problem in this process.
void warnOnce(const std::string& what, const std::string& message);

/// A hit whose payload turned out unusable: counted as rejected and a miss.
void hitRejected();

/// `s` without the spaces at its start and end.
inline std::string trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace tessera::codegen::cache
