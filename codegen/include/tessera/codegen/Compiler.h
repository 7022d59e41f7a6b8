// The codegen entry point: tile IR in, a compiled artifact plus every
// intermediate stage out. No LLVM header appears here; LLVM objects stay
// behind the artifact's opaque owner handle.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/codegen/Target.h"
#include "tessera/ir/IR.h"

namespace tessera::codegen {

struct CompileOptions {
  int optLevel = 3;        // LLVM optimisation level 0..3
  bool dumpAssembly = false;  // also produce host assembly eagerly (otherwise on demand)
  /// GPU targets: warps per block (threads per block = numWarps x warp size).
  int numWarps = 4;
  /// AMDGPU code-object version (4, 5 or 6); 5 is what ROCm 6 runtimes load.
  int codeObjectVersion = 5;
  /// CPU target: test every global memory access against the extent of its
  /// buffer at run time (a checked launch, tessera/support/BoundsCheck.h).
  /// The emulator always checks; real GPUs ignore it.
  bool checkBounds = false;
  /// emu: targets: addresses of the SIMT machine's `tessera_emu_*` hooks, by
  /// symbol name (tessera::emu::hookSymbols()). Supplied by the caller so
  /// codegen does not depend on the runtime; not part of the cache key.
  std::vector<std::pair<std::string, void*>> emuHooks;
};

/// What the SIMT emulator needs to run an emu: artifact.
struct EmuEntry {
  /// The body of ONE GPU thread; args as CUDA kernelParams.
  void (*threadFn)(void* const* args) = nullptr;
  unsigned warpSize = 32;
  bool amd = false;
  size_t staticSharedBytes = 0;    // shared memory laid out from offset 0
  size_t dynamicSharedOffset = 0;  // where dynamic shared memory starts
};

/// The stages a compile produces, in pipeline order. Tile IR is captured
/// after every pass, named by the pass; the last capture is the final IR.
struct StageDumps {
  std::vector<std::pair<std::string, std::string>> tileIR;  // (pass name, IR text)
  std::string llvm;      // LLVM IR as first emitted
  std::string llvmOpt;   // after LLVM's optimisation pipeline
  std::string assembly;  // host assembly / PTX / AMDGCN (may be filled on demand)
  std::map<std::string, std::string> extra;  // target-specific stages (sass, resources, ...)
};

/// Entry point of a CPU kernel: runs the programs with linear ids
/// [begin, end) of a grid {gx, gy, gz}; x varies fastest. `args[i]` points
/// at the i-th argument's value (a device pointer or a scalar), exactly as
/// CUDA's kernelParams.
using CpuEntryFn = void (*)(void* const* args, int64_t begin, int64_t end, const int32_t* grid);

struct Artifact {
  Target target;
  std::string kernelName;
  StageDumps dumps;
  CpuEntryFn cpuEntry = nullptr;
  /// Bounds-checked CPU code (CompileOptions::checkBounds): the entry takes a
  /// BoundsCheckRecord after the arguments.
  bool boundsChecked = false;
  /// opId -> "op @ file:line": the ops run-time reports name (the emulator's
  /// races and bounds, checked CPU launches).
  std::vector<std::string> opNames;
  /// CPU targets the host cannot execute (cpu:x86-64-v4 on an AVX2 host):
  /// why, and cpuEntry stays null; the stages can still be inspected.
  std::string notRunnable;
  /// GPU targets: the PTX text (NVPTX) or the linked .hsaco (AMDGPU), the
  /// block size the kernel was compiled for, and the shared memory it uses.
  /// NVPTX kernels take sharedBytes as dynamic shared memory at launch;
  /// AMDGPU code objects hold it as static LDS (launch with 0 dynamic).
  std::string ptx;
  std::vector<char> codeObject;
  unsigned threadsPerBlock = 0;
  unsigned sharedBytes = 0;
  /// emu: targets only.
  EmuEntry emu;
  /// Keeps the JIT (or other owner of the code) alive while the artifact lives.
  std::shared_ptr<void> owner;
  /// Produces the assembly stage on demand for artifacts compiled without it.
  std::string assembly() const;
};

/// Compiles a verified kernel for `target`. Throws VerifyError, CompileError,
/// ResourceError or DeviceError (toolchain missing) with actionable messages.
std::shared_ptr<Artifact> compile(const ir::Function& kernel, const Target& target,
                                  const CompileOptions& opts = {});

/// The GPU lowering's first stage on its own (for `tessera opt`): checks
/// opts.numWarps against `target` (a GPU or emu: target), runs the axis and
/// layout analyses and writes each tile value's layout into `f` as a
/// `layout` attribute, as the `layout` dump of a compile shows it.
void annotateGpuLayouts(ir::Function& f, const Target& target, const CompileOptions& opts = {});

/// A resource report of a compiled artifact: for NVPTX registers, spills and
/// shared memory from ptxas -v (DeviceError if ptxas is absent); for AMDGPU
/// SGPRs/VGPRs, LDS, scratch and an occupancy estimate read back from the code
/// object; for the CPU the ISA and the compile-stage times.
std::string resourceReport(const Artifact& a);
/// SASS for an NVPTX artifact: needs the CUDA toolkit's nvdisasm or
/// cuobjdump (DeviceError naming what is missing otherwise).
std::string sass(const Artifact& a);

/// The host's vector ISA as detected at run time (narrowed by
/// TESSERA_HOST_CPU): "avx512", "avx2" or "sse2".
std::string hostIsa();
/// Why this host cannot execute code compiled for `target` ("" when it can,
/// and for every non-CPU target): e.g. cpu:x86-64-v4 on an AVX2-only host.
std::string cannotRunOnHost(const Target& target);

}  // namespace tessera::codegen
