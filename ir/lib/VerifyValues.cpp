// The verifier's rules for the ops that make and reshape values: program ids,
// constants, ranges, broadcasts and shape changes, gathers, joins and splits,
// fma, comparisons, selects and casts.
#include "VerifierImpl.h"

namespace tessera::ir::detail {

bool Verifier::verifyValueOp(const Op& op) {
  const OpCode c = op.code();
  switch (c) {
    case OpCode::ProgramId:
    case OpCode::NumPrograms: {
      operands(op, 0, 0);
      results(op, 1);
      int64_t axis = intAttr(op, "axis");
      if (axis < 0 || axis > 2) fail(op, "axis " + std::to_string(axis) + " is out of range 0..2");
      resultIs(op, Type::scalar(DType::I32));
      return true;
    }
    case OpCode::ClusterRank:
    case OpCode::ClusterSize:
    case OpCode::CancelProgram:
      operands(op, 0, 0);
      results(op, 1);
      resultIs(op, Type::scalar(DType::I32));
      return true;
    case OpCode::Constant: {
      operands(op, 0, 0);
      results(op, 1);
      if (!out(op).isNumeric()) fail(op, "result type " + ts(out(op)) + " must be a scalar or a tile of scalars");
      auto it = op.attrs().find("value");
      if (it == op.attrs().end()) fail(op, "needs a 'value' attribute");
      bool isInt = std::holds_alternative<int64_t>(it->second);
      bool isFlt = std::holds_alternative<double>(it->second);
      if (out(op).isIntLike() && !isInt) fail(op, "of integer type " + ts(out(op)) + " needs an integer value");
      if (out(op).isFloatLike() && !isInt && !isFlt)
        fail(op, "of float type " + ts(out(op)) + " needs a numeric value");
      return true;
    }
    case OpCode::Splat: {
      operands(op, 1, 1);
      results(op, 1);
      const Type& s = in(op, 0);
      if (!s.isScalar() && !s.isPointer()) fail(op, "operand " + ts(s) + " must be a scalar or a pointer");
      if (!out(op).isTile() || out(op).element() != s)
        fail(op, "result " + ts(out(op)) + " must be a tile of " + ts(s));
      return true;
    }
    case OpCode::Arange: {
      operands(op, 0, 0);
      results(op, 1);
      int64_t start = intAttr(op, "start"), end = intAttr(op, "end");
      if (end <= start) fail(op, "end " + std::to_string(end) + " must be greater than start " + std::to_string(start));
      if (start < INT32_MIN || end > int64_t{INT32_MAX} + 1) fail(op, "range must fit in i32");
      resultIs(op, Type::tile(Type::scalar(DType::I32), {end - start}));
      return true;
    }
    case OpCode::Broadcast: {
      operands(op, 1, 1);
      results(op, 1);
      const Type& s = in(op, 0);
      const Type& r = out(op);
      if (!s.isTile() || !r.isTile() || s.element() != r.element() || s.rank() != r.rank())
        fail(op, "cannot broadcast " + ts(s) + " to " + ts(r) + " (tiles of one element type and rank)");
      for (int i = 0; i < s.rank(); ++i)
        if (s.shape()[i] != r.shape()[i] && s.shape()[i] != 1)
          fail(op,
               "cannot broadcast " + ts(s) + " to " + ts(r) + ": dim " + std::to_string(i) + " is neither equal nor 1");
      return true;
    }
    case OpCode::ExpandDims: {
      operands(op, 1, 1);
      results(op, 1);
      const Type& s = in(op, 0);
      if (!s.isTile()) fail(op, "operand " + ts(s) + " must be a tile");
      int64_t axis = intAttr(op, "axis");
      if (axis < 0 || axis > s.rank()) fail(op, "axis " + std::to_string(axis) + " is out of range for " + ts(s));
      Shape sh = s.shape();
      sh.insert(sh.begin() + axis, 1);
      resultIs(op, s.withShape(sh));
      return true;
    }
    case OpCode::Reshape: {
      operands(op, 1, 1);
      results(op, 1);
      const Type& s = in(op, 0);
      const Type& r = out(op);
      if (!s.isTile() || !r.isTile() || s.element() != r.element())
        fail(op, "cannot reshape " + ts(s) + " to " + ts(r) + " (tiles of one element type)");
      if (s.numElements() != r.numElements())
        fail(op, "cannot reshape " + ts(s) + " to " + ts(r) + ": element counts differ");
      return true;
    }
    case OpCode::Transpose: {
      operands(op, 1, 1);
      results(op, 1);
      const Type& s = in(op, 0);
      if (!s.isTile()) fail(op, "operand " + ts(s) + " must be a tile");
      const auto& perm = intsAttr(op, "perm");
      std::vector<int64_t> sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      bool ok = static_cast<int>(perm.size()) == s.rank();
      for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int64_t>(i);
      if (!ok) fail(op, "perm is not a permutation of the " + std::to_string(s.rank()) + " dims of " + ts(s));
      Shape sh;
      for (int64_t p : perm) sh.push_back(s.shape()[static_cast<size_t>(p)]);
      resultIs(op, s.withShape(sh));
      return true;
    }
    case OpCode::Gather: {
      operands(op, 2, 2);
      results(op, 1);
      const Type& s = in(op, 0);
      const Type& idx = in(op, 1);
      if (!s.isTile() || !s.isNumeric()) fail(op, "source " + ts(s) + " must be a tile of numbers");
      if (!idx.isTile() || !idx.isIntLike() || idx.dtype() == DType::I1)
        fail(op, "index " + ts(idx) + " must be a tile of integers (not i1)");
      int64_t axis = intAttr(op, "axis");
      if (axis < 0 || axis >= s.rank()) fail(op, "axis " + std::to_string(axis) + " is out of range for " + ts(s));
      if (idx.rank() != s.rank()) fail(op, "index " + ts(idx) + " must have the rank of the source " + ts(s));
      for (int d = 0; d < s.rank(); ++d)
        if (d != axis && idx.shape()[d] != s.shape()[d])
          fail(op, "index shape " + shapeStr(idx.shape()) + " must equal the source shape " + shapeStr(s.shape()) +
                       " except along axis " + std::to_string(axis) + " (dim " + std::to_string(d) + " differs)");
      resultIs(op, s.withShape(idx.shape()));
      return true;
    }
    case OpCode::Join: {
      operands(op, 2, 2);
      results(op, 1);
      const Type& a = in(op, 0);
      if (!a.isTile() || !a.isNumeric()) fail(op, "operand " + ts(a) + " must be a tile of numbers");
      if (in(op, 1) != a) fail(op, "operand types differ: " + ts(a) + ", " + ts(in(op, 1)));
      checkJoinRank(op);
      Shape sh = a.shape();
      sh.push_back(2);
      resultIs(op, a.withShape(sh));
      return true;
    }
    case OpCode::Split: {
      operands(op, 1, 1);
      results(op, 2);
      const Type& x = in(op, 0);
      if (!x.isTile() || !x.isNumeric()) fail(op, "operand " + ts(x) + " must be a tile of numbers");
      if (x.rank() < 2 || x.shape().back() != 2)
        fail(op, "operand " + ts(x) + " must have rank 2 or more and a last dim of 2");
      Shape sh(x.shape().begin(), x.shape().end() - 1);
      Type want = x.withShape(sh);
      for (unsigned i = 0; i < 2; ++i)
        if (op.result(i)->type() != want)
          fail(op, "result " + std::to_string(i) + " type " + ts(op.result(i)->type()) + " should be " + ts(want));
      return true;
    }
    case OpCode::Fma: {
      operands(op, 3, 3);
      results(op, 1);
      const Type& a = in(op, 0);
      if (in(op, 1) != a || in(op, 2) != a)
        fail(op, "operand types differ: " + ts(a) + ", " + ts(in(op, 1)) + ", " + ts(in(op, 2)));
      if (!a.isFloatLike()) fail(op, "needs float operands, got " + ts(a));
      resultIs(op, a);
      return true;
    }
    case OpCode::Cmp: {
      operands(op, 2, 2);
      results(op, 1);
      const Type& a = in(op, 0);
      if (a != in(op, 1)) fail(op, "operand types differ: " + ts(a) + " vs " + ts(in(op, 1)));
      if (!a.isNumeric()) fail(op, "needs numeric operands, got " + ts(a));
      const std::string& p = strAttr(op, "pred");
      if (p != "eq" && p != "ne" && p != "lt" && p != "le" && p != "gt" && p != "ge")
        fail(op, "unknown predicate '" + p + "' (expected eq, ne, lt, le, gt, ge)");
      resultIs(op, a.withDType(DType::I1));
      return true;
    }
    case OpCode::Select: {
      operands(op, 3, 3);
      results(op, 1);
      const Type& cnd = in(op, 0);
      const Type& a = in(op, 1);
      if (a != in(op, 2)) fail(op, "value types differ: " + ts(a) + " vs " + ts(in(op, 2)));
      if (a.isBuffer()) fail(op, "cannot select buffers");
      if (!cnd.isNumeric() || cnd.dtype() != DType::I1 || cnd.shape() != a.shape())
        fail(op, "condition " + ts(cnd) + " must be i1 with the shape of " + ts(a));
      resultIs(op, a);
      return true;
    }
    case OpCode::Cast: {
      operands(op, 1, 1);
      results(op, 1);
      const Type& s = in(op, 0);
      const Type& r = out(op);
      if (!s.isNumeric() || !r.isNumeric()) fail(op, "casts numbers only: " + ts(s) + " to " + ts(r));
      if (s.shape() != r.shape()) fail(op, "cannot change the shape: " + ts(s) + " to " + ts(r));
      return true;
    }
    case OpCode::Bitcast: {
      operands(op, 1, 1);
      results(op, 1);
      const Type& s = in(op, 0);
      const Type& r = out(op);
      if (!s.isNumeric() || !r.isNumeric()) fail(op, "reinterprets numbers only: " + ts(s) + " to " + ts(r));
      if (s.shape() != r.shape()) fail(op, "cannot change the shape: " + ts(s) + " to " + ts(r));
      if (s.dtype() == DType::I1 || r.dtype() == DType::I1)
        fail(op, "i1 has no bit layout to reinterpret: " + ts(s) + " to " + ts(r));
      if (bitWidth(s.dtype()) != bitWidth(r.dtype()))
        fail(op, "needs dtypes of the same width: " + ts(s) + " (" + std::to_string(bitWidth(s.dtype())) +
                     " bits) to " + ts(r) + " (" + std::to_string(bitWidth(r.dtype())) + " bits)");
      return true;
    }
    default: return false;
  }
}

}  // namespace tessera::ir::detail
