#include "codegen/gpu/RematerializeAfterLoops.h"

#include <vector>

#include <llvm/ADT/DenseMap.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Transforms/Utils/Local.h>

#include "codegen/gpu/GpuTargetInfo.h"

namespace tessera::codegen {

namespace {

// Bounds on the work per loop: index trees are a handful of levels deep;
// the budget keeps a pathological kernel's epilogue from growing without
// limit.
constexpr unsigned kMaxDepth = 16;
constexpr unsigned kMaxClones = 1024;

// Instructions worth recomputing: one ALU operation on integers or
// addresses. Division is a sequence on both vendors; memory, calls and
// floating point never qualify.
bool cheap(const llvm::Instruction& i) {
  llvm::Type* t = i.getType();
  if (!t->isIntegerTy() && !t->isPointerTy()) return false;
  if (const auto* bo = llvm::dyn_cast<llvm::BinaryOperator>(&i)) {
    switch (bo->getOpcode()) {
      case llvm::Instruction::UDiv:
      case llvm::Instruction::SDiv:
      case llvm::Instruction::URem:
      case llvm::Instruction::SRem: return false;
      default: return true;
    }
  }
  if (const auto* c = llvm::dyn_cast<llvm::CastInst>(&i)) return !c->getSrcTy()->isFPOrFPVectorTy();
  return llvm::isa<llvm::ICmpInst>(i) || llvm::isa<llvm::GetElementPtrInst>(i) || llvm::isa<llvm::SelectInst>(i);
}

class LoopRemat {
 public:
  LoopRemat(llvm::Loop& loop, llvm::BasicBlock& exit, GpuTargetInfo& ti)
      : loop_(loop), b_(&exit, exit.getFirstInsertionPt()), ti_(ti) {}

  /// Loop-crossing uses of `v` replaced by a recomputation; 0 when `v`
  /// does not qualify.
  unsigned run(llvm::Instruction& v, const std::vector<llvm::Use*>& uses) {
    Result r = get(&v, 0);
    if (!r.value || !r.fresh || r.extends) return 0;
    for (llvm::Use* u : uses) u->set(r.value);
    return static_cast<unsigned>(uses.size());
  }

  /// Clones and re-reads nothing ended up using, last first.
  void eraseUnused() {
    std::vector<llvm::Instruction*> kept;
    for (auto it = made_.rbegin(); it != made_.rend(); ++it)
      if (llvm::isInstructionTriviallyDead(*it))
        (*it)->eraseFromParent();
      else
        kept.push_back(*it);
    made_.assign(kept.rbegin(), kept.rend());
  }

  /// Whether the loop reads `v` (a use in it other than the header's phi
  /// taking its first value): then `v` is live through it anyway.
  bool liveInLoop(const llvm::Value& v) const {
    for (const llvm::User* u : v.users())
      if (const auto* ui = llvm::dyn_cast<llvm::Instruction>(u))
        if (loop_.contains(ui) && !(llvm::isa<llvm::PHINode>(ui) && ui->getParent() == loop_.getHeader())) return true;
    return false;
  }

 private:
  // `fresh`: the value differs from the original (it depends on a re-read),
  // so the code generator cannot merge it back. `extends`: it reads, after
  // the loop, an instruction the loop does not keep live, whose live range
  // would then grow through the loop instead of shrinking.
  struct Result {
    llvm::Value* value = nullptr;
    bool fresh = false, extends = false;
  };

  Result get(llvm::Value* v, unsigned depth) {
    if (llvm::isa<llvm::Constant>(v) || llvm::isa<llvm::Argument>(v)) return {v};
    auto* i = llvm::dyn_cast<llvm::Instruction>(v);
    if (!i || loop_.contains(i)) return {};
    if (auto it = memo_.find(i); it != memo_.end()) return it->second;
    Result r = compute(*i, depth);
    if (r.value) memo_[i] = r;
    return r;
  }

  Result compute(llvm::Instruction& i, unsigned depth) {
    if (llvm::Value* again = ti_.rereadSpecialRegister(b_, i)) {
      if (again == &i) return {&i};
      made_.push_back(llvm::cast<llvm::Instruction>(again));
      return {again, true};
    }
    if (liveInLoop(i)) return {&i};
    if (!cheap(i) || depth >= kMaxDepth || made_.size() >= kMaxClones) return {};
    std::vector<Result> ops;
    bool fresh = false, extends = false;
    for (llvm::Value* op : i.operands()) {
      Result r = get(op, depth + 1);
      if (!r.value) return {};
      fresh |= r.fresh;
      extends |= r.extends;
      ops.push_back(r);
    }
    // An identical recomputation would be merged back into the original,
    // which would then be read after the loop.
    if (!fresh) return {&i, false, true};
    llvm::Instruction* c = i.clone();
    for (unsigned k = 0; k < ops.size(); ++k) c->setOperand(k, ops[k].value);
    c->setName(i.getName() + ".remat");
    b_.Insert(c);
    made_.push_back(c);
    return {c, true, extends};
  }

  llvm::Loop& loop_;
  llvm::IRBuilder<> b_;
  GpuTargetInfo& ti_;
  llvm::DenseMap<llvm::Instruction*, Result> memo_;
  std::vector<llvm::Instruction*> made_;
};

}  // namespace

unsigned rematerializeAfterLoops(llvm::Function& f, GpuTargetInfo& ti) {
  if (f.isDeclaration()) return 0;
  llvm::DominatorTree dt(f);
  llvm::LoopInfo li(dt);
  unsigned total = 0;
  for (llvm::Loop* loop : li) {  // outermost loops
    llvm::BasicBlock* header = loop->getHeader();
    llvm::BasicBlock* exit = loop->getUniqueExitBlock();
    if (!exit || !dt.dominates(header, exit) || exit->getFirstInsertionPt() == exit->end()) continue;
    // Candidates: instructions before the loop with uses after it.
    std::vector<std::pair<llvm::Instruction*, std::vector<llvm::Use*>>> work;
    for (llvm::BasicBlock& bb : f) {
      if (loop->contains(&bb) || !dt.dominates(&bb, header)) continue;
      for (llvm::Instruction& i : bb) {
        std::vector<llvm::Use*> after;
        for (llvm::Use& u : i.uses()) {
          auto* ui = llvm::cast<llvm::Instruction>(u.getUser());
          llvm::BasicBlock* at = ui->getParent();
          if (auto* phi = llvm::dyn_cast<llvm::PHINode>(ui)) at = phi->getIncomingBlock(u);
          if (!loop->contains(at) && dt.dominates(exit, at)) after.push_back(&u);
        }
        if (!after.empty()) work.emplace_back(&i, std::move(after));
      }
    }
    if (work.empty()) continue;
    LoopRemat remat(*loop, *exit, ti);
    for (auto& [i, uses] : work)
      if (!remat.liveInLoop(*i)) total += remat.run(*i, uses);
    remat.eraseUnused();
  }
  return total;
}

}  // namespace tessera::codegen
