// The compile pipeline, linear and logged: every stage's text is kept in
// the artifact's dumps.
//
//   verify -> clone -> tile-IR passes (dump after each) -> lower to LLVM IR
//   -> verify LLVM IR -> LLVM optimisation -> JIT (CPU) -> assembly (on demand)
#include "tessera/codegen/Compiler.h"

#include <chrono>
#include <cstdio>
#include <optional>

#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/llvm/Jit.h"
#include "codegen/emu/EmuCompile.h"
#include "codegen/GpuTargets.h"
#include "codegen/cpu/CpuLowering.h"
#include "codegen/cpu/EntrySymbol.h"
#include "codegen/llvm/HostIsa.h"
#include "codegen/llvm/KeptModule.h"
#include "codegen/llvm/LLVMSupport.h"
#include "tessera/ir/Atomics.h"
#include "tessera/ir/Pass.h"
#include "tessera/ir/Printer.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

const char* name(Precision p) { return p == Precision::Approximate ? "approx" : "accurate"; }

Precision parsePrecision(const std::string& s) {
  if (s == "accurate") return Precision::Accurate;
  if (s == "approx") return Precision::Approximate;
  throw UsageError("unknown precision '" + s + "' (expected accurate or approx)");
}

KernelSignature kernelSignature(const ir::Function& f) {
  KernelSignature sig;
  sig.kernelName = f.name();
  for (unsigned i = 0; i < f.numArgs(); ++i) {
    const ir::Value* a = f.arg(i);
    ArgSpec spec;
    spec.kind = a->type().isPointer() ? ArgSpec::Kind::Pointer : ArgSpec::Kind::Scalar;
    spec.dtype = a->type().dtype();
    spec.name = a->nameHint.empty() ? "arg" + std::to_string(i) : a->nameHint;
    sig.args.push_back(std::move(spec));
  }
  return sig;
}

namespace {
void compileCpu(const ir::Function& f, const Target& target, const CompileOptions& opts, Artifact& art,
                StageTimer& timer) {
  if (opts.optLevel < 0 || opts.optLevel > 3)
    throw CompileError("optLevel must be 0..3, got " + std::to_string(opts.optLevel));
  CpuTargetInfo t = selectCpuTarget(target.arch);
  if (!opts.cpuTiles) t.amxBf16 = t.amxInt8 = false;
  art.dumps.extra["cpu"] = t.isa + " (" + t.cpu + ", " + std::to_string(t.lanes) + " lanes)";
  initLLVM();
  llvm::TargetMachine& tm = cpu::cachedTargetMachine(t, opts.optLevel);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::string entry = cpu::entrySymbol(f.name());
  auto mod =
      cpu::lowerToLLVM(f, *ctx, t, tm.createDataLayout(), entry, opts.checkBounds ? &art.binary.opNames : nullptr,
                       &art.binary.hostStackBytes, opts.profile ? &art.binary.profileScopes : nullptr);
  art.binary.format = KernelBinary::Format::HostFunction;
  art.binary.boundsChecked = opts.checkBounds;
  if (opts.profile) {
    art.binary.profiled = true;
    art.binary.profileWarps = 1;  // a program is one thread
    art.binary.profileClock = KernelBinary::ProfileClock::TimeStampCounter;
  }
  timer.mark("lower");
  art.dumps.llvm = printModule(*mod);
  timer.mark("print-llvm");
  {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    if (llvm::verifyModule(*mod, &os))
      throw InternalError("CPU lowering of @" + f.name() + " produced invalid LLVM IR:\n" + msg);
  }
  timer.mark("verify-llvm");
  cpu::optimizeKernel(*mod, tm, opts.optLevel);
  timer.mark("optimize");
  art.dumps.llvmOpt = printModule(*mod);
  timer.mark("print-llvm-opt");
  if (opts.dumpAssembly) art.dumps.assembly = cpu::emitAssembly(*mod, tm);
  // Code generation mutates the module: assembly on demand starts from a copy.
  art.kept = keepModule(*mod, ctx);
  if (!t.notRunnable.empty()) {
    // Compiled for inspection only (e.g. AVX-512 code on an AVX2 host):
    // running it would fault on an illegal instruction.
    art.notRunnable = t.notRunnable;
    return;
  }
  auto obj = cpu::emitObjectReusingPipeline(*mod, tm);  // the thread's TargetMachine; the module is done with
  timer.mark("codegen");
  art.hostObject.assign(obj->getBufferStart(), obj->getBufferSize());
  auto jit = cpu::jitObject(std::move(obj), entry);
  art.binary.hostEntry = jit.entry.toPtr<KernelBinary::HostEntry>();
  art.binary.owner = jit.owner;
  timer.mark("link");
  art.dumps.extra["compile-times"] = timer.log;
}
// NVPTX and AMDGPU go through the shared GPU lowering; emu: targets take the
// very module handed to the GPU backend and run it on the SIMT machine.
std::shared_ptr<Artifact> compileGpuTarget(const ir::Function& f, const GpuConfig& c, const CompileOptions& opts,
                                           StageDumps dumps) {
  const Target& target = c.target;
  auto art = compileGpu(createGpuTargetInfo, f, c, opts, std::move(dumps));
  if (target.kind == Target::Kind::NVPTX || target.kind == Target::Kind::AMDGPU) return art;
  const bool amd = c.row->vendor == GpuArch::Vendor::AMD;
  art->target = target;
  if (opts.emuHooks.empty())
    throw CompileError("target " + target.str() +
                       " needs the SIMT emulator's hooks (compile it through "
                       "tessera::compile for an emulator device)");
  TS_ASSERT(art->kept, "GPU compile kept no module");
  // The emulator rewrites its module and its JIT owns the context: it gets
  // its own copy of the module the GPU backend was handed.
  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> gpuModule;
  {
    std::lock_guard<std::mutex> lock(art->kept->mu);
    gpuModule = copyToContext(*art->kept->module, *ctx);
  }
  EmuKernel k = compileForEmulator(std::move(gpuModule), std::move(ctx), *c.row, opts.emuHooks, art->binary.opNames);
  KernelBinary& b = art->binary;
  b.format = KernelBinary::Format::EmulatedGpu;
  b.emuThread = k.threadFn;
  b.opNames = std::move(k.opNames);
  b.emuWarpSize = k.warpSize;
  b.emuAmd = amd;
  if (b.profiled) b.profileClock = KernelBinary::ProfileClock::EmulatorOps;  // tessera_emu_clock
  b.emuStaticSharedBytes = k.staticSharedBytes;
  b.emuDynamicSharedOffset = k.dynamicSharedOffset;
  art->dumps.extra["emu-host-llvm"] = std::move(k.hostIR);
  b.owner = k.owner;
  return art;
}
}  // namespace

namespace {
// Block-scaled matrix instructions: sm_120a's mma.sync block_scale takes
// the MX formats and NVFP4 x NVFP4, gfx950's scaled MFMA fp8 and fp4
// (gpuScaledDotNative, which the vendor's tensor-core table answers);
// sm_100a's tcgen05 block-scaled kinds have no lowering yet. Every other
// dot_scaled runs as its decomposition (the decompose-scaled-dots pass),
// which the compile says.
ir::ScaledDotForm nativeScaledDot(const GpuConfig* gc, const ir::Op& op) {
  return gc ? gpuScaledDotNative(createGpuTargetInfo, *gc, op) : ir::ScaledDotForm::Decomposed;
}

// The decomposition is never silent: each dot_scaled the target runs
// decomposed is a warning naming the user's line, the target and the cost,
// or with CompileOptions::nativeScaledDotsOnly a CompileError. The cost is
// the native rate the decomposition gives up: block-scaled fp4 x fp4 runs
// at 4x bf16's rate on the targets that have it, every other pair (fp8,
// fp6, fp8 x fp4) at 2x.
void scaledDotWarnings(ir::Function& f, const Target& target, const GpuConfig* gc, const CompileOptions& opts,
                       std::vector<std::string>& warnings) {
  ir::walk(f.body(), [&](ir::Op& op) {
    if (op.code() != ir::OpCode::DotScaled) return;
    const std::string& a = op.strAttr("a_format");
    const std::string& b = op.strAttr("b_format");
    if (nativeScaledDot(gc, op) != ir::ScaledDotForm::Decomposed) return;
    auto fp4 = [](const std::string& x) { return x == "mxfp4" || x == "nvfp4"; };
    const std::string what =
        "dot_scaled " + a + " x " + b + " on " + target.str() +
        " runs decomposed as a bf16 dot (no block-scaled matrix instruction lowers this pair on the target): ~" +
        (fp4(a) && fp4(b) ? "4" : "2") + "x below a native target";
    if (opts.nativeScaledDotsOnly)
      throw CompileError(op.loc().str() + ": error: " + what + " (CompileOptions::nativeScaledDotsOnly is set)");
    warnings.push_back(op.loc().str() + ": warning: " + what);
  });
}

// Under CompileOptions::deterministic: a float atomic add sums in the
// order the programs (or lanes) reach it, which varies from run to run
// and with the thread count and the grid, and so does its rounding. Min,
// max and exchange of floats are order-free in value (the last exchange
// wins a race either way, which is the kernel's own logic); integer
// atomics are exact.
void deterministicCheck(const ir::Function& f, const CompileOptions& opts) {
  if (!opts.deterministic) return;
  ir::walk(const_cast<ir::Function&>(f).body(), [&](ir::Op& op) {
    if (op.code() != ir::OpCode::AtomicRmw || ir::atomicKind(op) != ir::AtomicKind::Add) return;
    const DType d = op.result()->type().dtype();
    if (!isFloat(d)) return;
    throw CompileError(op.loc().str() + ": error: atomic_add on " + name(d) +
                       " is refused under CompileOptions::deterministic (TESSERA_DETERMINISTIC): the order of the "
                       "additions, and so the rounding of the sum, varies from run to run; write the partial sums "
                       "to a buffer and combine them in a fixed order (or accumulate in an integer type)");
  });
}
}  // namespace

namespace {
/// A cluster shape the target launches: NVIDIA's thread-block clusters,
/// from sm_90 on, of at most the row's maxClusterBlocks programs. Kernels
/// using the cluster ops compile for every target as clusters of one.
void clusterCheck(const ir::Function& f, const Target& target, const GpuConfig* gc, const CompileOptions& o) {
  const std::array<int, 3>& c = o.cluster;
  const std::string shape =
      "{" + std::to_string(c[0]) + ", " + std::to_string(c[1]) + ", " + std::to_string(c[2]) + "}";
  const std::string what = "kernel @" + f.name() + ": CompileOptions::cluster " + shape;
  for (int d : c)
    if (d < 1) throw CompileError(what + ": every dimension is a count of programs, at least 1");
  const int64_t n = int64_t{c[0]} * c[1] * c[2];
  if (n == 1) return;
  const int most = gc ? gc->row->maxClusterBlocks : 0;
  if (most == 0)
    throw CompileError(what + " on " + target.str() +
                       ", which has no thread-block clusters (NVIDIA sm_90 and later have them); compile it with "
                       "{1, 1, 1} there: the cluster ops then see clusters of one program");
  if (n > most)
    throw CompileError(what + " is " + std::to_string(n) + " programs; " + target.str() + " takes at most " +
                       std::to_string(most) + " per cluster");
}

/// Whether `f` holds an op of `code` (the passes only some kernels need).
bool contains(ir::Function& f, ir::OpCode code) {
  bool found = false;
  ir::walk(f.body(), [&](ir::Op& op) { found |= op.code() == code; });
  return found;
}
}  // namespace

std::shared_ptr<Artifact> compile(const ir::Function& kernel, const Target& target, const CompileOptions& opts) {
  StageTimer timer;
  ir::verify(kernel);  // user errors surface here, unchanged
  deterministicCheck(kernel, opts);
  auto art = std::make_shared<Artifact>();
  art->target = target;
  art->binary.signature = kernelSignature(kernel);
  art->binary.symbol = kernel.name();
  std::unique_ptr<ir::Function> f = ir::clone(kernel);
  art->dumps.tileIR.emplace_back("input", ir::print(*f));
  // A GPU target's one configuration (warps, warp size, vendor, limits),
  // which every GPU question of the passes and the compile reads.
  std::optional<GpuConfig> gpuCfg;
  if (target.isGpu()) gpuCfg = gpuConfig(target, opts.numWarps, gpuOptions(opts));
  const GpuConfig* gc = gpuCfg ? &*gpuCfg : nullptr;
  clusterCheck(kernel, target, gc, opts);
  ir::PassManager pm;
  // Scopes the user wrote change nothing in a compile that is not
  // profiled: they go first (only where there are some, so every other
  // kernel's stages stay as they were).
  if (!opts.profile && contains(*f, ir::OpCode::Probe)) pm.add(ir::createStripProbesPass());
  // Assertions are tested by checked compiles only; the others drop them
  // before any pass, and the default passes drop what only they used.
  if (!opts.checkBounds && contains(*f, ir::OpCode::Assert)) pm.add(ir::createStripAssertsPass());
  // Before pad-tiles: the decomposition's ops are ordinary tile ops,
  // which pad-tiles and the default passes then treat as any others.
  if (contains(*f, ir::OpCode::DotScaled)) {
    scaledDotWarnings(*f, target, gc, opts, art->warnings);
    pm.add(ir::createDecomposeScaledDotsPass([gc](const ir::Op& op) { return nativeScaledDot(gc, op); }));
  }
  // GPU layouts split dims over threads in powers of two: pad first, so the
  // default passes clean up (CSE) the masks it adds.
  if (target.kind != Target::Kind::CPU) pm.add(ir::createPadTilesPass(&art->warnings));
  bool fp8Dot = false;
  ir::walk(f->body(), [&](ir::Op& op) {
    if (op.code() == ir::OpCode::Dot && (isFp8(op.operand(0)->type().dtype()) || isFp8(op.operand(1)->type().dtype())))
      fp8Dot = true;
  });
  // fp8 dots the target has no matrix instruction for are widened to f16
  // (exactly); the others keep their fp8 operands (the GPU tensor-core
  // tables decide: gpuTensorCoreTakes).
  if (fp8Dot) {
    std::function<bool(DType, DType, DType)> native;
    if (gc)
      native = [gc](DType a, DType b, DType acc) { return gpuTensorCoreTakes(createGpuTargetInfo, *gc, a, b, acc); };
    pm.add(ir::createWidenFp8DotsPass(std::move(native)));
  }
  ir::addDefaultPasses(pm);
  // A loop the user asked to warp-specialise, where the target can
  // (producer warps issuing tensor copies); elsewhere a warning says why.
  {
    std::function<bool(const ir::Op&)> inFlight = [gc](const ir::Op& dot) {
      return gc && gpuKeepsDotInFlight(createGpuTargetInfo, *gc, dot);
    };
    auto refuse = [gc](const ir::Function& fn, const ir::Op& loop) -> std::string {
      if (!gc) return "the CPU has no warps to specialise";
      return gpuWarpSpecializeRefusal(createGpuTargetInfo, *gc, fn, loop);
    };
    // Asked only of a loop the pass rewrites, which a GPU target's refusal
    // allowed.
    auto producerWarps = [gc](const ir::Op& loop) { return gpuProducerWarps(*gc, loop); };
    pm.add(ir::createWarpSpecializePass(refuse, std::move(inFlight), producerWarps, &art->warnings));
  }
  // Every backend lowers buffer_slot, async copies, commits and waits, so
  // `for {stages}` loops are scheduled for all targets (the schedule is the
  // pass's tile-IR dump).
  pm.add(ir::createPipelineSchedulePass());
  // Where a dot's matrix instruction runs behind the program (wgmma), the
  // pipelined loop keeps it in flight into the next iteration.
  if (gc)
    pm.add(ir::createAsyncDotsPass(
        [gc](const ir::Op& dot) { return gpuKeepsDotInFlight(createGpuTargetInfo, *gc, dot); }));
  // A profiled compile's automatic scopes, once nothing moves code.
  if (opts.profile) pm.add(ir::createInsertProbesPass());
  pm.setAfterPass(
      [&](const std::string& pass, const ir::Function& fn) { art->dumps.tileIR.emplace_back(pass, ir::print(fn)); });
  pm.run(*f);
  timer.mark("tile-ir");
  if (target.kind == Target::Kind::CPU) {
    compileCpu(*f, target, opts, *art, timer);
    return art;
  }
  std::shared_ptr<Artifact> gpu = compileGpuTarget(*f, *gc, opts, std::move(art->dumps));
  gpu->warnings = std::move(art->warnings);
  return gpu;
}

std::string Artifact::assembly() const {
  if (!dumps.assembly.empty()) return dumps.assembly;
  if (gpuDevice(target).kind == Target::Kind::AMDGPU) return amdgpuAssembly(*this);
  if (target.kind != Target::Kind::CPU) throw InternalError("GPU artifact of " + target.str() + " has no assembly");
  TS_ASSERT(kept, "CPU artifact of @" + kernelName() + " kept no module");
  initLLVM();
  // The kept module's functions carry their target-cpu and target-features,
  // so the host TargetMachine emits the same code the JIT ran.
  std::lock_guard<std::mutex> lock(kept->mu);
  CpuTargetInfo t = selectCpuTarget(target.arch);
  return cpu::emitAssembly(*kept->module, cpu::cachedTargetMachine(t, cpu::kAssemblyOptLevel));
}

}  // namespace tessera::codegen
