// The verifier's rules for reductions, scans and dots.
#include "VerifierImpl.h"

namespace tessera::ir::detail {

bool Verifier::verifyComputeOp(const Op& op) {
  const OpCode c = op.code();
  switch (c) {
    case OpCode::Reduce: {
      operands(op, 1, 1);
      results(op, 1);
      const Type& s = in(op, 0);
      if (!s.isTile() || !s.isNumeric()) fail(op, "operand " + ts(s) + " must be a tile of numbers");
      const std::string& kind = strAttr(op, "kind");
      if (!isReduceKind(kind)) fail(op, "unknown kind '" + kind + "' (expected sum, max, min, argmax, argmin)");
      int64_t axis = intAttr(op, "axis");
      if (axis < 0 || axis >= s.rank()) fail(op, "axis " + std::to_string(axis) + " is out of range for " + ts(s));
      Shape sh = s.shape();
      sh.erase(sh.begin() + axis);
      Type want = (kind == "argmax" || kind == "argmin" ? Type::scalar(DType::I32) : s.element()).withShape(sh);
      resultIs(op, want);
      return true;
    }
    case OpCode::Scan: {
      operands(op, 1, 1);
      results(op, 1);
      const Type& s = in(op, 0);
      if (!s.isTile() || !s.isNumeric() || s.dtype() == DType::I1)
        fail(op, "operand " + ts(s) + " must be a tile of numbers (not i1)");
      resultIs(op, s);
      int64_t axis = intAttr(op, "axis");
      if (axis < 0 || axis >= s.rank()) fail(op, "axis " + std::to_string(axis) + " is out of range for " + ts(s));
      if (op.numRegions() != 1) fail(op, "needs exactly one region (the combine function)");
      const Block& b = op.region(0).block();
      const Type elem = s.element();
      if (b.numArgs() != 2 || b.arg(0)->type() != elem || b.arg(1)->type() != elem)
        fail(op, "combine region needs two arguments of type " + ts(elem));
      // The combine function is evaluated many times, in an order the
      // backend picks: it must be a pure function of scalars.
      for (auto& inner : b.ops()) {
        if (inner->code() == OpCode::Yield) continue;
        if (!isElementwise(inner->code()) && inner->code() != OpCode::Constant)
          fail(*inner, "cannot appear in the combine region of 'scan' (only elementwise ops and constants)");
        for (Value* v : inner->operands())
          if (v && !v->type().isScalar())
            fail(*inner, "uses " + ts(v->type()) + " in the combine region of 'scan' (only scalars)");
        for (auto& r : inner->results())
          if (!r->type().isScalar())
            fail(*inner, "yields " + ts(r->type()) + " in the combine region of 'scan' (only scalars)");
      }
      const Op* y = b.terminator();
      if (!y || y->code() != OpCode::Yield) fail(op, "combine region must end in 'yield'");
      if (y->numOperands() != 1 || !y->operand(0) || y->operand(0)->type() != elem)
        fail(*y, "must yield one " + ts(elem) + " (the combined value)");
      return true;
    }
    case OpCode::Dot: {
      operands(op, 3, 3);
      results(op, 1);
      const Type& a = in(op, 0);
      const Type& b = in(op, 1);
      const Type& acc = in(op, 2);
      if (!a.isNumeric() || !b.isNumeric() || !acc.isNumeric() || a.rank() != 2 || b.rank() != 2 || acc.rank() != 2)
        fail(op, "needs rank-2 tiles, got " + ts(a) + ", " + ts(b) + ", " + ts(acc));
      if (a.shape()[1] != b.shape()[0] || acc.shape()[0] != a.shape()[0] || acc.shape()[1] != b.shape()[1])
        fail(op, "shapes do not contract: " + ts(a) + " x " + ts(b) + " -> " + ts(acc));
      // Two fp8 operands may differ in format (e4m3 x e5m2, as the tensor
      // cores take them).
      if (a.dtype() != b.dtype() && !(isFp8(a.dtype()) && isFp8(b.dtype())))
        fail(op, "operand dtypes differ: " + ts(a) + " vs " + ts(b));
      DType d = a.dtype();
      if (d != DType::F16 && d != DType::BF16 && d != DType::F32 && d != DType::I8 && !isFp8(d))
        fail(op, "operands must be f16, bf16, f32, i8 or fp8 (f8e4m3, f8e5m2 and their fnuz variants), got " + ts(a));
      DType accD = d == DType::I8 ? DType::I32 : DType::F32;
      if (acc.dtype() != accD)
        fail(op, "accumulator " + ts(acc) + " must be " + name(accD) + " for " + name(d) + " operands");
      resultIs(op, acc);
      if (op.hasAttr("async")) {
        int64_t x = intAttr(op, "async");
        if (x != 0 && x != 1) fail(op, "attribute 'async' must be 0 or 1, got " + std::to_string(x));
      }
      return true;
    }
    case OpCode::DotWait: {
      if (op.numResults() != op.numOperands())
        fail(op, "has " + std::to_string(op.numOperands()) + " operands but " + std::to_string(op.numResults()) +
                     " results (it returns its operands)");
      for (unsigned i = 0; i < op.numOperands(); ++i)
        if (in(op, i) != op.result(i)->type())
          fail(op, "result #" + std::to_string(i) + " has type " + ts(op.result(i)->type()) + " but operand #" +
                       std::to_string(i) + " is " + ts(in(op, i)));
      int64_t n = intAttr(op, "pending");
      if (n < 0) fail(op, "'pending' must be >= 0, got " + std::to_string(n));
      if (op.numOperands() != 0 && n != 0)
        fail(op, "completes its operands only with 'pending' = 0, got " + std::to_string(n) +
                     " (a wait that leaves dots in flight takes no operands)");
      return true;
    }
    default: return false;
  }
}

}  // namespace tessera::ir::detail
