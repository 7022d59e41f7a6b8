// The verifier's rules for reductions, scans and dots.
#include "VerifierImpl.h"
#include "tessera/ir/ScaledDot.h"

#include <optional>

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
      operands(op, 3, 5);
      results(op, 1);
      const Type& a = in(op, 0);
      const Type& b = in(op, 1);
      const Type& acc = in(op, 2);
      if (op.numOperands() == 4) fail(op, "takes both block scales or none, got one");
      if (!a.isNumeric() || !b.isNumeric() || !acc.isNumeric() || a.rank() != 2 || b.rank() != 2 || acc.rank() != 2)
        fail(op, "needs rank-2 tiles, got " + ts(a) + ", " + ts(b) + ", " + ts(acc));
      if (a.shape()[1] != b.shape()[0] || acc.shape()[0] != a.shape()[0] || acc.shape()[1] != b.shape()[1])
        fail(op, "shapes do not contract: " + ts(a) + " x " + ts(b) + " -> " + ts(acc));
      if (op.numOperands() == 5) {
        // The block-scaled form a target with block-scaled matrix
        // instructions lowers natively (decompose-scaled-dots leaves it):
        // u8 operands holding one element a byte of the OCP dtypes
        // `a_elem` / `b_elem` (kind::mxf8f6f4's containers:
        // buildMmaContainers), or with `packed` fp4 x fp4 two a byte along
        // K, e8m0 codes (u8) scaling blocks of 32 along K, A's [M, K/32]
        // and B's [N, K/32] (with `scale_elem = "ue4m3"` NVFP4's scales of
        // blocks of 16), an f32 accumulator.
        const Type& sa = in(op, 3);
        const Type& sb = in(op, 4);
        for (const char* k : {"a_elem", "b_elem"}) {
          std::optional<DType> d = parseDType(strAttr(op, k));
          if (!d || !(*d == DType::F8E4M3 || *d == DType::F8E5M2 || *d == DType::F6E2M3 || *d == DType::F6E3M2 ||
                      *d == DType::F4E2M1))
            fail(op, std::string("block-scaled '") + k + "' must be f8e4m3, f8e5m2, f6e2m3, f6e3m2 or f4e2m1, got '" +
                         strAttr(op, k) + "'");
        }
        if (a.dtype() != DType::U8 || b.dtype() != DType::U8 || acc.dtype() != DType::F32)
          fail(op, "block-scaled operands must be u8 elements and an f32 accumulator, got " + ts(a) + ", " + ts(b) +
                       ", " + ts(acc));
        const bool packed = op.hasAttr("packed") && op.intAttr("packed") != 0;
        if (packed && (strAttr(op, "a_elem") != "f4e2m1" || strAttr(op, "b_elem") != "f4e2m1"))
          fail(op, "a packed block-scaled dot takes f4e2m1 x f4e2m1, got '" + strAttr(op, "a_elem") + "' x '" +
                       strAttr(op, "b_elem") + "'");
        if (op.hasAttr("scale_elem") && strAttr(op, "scale_elem") != "e8m0" && strAttr(op, "scale_elem") != "ue4m3")
          fail(op, "block-scaled 'scale_elem' must be e8m0 or ue4m3, got '" + strAttr(op, "scale_elem") + "'");
        const int64_t M = a.shape()[0], K = a.shape()[1] * (packed ? 2 : 1), N = b.shape()[1];
        const int64_t bs = dotScaleBlock(op);
        const char* codes = bs == 16 ? "ue4m3" : "e8m0";
        if (K % bs != 0)
          fail(op, "block-scaled K must be a multiple of " + std::to_string(bs) + ", got " + ts(a) +
                       (packed ? " (packed)" : ""));
        const Shape wantA = {M, K / bs}, wantB = {N, K / bs};
        if (!sa.isTile() || sa.dtype() != DType::U8 || sa.shape() != wantA || !sb.isTile() || sb.dtype() != DType::U8 ||
            sb.shape() != wantB)
          fail(op, std::string("block scales must be u8 (") + codes + " codes) tiles " + shapeStr(wantA) + " and " +
                       shapeStr(wantB) + ", got " + ts(sa) + ", " + ts(sb));
        resultIs(op, acc);
        return true;
      }
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
    case OpCode::DotScaled: {
      operands(op, 5, 6);
      results(op, 1);
      const ScaledFormatInfo* f[2];
      const char* attr[2] = {"a_format", "b_format"};
      for (int i = 0; i < 2; ++i) {
        f[i] = findScaledFormat(strAttr(op, attr[i]));
        if (!f[i])
          fail(op, std::string("unknown ") + attr[i] + " '" + strAttr(op, attr[i]) + "' (expected " +
                       scaledFormatNames() + ")");
      }
      // Per operand: codes u8 [rows, K] (fp4: [rows, K/2]), K a multiple of
      // the block, scales [rows, K / block] (u8, or f8e4m3 for nvfp4's).
      int64_t rows[2], k[2];
      for (int i = 0; i < 2; ++i) {
        const char* which = i == 0 ? "a" : "b";
        const Type& c = in(op, 2 * i);
        const Type& s = in(op, 2 * i + 1);
        if (!c.isTile() || !c.isNumeric() || c.rank() != 2 || c.dtype() != DType::U8)
          fail(op, std::string(which) + " codes must be a rank-2 u8 tile, got " + ts(c));
        rows[i] = c.shape()[0];
        k[i] = c.shape()[1] * (f[i]->packed ? 2 : 1);
        if (k[i] % f[i]->block != 0)
          fail(op, std::string(which) + " holds K = " + std::to_string(k[i]) + " " + f[i]->name +
                       " elements, not a multiple of its block of " + std::to_string(f[i]->block));
        const bool scaleDType =
            s.isTile() && s.isNumeric() &&
            (s.dtype() == DType::U8 || (f[i]->scale == DType::F8E4M3 && s.dtype() == DType::F8E4M3));
        if (!scaleDType || s.shape() != Shape{rows[i], k[i] / f[i]->block})
          fail(op, std::string(which) + "_scale must be a u8" + (f[i]->scale == DType::F8E4M3 ? " (or f8e4m3)" : "") +
                       " tile [" + std::to_string(rows[i]) + ", " + std::to_string(k[i] / f[i]->block) + "], got " +
                       ts(s));
      }
      if (k[0] != k[1])
        fail(op, "a holds K = " + std::to_string(k[0]) + " elements but b holds " + std::to_string(k[1]) +
                     " (b is K-major: [N, K], [N, K/2] for fp4)");
      const Type& acc = in(op, 4);
      if (acc != Type::tile(Type::scalar(DType::F32), {rows[0], rows[1]}))
        fail(op, "accumulator " + ts(acc) + " must be tile<" + std::to_string(rows[0]) + "x" + std::to_string(rows[1]) +
                     "xf32>");
      resultIs(op, acc);
      if (op.numOperands() == 6) {
        if (in(op, 5) != Type::scalar(DType::F32)) fail(op, "tensor_scale " + ts(in(op, 5)) + " must be an f32 scalar");
        if (f[0]->scale != DType::F8E4M3 && f[1]->scale != DType::F8E4M3)
          fail(op, "takes a tensor_scale only with an nvfp4 operand");
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
