// Process-wide LLVM set-up and llvm::Error plumbing shared by the backends.
// Private to codegen: includes LLVM headers.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <type_traits>

#include <llvm/Support/CodeGen.h>
#include <llvm/Support/Error.h>

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

#include "tessera/support/Error.h"

namespace tessera::codegen {

/// Initialises the native target, its asm printer/parser, and installs a
/// fatal-error handler that throws InternalError instead of aborting.
/// Idempotent and thread-safe.
void initLLVM();

/// Wall-clock time of each compile stage, reported in
/// dumps.extra["compile-times"] as "stage 1.23 ms" lines.
struct StageTimer {
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  std::string log;
  void mark(const char* stage);
};

/// The textual form of a module (for the LLVM stages of the dumps).
std::string printModule(const llvm::Module& m);

/// Runs LLVM's default per-module pipeline for optLevel 0..3; `vectorize`
/// turns the loop and SLP vectorisers on or off (nullopt: LLVM's defaults).
/// (PassBuilder.h stays out of this widely included header.)
void runDefaultPipeline(llvm::Module& m, llvm::TargetMachine& tm, int optLevel,
                        std::optional<bool> vectorize = std::nullopt);

/// Runs a fixed new-PM pipeline given in textual form (the backends' short
/// kernel pipelines); a pipeline that does not parse is an InternalError.
void runPipeline(llvm::Module& m, llvm::TargetMachine& tm, const char* pipeline);

/// Runs the code generator of `tm` on a copy of `m` (code generation mutates
/// the module it runs on; `m` is left as it was) and returns the file:
/// assembly text (host assembly, PTX, AMDGCN) or object code.
std::string emitFile(const llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType kind);

/// emitFile for the GPU compiles: runs on `m` itself, which it consumes (code
/// generation mutates the module; the caller drops it afterwards), through a
/// code generator pipeline the calling thread keeps per TargetMachine and
/// file kind. Building and tearing down the legacy pass pipeline (about 200
/// passes, the machine-module info, the object streamer) was a fifth of a
/// small kernel's AMDGPU code generation. `tm` must outlive the thread's use
/// of it (the GPU TargetMachines are kept per thread: cachedGpuTargetMachine).
/// A run that throws drops the kept pipeline. TESSERA_FRESH_CODEGEN=1 builds
/// a fresh one for every call (to rule the reuse out when chasing a bug).
std::string emitFileReusingPipeline(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType kind);

/// Consumes an llvm::Error: returns normally on success, otherwise throws
/// E (CompileError by default) with `what` and LLVM's message.
template <typename E = CompileError>
void check(llvm::Error err, const std::string& what) {
  if (err) throw E(what + ": " + llvm::toString(std::move(err)));
}

template <typename E = CompileError, typename T>
T check(llvm::Expected<T> v, const std::string& what) {
  if (!v) throw E(what + ": " + llvm::toString(v.takeError()));
  if constexpr (std::is_reference_v<T>)
    return *v;
  else
    return std::move(*v);
}

}  // namespace tessera::codegen
