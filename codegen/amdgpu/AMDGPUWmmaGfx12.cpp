// WMMA on RDNA4 (gfx1200, gfx1201: Targets.def's wmmaLaneElems 8 and
// fp8Wmma columns), wave32. Fragment layouts (AMD's matrix instruction
// calculator, RDNA4), i = lane % 16, h = lane / 16:
//
// v_wmma_f32_16x16x16_{f16,bf16}: A: element e (of 8, two per register) of
//   lane (i, h) is (row i, k 8(e/4) + 4h + e%4); B: (that k, col i).
//   Unlike RDNA3's, lanes 16-31 hold the other half of K, not a copy.
// v_wmma_i32_16x16x16_iu8, v_wmma_f32_16x16x16_{fp8,bf8}_{fp8,bf8}: byte e
//   (of 8, four per register) of lane (i, h) is (row i, k 8h + e); B alike.
//   fp8 = OCP e4m3, bf8 = OCP e5m2.
// D (f32 or i32, 8 registers): register r of lane (i, h) is (row r + 8h,
//   col i).
//
// Tessera feeds B^T as the instruction's A and A^T as its B (both are rows
// of a K-contiguous staging buffer), so D is C^T: register r holds C(row i,
// col r + 8h), the #mma layout spt=[1,8], tpw=[16,2], order=[0,1] (as the
// MFMAs do). Each lane reads one run of 8 consecutive k of its row, k 8h..
// 8h+7: for the 8-bit forms that is the instruction's own k order; for
// f16/bf16 it feeds instruction slot k' = 8(e/4) + 4h + e%4 with the
// operands' k = 8h + e, one permutation of K applied to both operands, so
// D is the same sum of products (in another order) and the run is one
// 16-byte LDS read instead of two 8-byte ones.
#include <llvm/IR/IntrinsicsAMDGPU.h>

#include "codegen/amdgpu/AMDGPUDot.h"

namespace tessera::codegen::amdgpu {

namespace {

class WmmaGfx12 final : public SwappedFamily {
 public:
  // f16/bf16 with an f32 accumulator; i8 with an i32 accumulator (iu8,
  // both operands signed, sums wrapping mod 2^32, no clamp); the OCP fp8
  // formats, either on either side, with an f32 accumulator
  // (v_wmma_f32_16x16x16_{fp8,bf8}_{fp8,bf8}; swapped, so the instruction's
  // first format is B's). FNUZ fp8 operands are widened (widen-fp8-dots).
  TensorCoreOp op(const GpuArch& row, DType in, DType inB, DType acc) const override {
    TensorCoreOp t;
    t.kind = ir::MmaKind::AmdWmmaGfx12;
    auto ocp = [](DType d) { return d == DType::F8E4M3 || d == DType::F8E5M2; };
    if (ocp(in) && ocp(inB) && acc == DType::F32) {
      if (!row.fp8Wmma) return {};
      const bool srcAFp8 = inB == DType::F8E4M3, srcBFp8 = in == DType::F8E4M3;
      t.mma = srcAFp8 ? (srcBFp8 ? llvm::Intrinsic::amdgcn_wmma_f32_16x16x16_fp8_fp8
                                 : llvm::Intrinsic::amdgcn_wmma_f32_16x16x16_fp8_bf8)
                      : (srcBFp8 ? llvm::Intrinsic::amdgcn_wmma_f32_16x16x16_bf8_fp8
                                 : llvm::Intrinsic::amdgcn_wmma_f32_16x16x16_bf8_bf8);
      return t;
    }
    if (inB != in) return {};
    if (in == DType::I8 && acc == DType::I32) {
      t.mma = llvm::Intrinsic::amdgcn_wmma_i32_16x16x16_iu8;
      return t;
    }
    if (acc != DType::F32 || (in != DType::F16 && in != DType::BF16)) return {};
    t.mma = in == DType::F16 ? llvm::Intrinsic::amdgcn_wmma_f32_16x16x16_f16
                             : llvm::Intrinsic::amdgcn_wmma_f32_16x16x16_bf16;
    return t;
  }
  // Lanes read 16 bytes (8 f16) or 8 bytes (8 codes) of a row: rows padded
  // by 16 bytes keep the 16-byte reads aligned (ds_load_b128) and put the
  // 16 rows of one read into distinct 4-bank groups.
  int64_t padBytes(ir::MmaKind) const override { return 16; }
  int64_t swizzleUnit(const TensorCoreDotPlan& p) const override { return 8 * int64_t{p.elemBytes}; }
  unsigned accRegisters(int64_t) const override { return 8; }
  unsigned operandElems(int64_t, int64_t) const override { return 8; }
  // <2 x i32> for the 8 codes of a run.
  llvm::Type* packedOperandType(llvm::IRBuilderBase& b, unsigned elems) const override {
    return llvm::FixedVectorType::get(b.getInt32Ty(), elems / 4);
  }
  llvm::Function* declare(llvm::Module& m, llvm::Intrinsic::ID id, llvm::Type* accTy, llvm::Type* opTy,
                          llvm::Type*) const override {
    return llvm::Intrinsic::getOrInsertDeclaration(&m, id, {accTy, opTy});
  }
  // Swapped: B^T as the instruction's A, A^T as its B.
  llvm::Value* call(llvm::IRBuilderBase& b, llvm::Function* fn, llvm::Value* a, llvm::Value* bOp, llvm::Value* c,
                    const TensorCoreDotPlan& p, llvm::Value*, llvm::Value*) const override {
    if (p.elemBytes == 1 && !isFp8(p.in))  // iu8: A_sign, A, B_sign, B, C, clamp
      return b.CreateCall(fn, {b.getTrue(), bOp, b.getTrue(), a, c, b.getFalse()});
    return b.CreateCall(fn, {bOp, a, c});
  }
};

}  // namespace

const MatrixCoreFamily& wmmaGfx12Family() {
  static const WmmaGfx12 f;
  return f;
}

}  // namespace tessera::codegen::amdgpu
