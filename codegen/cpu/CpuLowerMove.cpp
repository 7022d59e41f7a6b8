// Data movement between tiles: gather along an axis, join and split. Their
// operands are materialised (canFuseInto), so each is one chunk loop over
// its result reading the operands' arrays.
#include "codegen/cpu/CpuLowerImpl.h"

#include <llvm/IR/Intrinsics.h>

namespace tessera::codegen::cpu::detail {

void Lowering::emitGather(const ir::Op& op) {
  const ir::Value* src = op.operand(0);
  const ir::Value* index = op.operand(1);
  const ir::Type& rt = op.result()->type();
  const ir::Shape& rs = rt.shape();
  const ir::Shape& ss = src->type().shape();
  const auto axis = static_cast<size_t>(op.intAttr("axis"));
  const DType it = index->type().dtype();
  const int64_t n = numElems(rt), c = chunkWidth(n);
  auto rst = stridesOf(rs), sst = stridesOf(ss);
  llvm::Value* arr = allocTile(rt);
  llvm::Type* i64v = vec(b_.getInt64Ty(), c);
  auto splat = [&](int64_t v) { return llvm::ConstantInt::get(i64v, static_cast<uint64_t>(v)); };
  chunkLoop(n, c, [&](llvm::Value* base) {
    llvm::Value* flat = iotaI64(base, c);
    // The index, widened by its signedness and clamped to the axis: an
    // out-of-range index reads some element of the row (IR.h leaves the
    // value unspecified), never memory outside the source's array.
    llvm::Value* k = emitChunk(index, base, c);
    k = isUnsigned(it) ? b_.CreateZExtOrTrunc(k, i64v) : b_.CreateSExtOrTrunc(k, i64v);
    k = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, k, splat(0));
    k = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, k, splat(ss[axis] - 1));
    llvm::Value* at = splat(0);
    for (size_t d = 0; d < rs.size(); ++d) {
      llvm::Value* idx = d == axis ? k : b_.CreateURem(b_.CreateUDiv(flat, splat(rst[d])), splat(rs[d]));
      at = b_.CreateAdd(at, b_.CreateMul(idx, splat(sst[d])));
    }
    storeChunk(arr, rt, base, gatherFrom(src, at, c));
  });
  arrays_[op.result()] = arr;
}

void Lowering::emitJoin(const ir::Op& op) {
  const ir::Value* a = op.operand(0);
  const ir::Value* b = op.operand(1);
  const ir::Type& rt = op.result()->type();
  const int64_t n = numElems(a->type()), c = chunkWidth(n);
  llvm::Value* arr = allocTile(rt);
  std::vector<int> interleave;
  for (int i = 0; i < c; ++i) interleave.insert(interleave.end(), {i, static_cast<int>(c) + i});
  chunkLoop(n, c, [&](llvm::Value* base) {
    llvm::Value* v = b_.CreateShuffleVector(emitChunk(a, base, c), emitChunk(b, base, c), interleave);
    storeChunk(arr, rt, b_.CreateShl(base, 1), v);
  });
  arrays_[op.result()] = arr;
}

void Lowering::emitSplit(const ir::Op& op) {
  const ir::Value* x = op.operand(0);
  const ir::Type& rt = op.result(0)->type();
  const int64_t n = numElems(rt), c = chunkWidth(n);
  llvm::Value* lo = allocTile(rt);
  llvm::Value* hi = allocTile(rt);
  std::vector<int> even, odd;
  for (int i = 0; i < c; ++i) {
    even.push_back(2 * i);
    odd.push_back(2 * i + 1);
  }
  chunkLoop(n, c, [&](llvm::Value* base) {
    llvm::Value* v = emitChunk(x, b_.CreateShl(base, 1), 2 * c);
    storeChunk(lo, rt, base, b_.CreateShuffleVector(v, even));
    storeChunk(hi, rt, base, b_.CreateShuffleVector(v, odd));
  });
  arrays_[op.result(0)] = lo;
  arrays_[op.result(1)] = hi;
}

}  // namespace tessera::codegen::cpu::detail
