#include "codegen/gpu/GpuCompile.h"
#include "codegen/gpu/GpuTargetInfo.h"
#include "codegen/gpu/RematerializeAfterLoops.h"

#include <bit>
#include <chrono>
#include <map>
#include <cstdio>
#include <set>
#include <sstream>

#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/IR/OptBisect.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/raw_ostream.h>

#include "tessera/ir/analysis/AxisInfo.h"
#include "tessera/ir/analysis/TiledAccess.h"
#include "codegen/gpu/GpuLowering.h"
#include "tessera/ir/analysis/GpuResourceCheck.h"
#include "codegen/llvm/GpuToolchain.h"
#include "codegen/llvm/KeptModule.h"
#include "codegen/llvm/LLVMSupport.h"
#include "tessera/ir/analysis/Layout.h"
#include "tessera/ir/analysis/LayoutStats.h"
#include "tessera/ir/Printer.h"
#include "tessera/ir/ScaledDot.h"
#include "tessera/support/Error.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

namespace {

// Compile latency. The default O3 pipeline plus the backends' own IR passes
// cost 110-120 ms for a 32x32x32 GEMM to PTX (150-260 ms to .hsaco), most
// of it in passes that have little to do on this code. Measured with
// -time-passes on gemm_f16; registers checked with ptxas / the code object
// metadata on the GEMM examples, gpu_test's kernels and gpu_dot_test's
// 64x64 and 128x128 tiles (docs/gpu.md, "Compile latency"):
//
// * The lowering emits straight-line code whose redundancy is index
//   arithmetic recomputed per element and per op, plus guard branches around
//   single stores. What removes it: early-cse (the repeated lane/warp index
//   computations, with MemorySSA for the repeated shared-memory reloads),
//   instcombine (udiv/urem by powers of two and by 1, folded constant
//   offsets), simplifycfg (merges the guard blocks), LICM (hoists per-thread
//   index math and base pointers out of the K loop: without it the loop is
//   6% longer) and a last simplifycfg for the blocks LICM emptied. Then
//   infer-alignment: the lowering's scalar shared-memory accesses carry
//   their element alignment, and only once offsets from the 16-byte aligned
//   shared array are known to be aligned can the backends' load/store
//   vectoriser merge them; without it a 128x128x32 f16 tile spills 650 bytes
//   instead of ~100-200 (O3: 64-280). AMDGPU also needs amdgpu-attributor:
//   it proves which implicit kernel inputs (work-item ids y/z, dispatch and
//   queue pointers, ...) are unused, which frees their registers (gfx942
//   64x64x32 tile: 184 -> 168 VGPRs, as with O3). The pipelines are the
//   vendors' (GpuTargetInfo::kernelPipeline).
//   Nothing to inline (one function, no calls but intrinsics), no alloca for
//   SROA; the lowering's tiles are unrolled already, so loop and SLP
//   vectorisation, unrolling and the loop passes of O3 changed no register
//   count. infer-address-spaces is not needed: every pointer carries its
//   address space from the lowering (global 1, shared 3).
//   This pipeline costs 5-8 ms where O3 costs 35-50 ms.
// * Code generation at CodeGenOptLevel::Default rather than Aggressive: the
//   NVPTX backend's only difference is EarlyCSE instead of GVN, twice, in its
//   IR pipeline (9 ms less; same PTX size and ptxas registers for gemm_f16).
// * Straight-line strength reduction, which both backends run before
//   instruction selection, takes 25-40 ms on these kernels, most of it in
//   ValueTracking's UB/poison reasoning (mustTriggerUB, mayThrow) repeated
//   per candidate over the long straight-line blocks the lowering produces.
//   It rewrites unrolled address arithmetic into increments, which ptxas and
//   the AMDGPU scheduler redo on their own; N-ary reassociation (2 ms) only
//   prepares more such reuse. Skipping both left every register count and
//   spill above unchanged. NVPTX also skips CodeGenPrepare (8 ms), whose
//   address-mode sinking serves targets with rich addressing modes: on the
//   default GEMM configurations the PTX is no longer and ptxas uses as many
//   or fewer registers without it (gemm_f16 sm_80: 112, O3 117; gemm_f32
//   sm_80 spilled 8 bytes with it), but the 8-warp 128x128x32 f16 tile, at
//   the 255-register limit either way, spills more (sm_86: 64 bytes, was 0;
//   docs/gpu.md). These are optional passes (the backends skip them at -O0),
//   skipped through the context's pass gate, the mechanism behind
//   -opt-bisect-limit; a renamed pass would only run again. The load/store
//   vectoriser stays: without it the 128x128 tile spills 600 bytes.
struct SkipPassGate : llvm::OptPassGate {
  std::set<std::string, std::less<>> skip;
  bool shouldRunPass(llvm::StringRef pass, llvm::StringRef) const override { return !skip.count(pass); }
  bool isEnabled() const override { return !skip.empty(); }
};

// Loop strength reduction only in kernels with a dot. A loop that reads
// rows owned by whole warps (a GEMV's 64x128 tile: 16 rows per lane, each at
// a warp-uniform base, one column offset per lane) is rewritten by LSR into
// one 64-bit pointer per row and lane, hoisted out of the loop and advanced
// by the step every iteration: 32 registers where the row bases are
// uniform and one lane offset would serve them all (AMDGPU: LSR's cost model
// does not know the SGPR-base + VGPR-offset global addressing). Skipped in
// the static benchmark's dot-free kernels (tessera_gpu_bench, all rows):
// * AMDGPU: GEMV takes Triton's VGPRs (gfx1100 64x128: 124 -> 92, 12 -> 16
//   waves; 32x128: 68 -> 52); gfx942 32x128 GEMV 42 -> 44 (same
//   occupancy); tutorial_softmax and cross_entropy 1-4 fewer; loops 2-16
//   instructions longer (the row addresses are recomputed);
// * NVIDIA: GEMV loops 2-18 SASS instructions shorter, sm_90a 64x128 149 ->
//   128 registers (Triton's), 12 -> 16 warps per SM; sm_80 64x128 149 -> 152
//   (same occupancy); paged_decode_attention sm_80 80 -> 76; the other
//   loops equal or shorter.
// In kernels with a dot, LSR's increments of the operand pointers pay:
// without it gfx942 attention takes 125 -> 141 VGPRs and the GEMMs' K loops
// grow by 3-8 instructions. compileGpu marks the module; assembly on demand
// reads the mark.
const char* kNoLsrFlag = "tessera.no-lsr";

void installPassGate(const llvm::Module& m, SkipPassGate& gate, const GpuTargetInfo& ti, int optLevel) {
  gate.skip.clear();
  if (optLevel == 0) return;
  gate.skip.insert("slsr");
  gate.skip.insert("nary-reassociate");
  if (ti.skipsCodeGenPrepare()) gate.skip.insert("codegenprepare");
  if (m.getModuleFlag(kNoLsrFlag)) gate.skip.insert("Loop Strength Reduction");  // a legacy loop pass: its name
  m.getContext().setOptPassGate(gate);
}

void optimizeGpuKernel(llvm::Module& m, llvm::TargetMachine& tm, int optLevel, GpuTargetInfo& ti) {
  if (optLevel == 0) return runDefaultPipeline(m, tm, 0);
  runPipeline(m, tm, ti.kernelPipeline());
  for (llvm::Function& f : m) ti.afterKernelPipeline(f);
  // Last: the pipeline's CSE and LICM are what make index values live
  // through the loops.
  for (llvm::Function& f : m) rematerializeAfterLoops(f, ti);
}

}  // namespace

llvm::TargetMachine& cachedGpuTargetMachine(void (*initTarget)(), const std::string& vendor, const std::string& triple,
                                            const std::string& cpu, const std::string& features,
                                            std::optional<llvm::Reloc::Model> reloc, int optLevel) {
  // Default, not Aggressive, for every optLevel >= 1: see kNvptxKernelPipeline.
  auto lvl = optLevel == 0 ? llvm::CodeGenOptLevel::None : llvm::CodeGenOptLevel::Default;
  // Reused: a fresh TargetMachine rebuilds on its first code generation the
  // subtarget, its lowering tables and the register alias caches; for
  // AMDGPU's thousands of registers that was a quarter of a small kernel's
  // compile (vector_add to a gfx942 .hsaco: 5.9 -> 4.4 ms; docs/gpu.md,
  // "Compile latency"). A TargetMachine must not generate code for two
  // modules at once, and nothing here changes its options after creation,
  // so each thread keeps its own per configuration (as the CPU JIT does).
  thread_local std::map<std::string, std::unique_ptr<llvm::TargetMachine>> cache;
  std::string key = triple + "|" + cpu + "|" + features + "|" + std::to_string(reloc ? int(*reloc) : -1) + "|" +
                    std::to_string(int(lvl));
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  initTarget();
  initLLVM();
  llvm::Triple t(triple);
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(t, err);
  if (!target) throw CompileError("this LLVM has no " + vendor + " target: " + err);
  llvm::TargetOptions to;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(t, cpu, features, to, reloc, std::nullopt, lvl));
  if (!tm) throw CompileError("cannot create an " + vendor + " TargetMachine for " + cpu);
  return *cache.emplace(key, std::move(tm)).first->second;
}

namespace {
// The layouts split a tile's dimensions among lanes and warps by powers of
// two, so numWarps must be one; checked before anything divides by it.
void checkNumWarps(const ir::Function& fn, const GpuTargetInfo& ti, int numWarps) {
  const int64_t maxWarps = ti.maxThreadsPerBlock() / ti.warpSize();
  if (numWarps >= 1 && numWarps <= maxWarps && (numWarps & (numWarps - 1)) == 0) return;
  std::string allowed;
  for (int64_t w = 1; w <= maxWarps; w *= 2) allowed += (allowed.empty() ? "" : ", ") + std::to_string(w);
  std::string why = numWarps < 1 || numWarps > maxWarps
                        ? "out of range: " + ti.arch() + " allows " + std::to_string(ti.maxThreadsPerBlock()) +
                              " threads per block, " + std::to_string(maxWarps) + " warps of " +
                              std::to_string(ti.warpSize())
                        : "not a power of two (tile layouts split dimensions among warps by powers of two)";
  std::string msg = fn.loc().str() + ": kernel @" + fn.name() + ": numWarps = " + std::to_string(numWarps) + " is " +
                    why + "; use one of " + allowed;
  // More threads than the target has is a resource limit; the rest are
  // malformed options.
  if (numWarps > maxWarps) throw ResourceError(msg);
  throw CompileError(msg);
}
}  // namespace

bool gpuTensorCoreTakes(GpuTargetFactory make, const GpuConfig& c, DType a, DType b, DType acc) {
  return make(c)->tensorCore(a, b, acc).kind != ir::MmaKind::None;
}

ir::ScaledDotForm gpuScaledDotNative(GpuTargetFactory make, const GpuConfig& c, const ir::Op& dotScaled) {
  using ir::ScaledDotForm;
  const ir::ScaledFormatInfo* fa = ir::findScaledFormat(dotScaled.strAttr("a_format"));
  const ir::ScaledFormatInfo* fb = ir::findScaledFormat(dotScaled.strAttr("b_format"));
  // The MX formats, any pair; NVFP4 x NVFP4 (blocks of 16, UE4M3 scales)
  // where the target has its instruction (TensorCoreOp::mmaNvfp4), packed;
  // an NVFP4 operand beside an MX one has two kinds of scale, which no
  // instruction takes. A per-tensor scale (NVFP4's) multiplies the native
  // dot's result (decompose-scaled-dots).
  if (!fa || !fb || fa->scale != fb->scale || fa->block != fb->block) return ScaledDotForm::Decomposed;
  const TensorCoreOp op = make(c)->tensorCore(fa->elem, fb->elem, DType::F32);
  const bool nvfp4 = fa->block == 16;
  if (nvfp4 ? op.mmaNvfp4 == llvm::Intrinsic::not_intrinsic
            : op.mmaBlockScale == llvm::Intrinsic::not_intrinsic &&
                  op.mmaSmallBlockScale == llvm::Intrinsic::not_intrinsic)
    return ScaledDotForm::Decomposed;
  // The shape after pad-tiles (every dim to a power of two; the padded K
  // blocks' codes zeroed and scales made finite there). fp4's unpacking
  // reshapes K, which pad-tiles cannot pad: those shapes as they are.
  const auto& a = dotScaled.operand(0)->type().shape();  // [M, K] ([M, K/2] packed fp4)
  const auto& b = dotScaled.operand(2)->type().shape();  // [N, K]
  const bool packed = fa->packed || fb->packed;
  auto pad = [&](int64_t x) { return packed ? x : static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(x))); };
  const int64_t K = pad(a[1]) * (fa->packed ? 2 : 1);
  auto l = ir::mmaLayout(op.kind, pad(a[0]), pad(b[0]), K, c.numWarps, static_cast<int>(c.warpSize()), false);
  std::unique_ptr<GpuTargetInfo> ti = make(c);
  if (!l || (l->mma == op.kind && !ti->takesScaledDot(op, *l, pad(a[0]), pad(b[0]), K / fa->block)))
    return ScaledDotForm::Decomposed;
  // The placement the layouts give (the first choice, or where that does
  // not fit the smaller instruction) must be one with a block-scaled form
  // (NVFP4's: the first choice's).
  const bool fits = l->mma == op.kind ? nvfp4 || op.mmaBlockScale != llvm::Intrinsic::not_intrinsic
                                      : !nvfp4 && op.small != ir::MmaKind::None && l->mma == op.small &&
                                            op.mmaSmallBlockScale != llvm::Intrinsic::not_intrinsic;
  if (!fits) return ScaledDotForm::Decomposed;
  // fp4 x fp4 packed where the target takes it so and K is whole packed
  // k-steps; else in containers.
  const bool wholePackedSteps = op.fp4PackedK != 0 && K % (ir::mmaK(l->mma) * op.fp4PackedK) == 0;
  if (fa->packed && fb->packed && wholePackedSteps) return ScaledDotForm::PackedFp4;
  const bool subByte = bitWidth(fa->elem) < 8 || bitWidth(fb->elem) < 8;
  return nvfp4 || (subByte && !op.subByteContainers) ? ScaledDotForm::Decomposed : ScaledDotForm::Containers;
}

bool gpuKeepsDotInFlight(GpuTargetFactory make, const GpuConfig& c, const ir::Op& dot) {
  std::unique_ptr<GpuTargetInfo> ti = make(c);
  const auto& a = dot.operand(0)->type();
  const auto& b = dot.operand(1)->type();
  const ir::MmaKind k =
      ti->tensorCore(ir::dotOperandElem(dot, 0), ir::dotOperandElem(dot, 1), dot.operand(2)->type().dtype()).kind;
  if (!ir::isAsyncMma(k)) return false;
  auto l =
      ir::mmaLayout(k, a.shape()[0], b.shape()[1], ir::dotK(dot), c.numWarps, static_cast<int>(c.warpSize()), false);
  return l && l->mma == k;
}

std::string gpuWarpSpecializeRefusal(GpuTargetFactory make, const GpuConfig& c, const ir::Function& f,
                                     const ir::Op& loop) {
  std::unique_ptr<GpuTargetInfo> ti = make(c);
  if (!ti->hasTensorCopies())
    return c.options.tensorCopies
               ? c.target.str() + " has no tensor copies (TMA: " + gpuTargetsWith(&GpuArch::tensorCopies) + ")"
               : "tensor copies are off";
  if (c.numWarps % 4 != 0) return "numWarps = " + std::to_string(c.numWarps) + " is not whole warpgroups";
  // The consumers' dots must run behind the program, reading their
  // operands in place from the slots the producer fills (a warpgroup MMA
  // kept in flight); mma.sync reads registers, so its slots would have to
  // be read back by the consumers, which the channel's protocol does not
  // order.
  // A block-scaled dot's scales are staged by the threads that run it and
  // copied by its issuing thread, which the channel's protocol does not
  // cover.
  for (auto& op : loop.region(0).block().ops())
    if (op->code() == ir::OpCode::DotScaled || (op->code() == ir::OpCode::Dot && op->numOperands() == 5))
      return "the block-scaled dot at " + op->loc().str() + " is not taken by warp-specialised loops yet";
  for (auto& op : loop.region(0).block().ops())
    if (op->code() == ir::OpCode::Dot && !gpuKeepsDotInFlight(make, c, *op))
      return "the dot at " + op->loc().str() +
             (c.row->wgmma     ? " does not take wgmma at numWarps = " + std::to_string(c.numWarps)
              : c.row->tcgen05 ? " does not take tcgen05 at numWarps = " + std::to_string(c.numWarps)
                               : " runs on mma.sync on " + c.target.str() + " (no warpgroup MMA)") +
             ": the consumers' dots must run behind the program, reading their slots in place";
  ir::AxisAnalysis axis(f);
  for (auto& op : loop.region(0).block().ops()) {
    if (op->code() != ir::OpCode::Copy) continue;
    auto acc = ir::matchTiledAccess(f, *op, axis);
    const std::string at = "the staged copy at " + op->loc().str();
    if (!acc) return at + " is not a box of a row-major tensor";
    if (!acc->aligned) return at + " is not known 16-byte aligned (an unaligned launch)";
    const int64_t eb = static_cast<int64_t>(byteSize(acc->dtype));
    if ((acc->tileCols * eb) % 16 != 0 || (acc->tileRows * acc->tileCols * eb) % 128 != 0)
      return at + " has rows of " + std::to_string(acc->tileCols * eb) + " bytes (TMA boxes need multiples of 16)";
  }
  return "";
}

int64_t gpuProducerWarps(const GpuConfig& c, const ir::Op& loop) {
  int64_t carried = 0;
  for (unsigned i = 0; i < loop.numResults(); ++i)
    if (loop.result(i)->type().isTile()) carried += loop.result(i)->type().numElements();
  return producerTradesRegisters(c.numWarps, carried / (int64_t{c.numWarps} * int64_t{c.warpSize()})) ? 4 : 1;
}

void annotateGpuLayouts(GpuTargetFactory make, ir::Function& f, const GpuConfig& c) {
  std::unique_ptr<GpuTargetInfo> ti = make(c);
  checkNumWarps(f, *ti, c.numWarps);
  ir::AxisAnalysis axis(f);
  ir::LayoutAnalysis la(f, axis, c.numWarps, static_cast<int>(c.warpSize()),
                        [&](DType a, DType b, DType acc) { return ti->tensorCore(a, b, acc).kind; });
  ir::annotateLayouts(f, la);
}

namespace {
/// The AMD code's waves per SIMD, or -1 where it has scratch.
int64_t wavesWithoutScratch(const GpuArch& a, const GpuResources& r, uint64_t sharedBytes, unsigned threads) {
  if (r.spillBytes != 0) return -1;
  return occupancy(a, r.registers, static_cast<int64_t>(sharedBytes), static_cast<int>(threads)).value;
}
}  // namespace

std::shared_ptr<Artifact> compileGpu(GpuTargetFactory make, const ir::Function& fn, const GpuConfig& c,
                                     const CompileOptions& o, StageDumps dumps) {
  if (o.optLevel < 0 || o.optLevel > 3) throw CompileError("optLevel must be 0..3, got " + std::to_string(o.optLevel));
  StageTimer timer;
  const Target& t = c.device;
  std::unique_ptr<GpuTargetInfo> ti = make(c);
  checkNumWarps(fn, *ti, c.numWarps);
  auto art = std::make_shared<Artifact>();
  art->target = t;
  art->binary.signature = kernelSignature(fn);
  art->binary.symbol = fn.name();
  const StageDumps dumpsIn = dumps;  // for a second compile (invariantsForLds)
  art->dumps = std::move(dumps);

  // Layouts, annotated on a copy for the dump; the lowering reads the same
  // copy, so analysis keys and lowered values agree.
  std::unique_ptr<ir::Function> f = ir::clone(fn);
  ir::AxisAnalysis axis(*f);
  ir::LayoutAnalysis la(*f, axis, c.numWarps, static_cast<int>(c.warpSize()),
                        [&](DType a, DType b, DType acc) { return ti->tensorCore(a, b, acc).kind; });
  ir::annotateLayouts(*f, la);
  art->dumps.tileIR.emplace_back("layout", ir::print(*f));
  // A loop whose carried values cannot fit the register file is rejected
  // here, before any code exists. (Shared memory is checked by the lowering
  // against its liveness-aware plan, which also counts the compiler's own
  // scratch areas: summing the buffers here would reject kernels whose
  // buffers are never live together.)
  // The loop check first: its message (the carried tiles, a numWarps that
  // fits) is the more useful one when both apply.
  ir::checkRegisterBudget(*f, la, ti->maxRegistersPerThread(), ti->arch());
  ir::checkValueBudget(*f, la, ti->maxRegistersPerThread(), ti->arch());
  timer.mark("layout");

  initLLVM();
  llvm::TargetMachine* tm = &ti->targetMachine(o.optLevel);
  timer.mark("target-machine");
  SkipPassGate gate;  // outlives the context that refers to it
  auto ctx = std::make_unique<llvm::LLVMContext>();
  GpuLoweringResult low = lowerToGpuLLVM(*f, *ti, la, axis, *ctx, tm->createDataLayout());
  llvm::Module& m = *low.module;
  ti->prepareModule(m, *tm);
  bool dot = false;
  ir::walk(f->body(), [&](const ir::Op& op) { dot |= op.code() == ir::OpCode::Dot; });
  if (!dot) m.addModuleFlag(llvm::Module::Warning, kNoLsrFlag, 1);
  installPassGate(m, gate, *ti, o.optLevel);
  art->binary.threadsPerBlock = low.threadsPerBlock;
  for (int d = 0; d < 3; ++d) art->binary.cluster[d] = static_cast<uint32_t>(c.options.cluster[d]);
  art->binary.signature.tensorMaps = low.tensorMaps;
  art->binary.boundsChecked = c.options.checkBounds;
  art->binary.opNames = low.checkedOps;
  if (c.options.profile) {
    art->binary.profiled = true;
    art->binary.profileScopes = low.profileScopes;
    art->binary.profileWarps = low.threadsPerBlock / c.warpSize();
    art->binary.profileClock = ti->profileClockKind();
  }
  if (!low.tensorMaps.empty()) {
    std::string maps;
    for (const TensorMapSpec& s : low.tensorMaps) maps += s.str(art->binary.signature.args) + "\n";
    art->dumps.extra["tensor-maps"] = maps;
  }
  art->binary.sharedBytes = static_cast<unsigned>(low.sharedBytes);
  art->dumps.extra["shared-memory"] = std::to_string(low.sharedBytes) + " bytes per block, " +
                                      std::to_string(low.threadsPerBlock) + " threads per block\n" + low.sharedPlan;
  art->dumps.extra["layout-stats"] = ir::layoutStats(axis, la, low.record).str();
  timer.mark("lower");
  art->dumps.llvm = printModule(m);
  timer.mark("print-llvm");
  {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    if (llvm::verifyModule(m, &os))
      throw InternalError("GPU lowering of @" + fn.name() + " for " + t.str() + " produced invalid LLVM IR:\n" + msg);
  }
  timer.mark("verify");
  optimizeGpuKernel(m, *tm, o.optLevel, *ti);
  timer.mark("optimize");
  art->dumps.llvmOpt = printModule(m);
  art->dumps.extra["llvm-gpu"] = art->dumps.llvmOpt;
  timer.mark("print-opt");
  // The backend mutates the module: the emulator and assembly on demand
  // start from a copy of it as it was handed over.
  std::unique_ptr<llvm::Module> handed = llvm::CloneModule(m);
  GpuOutput out = ti->emit(m, *tm);
  timer.mark(ti->emitStage());
  // Invariant operands moved to registers for the LDS's sake, and a
  // chained dot's A fragments read before its B is staged, must pay: no
  // scratch, and more waves than the LDS allowed without them (an upper
  // bound of the other code's occupancy); else compiled again without
  // (GpuOptions::invariantsForLds, fragmentsForLds), the fragments first,
  // being the later choice. The fragments also pay at as many waves as
  // that bound: the other code has no more. And fragments without scratch
  // that do not reach it are weighed against the code compiled without
  // them, whose VGPRs may hold it below what its LDS allows: the one with
  // more waves is kept, the other on a tie (attention 128x64 d64 w8 causal
  // on gfx1100: 7 waves with them, 193 VGPRs; 6 without, 218).
  if (low.fragmentsForLds || low.invariantsForLds) {
    TS_ASSERT(ti->tradesSharedForOccupancy(), "an LDS choice on a target that does not trade shared memory");
    const GpuArch* a = &ti->row();
    const int64_t waves = wavesWithoutScratch(*a, ti->resources(out, fn.name(), c.threadsPerBlock()), low.sharedBytes,
                                              low.threadsPerBlock);
    const bool fragmentsUnpaid = low.fragmentsForLds && waves < low.ldsWavesWithoutFragments;
    if (fragmentsUnpaid || (low.invariantsForLds && waves <= low.ldsWavesWithoutInvariants)) {
      GpuConfig other = c;
      (fragmentsUnpaid ? other.options.fragmentsForLds : other.options.invariantsForLds) = false;
      std::shared_ptr<Artifact> without = compileGpu(make, fn, other, o, dumpsIn);
      const Artifact& w = *without;
      if (!fragmentsUnpaid ||
          waves <= wavesWithoutScratch(*a, gpuResources(make, c, w), w.binary.sharedBytes, w.binary.threadsPerBlock)) {
        ctx->setOptPassGate(llvm::getGlobalPassGate());
        low.module.reset();
        return without;
      }
    }
  }
  ti->storeOutput(out, art->binary, art->dumps);
  // The kept context must not refer to this function's pass gate.
  ctx->setOptPassGate(llvm::getGlobalPassGate());
  low.module.reset();
  art->kept = keepModule(*handed, ctx);
  art->dumps.extra["compile-times"] = timer.log;
  return art;
}

std::string checkSharedNeedsModel(GpuTargetFactory make, const ir::Function& fn, const GpuConfig& c) {
  std::unique_ptr<GpuTargetInfo> ti = make(c);
  checkNumWarps(fn, *ti, c.numWarps);
  std::unique_ptr<ir::Function> f = ir::clone(fn);
  ir::AxisAnalysis axis(*f);
  ir::LayoutAnalysis la(*f, axis, c.numWarps, static_cast<int>(c.warpSize()),
                        [&](DType a, DType b, DType acc) { return ti->tensorCore(a, b, acc).kind; });
  ir::annotateLayouts(*f, la);
  initLLVM();
  llvm::LLVMContext ctx;
  return sharedNeedsModelErrors(*f, *ti, la, axis, ctx, ti->targetMachine(3).createDataLayout());
}

// An emu: artifact was compiled by the real vendor backend first; its
// resources are those of that target (c.device). The occupancy estimate
// counts the threads the artifact launches (the producer warps of a
// warp-specialised loop included).
GpuResources gpuResources(GpuTargetFactory make, const GpuConfig& c, const Artifact& art) {
  auto ti = make(c);
  GpuOutput out;
  out.assembly = art.dumps.assembly;
  out.codeObject = art.binary.codeObject;
  out.dynamicSharedBytes = art.binary.sharedBytes;
  return ti->resources(out, art.kernelName(),
                       art.binary.threadsPerBlock ? art.binary.threadsPerBlock : c.threadsPerBlock());
}

std::string gpuAssembly(GpuTargetFactory make, const GpuConfig& c, const Artifact& a) {
  TS_ASSERT(a.kept, "GPU artifact of @" + a.kernelName() + " kept no module");
  initLLVM();
  GpuConfig eager = c;
  eager.options.eagerAssembly = true;
  auto ti = make(eager);
  // The code generator configuration of a default (optLevel 3) compile,
  // skipped passes included, so the text matches the code object.
  std::lock_guard<std::mutex> lock(a.kept->mu);
  SkipPassGate gate;
  installPassGate(*a.kept->module, gate, *ti, 3);
  struct Restore {
    llvm::LLVMContext& ctx;
    ~Restore() { ctx.setOptPassGate(llvm::getGlobalPassGate()); }
  } restore{*a.kept->context};
  return emitFile(*a.kept->module, ti->targetMachine(3), llvm::CodeGenFileType::AssemblyFile);
}

}  // namespace tessera::codegen
