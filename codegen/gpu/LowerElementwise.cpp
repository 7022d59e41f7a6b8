// Elementwise ops: constants, casts, integer and float arithmetic (with the
// targets' math tables), and the free / reshaping ops emitted with them.

#include <functional>
#include <variant>

#include <llvm/IR/Constants.h>

#include "codegen/gpu/LowerImpl.h"
#include "codegen/llvm/Elementwise.h"
#include "codegen/llvm/VectorMath.h"

namespace tessera::codegen::gpu_lower {

// ================================================================ elementwise

llvm::Value* Lower::constantOf(const ir::Op& op, llvm::Type* t) { return codegen::constantOf(op, t); }

// GPU backends lower every fptrunc (f64 -> bf16 included) correctly
// rounded, so casts narrow with a plain fptrunc; the CPU needs its own.
llvm::Value* Lower::castValue(llvm::Value* x, DType from, DType to) {
  return emitCast(b_, x, from, to, [&](llvm::Value* y, llvm::Type* t) { return b_.CreateFPTrunc(y, t); });
}

llvm::Value* Lower::floatOp(const ir::Op& op, Slots& v) {
  if (o_.precision == Precision::Approximate && v[0]->getType()->isFloatTy())
    if (llvm::Value* r = t_.approxMath(b_, op.code(), v)) return r;
  if (llvm::Value* r = emitFloatOp(b_, op, v)) return r;
  // pow and the transcendentals: the target's math table chooses the
  // polynomials (VectorMath) or the device library.
  DType dt = v[0]->getType()->isDoubleTy() ? DType::F64 : DType::F32;
  MathChoice c = t_.math(op.code(), dt);
  switch (c.impl) {
    case MathImpl::Polynomial: return emitVectorMath(b_, op.code(), v);
    case MathImpl::DeviceLibrary: return deviceLibraryCall(op, c.function, v);
    case MathImpl::LlvmIntrinsic: break;
  }
  TS_UNREACHABLE(std::string("math table: ") + op.name() + " on " + name(dt) + " has no implementation on " +
                 t_.arch());
}

// A call of the device library's `fn` (double -> double, pow two operands),
// declared here and linked by the target's prepareModule.
llvm::Value* Lower::deviceLibraryCall(const ir::Op& op, const std::string& fn, Slots& v) {
  llvm::Type* t = v[0]->getType();
  TS_ASSERT(!t->isVectorTy(), "device library calls take scalars");
  std::vector<llvm::Type*> params(op.code() == OpCode::Pow ? 2 : 1, t);
  llvm::FunctionCallee callee = m_.getOrInsertFunction(fn, llvm::FunctionType::get(t, params, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    f->setDoesNotThrow();
    f->setDoesNotAccessMemory();
    f->setWillReturn();
  }
  return b_.CreateCall(callee, v);
}

llvm::Value* Lower::compute(const ir::Op& op, Slots v) {
  switch (op.code()) {
    case OpCode::Cast: return castValue(v[0], op.operand(0)->type().dtype(), op.result()->type().dtype());
    case OpCode::Bitcast:
      return b_.CreateBitCast(v[0], shapedLike(scalarType(b_, op.result()->type().dtype()), v[0]->getType()));
    case OpCode::Select: return b_.CreateSelect(v[0], v[1], v[2]);
    case OpCode::PtrAdd: {
      llvm::Value* off = isUnsigned(op.operand(1)->type().dtype()) ? b_.CreateZExtOrTrunc(v[1], b_.getInt64Ty())
                                                                   : b_.CreateSExtOrTrunc(v[1], b_.getInt64Ty());
      return b_.CreateGEP(memTyOf(op.operand(0)->type().dtype()), v[0], off);
    }
    default: break;
  }
  const ir::Type& t0 = op.operand(0)->type();
  if (t0.isPointerLike())
    throw CompileError(std::string(op.name()) + " is not defined on pointers (at " + op.loc().str() + ")");
  DType dt = t0.dtype();
  if (!isFloat(dt)) {
    if (llvm::Value* r = t_.integerOp(b_, op.code(), v, dt)) return r;
    return emitIntegerOp(b_, op, v, dt);
  }
  return emitFloatElementwise(
      b_, op, v, dt, [&](Slots& w) { return floatOp(op, w); },
      [&](llvm::Value* y, llvm::Type* t) { return b_.CreateFPTrunc(y, t); });
}

void Lower::emitElementwiseLike(const ir::Op& op) {
  const ir::Value* r = op.result();
  if (!r->type().isTile()) {
    if (op.code() == OpCode::Constant) {
      scalars_[r] = constantOf(op, elemTy(r->type()));
      return;
    }
    Slots v;
    for (const ir::Value* o : op.operands()) v.push_back(scalar(o));
    scalars_[r] = compute(op, std::move(v));
    return;
  }
  const ir::Layout& l = la_.get(r);
  const auto& shape = r->type().shape();
  switch (op.code()) {
    case OpCode::Constant:
    case OpCode::Splat:
    case OpCode::Arange:
    case OpCode::Broadcast:
    case OpCode::ExpandDims: {
      // Emitted in the op's own layout here; consumers wanting another
      // layout re-emit them (remat) instead of converting.
      tiles_[r] = TileV{l, remat(r, l)};
      return;
    }
    case OpCode::Reshape:
    case OpCode::Transpose: {
      const ir::Value* s = op.operand(0);
      const TileV& st = tile(s);
      std::vector<int64_t> ss = s->type().shape();
      std::function<llvm::Value*(const Slots&, size_t)> map;
      if (op.code() == OpCode::Reshape) {
        map = [&](const Slots& idx, size_t) { return linear(idx, shape); };
      } else {
        const auto& perm = op.intsAttr("perm");
        map = [&, perm](const Slots& idx, size_t) {
          Slots si(idx.size());
          for (size_t k = 0; k < perm.size(); ++k) si[static_cast<size_t>(perm[k])] = idx[k];
          return linear(si, ss);
        };
      }
      tiles_[r] = TileV{l, convertVia(st.slots, st.layout, ss, s->type().element(), l, shape, map)};
      return;
    }
    default: break;
  }
  TS_ASSERT(ir::isElementwise(op.code()), std::string("gpu lowering: unhandled op ") + op.name());
  std::vector<Slots> ins;
  for (const ir::Value* o : op.operands()) ins.push_back(tileIn(o, l));
  if (swapOperands(op)) std::swap(ins[0], ins[1]);
  Slots out;
  const size_t n = ins[0].size();
  if (packedOps_.count(&op) && n % 2 == 0) {
    // Two adjacent elements per instruction (planPackedMath).
    auto* pair = llvm::FixedVectorType::get(b_.getFloatTy(), 2);
    for (size_t i = 0; i < n; i += 2) {
      Slots v;
      for (auto& in : ins) {
        llvm::Value* p = b_.CreateInsertElement(llvm::PoisonValue::get(pair), in[i], uint64_t{0});
        v.push_back(b_.CreateInsertElement(p, in[i + 1], uint64_t{1}));
      }
      llvm::Value* res = compute(op, std::move(v));
      out.push_back(b_.CreateExtractElement(res, uint64_t{0}));
      out.push_back(b_.CreateExtractElement(res, uint64_t{1}));
    }
    tiles_[r] = TileV{l, std::move(out)};
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    Slots v;
    for (auto& in : ins) v.push_back(in[i]);
    out.push_back(compute(op, std::move(v)));
  }
  tiles_[r] = TileV{l, std::move(out)};
}

bool Lower::swapOperands(const ir::Op& op) {
  switch (op.code()) {
    case OpCode::Add:
    case OpCode::Mul:
    case OpCode::Min:
    case OpCode::Max:
    case OpCode::And:
    case OpCode::Or:
    case OpCode::Xor: break;
    default: return false;
  }
  const ir::Value* a = op.operand(0);
  const ir::Value* b = op.operand(1);
  if (!a->type().isTile() || !b->type().isTile()) return false;
  auto key = [](const ir::Value* v) {
    const ir::Op* d = v->definingOp();
    int code = d ? static_cast<int>(d->code()) : -1;
    std::vector<int64_t> src;
    if (d && (d->code() == OpCode::Broadcast || d->code() == OpCode::ExpandDims)) src = d->operand(0)->type().shape();
    return std::make_pair(code, src);
  };
  return key(b) < key(a);
}

}  // namespace tessera::codegen::gpu_lower
