// The process-wide ORC JIT (CPU kernels, emulated GPU kernels and the math
// test harness all link into it), and host code generation (TargetMachine,
// optimisation pipeline, object code, assembly text).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <llvm/ExecutionEngine/Orc/Shared/ExecutorAddress.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/llvm/HostIsa.h"

namespace tessera::codegen::cpu {

/// A TargetMachine for `t` at LLVM optimisation level 0..3.
std::unique_ptr<llvm::TargetMachine> createTargetMachine(const CpuTargetInfo& t, int optLevel);

/// A per-thread cached TargetMachine for `t` at `optLevel` (never shared
/// between threads, so code generation through it needs no lock).
llvm::TargetMachine& cachedTargetMachine(const CpuTargetInfo& t, int optLevel);

/// Runs LLVM's default new-pass-manager pipeline at `optLevel`.
void optimizeModule(llvm::Module& m, llvm::TargetMachine& tm, int optLevel);

/// The optimisation pipeline for kernels made by lowerToLLVM: a short
/// fixed pipeline for optLevel >= 1 (see CpuJIT.cpp for why), LLVM's O0
/// pipeline for 0.
void optimizeKernel(llvm::Module& m, llvm::TargetMachine& tm, int optLevel);

/// The optimisation level of the TargetMachine that produces on-demand
/// assembly (the default CompileOptions::optLevel).
constexpr int kAssemblyOptLevel = 3;

/// Host assembly text of `m` (the module is left untouched: codegen runs on
/// a clone).
std::string emitAssembly(const llvm::Module& m, llvm::TargetMachine& tm);

struct JitResult {
  llvm::orc::ExecutorAddr entry;  // entry.toPtr<F>() for the entry's type
  std::shared_ptr<void> owner;    // removes the kernel's code when released
};

/// Native object code of `m` (code generation runs on a copy).
std::unique_ptr<llvm::MemoryBuffer> emitObject(llvm::Module& m, llvm::TargetMachine& tm);

/// emitObject through the code generator pipeline the thread keeps for
/// `tm` (emitFileReusingPipeline): `m` is consumed, and `tm` must be one
/// the thread keeps (cachedTargetMachine).
std::unique_ptr<llvm::MemoryBuffer> emitObjectReusingPipeline(llvm::Module& m, llvm::TargetMachine& tm);

/// Links an object file made by emitObject into the process's JIT, in a
/// JITDylib of its own that also defines `symbols` (name -> address: hooks
/// the object calls, bound explicitly so the executable need not export
/// them), and looks up `entryName`. Thread-safe.
JitResult jitObject(std::unique_ptr<llvm::MemoryBuffer> obj, const std::string& entryName,
                    const std::vector<std::pair<std::string, void*>>& symbols = {});

}  // namespace tessera::codegen::cpu
