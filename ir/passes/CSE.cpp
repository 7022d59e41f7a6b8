// Common subexpression elimination over pure ops: an op identical to one
// that dominates it (same opcode, operands, attributes and result types, in
// this block or an enclosing one) is replaced by the earlier op's results.
//
// Excluded on purpose: ops with effects or regions; `load` and `local_load`
// (memory may change between two reads); `alloc` (every alloc is a distinct
// buffer, two identical allocs are not the same memory).
#include <string>
#include <unordered_map>
#include <vector>

#include "../lib/PrinterDetail.h"
#include "tessera/ir/Pass.h"

namespace tessera::ir {
namespace {

bool eligible(const Op& op) {
  if (hasSideEffects(op.code()) || op.numRegions() != 0 || op.numResults() == 0) return false;
  switch (op.code()) {
    case OpCode::Load:
    case OpCode::LocalLoad:
    case OpCode::Alloc: return false;
    // Each async dot is a group of its own (dot_wait counts them).
    case OpCode::Dot: return !op.hasAttr("async") || op.intAttr("async") == 0;
    default: return true;
  }
}

// A textual key: attributes go through the printer's spelling, which is
// exact (hex floats keep every bit, so -0.0 and 0.0 stay apart).
std::string keyOf(const Op& op) {
  std::string k = std::to_string(static_cast<int>(op.code()));
  // Appended piecewise (`"|" + std::string` trips a GCC 12 -Wrestrict false positive).
  for (Value* v : op.operands()) {
    k += '|';
    k += std::to_string(reinterpret_cast<uintptr_t>(v));
  }
  for (auto& [name, a] : op.attrs()) {
    k += '|';
    k += name;
    k += '=';
    k += detail::attrText(a);
  }
  for (auto& r : op.results()) {
    k += '|';
    k += r->type().str();
  }
  return k;
}

class CSE : public Pass {
 public:
  const char* name() const override { return "cse"; }

  void run(Function& f) override {
    repl_.clear();
    scopes_.clear();
    visit(f.body());
    dead_.clear();
  }

 private:
  Value* resolve(Value* v) const {
    auto it = repl_.find(v);
    return it == repl_.end() ? v : it->second;
  }

  // Walks in program order, so every use is visited after its definition:
  // remapping operands on the way replaces all uses without a second walk.
  void visit(Block& b) {
    scopes_.emplace_back();
    std::vector<std::unique_ptr<Op>> kept;
    kept.reserve(b.ops().size());
    for (auto& op : b.ops()) {
      for (unsigned i = 0; i < op->numOperands(); ++i) op->setOperand(i, resolve(op->operand(i)));
      // A warp-specialised producer sees nothing of the body but the
      // kernel's arguments and allocs (IR.h): its ops are merged among
      // themselves only, never with the body's.
      std::vector<std::unordered_map<std::string, Op*>> outer;
      if (op->code() == OpCode::WarpSpecialize) std::swap(outer, scopes_);
      for (auto& r : op->regions()) visit(r->block());
      if (op->code() == OpCode::WarpSpecialize) std::swap(outer, scopes_);
      if (eligible(*op)) {
        std::string key = keyOf(*op);
        Op* prev = lookup(key);
        if (prev) {
          for (unsigned i = 0; i < op->numResults(); ++i) repl_[op->result(i)] = prev->result(i);
          // Dropped: every later use is remapped to `prev`. Kept alive until
          // the pass ends so no address in repl_ is reused meanwhile.
          dead_.push_back(std::move(op));
          continue;
        }
        scopes_.back().emplace(std::move(key), op.get());
      }
      kept.push_back(std::move(op));
    }
    b.ops() = std::move(kept);
    scopes_.pop_back();
  }

  Op* lookup(const std::string& key) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(key);
      if (f != it->end()) return f->second;
    }
    return nullptr;
  }

  std::unordered_map<Value*, Value*> repl_;
  std::vector<std::unordered_map<std::string, Op*>> scopes_;
  std::vector<std::unique_ptr<Op>> dead_;
};

}  // namespace

std::unique_ptr<Pass> createCSEPass() { return std::make_unique<CSE>(); }

}  // namespace tessera::ir
