// Compiles a GPU-lowered LLVM module (NVPTX or AMDGPU) for the host so the
// SIMT machine (tessera::emu, runtime/include/tessera/runtime/Emulator.h) can
// run it: the exact module handed to the GPU backend, with its vendor
// intrinsics, shared/LDS memory and address spaces rewritten onto the
// machine's `tessera_emu_*` hooks, JIT-compiled with ORC.
//
// Private to codegen (LLVM-free header, but not a public API). codegen does
// not link the emulator runtime: the caller supplies the hook addresses
// (tessera::emu::hookSymbols()), which the JIT binds explicitly by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace tessera {
struct GpuArch;
}  // namespace tessera

namespace tessera::codegen {

struct EmuKernel {
  /// The kernel body of ONE GPU thread: `args[i]` points at the value of the
  /// kernel's i-th parameter (CUDA kernelParams). This is emu::ThreadFn.
  void (*threadFn)(void* const*) = nullptr;
  /// Keeps the JIT-compiled code alive.
  std::shared_ptr<void> owner;
  /// opId -> "tile op @ file:line" (or the instruction's text): pass as
  /// LaunchConfig::opNames so reports name the op.
  std::vector<std::string> opNames;
  unsigned warpSize = 32;
  bool amd = false;
  /// The rewritten host module after optimisation (for dumps and debugging).
  std::string hostIR;
  /// Name of the GPU kernel the module defined.
  std::string kernelName;
  /// Bytes of statically allocated shared memory (addrspace(3) globals), laid
  /// out from offset 0 of the block's shared region. Dynamic shared memory
  /// (`extern __shared__` / zero-sized LDS arrays) starts at
  /// `dynamicSharedOffset`; LaunchConfig::sharedBytes must be at least
  /// dynamicSharedOffset + the dynamic bytes the launch uses, and at least
  /// staticSharedBytes.
  size_t staticSharedBytes = 0;
  size_t dynamicSharedOffset = 0;
  /// The kernel's "nvvm.cluster_dim" (blocks per cluster along x, y, z),
  /// for LaunchConfig::cluster; {1, 1, 1} when it has none.
  uint32_t cluster[3] = {1, 1, 1};
  /// Memory accesses through flat/generic pointers whose address space could
  /// not be proven: they run correctly but are not checked for races and
  /// bounds. Zero for modules whose accesses are all in addrspace(1)/(3).
  unsigned uncheckedAccesses = 0;
};

/// Compiles `gpuModuleText` (textual LLVM IR for nvptx64-nvidia-cuda when
/// !amd, amdgcn-amd-amdhsa when amd, defining exactly one kernel) for the
/// host. `hooks` maps every `tessera_emu_*` symbol to its address.
/// `row`: the module's architecture (Targets.def), where known; the
/// instructions whose meaning depends on it (the fp8 MFMAs, FNUZ on gfx942,
/// OCP on gfx950: its fp8Mfma column) are a CompileError without it.
/// Throws CompileError for a module the machine cannot run faithfully (an
/// unsupported intrinsic or construct, named in the message), InternalError
/// if the rewritten module does not verify.
EmuKernel compileForEmulator(const std::string& gpuModuleText, bool amd, unsigned warpSize,
                             const std::vector<std::pair<std::string, void*>>& hooks, const GpuArch* row = nullptr);
/// The same for a module in memory compiled for architecture `row` (its
/// vendor and warp size too; `gpuModule` lives in `ctx`; both are consumed:
/// the module is rewritten in place and the JIT owns the context). The
/// compiler hands its GPU module over this way, never as text.
/// `firstOpNames`: the op names the module's own ids index (a bounds-checked
/// compile's, GpuLoweringResult::checkedOps): opNames starts with them.
EmuKernel compileForEmulator(std::unique_ptr<llvm::Module> gpuModule, std::unique_ptr<llvm::LLVMContext> ctx,
                             const GpuArch& row, const std::vector<std::pair<std::string, void*>>& hooks,
                             std::vector<std::string> firstOpNames = {});

}  // namespace tessera::codegen
