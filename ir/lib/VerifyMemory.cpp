// The verifier's rules for the ops that touch memory: pointer arithmetic,
// global loads, stores and atomics, fences, shared and local buffers and
// their copies, barriers, async copies and the stages of pipelined and
// warp-specialised loops.
#include "VerifierImpl.h"

namespace tessera::ir::detail {

bool Verifier::verifyMemoryOp(const Op& op) {
  const OpCode c = op.code();
  switch (c) {
    case OpCode::PtrAdd: {
      operands(op, 2, 2);
      results(op, 1);
      const Type& p = in(op, 0);
      const Type& o = in(op, 1);
      if (!p.isPointerLike()) fail(op, "first operand " + ts(p) + " must be a pointer or a tile of pointers");
      if (!o.isIntLike() || o.dtype() == DType::I1 || o.shape() != p.shape())
        fail(op, "offsets " + ts(o) + " must be integers with the shape of " + ts(p));
      resultIs(op, p);
      return true;
    }
    case OpCode::Load: {
      operands(op, 1, 3);
      results(op, 1);
      const Type& p = in(op, 0);
      if (!p.isPointerLike()) fail(op, "operand " + ts(p) + " must be a pointer or a tile of pointers");
      Type want = p.withDType(p.dtype());
      resultIs(op, want);
      if (op.numOperands() >= 2) maskFor(op, 1, p);
      if (op.numOperands() == 3 && in(op, 2) != want)
        fail(op, "'other' " + ts(in(op, 2)) + " must have the result type " + ts(want));
      return true;
    }
    case OpCode::Store: {
      operands(op, 2, 3);
      results(op, 0);
      const Type& p = in(op, 0);
      if (!p.isPointerLike()) fail(op, "operand " + ts(p) + " must be a pointer or a tile of pointers");
      Type want = p.withDType(p.dtype());
      if (in(op, 1) != want) fail(op, "value " + ts(in(op, 1)) + " does not match the pointee: expected " + ts(want));
      if (op.numOperands() == 3) maskFor(op, 2, p);
      return true;
    }
    case OpCode::AtomicRmw:
    case OpCode::AtomicCas: {
      const bool cas = op.code() == OpCode::AtomicCas;
      operands(op, cas ? 3 : 2, cas ? 4 : 3);
      results(op, 1);
      const Type& p = in(op, 0);
      if (!p.isPointerLike()) fail(op, "operand " + ts(p) + " must be a pointer or a tile of pointers");
      if (p.space() != MemSpace::Global) fail(op, "needs global pointers, got " + ts(p));
      Type want = p.withDType(p.dtype());
      for (unsigned i = 1; i < valueOperand(op.code()) + 1; ++i)
        if (in(op, i) != want)
          fail(op, (i == 1 && cas ? "compare value " : "value ") + ts(in(op, i)) +
                       " does not match the pointee: expected " + ts(want));
      if (want.dtype() == DType::I1) fail(op, "is not defined on i1");
      if (!cas) {
        auto kind = parseAtomicKind(strAttr(op, "kind"));
        if (!kind) fail(op, "unknown kind '" + strAttr(op, "kind") + "' (expected add, min, max, and, or, xor, xchg)");
        if (isFloat(want.dtype()) && !takesFloats(*kind))
          fail(op, std::string("kind ") + name(*kind) + " is not defined on " + ts(want));
      }
      memAttrs(op);
      if (op.numOperands() == maskOperand(op.code()) + 1) maskFor(op, maskOperand(op.code()), p);
      resultIs(op, want);
      return true;
    }
    case OpCode::Fence:
      operands(op, 0, 0);
      results(op, 0);
      if (!acquires(memAttrs(op)) && !releases(memAttrs(op)))
        fail(op, "a relaxed fence orders nothing (expected acquire, release or acq_rel)");
      return true;
    case OpCode::Alloc: {
      operands(op, 0, 0);
      results(op, 1);
      const Type& r = out(op);
      if (!r.isBuffer() || (r.space() != MemSpace::Shared && r.space() != MemSpace::Local))
        fail(op, "result " + ts(r) + " must be a shared or local buffer");
      return true;
    }
    case OpCode::LocalLoad: {
      operands(op, 1, 1);
      results(op, 1);
      const Type& b = in(op, 0);
      if (!b.isBuffer()) fail(op, "operand " + ts(b) + " must be a buffer");
      resultIs(op, Type::tile(Type::scalar(b.dtype()), b.shape()));
      return true;
    }
    case OpCode::LocalStore: {
      operands(op, 2, 2);
      results(op, 0);
      const Type& b = in(op, 0);
      if (!b.isBuffer()) fail(op, "first operand " + ts(b) + " must be a buffer");
      Type want = Type::tile(Type::scalar(b.dtype()), b.shape());
      if (in(op, 1) != want)
        fail(op, "value " + ts(in(op, 1)) + " does not match buffer " + ts(b) + ": expected " + ts(want));
      return true;
    }
    case OpCode::Copy: {
      operands(op, 2, 3);
      results(op, 0);
      const Type& b = in(op, 0);
      const Type& s = in(op, 1);
      if (!b.isBuffer()) fail(op, "destination " + ts(b) + " must be a buffer");
      Type want = Type::tile(Type::ptr(b.dtype(), MemSpace::Global), b.shape());
      if (s != want) fail(op, "source " + ts(s) + " must be " + ts(want) + " to fill " + ts(b));
      if (op.numOperands() == 3) maskFor(op, 2, s);
      if (op.hasAttr("async")) {
        int64_t a = intAttr(op, "async");
        if (a != 0 && a != 1) fail(op, "attribute 'async' must be 0 or 1, got " + std::to_string(a));
        if (a == 1 && b.space() != MemSpace::Shared) fail(op, "an async copy needs a shared destination, got " + ts(b));
      }
      return true;
    }
    case OpCode::Barrier:
    case OpCode::ClusterBarrier:
      operands(op, 0, 0);
      results(op, 0);
      return true;
    case OpCode::RemoteBuffer: {
      operands(op, 2, 2);
      results(op, 1);
      const Type& b = in(op, 0);
      const Type& r = in(op, 1);
      if (!b.isBuffer() || b.space() != MemSpace::Shared) fail(op, "operand " + ts(b) + " must be a shared buffer");
      if (!r.isScalar() || r.dtype() != DType::I32) fail(op, "rank " + ts(r) + " must be an i32 scalar");
      // The view is of the program's own allocation (or a slot of it): the
      // same offset in another program's shared memory. A view of a view
      // would name a third program's memory through a second's.
      const Value* root = op.operand(0);
      while (root->definingOp() && root->definingOp()->code() == OpCode::BufferSlot)
        root = root->definingOp()->operand(0);
      if (!root->definingOp() || root->definingOp()->code() != OpCode::Alloc)
        fail(op, "operand must be a shared buffer the kernel allocates (or a slot of one), not another program's view");
      resultIs(op, b);
      return true;
    }
    case OpCode::Probe: {
      operands(op, 0, 0);
      results(op, 0);
      if (strAttr(op, "name").empty()) fail(op, "needs a non-empty scope name");
      const int64_t end = intAttr(op, "end");
      if (end != 0 && end != 1) fail(op, "attribute 'end' must be 0 (the scope's begin) or 1 (its end)");
      return true;
    }
    case OpCode::Assert: {
      operands(op, 1, 1);
      results(op, 0);
      if (in(op, 0).dtype() != DType::I1 || in(op, 0).isBuffer() || in(op, 0).isPointer())
        fail(op, "condition " + ts(in(op, 0)) + " must be an i1 scalar or tile");
      if (strAttr(op, "message").empty()) fail(op, "needs a non-empty message");
      return true;
    }
    case OpCode::BufferSlot: {
      operands(op, 2, 2);
      results(op, 1);
      const Type& b = in(op, 0);
      const Type& i = in(op, 1);
      if (!b.isBuffer() || b.rank() < 2) fail(op, "operand " + ts(b) + " must be a buffer of rank >= 2 (slots x tile)");
      if (!i.isScalar() || !i.isIntLike() || i.dtype() == DType::I1)
        fail(op, "index " + ts(i) + " must be an integer scalar");
      resultIs(op, Type::buffer(b.dtype(), b.space(), Shape(b.shape().begin() + 1, b.shape().end())));
      // A constant index is checked here; others by the pipeline verifier
      // where they matter (slots written by async copies).
      const Op* d = op.operand(1)->definingOp();
      if (d && d->code() == OpCode::Constant) {
        auto it = d->attrs().find("value");
        if (it != d->attrs().end() && std::holds_alternative<int64_t>(it->second)) {
          int64_t v = std::get<int64_t>(it->second);
          if (v < 0 || v >= b.shape()[0])
            fail(op, "slot index " + std::to_string(v) + " is out of range for " + ts(b) + " (" +
                         std::to_string(b.shape()[0]) + " slots)");
        }
      }
      return true;
    }
    case OpCode::AsyncCommit:
      operands(op, 0, 0);
      results(op, 0);
      return true;
    case OpCode::AsyncWait: {
      operands(op, 0, 0);
      results(op, 0);
      int64_t n = intAttr(op, "pending");
      if (n < 0) fail(op, "'pending' must be >= 0, got " + std::to_string(n));
      return true;
    }
    case OpCode::WarpSpecialize: {
      operands(op, 0, 0);
      results(op, 0);
      if (op.numRegions() != 1 || op.region(0).block().numArgs() != 0)
        fail(op, "needs one region without arguments (the producer's code)");
      int64_t w = intAttr(op, "warps");
      if (w < 1 || w > 32) fail(op, "'warps' must be in [1, 32], got " + std::to_string(w));
      checkYield(op, op.region(0).block(), "producer");
      return true;
    }
    case OpCode::StageAcquire:
    case OpCode::StageCommit:
    case OpCode::StageWait:
    case OpCode::StageRelease: {
      operands(op, 1, op.code() == OpCode::StageRelease ? 2 : 1);
      results(op, 0);
      const Type& i = in(op, 0);
      if (!i.isScalar() || !i.isIntLike() || i.dtype() == DType::I1)
        fail(op, "slot index " + ts(i) + " must be an integer scalar");
      if (op.numOperands() == 2 && in(op, 1) != Type::scalar(DType::I1))
        fail(op, "condition " + ts(in(op, 1)) + " must be an i1 scalar");
      int64_t n = intAttr(op, "slots");
      if (n < 1) fail(op, "'slots' must be >= 1, got " + std::to_string(n));
      return true;
    }
    default: return false;
  }
}

}  // namespace tessera::ir::detail
