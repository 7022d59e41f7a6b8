// Process-wide LLVM set-up and llvm::Error plumbing shared by the backends.
// Private to codegen: includes LLVM headers.
#pragma once

#include <string>
#include <type_traits>

#include <llvm/Support/Error.h>

#include "tessera/support/Error.h"

namespace tessera::codegen {

/// Initialises the native target, its asm printer/parser, and installs a
/// fatal-error handler that throws InternalError instead of aborting.
/// Idempotent and thread-safe.
void initLLVM();

/// Consumes an llvm::Error: returns normally on success, otherwise throws
/// E (CompileError by default) with `what` and LLVM's message.
template <typename E = CompileError>
void check(llvm::Error err, const std::string& what) {
  if (err) throw E(what + ": " + llvm::toString(std::move(err)));
}

template <typename E = CompileError, typename T>
T check(llvm::Expected<T> v, const std::string& what) {
  if (!v) throw E(what + ": " + llvm::toString(v.takeError()));
  if constexpr (std::is_reference_v<T>) return *v;
  else return std::move(*v);
}

}  // namespace tessera::codegen
