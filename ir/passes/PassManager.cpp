#include "tessera/ir/Pass.h"

#include "PassUtils.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

namespace tessera::ir {

namespace passutil {
namespace {
void cloneInto(Block& dst, const Block& src, ValueMap& m) {
  for (auto& a : src.args()) m[a.get()] = dst.addArgument(a->type());
  Builder b(&dst);
  for (auto& op : src.ops()) cloneOp(b, *op, m);
}
}  // namespace

Op* cloneOp(Builder& b, const Op& op, ValueMap& m) {
  std::vector<Value*> operands;
  for (Value* v : op.operands()) operands.push_back(mapped(m, v));
  std::vector<Type> types;
  for (auto& r : op.results()) types.push_back(r->type());
  Location saved = b.loc();
  b.setLoc(op.loc());
  Op* n = b.create(op.code(), std::move(operands), types, op.attrs());
  b.setLoc(saved);
  for (unsigned i = 0; i < op.numResults(); ++i) m[op.result(i)] = n->result(i);
  for (auto& r : op.regions()) cloneInto(n->addRegion()->block(), r->block(), m);
  return n;
}

std::vector<Staged> stagedCopies(Block& body) {
  std::vector<Staged> staged;
  for (auto& op : body.ops()) {
    if (op->code() != OpCode::Copy) continue;
    Op* view = op->operand(0)->definingOp();
    if (view && view->code() == OpCode::BufferSlot && view->parent() == &body)
      staged.push_back({op.get(), view, view->operand(0)});
  }
  return staged;
}

void removeDeadPureOps(Function& f, Block& b) {
  auto uses = countUses(f);
  auto& ops = b.ops();
  for (size_t i = ops.size(); i-- > 0;) {
    Op& op = *ops[i];
    if (hasSideEffects(op.code()) || op.numRegions() != 0 || op.numResults() == 0) continue;
    bool used = false;
    for (auto& r : op.results()) used = used || uses[r.get()] != 0;
    if (used) continue;
    for (Value* v : op.operands()) --uses[v];
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void replaceAllUsesWith(Function& f, Value* from, Value* to) {
  walk(f.body(), [&](Op& op) {
    for (unsigned i = 0; i < op.numOperands(); ++i)
      if (op.operand(i) == from) op.setOperand(i, to);
  });
}

void eraseOps(Block& b, OpCode code) {
  auto& ops = b.ops();
  std::erase_if(ops, [&](const std::unique_ptr<Op>& op) { return op->code() == code; });
  for (auto& op : ops)
    for (auto& r : op->regions()) eraseOps(r->block(), code);
}

std::unordered_map<const Value*, unsigned> countUses(Function& f) {
  std::unordered_map<const Value*, unsigned> uses;
  walk(f.body(), [&](Op& op) {
    for (Value* v : op.operands()) ++uses[v];
  });
  return uses;
}
}  // namespace passutil

void PassManager::run(Function& f) {
  // Malformed input is the caller's error, not a pass bug: check it first so
  // the blame below is accurate and no pass ever sees invalid IR.
  verify(f);
  for (auto& p : passes_) {
    p->run(f);
    if (after_) after_(p->name(), f);  // before verifying, so a dump shows the broken IR
    try {
      verify(f);
    } catch (const VerifyError& e) {
      throw InternalError(std::string("internal compiler error: the IR is invalid after pass '") + p->name() +
                          "'; please report this as a Tessera bug:\n" + e.what());
    }
  }
}

std::vector<std::string> passNames() {
  return {
#define TS_PASS(name, factory) name,
#include "tessera/ir/Passes.def"
  };
}

std::unique_ptr<Pass> createPassByName(const std::string& name) {
#define TS_PASS(pname, factory) \
  if (name == pname) return factory();
#include "tessera/ir/Passes.def"
  std::string known;
  for (const std::string& n : passNames()) known += (known.empty() ? "" : ", ") + n;
  throw UsageError("unknown pass '" + name + "'; the passes are " + known);
}

void addDefaultPasses(PassManager& pm) {
  pm.add(createCanonicalizePass());
  pm.add(createCSEPass());
  pm.add(createDeadCodeEliminationPass());
}

}  // namespace tessera::ir
