// `tessera opt`: runs named passes over textual tile IR and prints the
// result, the way LLVM's `opt` and MLIR's `*-opt` tools do, so every pass has
// golden tests of its own (tests/lit/passes/).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace tessera::tools {

struct OptRequest {
  std::string text;                 // the input (a file's contents or standard input)
  std::string bufferName;           // for locations in messages
  std::vector<std::string> passes;  // Passes.def names, and "layout" (a GPU target's layouts)
  std::string target;               // for "layout": a GPU or emu: target
  int numWarps = 4;
  bool splitInputFile = false;  // chunks separated by a line "// -----", each on its own
  bool locations = false;       // print loc(...) on ops
};

/// Runs the request, printing the IR to `out` and each chunk's error to
/// `err`. Returns 0 when every chunk succeeded, 1 otherwise. Errors other
/// than the chunks' own (a bad pass name) throw.
int runOpt(const OptRequest& r, std::ostream& out, std::ostream& err);

}  // namespace tessera::tools
