// Which kernel arguments a pointer may point into (PointerOrigin.h).
#include "tessera/ir/analysis/PointerOrigin.h"

#include <algorithm>

namespace tessera::ir {

namespace {
using ArgSet = std::vector<unsigned>;  // sorted kernel-argument indices

bool mergeInto(ArgSet& dst, const ArgSet& src) {
  bool changed = false;
  for (unsigned a : src) {
    auto it = std::lower_bound(dst.begin(), dst.end(), a);
    if (it == dst.end() || *it != a) {
      dst.insert(it, a);
      changed = true;
    }
  }
  return changed;
}
}  // namespace

const std::vector<unsigned>& PointerOrigins::of(const Value* v) const {
  static const ArgSet empty;
  auto it = prov_.find(v);
  return it == prov_.end() ? empty : it->second;
}

PointerOrigins::PointerOrigins(const Function& f) {
  for (unsigned i = 0; i < f.numArgs(); ++i)
    if (f.arg(i)->type().isPointerLike()) prov_[f.arg(i)] = {i};
  // Loop-carried and `if` values feed back: iterate to a fixpoint (each
  // round only adds arguments, so it ends within #args + 1 rounds).
  for (unsigned round = 0; round <= f.numArgs() + 1; ++round) {
    bool changed = false;
    auto flow = [&](const Value* to, const Value* from) {
      if (!to->type().isPointerLike()) return;
      const ArgSet src = of(from);  // copy: prov_ may rehash
      if (!src.empty()) changed |= mergeInto(prov_[to], src);
    };
    walk(const_cast<Block&>(f.body()), [&](Op& op) {
      switch (op.code()) {
        case OpCode::Splat:
        case OpCode::PtrAdd:
        case OpCode::Broadcast:
        case OpCode::ExpandDims:
        case OpCode::Reshape:
        case OpCode::Transpose: flow(op.result(), op.operand(0)); break;
        case OpCode::Select:
          flow(op.result(), op.operand(1));
          flow(op.result(), op.operand(2));
          break;
        case OpCode::For: {
          const Block& b = op.region(0).block();
          const Op* y = b.terminator();
          for (unsigned i = 0; i < op.numResults(); ++i) {
            flow(b.arg(i + 1), op.operand(3 + i));
            if (y && i < y->numOperands()) flow(b.arg(i + 1), y->operand(i));
            flow(op.result(i), b.arg(i + 1));
          }
          break;
        }
        case OpCode::If:
          for (unsigned r = 0; r < 2; ++r) {
            const Op* y = op.region(r).block().terminator();
            for (unsigned i = 0; y && i < op.numResults() && i < y->numOperands(); ++i)
              flow(op.result(i), y->operand(i));
          }
          break;
        default: break;
      }
    });
    if (!changed) break;
  }
}

}  // namespace tessera::ir
