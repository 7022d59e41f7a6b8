// The codegen entry point: tile IR in, a compiled artifact plus every
// intermediate stage out. No LLVM header appears here; LLVM objects stay
// behind the artifact's opaque owner handle.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/codegen/Target.h"
#include "tessera/ir/IR.h"
#include "tessera/support/Binary.h"

namespace tessera::codegen {

/// How float math is computed (docs/math.md states each choice's error).
enum class Precision {
  /// The default: IEEE division and square root, Tessera's own f32
  /// polynomials for exp/log/tanh/erf (<= 2-4 ulp on every target), no
  /// contraction of a * b + c into an FMA unless written as fma.
  Accurate,
  /// The GPU's hardware approximations, as Triton uses them: NVPTX
  /// ex2.approx / lg2.approx for exp, exp2, log, log2, sqrt.approx,
  /// rsqrt.approx, div.full; AMDGPU v_exp_f32, v_log_f32, v_sqrt_f32,
  /// v_rsq_f32 and division by v_rcp_f32; and a * b + c contracted into
  /// FMAs. f32 only (f16/bf16 compute in f32); f64 and the CPU stay accurate.
  Approximate,
};
const char* name(Precision p);  // "accurate", "approx"
/// Parses "accurate" or "approx"; a UsageError names the choices otherwise.
Precision parsePrecision(const std::string& s);

struct CompileOptions {
  int optLevel = 3;           // LLVM optimisation level 0..3
  bool dumpAssembly = false;  // also produce host assembly eagerly (otherwise on demand)
  /// GPU targets: warps per block (threads per block = numWarps x warp size).
  int numWarps = 4;
  /// NVIDIA sm_90 and later (and their emu: targets): programs per
  /// thread-block cluster along grid axes 0, 1, 2 (docs/dsl.md, "Clusters").
  /// The programs of a cluster are launched together and reach each other's
  /// shared buffers (ts::TileBuffer::remote); every launch's grid must be a
  /// multiple of it. At most the target's maxClusterBlocks (Targets.def) in
  /// all; {1, 1, 1} (no cluster) on every target.
  std::array<int, 3> cluster = {1, 1, 1};
  /// AMDGPU code-object version (4, 5 or 6); 5 is what ROCm 6 runtimes load.
  int codeObjectVersion = 5;
  /// Test every global memory access against the extent of its buffer at
  /// run time (a checked launch, tessera/support/BoundsCheck.h), on CPU and
  /// GPU targets (codegen/gpu/LowerChecks.cpp: also shared slot indices).
  bool checkBounds = false;
  /// Probes in the kernel (a profiled launch, tessera/support/Profile.h):
  /// the scopes the user wrote (ts::profile_scope) and the automatic ones
  /// (ir/passes/InsertProbes.cpp) record each warp's time at their begin
  /// and end. Off: the user's scopes are removed first and the code is as
  /// without them. Profiled compiles are not kept in the disk cache.
  bool profile = false;
  /// Accurate math (default) or the GPU's hardware approximations.
  /// TESSERA_PRECISION=approx|accurate and `--precision` on the command
  /// line set it too.
  Precision precision = Precision::Accurate;
  /// sm_90a: async copies of a tiled box of global memory (the pipelined
  /// GEMM's slots) are TMA tensor copies completing on mbarriers, their
  /// tensor maps built by the launch (docs/gpu.md). Off: cp.async, the
  /// sm_80 path. TESSERA_TENSOR_COPIES=0 turns it off too.
  bool tensorCopies = true;
  /// GPU targets: masked global loads and stores without a branch, where
  /// the target has a form for them (NVPTX: predicated ld/st.global;
  /// AMDGPU: raw buffer accesses, for pointers a uniform base plus offsets
  /// of a proven range; docs/gpu.md, "Masked accesses"). Off: a branch
  /// around each access. TESSERA_PREDICATED_ACCESSES=0 turns it off too.
  bool predicatedAccesses = true;
  /// CPU targets: bf16 and i8 dots on the cpu's x86 AMX matrix tiles where
  /// it has them (and the OS grants their state); off: the vector kernel,
  /// as on a cpu without them (docs/targets/cpu.md). TESSERA_CPU_TILES=0
  /// turns it off too.
  bool cpuTiles = true;
  /// ts::dot_scaled on a target without a block-scaled matrix instruction
  /// (every target today) runs decomposed: its operands decoded and scaled
  /// into bf16, then a bf16 dot (docs/dot_scaled.md). The compile's
  /// warnings say so, naming the line, the target and the cost; with this
  /// set that is a CompileError instead.
  bool nativeScaledDotsOnly = false;
  /// Results that do not depend on how programs are scheduled: a float
  /// atomic add in the kernel (whose rounding depends on the order the
  /// programs reach it) is a CompileError naming its line. Float min, max
  /// and exchange, integer atomics and the ordered combines of Tessera's
  /// schedules stay (docs/options.md, "Deterministic results").
  /// TESSERA_DETERMINISTIC=1 turns it on too.
  bool deterministic = false;
  /// emu: targets: addresses of the SIMT machine's `tessera_emu_*` hooks, by
  /// symbol name (tessera::emu::hookSymbols()). Supplied by the caller so
  /// codegen does not depend on the runtime; not part of the cache key.
  std::vector<std::pair<std::string, void*>> emuHooks;
  /// Keep this compile in (and take it from) the persistent compile cache
  /// (tessera/codegen/DiskCache.h, docs/cache.md) when the cache is on
  /// (TESSERA_CACHE, the default). Not part of any key.
  bool useDiskCache = true;
};

/// The stages a compile produces, in pipeline order. Tile IR is captured
/// after every pass, named by the pass; the last capture is the final IR.
struct StageDumps {
  std::vector<std::pair<std::string, std::string>> tileIR;  // (pass name, IR text)
  std::string llvm;                                         // LLVM IR as first emitted
  std::string llvmOpt;                                      // after LLVM's optimisation pipeline
  std::string assembly;                                     // host assembly / PTX / AMDGCN (may be filled on demand)
  std::map<std::string, std::string> extra;                 // target-specific stages (sass, resources, ...)
};

/// The optimised LLVM module a compile kept (before code generation), so
/// assembly can be produced on demand from the very module the code came
/// from. Opaque here: no LLVM header in public headers.
struct KeptModule;

struct Artifact {
  Target target;
  StageDumps dumps;
  /// What the runtime loads (tessera/support/Binary.h): the signature, the
  /// code in the target's format (host entry, PTX, code object or emulated
  /// thread), block size, shared memory, op names for reports, and the owner
  /// that keeps JIT-compiled code alive. Filled by codegen, handed to
  /// rt::Device::load as is.
  KernelBinary binary;
  /// CPU targets the host cannot execute (cpu:x86-64-v4 on an AVX2 host):
  /// why, and binary.hostEntry stays null; the stages can still be inspected.
  std::string notRunnable;
  /// Compile-time warnings ("file:line:col: warning: ..."): code that is
  /// correct but costly in a way the compiler could not fix (e.g. tiles
  /// left unpadded, ir/passes/PadTiles.cpp). The CLI prints them to stderr.
  std::vector<std::string> warnings;
  std::shared_ptr<KeptModule> kept;
  /// CPU targets the host can run: the relocatable object code the JIT
  /// linked (what the persistent cache keeps and `export` writes).
  std::string hostObject;
  /// Read back from the persistent compile cache: the binary, hostObject,
  /// warnings and target are there; the stage dumps and the kept module are
  /// not (tessera::compile recompiles on a request for a stage).
  bool fromDiskCache = false;
  const std::string& kernelName() const { return binary.signature.kernelName; }
  /// The assembly stage: eager (CompileOptions::dumpAssembly) or produced on
  /// demand from the kept module.
  std::string assembly() const;
};

/// The kernel's parameters as the runtime checks launches against them.
KernelSignature kernelSignature(const ir::Function& kernel);

/// Compiles a verified kernel for `target`. Throws VerifyError, CompileError,
/// ResourceError or DeviceError (toolchain missing) with actionable messages.
std::shared_ptr<Artifact> compile(const ir::Function& kernel, const Target& target, const CompileOptions& opts = {});

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

/// The resources a GPU kernel uses, as read back from the toolchain (what
/// resourceReport prints): ptxas -v for NVPTX (DeviceError if ptxas is
/// missing), the code object's metadata for AMDGPU; emu: targets as their
/// device target.
struct GpuResources {
  int registers = -1;        // NVPTX registers / AMDGPU VGPRs
  int sgprs = -1;            // AMDGPU only
  int64_t spillBytes = -1;   // NVPTX spill stores + loads / AMDGPU private segment
  int64_t sharedBytes = -1;  // static shared memory / group segment
  int wavefrontSize = -1;
  std::string text;  // human-readable report
};
GpuResources gpuResources(const Artifact& a);
/// SASS for an NVPTX artifact: needs the CUDA toolkit's nvdisasm or
/// cuobjdump (DeviceError naming what is missing otherwise).
std::string sass(const Artifact& a);

/// The toolchain Tessera uses, one line each: the LLVM it was built with,
/// the CUDA toolkit's ptxas version (or that none was found) and the
/// libdevice NVPTX compiles link (or that f64 math uses the polynomials).
std::string toolchainVersions();

/// The device math library compiles for `t` link: CUDA's libdevice for
/// nvptx and emu:nvptx targets where it is found (its path: TESSERA_LIBDEVICE,
/// else $CUDA_HOME, $CUDA_PATH, /usr/local/cuda), "" elsewhere (CPU, AMDGPU)
/// and without it. f64 transcendentals on GPUs call it; without it they use
/// Tessera's f64 polynomials (docs/math.md).
std::string deviceMathLibrary(const Target& t);

/// The assembler whose version the code of `t` answers to: for nvptx and
/// emu:nvptx targets the release line of the CUDA toolkit's `ptxas
/// --version` (read once per file; "none" without ptxas), "" elsewhere.
/// Part of the compile cache's key.
std::string deviceAssemblerVersion(const Target& t);

/// The host's vector ISA as detected at run time (narrowed by
/// TESSERA_HOST_CPU): "avx512", "avx2" or "sse2".
std::string hostIsa();
/// True when the host's bf16 or i8 CPU dots can run on its AMX matrix tiles
/// (the cpu has them and the OS granted their state): what
/// CompileOptions::cpuTiles uses.
bool hostMatrixTiles();
/// Why this host cannot execute code compiled for `target` ("" when it can,
/// and for every non-CPU target): e.g. cpu:x86-64-v4 on an AVX2-only host.
std::string cannotRunOnHost(const Target& target);

}  // namespace tessera::codegen
