// The optimised LLVM module an artifact keeps (codegen::KeptModule, opaque
// in the public header): the module exactly as it was handed to the code
// generator, with the context that owns it. Assembly on demand and the
// emulator start from a copy of it; nothing is printed and re-parsed.
#pragma once

#include <memory>
#include <mutex>

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include "tessera/support/Error.h"

namespace tessera::codegen {

struct KeptModule {
  /// An LLVMContext is not thread-safe: users hold `mu`, and generate code
  /// from a copy (emitFile copies), never from `module` itself.
  std::mutex mu;
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
};

/// Keeps a copy of `m`, which lives in `*ctx`; takes the context over (the
/// caller's modules in it must be destroyed before the returned object).
inline std::shared_ptr<KeptModule> keepModule(const llvm::Module& m, std::unique_ptr<llvm::LLVMContext>& ctx) {
  auto k = std::make_shared<KeptModule>();
  k->module = llvm::CloneModule(m);
  k->context = std::move(ctx);
  return k;
}

/// An exact copy of `m` in the context `ctx` (modules cannot be cloned across
/// contexts directly: the copy goes through in-memory bitcode).
inline std::unique_ptr<llvm::Module> copyToContext(const llvm::Module& m, llvm::LLVMContext& ctx) {
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::WriteBitcodeToFile(m, os);
  auto r = llvm::parseBitcodeFile(llvm::MemoryBufferRef(llvm::StringRef(buf.data(), buf.size()), "kept"), ctx);
  if (!r) throw InternalError("copying the kept module: " + llvm::toString(r.takeError()));
  return std::move(*r);
}

}  // namespace tessera::codegen
