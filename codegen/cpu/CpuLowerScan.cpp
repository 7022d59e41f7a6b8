// Scans along an axis: one running value per lane, the lanes being chunks
// of the dims after the axis (so a scan along an outer axis is vectorised,
// one along the contiguous axis is a scalar loop per row).
#include "codegen/cpu/CpuLowerImpl.h"

namespace tessera::codegen::cpu::detail {

void Lowering::emitScan(const ir::Op& op) {
  const ir::Value* in = op.operand(0);
  const ir::Type& rt = op.result()->type();
  const ir::Shape& s = rt.shape();
  const int axis = static_cast<int>(op.intAttr("axis"));
  int64_t outer = 1, inner = 1, R = s[axis];
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t c = chunkWidth(inner);
  llvm::Type* vt = vec(scalarTy(rt.dtype()), c);
  auto combine = [&](llvm::Value* a, llvm::Value* x) {
    return emitCombineRegion(
        op.region(0).block(), a, x,
        [&](const ir::Value* v) { return b_.CreateVectorSplat(static_cast<unsigned>(c), scalar(v)); },
        [&](const ir::Op& o, std::vector<llvm::Value*> v) {
          if (o.code() == OpCode::Constant) return constantOf(o, vec(elemTy(o.result()->type()), c));
          return elementwise(o, std::move(v));
        });
  };
  llvm::Value* outArr = allocTile(rt);
  llvm::Value* acc = entryAlloca(vt);
  auto loop = [&](int64_t n, int64_t step, const std::function<void(llvm::Value*)>& body) {
    if (n == step) return body(i64(0));
    constLoop(0, n, step, body);
  };
  loop(outer, 1, [&](llvm::Value* o) {
    loop(inner, c, [&](llvm::Value* ic) {
      llvm::Value* first = b_.CreateAdd(b_.CreateMul(o, i64(R * inner)), ic);
      llvm::Value* x0 = emitChunk(in, first, c);
      b_.CreateStore(x0, acc);
      storeChunk(outArr, rt, first, x0);
      if (R == 1) return;
      constLoop(1, R, 1, [&](llvm::Value* r) {
        llvm::Value* at = b_.CreateAdd(first, b_.CreateMul(r, i64(inner)));
        llvm::Value* a = combine(b_.CreateLoad(vt, acc), emitChunk(in, at, c));
        b_.CreateStore(a, acc);
        storeChunk(outArr, rt, at, a);
      });
    });
  });
  arrays_[op.result()] = outArr;
}

}  // namespace tessera::codegen::cpu::detail
