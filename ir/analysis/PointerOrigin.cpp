// Which kernel argument a pointer derives from (PointerOrigin.h).
#include "tessera/ir/analysis/PointerOrigin.h"

namespace tessera::ir {

int pointerArgument(const Function& f, const Value* v) {
  while (const Op* d = v->definingOp()) {
    switch (d->code()) {
      case OpCode::PtrAdd:
      case OpCode::Splat:
      case OpCode::Broadcast:
      case OpCode::ExpandDims:
      case OpCode::Reshape:
      case OpCode::Transpose: v = d->operand(0); continue;
      default: return -1;
    }
  }
  for (unsigned i = 0; i < f.numArgs(); ++i)
    if (f.arg(i) == v) return static_cast<int>(i);
  return -1;
}

}  // namespace tessera::ir
