#include "tessera/support/Error.h"

namespace tessera {

void internalError(const char* cond, const char* file, int line, const std::string& msg) {
  throw InternalError(std::string("internal compiler error at ") + file + ":" + std::to_string(line) + ": " + msg +
                      " (failed: " + cond + "); please report this as a Tessera bug");
}

}  // namespace tessera
