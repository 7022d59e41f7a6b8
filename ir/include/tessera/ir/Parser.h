// Parser: reads the textual form written by Printer. Errors throw ParseError
// naming the buffer name, line and column of the offending token.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tessera/ir/IR.h"

namespace tessera::ir {

/// Parses one or more kernels. `bufferName` is used in error messages.
std::unique_ptr<Module> parseModule(std::string_view text, const std::string& bufferName = "<input>");

}  // namespace tessera::ir
