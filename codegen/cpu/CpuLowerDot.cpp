// `dot`: operands packed into the layouts the microkernel of CpuDot.h
// reads (B panels, padded A rows), widening, in-place accumulators and the
// next iteration's prefetches, then the kernel itself.
#include "codegen/cpu/CpuLowerImpl.h"

#include <llvm/IR/Intrinsics.h>

#include "codegen/cpu/CpuDot.h"

namespace tessera::codegen::cpu::detail {

// ======================================================================== dot

void Lowering::emitDot(const ir::Op& op) {
  // C = acc + A B through the register-blocked microkernel (CpuDot.h). The
  // kernel wants A (M x K) row-major and B (K x N) in its panel layout,
  // both in the compute type (f32, or i32 for i8 dots), and updates C in
  // place.
  const ir::Value* a = op.operand(0);
  const ir::Value* bv = op.operand(1);
  const ir::Value* acc = op.operand(2);
  int64_t M = a->type().shape()[0], K = a->type().shape()[1], N = bv->type().shape()[1];
  DType in = a->type().dtype(), out = acc->type().dtype();  // out: f32 or i32 (verifier)
  for (const ir::Value* v : {a, bv}) {
    if (arrays_.count(v)) continue;
    // A load sunk into the dot (planLoadFusion: nothing writes memory in
    // between) is emitted here as a whole-tile load: B lands in the panel
    // layout and the next iteration's tiles are prefetched.
    const ir::Op* d = v->definingOp();
    if (d && d->code() == OpCode::Load && fused_.count(v)) {
      fused_.erase(v);
      emitLoad(*d);
    } else {
      materialize(v);
    }
  }
  // The accumulator is updated in place when nothing can observe the old
  // value: its only use is this dot, it belongs to this block (not to an
  // enclosing one, whose value must survive the loop), and, for a loop-carried
  // accumulator, the result goes straight back into the same carried slot
  // (a yield into another slot would copy from storage it has overwritten).
  const ir::Block* blk = op.parent();
  bool inPlace = false;
  if (arrays_.count(acc) && uses_[acc] == 1 && !pending_.count(acc) && acc->ownerBlock() == blk) {
    if (!acc->isBlockArg()) {
      inPlace = true;
    } else if (const ir::Region* r = blk->parent(); r && r->parentOp() && r->parentOp()->code() == OpCode::For &&
                                                    acc->index() >= 1 && uses_[op.result()] == 1) {
      const ir::Op* u = users_[op.result()][0];
      inPlace = u->code() == OpCode::Yield && u->parent() == blk && u->numOperands() > acc->index() - 1 &&
                u->operand(acc->index() - 1) == op.result();
    }
  }
  llvm::Value* outArr;
  if (inPlace) {
    outArr = arrays_.at(acc);
  } else {
    outArr = allocTile(op.result()->type());
    writeTile(outArr, acc);
  }
  // bf16 and i8 dots on AMX tiles where the target has them; they read
  // the operands unwidened.
  if (dotOnTiles(in)) {
    TS_ASSERT(!panelB_.count(bv), "cpu dot: a tile dot's B operand is in the vector kernel's panel layout");
    auto ars = rowStride_.find(a);
    int64_t units = 0;
    std::function<void(llvm::Value*)> prefetch = dotPrefetcher(op, units);
    emitTileDot(op, arrays_.at(a), ars != rowStride_.end() ? ars->second : K, arrays_.at(bv), outArr, prefetch, units);
    arrays_[op.result()] = outArr;
    return;
  }
  // f16/bf16/i8 operands are widened once here, not per use in the kernel
  // (each element of A is used N times, each of B M times).
  llvm::Value* aArr = arrays_.at(a);
  auto rs = rowStride_.find(a);
  int64_t lda = rs != rowStride_.end() ? rs->second : K;
  if (in != out) {
    ir::Type wt = ir::Type::tile(ir::Type::scalar(out), a->type().shape());
    aArr = allocTile(wt);
    int64_t c = chunkWidth(numElems(wt));
    chunkLoop(wt.shape(), c,
              [&](llvm::Value* base) { storeChunk(aArr, wt, base, castValue(emitChunk(a, base, c), in, out)); });
  }
  // B into the panel layout (widened on the way) unless its load put it there.
  llvm::Value* bArr = arrays_.at(bv);
  if (!panelB_.count(bv)) {
    llvm::Type* ct = scalarTy(out);
    int64_t nr = dotBlocking(tgt_, ct).nr(), c = chunkWidth(N);
    bArr = entryAlloca(llvm::ArrayType::get(ct, static_cast<uint64_t>(panelElems(K, N, nr))), 64);
    chunkLoop(bv->type().shape(), c, [&](llvm::Value* base) {
      llvm::Value* x = emitChunk(bv, base, c);
      if (in != out) x = castValue(x, in, out);
      b_.CreateAlignedStore(x, b_.CreateInBoundsGEP(ct, bArr, panelIndex(base, K, N, nr)), llvm::Align(4));
    });
  }
  DotArrays d;
  d.a = aArr;
  d.b = bArr;
  d.c = outArr;
  d.M = M;
  d.N = N;
  d.K = K;
  d.elemTy = scalarTy(out);
  d.lda = lda;
  d.prefetch = dotPrefetcher(op, d.prefetchUnits);
  emitDotKernel(b_, tgt_, d);
  arrays_[op.result()] = outArr;
}

std::function<void(llvm::Value*)> Lowering::dotPrefetcher(const ir::Op& op, int64_t& units) {
  // Prefetch units: one row of an operand's next tile each (a row pointer
  // computed once, then one prefetch per cache line of the row).
  units = 0;
  auto pf = dotPrefetch_.find(&op);
  if (pf == dotPrefetch_.end()) return nullptr;
  std::vector<PrefetchStream> streams = pf->second;
  struct Rows {
    int64_t first, count, len, lines;  // unit range, row length, lines per row
  };
  std::vector<Rows> rows;
  for (const PrefetchStream& st : streams) {
    const ir::Shape& sh = st.ptr->type().shape();
    int64_t bytes = static_cast<int64_t>(mod_.getDataLayout().getTypeAllocSize(memTy(st.ptr->type().dtype())));
    rows.push_back({units, sh[0], sh[1], (sh[1] * bytes + 63) / 64});
    units += sh[0];
  }
  return [this, streams, rows](llvm::Value* unit) {
    // A unit past the last stream's rows prefetches nothing. Streams are
    // few (A and B): select the stream's row by comparisons, no division
    // by a variable.
    for (size_t s = 0; s < streams.size(); ++s) {
      const PrefetchStream& st = streams[s];
      const Rows& r = rows[s];
      llvm::Function* f = b_.GetInsertBlock()->getParent();
      auto* in = llvm::BasicBlock::Create(ctx_, "pf.row", f);
      auto* next = llvm::BasicBlock::Create(ctx_, "pf.next", f);
      llvm::Value* rel = b_.CreateSub(unit, i64(r.first));
      b_.CreateCondBr(b_.CreateICmpULT(rel, i64(r.count)), in, next);
      b_.SetInsertPoint(in);
      llvm::Value* cur = scalars_.at(st.iv);
      scalars_[st.iv] = st.nextIv;
      Coords saved = coords_;
      coords_ = {};
      llvm::Value* p = firstPointer(st.ptr, b_.CreateMul(rel, i64(r.len)), 1);
      coords_ = saved;
      scalars_[st.iv] = cur;
      for (int64_t l = 0; l < r.lines; ++l)
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                           {b_.CreateConstGEP1_64(b_.getInt8Ty(), p, static_cast<uint64_t>(l * 64)), b_.getInt32(0),
                            b_.getInt32(3), b_.getInt32(1)});
      b_.CreateBr(next);
      b_.SetInsertPoint(next);
    }
  };
}

bool Lowering::loadsAsDotRows(const ir::Value* v) {
  if (!v->type().isTile() || v->type().rank() != 2 || uses_[v] != 1) return false;
  const ir::Op* u = users_[v][0];
  return u->code() == OpCode::Dot && u->operand(0) == v && u->operand(1) != v &&
         u->operand(2)->type().dtype() == v->type().dtype();
}

llvm::Value* Lowering::paddedIndex(llvm::Value* base, int64_t L, int64_t stride) {
  if (coords_.base == base) return b_.CreateAdd(b_.CreateMul(coords_.row, i64(stride)), coords_.col);
  return b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(base, i64(L)), i64(stride)), b_.CreateURem(base, i64(L)));
}

bool Lowering::loadsAsDotPanel(const ir::Value* v) {
  if (!v->type().isTile() || v->type().rank() != 2 || uses_[v] != 1) return false;
  const ir::Op* u = users_[v][0];
  return u->code() == OpCode::Dot && u->operand(1) == v && u->operand(0) != v &&
         u->operand(2)->type().dtype() == v->type().dtype();
}

llvm::Value* Lowering::panelIndex(llvm::Value* base, int64_t K, int64_t N, int64_t nr) {
  llvm::Value *k, *j;
  if (coords_.base == base) {
    k = coords_.row;
    j = coords_.col;
  } else {
    k = b_.CreateUDiv(base, i64(N));
    j = b_.CreateURem(base, i64(N));
  }
  // Panel p = j / nr holds columns [p nr, p nr + nr) as K rows of nr.
  llvm::Value* p = b_.CreateMul(b_.CreateUDiv(j, i64(nr)), i64(K * nr));
  return b_.CreateAdd(b_.CreateAdd(p, b_.CreateMul(k, i64(nr))), b_.CreateURem(j, i64(nr)));
}

}  // namespace tessera::codegen::cpu::detail
