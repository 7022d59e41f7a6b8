#include "tessera/ir/analysis/GpuResourceCheck.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "tessera/ir/analysis/Layout.h"
#include "tessera/ir/IR.h"
#include "tessera/support/Error.h"

namespace tessera::ir {

namespace {

// 32-bit registers one element takes (16-bit types pack two per register,
// 8-bit four; rounded up per tile below).
int64_t registersFor(int64_t elems, const ir::Type& t) {
  int64_t bits = t.isPointerLike() ? 64 : static_cast<int64_t>(bitWidth(t.dtype()));
  if (t.dtype() == DType::I1 && !t.isPointerLike()) bits = 32;  // predicates live in 32-bit registers once materialised
  return (elems * bits + 31) / 32;
}

}  // namespace

void checkRegisterBudget(const ir::Function& f, const LayoutAnalysis& la, int maxRegisters, const std::string& arch) {
  std::function<void(const ir::Block&)> walk = [&](const ir::Block& blk) {
    for (auto& opp : blk.ops()) {
      const ir::Op& op = *opp;
      for (auto& r : op.regions()) walk(r->block());
      if (op.code() != ir::OpCode::For) continue;
      const ir::Block& body = op.region(0).block();
      int64_t total = 0, tileElems = 0;
      std::string items;
      for (unsigned i = 1; i < body.numArgs(); ++i) {
        const ir::Value* a = body.arg(i);
        const ir::Type& t = a->type();
        int64_t regs;
        if (t.isTile() && la.has(a)) {
          int64_t slots = static_cast<int64_t>(slotTable(la.get(a), t.shape()).size());
          regs = registersFor(slots, t);
          tileElems += t.numElements();
          items += "  carried tile<" + shapeStr(t.shape()) + "x" + name(t.dtype()) + ">: " + std::to_string(slots) +
                   " elements = " + std::to_string(regs) + " registers per thread\n";
        } else {
          regs = registersFor(1, t);
        }
        total += regs;
      }
      if (total <= maxRegisters) continue;
      // Suggestion: the warps that bring the carried tiles under the limit
      // (elements spread evenly over the threads), else smaller tiles.
      int warps = la.numWarps();
      int64_t threadsNow = int64_t{warps} * la.warpSize();
      std::string suggestion;
      for (int w = warps * 2; w <= 32 && w * la.warpSize() <= 1024; w *= 2) {
        if (total * threadsNow / (int64_t{w} * la.warpSize()) <= maxRegisters * 3 / 4) {
          suggestion = "use numWarps = " + std::to_string(w) + " (about " +
                       std::to_string(total * threadsNow / (int64_t{w} * la.warpSize())) +
                       " registers per thread for the carried values), or smaller tiles";
          break;
        }
      }
      if (suggestion.empty())
        suggestion = "use smaller tiles: " + std::to_string(tileElems) + " carried elements over " +
                     std::to_string(threadsNow) + " threads cannot fit in " + std::to_string(maxRegisters) +
                     " registers each";
      std::string where = op.loc().known() ? op.loc().str() : "@" + f.name();
      throw ResourceError(where + ": error: the loop carries " + std::to_string(total) +
                          " registers per thread with numWarps = " + std::to_string(warps) + " (" +
                          std::to_string(threadsNow) + " threads), but a thread on " + arch + " has at most " +
                          std::to_string(maxRegisters) + ":\n" + items + "  suggestion: " + suggestion);
    }
  };
  walk(f.body());
}

void checkValueBudget(const ir::Function& f, const LayoutAnalysis& la, int maxRegisters, const std::string& arch) {
  // Generous: a tile this large per thread cannot stay in registers at all,
  // and lowering it one element at a time costs seconds and gigabytes.
  const int64_t budget = int64_t{kValueBudgetFactor} * maxRegisters;
  std::function<void(const ir::Block&)> walk = [&](const ir::Block& blk) {
    for (auto& opp : blk.ops()) {
      const ir::Op& op = *opp;
      for (auto& r : op.regions()) walk(r->block());
      for (unsigned i = 0; i < op.numResults(); ++i) {
        const ir::Value* v = op.result(i);
        const ir::Type& t = v->type();
        if (!t.isTile() || !la.has(v)) continue;
        int64_t slots = static_cast<int64_t>(slotTable(la.get(v), t.shape()).size());
        int64_t regs = registersFor(slots, t);
        if (regs <= budget) continue;
        const int64_t threads = int64_t{la.numWarps()} * la.warpSize();
        std::string where = op.loc().known() ? op.loc().str() : "@" + f.name();
        int64_t maxElems =
            budget * 32 / (t.isPointerLike() ? 64 : std::max<int64_t>(32, bitWidth(t.dtype()))) * threads;
        throw ResourceError(
            where + ": error: " + t.str() + " of '" + op.name() + "' holds " + std::to_string(slots) + " values (" +
            std::to_string(regs) + " registers) per thread with numWarps = " + std::to_string(la.numWarps()) + " (" +
            std::to_string(threads) + " threads); a thread on " + arch + " has " + std::to_string(maxRegisters) +
            " registers and Tessera refuses tiles above " + std::to_string(budget) +
            " per thread\n  suggestion: split the work over more programs "
            "(a grid axis or a loop over chunks) so one tile has at most about " +
            std::to_string(maxElems) + " elements at this numWarps");
      }
    }
  };
  walk(f.body());
}

}  // namespace tessera::ir
