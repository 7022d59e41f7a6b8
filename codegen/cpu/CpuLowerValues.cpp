// Chunk loops and the per-chunk evaluation of tiles: loading and storing
// chunks of stack arrays, fused definitions (constants, splat, arange,
// broadcast, transpose), and materialising tiles into arrays.
#include "codegen/cpu/CpuLowerImpl.h"

#include <variant>

namespace tessera::codegen::cpu::detail {

// ================================================================ structure

void Lowering::constLoop(int64_t lo, int64_t hi, int64_t step, const std::function<void(llvm::Value*)>& body) {
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(ctx_, "chunk", f);
  auto* exit = llvm::BasicBlock::Create(ctx_, "chunk.end", f);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, "i");
  iv->addIncoming(i64(lo), pre);
  body(iv);
  llvm::Value* next = b_.CreateAdd(iv, i64(step), "", /*HasNUW=*/true, /*HasNSW=*/true);
  iv->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateICmpSLT(next, i64(hi)), loop, exit);
  b_.SetInsertPoint(exit);
}

void Lowering::chunkLoop(const ir::Shape& s, int64_t c, const std::function<void(llvm::Value*)>& body) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  int64_t L = s.empty() ? 1 : s.back();
  if (s.size() < 2 || L % c != 0 || n == L) return chunkLoop(n, c, body);
  Coords saved = coords_;
  constLoop(0, n / L, 1, [&](llvm::Value* r) {
    llvm::Value* rowBase = b_.CreateMul(r, i64(L), "", /*HasNUW=*/true, /*HasNSW=*/true);
    auto inner = [&](llvm::Value* j) {
      llvm::Value* base = j == nullptr ? rowBase : b_.CreateAdd(rowBase, j, "", true, true);
      coords_ = {base, r, j ? j : i64(0), s};
      body(base);
    };
    if (L == c)
      inner(nullptr);
    else
      constLoop(0, L, c, inner);
  });
  coords_ = saved;
}

// =================================================================== values

llvm::Value* Lowering::loadChunk(llvm::Value* arr, const ir::Type& t, llvm::Value* base, int64_t c) {
  llvm::Type* st = storageTy(t);
  llvm::Value* p = b_.CreateInBoundsGEP(st, arr, base);
  auto align = llvm::Align(st->isPointerTy() ? 8 : st->getPrimitiveSizeInBits() / 8);
  llvm::Value* v = b_.CreateAlignedLoad(vec(st, c), p, align);
  return fromStorage(v, !t.isPointerLike() && t.dtype() == DType::I1);
}

void Lowering::storeChunk(llvm::Value* arr, const ir::Type& t, llvm::Value* base, llvm::Value* v) {
  llvm::Type* st = storageTy(t);
  llvm::Value* p = b_.CreateInBoundsGEP(st, arr, base);
  auto align = llvm::Align(st->isPointerTy() ? 8 : st->getPrimitiveSizeInBits() / 8);
  b_.CreateAlignedStore(toStorage(v, !t.isPointerLike() && t.dtype() == DType::I1), p, align);
}

llvm::Value* Lowering::emitChunk(const ir::Value* v, llvm::Value* base, int64_t c) {
  if (assumeOn_.count(v)) return llvm::ConstantInt::getTrue(vec(b_.getInt1Ty(), c));
  auto it = arrays_.find(v);
  if (it != arrays_.end()) return loadChunk(it->second, v->type(), base, c);
  const ir::Op* def = v->definingOp();
  auto pend = pending_.find(v);
  if (pend != pending_.end()) {
    // Deferred materialisation: compute the chunk once, keep it in the array
    // for later consumers and hand it to this one.
    auto key = std::make_tuple(v, base, c);
    auto m = memo_.find(key);
    if (m != memo_.end()) return m->second;
    llvm::Value* x = emitDef(*def, base, c);
    storeChunk(pend->second, v->type(), base, x);
    memo_[key] = x;
    return x;
  }
  // Transpose reaches here only while being materialised at its own position.
  TS_ASSERT(def && (isFusableDef(def->code()) || def->code() == OpCode::Transpose ||
                    (def->code() == OpCode::Load && fused_.count(v))),
            "cpu lowering: tile used before it was materialised");
  return emitDef(*def, base, c);
}

llvm::Value* Lowering::constantOf(const ir::Op& op, llvm::Type* t) { return codegen::constantOf(op, t); }

llvm::Value* Lowering::emitDef(const ir::Op& op, llvm::Value* base, int64_t c) {
  const ir::Type& rt = op.result()->type();
  switch (op.code()) {
    case OpCode::Constant: return constantOf(op, vec(elemTy(rt), c));
    case OpCode::Splat: return b_.CreateVectorSplat(static_cast<unsigned>(c), scalar(op.operand(0)));
    case OpCode::Arange: {
      llvm::Value* start = b_.CreateTrunc(base, b_.getInt32Ty());
      start = b_.CreateAdd(start, b_.getInt32(static_cast<uint32_t>(op.intAttr("start"))));
      return b_.CreateAdd(b_.CreateVectorSplat(static_cast<unsigned>(c), start), iotaI32(c));
    }
    case OpCode::ExpandDims:
    case OpCode::Reshape: return emitChunk(op.operand(0), base, c);
    case OpCode::Broadcast: return emitBroadcast(op, base, c);
    case OpCode::Load: return fromStorage(loadValueChunk(op, base, c), !rt.isPointerLike() && rt.dtype() == DType::I1);
    case OpCode::Transpose: {
      const ir::Shape& rs = rt.shape();
      const ir::Shape& ss = op.operand(0)->type().shape();
      const auto& perm = op.intsAttr("perm");
      auto rst = stridesOf(rs), sst = stridesOf(ss);
      llvm::Value* flat = iotaI64(base, c);
      llvm::Value* src = llvm::ConstantInt::get(flat->getType(), 0);
      for (size_t d = 0; d < rs.size(); ++d) {
        llvm::Value* idx = b_.CreateURem(b_.CreateUDiv(flat, llvm::ConstantInt::get(flat->getType(), rst[d])),
                                         llvm::ConstantInt::get(flat->getType(), rs[d]));
        src = b_.CreateAdd(src, b_.CreateMul(idx, llvm::ConstantInt::get(flat->getType(), sst[perm[d]])));
      }
      return gatherFrom(op.operand(0), src, c);
    }
    default: break;
  }
  TS_ASSERT(ir::isElementwise(op.code()), std::string("cpu lowering: cannot fuse ") + op.name());
  std::vector<llvm::Value*> ops;
  for (const ir::Value* o : op.operands()) ops.push_back(emitChunk(o, base, c));
  return elementwise(op, std::move(ops));
}

llvm::Value* Lowering::gatherFrom(const ir::Value* src, llvm::Value* idx, int64_t c) {
  auto it = arrays_.find(src);
  TS_ASSERT(it != arrays_.end(), "cpu lowering: gather source not materialised");
  llvm::Type* st = storageTy(src->type());
  llvm::Value* ptrs = b_.CreateGEP(st, it->second, idx);
  auto align = llvm::Align(st->isPointerTy() ? 8 : st->getPrimitiveSizeInBits() / 8);
  llvm::Value* v = b_.CreateMaskedGather(vec(st, c), ptrs, align);
  return fromStorage(v, !src->type().isPointerLike() && src->type().dtype() == DType::I1);
}

llvm::Value* Lowering::emitBroadcast(const ir::Op& op, llvm::Value* base, int64_t c) {
  const ir::Value* srcV = op.operand(0);
  const ir::Shape& rs = op.result()->type().shape();
  const ir::Shape& ss = srcV->type().shape();
  auto rst = stridesOf(rs), sst = stridesOf(ss);
  // Source flat index of result flat index `flat` (scalar or vector).
  auto srcIndex = [&](llvm::Value* flat) {
    llvm::Type* t = flat->getType();
    llvm::Value* src = llvm::ConstantInt::get(t, 0);
    if (flat == coords_.base && rs == coords_.shape) {
      // Inside a 2-D chunk loop over this very shape: the coordinates are
      // the row index split over the leading dimensions and the column.
      llvm::Value* rest = coords_.row;
      for (size_t d = rs.size() - 1; d-- > 0;) {
        llvm::Value* idx = d == 0 ? rest : b_.CreateURem(rest, llvm::ConstantInt::get(t, rs[d]));
        if (d > 0) rest = b_.CreateUDiv(rest, llvm::ConstantInt::get(t, rs[d]));
        if (ss[d] != 1) src = b_.CreateAdd(src, b_.CreateMul(idx, llvm::ConstantInt::get(t, sst[d])));
      }
      if (ss.back() != 1) src = b_.CreateAdd(src, coords_.col);
      return src;
    }
    for (size_t d = 0; d < rs.size(); ++d) {
      if (ss[d] == 1) continue;
      llvm::Value* idx =
          b_.CreateURem(b_.CreateUDiv(flat, llvm::ConstantInt::get(t, rst[d])), llvm::ConstantInt::get(t, rs[d]));
      src = b_.CreateAdd(src, b_.CreateMul(idx, llvm::ConstantInt::get(t, sst[d])));
    }
    return src;
  };
  int64_t L = rs.back();
  if (L % c == 0 && ss.back() == L)  // chunk = a contiguous piece of one source row
    return emitChunk(srcV, srcIndex(base), c);
  if (L % c == 0 && ss.back() == 1) {  // chunk = one source element repeated
    llvm::Value* e = b_.CreateExtractElement(emitChunk(srcV, srcIndex(base), 1), uint64_t{0});
    return b_.CreateVectorSplat(static_cast<unsigned>(c), e);
  }
  if (arrays_.count(srcV)) return gatherFrom(srcV, srcIndex(iotaI64(base, c)), c);
  // Fallback (not planned for, kept for robustness): one lane at a time.
  llvm::Value* r = llvm::PoisonValue::get(vec(elemTy(srcV->type()), c));
  for (int64_t j = 0; j < c; ++j) {
    llvm::Value* e = emitChunk(srcV, srcIndex(b_.CreateAdd(base, i64(j))), 1);
    r = b_.CreateInsertElement(r, b_.CreateExtractElement(e, uint64_t{0}), static_cast<uint64_t>(j));
  }
  return r;
}

void Lowering::writeTile(llvm::Value* dst, const ir::Value* v) {
  const ir::Type& t = v->type();
  int64_t n = numElems(t);
  auto it = arrays_.find(v);
  if (it != arrays_.end()) {
    if (it->second == dst) return;
    uint64_t bytes = static_cast<uint64_t>(n) * mod_.getDataLayout().getTypeAllocSize(storageTy(t));
    b_.CreateMemCpy(dst, llvm::MaybeAlign(64), it->second, llvm::MaybeAlign(64), bytes);
    return;
  }
  int64_t c = chunkWidth(n);
  versioned({v}, [&] {
    chunkLoop(t.shape(), c, [&](llvm::Value* base) { storeChunk(dst, t, base, emitChunk(v, base, c)); });
  });
}

void Lowering::materialize(const ir::Value* v) {
  llvm::Value* arr = allocTile(v->type());
  writeTile(arr, v);
  arrays_[v] = arr;
}

}  // namespace tessera::codegen::cpu::detail
