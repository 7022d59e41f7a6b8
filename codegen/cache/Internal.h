// Shared by the store and the compile cache (codegen/cache/). Private to codegen.
#pragma once

#include <string>

namespace tessera::codegen::cache {

/// "tessera: warning: compile cache: MESSAGE" on stderr, the first time
/// `what` (a folder, an entry) has a problem in this process.
void warnOnce(const std::string& what, const std::string& message);

/// A hit whose payload turned out unusable: counted as rejected and a miss.
void hitRejected();

}  // namespace tessera::codegen::cache
