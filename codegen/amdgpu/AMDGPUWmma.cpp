// WMMA on RDNA3 (gfx1100: Targets.def's matrixCore column), wave32.
// Fragment layouts:
//
// AMD v_wmma_f32_16x16x16_f16 (wave32), i = lane % 16, h = lane / 16:
//   A: lane holds (row i, k 0..15); B: (k 0..15, col i) (lanes 16-31 repeat
//   lanes 0-15); D (f32): register r holds (row 2r + h, col i).
//   v_wmma_i32_16x16x16_iu8: the same with 16 i8 in four registers and an
//   i32 D; the A_sign / B_sign flags set (signed operands), clamp off.
#include <llvm/IR/IntrinsicsAMDGPU.h>

#include "codegen/amdgpu/AMDGPUDot.h"

namespace tessera::codegen::amdgpu {

namespace {

class Wmma final : public MatrixCoreFamily {
 public:
  // f16/bf16 operands with an f32 accumulator: v_wmma_f32_16x16x16_{f16,
  // bf16}; i8 with an i32 accumulator: v_wmma_i32_16x16x16_iu8, both
  // operands signed, sums wrapping mod 2^32 (no clamp). No fp8 form here:
  // those dots are widened to f16 (widen-fp8-dots).
  TensorCoreOp op(const GpuArch&, DType in, DType inB, DType acc) const override {
    TensorCoreOp t;
    if (inB != in) return {};
    if (in == DType::I8 && acc == DType::I32) {
      t.kind = ir::MmaKind::AmdWmma16x16x16;
      t.mma = llvm::Intrinsic::amdgcn_wmma_i32_16x16x16_iu8;
      return t;
    }
    if (acc != DType::F32 || (in != DType::F16 && in != DType::BF16)) return {};
    t.kind = ir::MmaKind::AmdWmma16x16x16;
    t.mma = in == DType::F16 ? llvm::Intrinsic::amdgcn_wmma_f32_16x16x16_f16
                             : llvm::Intrinsic::amdgcn_wmma_f32_16x16x16_bf16;
    return t;
  }
  // Lanes read 32 bytes (a row of 16): rows padded by 16 bytes keep the
  // reads 16-byte aligned (ds_load_b128).
  int64_t padBytes(ir::MmaKind) const override { return 16; }
  int64_t swizzleUnit(const TensorCoreDotPlan&) const override { return 16; }  // a lane's 32 bytes: two units
  unsigned accRegisters(int64_t) const override { return 8; }
  unsigned operandElems(int64_t, int64_t) const override { return 16; }  // a whole row of 16
  // <4 x i32> for the 16 codes of a row.
  llvm::Type* packedOperandType(llvm::IRBuilderBase& b, unsigned elems) const override {
    return llvm::FixedVectorType::get(b.getInt32Ty(), elems / 4);
  }
  llvm::Function* declare(llvm::Module& m, llvm::Intrinsic::ID id, llvm::Type* accTy, llvm::Type* opTy,
                          llvm::Type*) const override {
    return llvm::Intrinsic::getOrInsertDeclaration(&m, id, {accTy, opTy});
  }
  // Lanes i and i + 16 hold the same row; the eight rows of a register
  // pair are 2 * wm apart (the #mma layout).
  llvm::Value* aRow0(DotEmitter& e, llvm::Value* i, int64_t) const override {
    llvm::IRBuilderBase& b = e.b;
    return b.CreateAdd(b.CreateAdd(b.CreateMul(e.wp0, e.i32(2)), b.CreateAnd(i, e.i32(1))),
                       b.CreateMul(b.CreateLShr(i, e.i32(1)), e.i32(2 * e.wm)));
  }
  llvm::Value* kOffset(DotEmitter& e, llvm::Value*, unsigned) const override { return e.i32(0); }
  // The eight registers of a tile are eight rows of C.
  int64_t slot(int64_t mi, int64_t ni, int64_t r, int64_t nT, unsigned) const override {
    return (8 * mi + r) * nT + ni;
  }
  llvm::Value* call(llvm::IRBuilderBase& b, llvm::Function* fn, llvm::Value* a, llvm::Value* bOp, llvm::Value* c,
                    const TensorCoreDotPlan& p, llvm::Value*, llvm::Value*) const override {
    if (p.elemBytes == 1)  // i8 (the only 8-bit WMMA dot): A_sign, A, B_sign, B, C, clamp
      return b.CreateCall(fn, {b.getTrue(), a, b.getTrue(), bOp, c, b.getFalse()});
    return b.CreateCall(fn, {a, bOp, c});
  }
};

}  // namespace

const MatrixCoreFamily& wmmaFamily() {
  static const Wmma f;
  return f;
}

}  // namespace tessera::codegen::amdgpu
