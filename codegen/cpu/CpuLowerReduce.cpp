// Reductions (sum, max, min, argmax, argmin) along the contiguous axis or an outer
// axis.
#include "codegen/cpu/CpuLowerImpl.h"

#include <llvm/IR/Intrinsics.h>

namespace tessera::codegen::cpu::detail {

// ================================================================= reductions

void Lowering::emitReduce(const ir::Op& op) {
  const ir::Value* in = op.operand(0);
  const std::string& kind = op.strAttr("kind");
  int axis = static_cast<int>(op.intAttr("axis"));
  const ir::Shape& s = in->type().shape();
  DType dt = in->type().dtype();
  bool fl = isFloat(dt);
  bool narrow = dt == DType::F16 || dt == DType::BF16;
  // argmax / argmin: the running best value and its index.
  bool argmax = kind == "argmax" || kind == "argmin";
  bool lowest = kind == "min" || kind == "argmin";
  TS_ASSERT(ir::isReduceKind(kind), "reduce: unverified kind '" + kind + "' at " + op.loc().str());
  // Compute type: narrow floats accumulate in f32.
  llvm::Type* ct = narrow ? b_.getFloatTy() : scalarTy(dt);
  int64_t outer = 1, inner = 1, R = s[axis];
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];

  auto ext = [&](llvm::Value* x) -> llvm::Value* {
    if (!narrow) return x;
    return b_.CreateFPExt(x, vec(b_.getFloatTy(), llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements()));
  };
  auto identity = [&](llvm::Type* t) -> llvm::Value* {
    if (kind == "sum") return fl ? llvm::ConstantFP::getNegativeZero(t) : llvm::Constant::getNullValue(t);
    bool wantMin = lowest;
    if (fl) return llvm::ConstantFP::getInfinity(t, /*Negative=*/!wantMin);
    unsigned bw = t->getScalarSizeInBits();
    llvm::APInt v = wantMin ? llvm::APInt::getSignedMaxValue(bw) : llvm::APInt::getSignedMinValue(bw);
    if (comparesUnsigned(dt)) v = wantMin ? llvm::APInt::getAllOnes(bw) : llvm::APInt(bw, 0);
    return llvm::ConstantInt::get(t, v);
  };
  auto combine = [&](llvm::Value* a, llvm::Value* x) -> llvm::Value* {
    if (kind == "sum") return fl ? b_.CreateFAdd(a, x) : b_.CreateAdd(a, x);
    bool isMin = kind == "min";
    if (fl) return b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::minimum : llvm::Intrinsic::maximum, a, x);
    if (comparesUnsigned(dt))
      return b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::umin : llvm::Intrinsic::umax, a, x);
    return b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::smin : llvm::Intrinsic::smax, a, x);
  };
  // Argmax step: lanes take x where it is greater, or NaN over a non-NaN
  // (NaN is the maximum, as for max); strict so the first index wins.
  // Argmin mirrors it: less, or NaN over a non-NaN (NaN is the minimum).
  auto better = [&](llvm::Value* x, llvm::Value* best) -> llvm::Value* {
    if (!fl) {
      if (lowest) return comparesUnsigned(dt) ? b_.CreateICmpULT(x, best) : b_.CreateICmpSLT(x, best);
      return comparesUnsigned(dt) ? b_.CreateICmpUGT(x, best) : b_.CreateICmpSGT(x, best);
    }
    llvm::Value* strict = lowest ? b_.CreateFCmpOLT(x, best) : b_.CreateFCmpOGT(x, best);
    return b_.CreateOr(strict, b_.CreateAnd(b_.CreateFCmpUNO(x, x), b_.CreateFCmpORD(best, best)));
  };
  auto horizontal = [&](llvm::Value* v) -> llvm::Value* {
    if (kind == "sum") {
      if (!fl) return b_.CreateAddReduce(v);
      auto* r = b_.CreateFAddReduce(llvm::ConstantFP::getNegativeZero(ct), v);
      r->setHasAllowReassoc(true);  // a tree, as the IR allows for reduce
      return r;
    }
    bool isMin = kind == "min";
    if (fl) return isMin ? b_.CreateFPMinimumReduce(v) : b_.CreateFPMaximumReduce(v);
    const bool isSigned = !comparesUnsigned(dt);
    return isMin ? b_.CreateIntMinReduce(v, isSigned) : b_.CreateIntMaxReduce(v, isSigned);
  };
  auto finish = [&](llvm::Value* x) -> llvm::Value* {
    return narrow
               ? fpTrunc(x, x->getType()->isVectorTy()
                                ? static_cast<llvm::Type*>(vec(
                                      scalarTy(dt), llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements()))
                                : scalarTy(dt))
               : x;
  };

  const ir::Type& rt = op.result()->type();
  bool scalarOut = !rt.isTile();
  llvm::Value* outArr = scalarOut ? nullptr : allocTile(rt);
  llvm::Value* scalarSlot = scalarOut ? entryAlloca(argmax ? b_.getInt32Ty() : scalarTy(dt)) : nullptr;

  auto forRange = [&](int64_t n, int64_t step, const std::function<void(llvm::Value*)>& body) {
    if (n == step)
      body(i64(0));
    else
      constLoop(0, n, step, body);
  };

  versioned({in}, [&] {
    if (inner == 1) {
      // Along the contiguous axis: vector accumulators over the row's chunks,
      // then one horizontal reduction per row. (The general version of a
      // versioned reduction, for partial rows, is kept small: one accumulator.)
      int64_t c = chunkWidth(R);
      int64_t chunks = R / c;
      // Accumulators: each more copy of the loop body costs code-generation
      // time, so as few as pay. A pass reading memory keeps four: more loads
      // in flight (measured: 4096x4096 layernorm and rmsnorm ~10% faster than
      // with two). A pass over cached data needs two to hide the adder's
      // latency; an input costing tens of instructions per chunk (softmax's
      // exp) hides it with one.
      int64_t U = 1;
      if (!argmax && !general_) {
        std::vector<const ir::Value*> unused;
        std::unordered_set<const ir::Value*> seen;
        expensiveBody_ = loadsBody_ = false;
        collectMasks(in, unused, seen);
        int64_t want = expensiveBody_ ? 1 : loadsBody_ ? 4 : 2;
        while (want > 1 && chunks % want != 0) want /= 2;
        U = want;
      }
      llvm::Type* vt = vec(ct, c);
      forRange(outer, 1, [&](llvm::Value* o) {
        llvm::Value* rowBase = b_.CreateMul(o, i64(R));
        std::vector<llvm::Value*> acc(U);
        llvm::Value* bestIdx = nullptr;
        for (int64_t u = 0; u < U; ++u) {
          acc[u] = entryAlloca(vt);
          b_.CreateStore(identity(vt), acc[u]);
        }
        if (argmax) {
          bestIdx = entryAlloca(vec(b_.getInt32Ty(), c));
          b_.CreateStore(iotaI32(c), bestIdx);
        }
        forRange(R, U * c, [&](llvm::Value* k) {
          for (int64_t u = 0; u < U; ++u) {
            llvm::Value* off = b_.CreateAdd(k, i64(u * c));
            llvm::Value* x = ext(emitChunk(in, b_.CreateAdd(rowBase, off), c));
            llvm::Value* a = b_.CreateLoad(vt, acc[u]);
            if (argmax) {
              llvm::Value* bi = b_.CreateLoad(vec(b_.getInt32Ty(), c), bestIdx);
              llvm::Value* upd = better(x, a);
              llvm::Value* idx = b_.CreateAdd(
                  b_.CreateVectorSplat(static_cast<unsigned>(c), b_.CreateTrunc(off, b_.getInt32Ty())), iotaI32(c));
              b_.CreateStore(b_.CreateSelect(upd, x, a), acc[u]);
              b_.CreateStore(b_.CreateSelect(upd, idx, bi), bestIdx);
            } else {
              b_.CreateStore(combine(a, x), acc[u]);
            }
          }
        });
        llvm::Value* result;
        if (argmax) {
          llvm::Value* vals = b_.CreateLoad(vt, acc[0]);
          llvm::Value* idxs = b_.CreateLoad(vec(b_.getInt32Ty(), c), bestIdx);
          llvm::Value* bv = b_.CreateExtractElement(vals, uint64_t{0});
          llvm::Value* bi = b_.CreateExtractElement(idxs, uint64_t{0});
          for (int64_t j = 1; j < c; ++j) {
            llvm::Value* v = b_.CreateExtractElement(vals, static_cast<uint64_t>(j));
            llvm::Value* i = b_.CreateExtractElement(idxs, static_cast<uint64_t>(j));
            llvm::Value* eq = fl ? b_.CreateOr(b_.CreateFCmpOEQ(v, bv),
                                               b_.CreateAnd(b_.CreateFCmpUNO(v, v), b_.CreateFCmpUNO(bv, bv)))
                                 : b_.CreateICmpEQ(v, bv);
            llvm::Value* take = b_.CreateOr(better(v, bv), b_.CreateAnd(eq, b_.CreateICmpSLT(i, bi)));
            bv = b_.CreateSelect(take, v, bv);
            bi = b_.CreateSelect(take, i, bi);
          }
          result = bi;
        } else {
          llvm::Value* a = b_.CreateLoad(vt, acc[0]);
          for (int64_t u = 1; u < U; ++u) a = combine(a, b_.CreateLoad(vt, acc[u]));
          result = finish(horizontal(a));
        }
        if (scalarOut)
          b_.CreateStore(result, scalarSlot);
        else
          storeChunk(outArr, rt, o, b_.CreateVectorSplat(1, result));
      });
    } else {
      // Along a non-last axis: vectorised over the inner dims, each lane
      // accumulating one output element across the reduced axis.
      int64_t c = chunkWidth(inner);
      llvm::Type* vt = vec(ct, c);
      llvm::Value* acc = entryAlloca(vt);
      llvm::Value* bestIdx = argmax ? entryAlloca(vec(b_.getInt32Ty(), c)) : nullptr;
      forRange(outer, 1, [&](llvm::Value* o) {
        forRange(inner, c, [&](llvm::Value* ic) {
          b_.CreateStore(identity(vt), acc);
          if (argmax) b_.CreateStore(llvm::Constant::getNullValue(vec(b_.getInt32Ty(), c)), bestIdx);
          forRange(R, 1, [&](llvm::Value* r) {
            llvm::Value* base =
                b_.CreateAdd(b_.CreateAdd(b_.CreateMul(o, i64(R * inner)), b_.CreateMul(r, i64(inner))), ic);
            llvm::Value* x = ext(emitChunk(in, base, c));
            llvm::Value* a = b_.CreateLoad(vt, acc);
            if (argmax) {
              llvm::Value* upd = better(x, a);
              llvm::Value* bi = b_.CreateLoad(vec(b_.getInt32Ty(), c), bestIdx);
              llvm::Value* idx = b_.CreateVectorSplat(static_cast<unsigned>(c), b_.CreateTrunc(r, b_.getInt32Ty()));
              b_.CreateStore(b_.CreateSelect(upd, x, a), acc);
              b_.CreateStore(b_.CreateSelect(upd, idx, bi), bestIdx);
            } else {
              b_.CreateStore(combine(a, x), acc);
            }
          });
          llvm::Value* res = argmax ? b_.CreateLoad(vec(b_.getInt32Ty(), c), bestIdx) : finish(b_.CreateLoad(vt, acc));
          storeChunk(outArr, rt, b_.CreateAdd(b_.CreateMul(o, i64(inner)), ic), res);
        });
      });
    }
  });
  if (scalarOut)
    scalars_[op.result()] = b_.CreateLoad(argmax ? b_.getInt32Ty() : scalarTy(dt), scalarSlot);
  else
    arrays_[op.result()] = outArr;
}

}  // namespace tessera::codegen::cpu::detail
