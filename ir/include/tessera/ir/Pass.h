// Passes over the tile IR. One pass per file in ir/passes/; the pipeline is
// linear and logged: after every pass the IR can be captured for dumps.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/ir/IR.h"

namespace tessera::ir {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual const char* name() const = 0;  // e.g. "cse"
  virtual void run(Function& f) = 0;
};

std::unique_ptr<Pass> createVerifyPass();
std::unique_ptr<Pass> createDeadCodeEliminationPass();
std::unique_ptr<Pass> createCSEPass();
std::unique_ptr<Pass> createCanonicalizePass();  // fold trivial ops (x+0, splat of constant, ...)
/// "pipeline": rewrites each `for {stages = S}` into its explicit
/// software-pipelined schedule (async copies, commits, waits, barriers; see
/// IR.h and docs/pipelining.md). Not in addDefaultPasses: a backend adds it
/// once it lowers `copy {async = 1}`, `async_commit`, `async_wait` and
/// `buffer_slot`; without it a `stages` loop runs as written (correct,
/// unpipelined).
std::unique_ptr<Pass> createPipelineSchedulePass();

/// "strip-probes": removes every `probe` op (ir/passes/StripProbes.cpp).
/// Run first by every compile that is not profiled.
std::unique_ptr<Pass> createStripProbesPass();

/// "strip-asserts": removes every `assert` op (ir/passes/StripAsserts.cpp).
/// Run first by every compile that is not checked.
std::unique_ptr<Pass> createStripAssertsPass();

/// "insert-probes": the automatic scopes of a profiled compile -- the
/// kernel, warp-specialised roles, a pipelined loop's prologue, main loop,
/// stages and epilogue, and every wait (ir/passes/InsertProbes.cpp). Run
/// after the passes that move code.
std::unique_ptr<Pass> createInsertProbesPass();

/// "pad-tiles": pads every non-power-of-two tile dim to the next power of
/// two, masking memory accesses, reductions and dot K so the padding is
/// never observed (ir/passes/PadTiles.cpp). Run first for GPU targets,
/// whose layouts split dims over threads in powers of two. Where a reshape
/// makes padding impossible the function is left unpadded and, when
/// `warnings` is given, a warning naming the reshape's line is appended.
std::unique_ptr<Pass> createPadTilesPass(std::vector<std::string>* warnings = nullptr);

/// "widen-fp8-dots": casts the fp8 operands of a dot to f16, exactly
/// (ir/passes/WidenFp8Dots.cpp), unless `native(a, b, acc)` says the target
/// has a matrix instruction for that dot's operand and accumulator dtypes
/// (the GPU targets' tensor-core tables: codegen::gpuTensorCoreTakes). Run
/// before lowering for every kernel with an fp8 dot; without `native` (CPU,
/// and the pass by name) every fp8 dot is widened.
std::unique_ptr<Pass> createWidenFp8DotsPass(std::function<bool(DType a, DType b, DType acc)> native = {});

/// "decompose-scaled-dots": rewrites each `dot_scaled` into its exact
/// decomposition (codes decoded and scaled into bf16, one bf16 dot
/// accumulating in f32; ir/passes/DecomposeScaledDots.cpp) unless
/// `native(op)` says the target lowers it to a block-scaled matrix
/// instruction, and takes its operands in which form (codegen's
/// nativeScaledDot; ScaledDot.h). Run first for every kernel with a
/// dot_scaled; without `native` (the pass by name) every one is decomposed.
enum class ScaledDotForm : int;
std::unique_ptr<Pass> createDecomposeScaledDotsPass(std::function<ScaledDotForm(const Op& dot)> native = {});

/// "async-dots": in a pipelined loop (after "pipeline") whose dots read both
/// operands from staged slots, marks those dots `async`, retires each one
/// iteration later (`dot_wait {pending}`) and moves the refill of a slot
/// behind the wait that retires its reader (ir/passes/AsyncDots.cpp; IR.h,
/// "Asynchronous dots"). Only the dots `inFlight` accepts (the GPU targets
/// whose matrix instructions run asynchronously:
/// codegen::gpuKeepsDotInFlight); without it, every candidate.
std::unique_ptr<Pass> createAsyncDotsPass(std::function<bool(const Op& dot)> inFlight = {});

/// "warp-specialize": rewrites each loop as written `for {stages, specialize
/// = 1}` in the kernel body (at most one per kernel) into a producer
/// `warp_specialize` region issuing its staged copies and a consumer loop
/// computing, linked by stage_acquire / commit / wait / release
/// (ir/passes/WarpSpecialize.cpp; IR.h, "Warp-specialised pipelines").
/// Run before "pipeline". `refuse(loop)` is the target's reason not to
/// (empty: go ahead; codegen::gpuWarpSpecializeRefusal); `inFlight(dot)` as
/// for async-dots; `producerWarps(loop)` the producer's `warps`
/// (codegen::gpuProducerWarps; without it kProducerWarps). Loops left alone
/// lose `specialize` and get a warning in `warnings`. Without `refuse`,
/// every loop that can be.
std::unique_ptr<Pass> createWarpSpecializePass(
    std::function<std::string(const Function& f, const Op& loop)> refuse = {},
    std::function<bool(const Op& dot)> inFlight = {}, std::function<int64_t(const Op& loop)> producerWarps = {},
    std::vector<std::string>* warnings = nullptr);

/// "verify-tile-coverage": checks that every output tile is stored exactly
/// once, for a bounded family of sizes and grids (ir/analysis/TileCoverage.h;
/// ir/passes/VerifyTileCoverage.cpp); a VerifyError at the store otherwise.
/// Changes nothing. One line per output (what was checked, or why it is not
/// analysable) goes to `notes` when given.
std::unique_ptr<Pass> createVerifyTileCoveragePass(std::vector<std::string>* notes = nullptr);

/// A pass by its name (Passes.def: canonicalize, cse, dce, pipeline,
/// async-dots, warp-specialize, pad-tiles, widen-fp8-dots, decompose-scaled-dots, verify, verify-tile-coverage);
/// UsageError naming the known ones otherwise.
std::unique_ptr<Pass> createPassByName(const std::string& name);
/// The known pass names, in Passes.def order.
std::vector<std::string> passNames();

class PassManager {
 public:
  void add(std::unique_ptr<Pass> p) { passes_.push_back(std::move(p)); }
  /// Called after every pass with its name and the function.
  void setAfterPass(std::function<void(const std::string&, const Function&)> cb) { after_ = std::move(cb); }
  /// Runs the passes in order, verifying after each one (a failure after a
  /// pass is a compiler bug and raises InternalError naming the pass).
  void run(Function& f);
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
  std::function<void(const std::string&, const Function&)> after_;
};

/// The default tile-IR pipeline shared by every target (target-specific
/// passes are appended by the codegen layer).
void addDefaultPasses(PassManager& pm);

}  // namespace tessera::ir
