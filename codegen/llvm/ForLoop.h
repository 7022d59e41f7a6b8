// The loop skeleton both lowerings give a tile-IR `for`, so its semantics
// live in one place: a non-positive step runs zero iterations (tested once,
// before the loop), and `iv + step` overflowing exits the loop (the wrap
// would otherwise restart it). Carried values are the caller's: it adds its
// phis at the header, or keeps them in memory.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace tessera::codegen {

struct ForLoop {
  llvm::BasicBlock *pre = nullptr, *header = nullptr, *body = nullptr, *exit = nullptr;
  llvm::PHINode* iv = nullptr;
  llvm::Value* positive = nullptr;  // step > 0

  /// Creates the blocks and branches to the header; the insertion point is
  /// left in the header after the iv phi (carried phis go there).
  static ForLoop open(llvm::IRBuilderBase& b, llvm::Value* lo, llvm::Value* step);
  /// Ends the header: the body runs while step > 0 and iv < hi. The
  /// insertion point moves to the body.
  void enterBody(llvm::IRBuilderBase& b, llvm::Value* hi);
  /// Ends the body at the current block (returned: the latch, where carried
  /// phis take their next values) with iv += step and the back edge. The
  /// insertion point moves to the exit.
  llvm::BasicBlock* close(llvm::IRBuilderBase& b, llvm::Value* step);
};

}  // namespace tessera::codegen
