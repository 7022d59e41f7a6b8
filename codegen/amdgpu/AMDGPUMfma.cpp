// MFMA on CDNA (gfx90a, gfx942, gfx950: Targets.def's matrixCore,
// i8MfmaK, fp8Mfma, f16MfmaK and f8f6f4MfmaK columns), wave64. Fragment layouts:
//
// AMD v_mfma_f32_16x16x16f16 (wave64), i = lane % 16, q = lane / 16:
//   A: lane holds (row i, k 4q..4q+3); B: (k 4q..4q+3, col i);
//   D: register r holds (row 4q + r, col i).
//   Tessera feeds it B^T as A and A^T as B (both fragments are 4
//   consecutive k of one row of a K-contiguous staging buffer), so D is
//   C^T: register r holds C(row i, col 4q + r), the #mma layout
//   spt=[1,4], tpw=[16,4], order=[0,1].
// AMD v_mfma_i32_16x16x16i8 (gfx90a): as 16x16x16f16, 4 i8 of k 4q..4q+3
//   in one register; v_mfma_i32_16x16x32_i8 (gfx942): 8 i8 of k 8q..8q+7 in
//   two registers (an i64); D (i32) as the f32 D. Swapped the same way.
//   v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8} (gfx942): the same with 8 fp8
//   codes and an f32 D; swapped, so the instruction's first format is B's.
// AMD v_mfma_f32_32x32x8f16 (wave64), i = lane % 32, q = lane / 32:
//   A: lane holds (row i, k 4q..4q+3); B: (k 4q..4q+3, col i); D: register
//   r holds (row 8(r/4) + 4q + r%4, col i). Swapped as above: register r
//   holds C(row i, col 8(r/4) + 4q + r%4), four repetitions of the #mma
//   layout spt=[1,4], tpw=[32,2] along the columns.
// AMD v_mfma_f32_16x16x32_{f16,bf16} and v_mfma_f32_32x32x16_{f16,bf16}
//   (CDNA4, gfx950): the K-doubled 16x16x16 and 32x32x8, 8 elements of k
//   8q..8q+7 per lane (a 16-byte run of the row); D, and the swap, as theirs.
// AMD v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8} on gfx950: gfx942's places,
//   reading the OCP e4m3 / e5m2 codes (Targets.def's fp8Mfma).
// AMD v_mfma_f32_16x16x128_f8f6f4 and v_mfma_f32_32x32x64_f8f6f4 (CDNA4,
//   fp8/bf8 operands; cbsz / blgp give the instruction's A / B format, 0
//   e4m3, 1 e5m2): 32 codes per lane in eight registers, two runs of 16
//   along K half a k-step apart: 16x16x128, i = lane % 16, q = lane / 16:
//   bytes 0..15 hold k 16q..16q+15, bytes 16..31 k 64+16q..64+16q+15;
//   32x32x64, i = lane % 32, q = lane / 32: k 16q.. and 32+16q.. (AMD's
//   CDNA4 matrix-core examples). fp4 (e2m1, cbsz / blgp 4) packs a lane's
//   32 elements two a byte in four registers, k 32q..32q+31 contiguous,
//   low nibble first. D as 16x16x16's / 32x32x8's; swapped the same way.
//   A plain dot is emitted through llvm.amdgcn.mfma.scale.* with op_sel 0
//   and constant zero scales, which LLVM selects as the unscaled
//   instructions (no v_mfma_ld_scale prefix, no scale VGPRs): the plain
//   fp8 product.
// AMD v_mfma_scale_f32_{16x16x128,32x32x64}_f8f6f4, the block-scaled form
//   (a dot's operands 3 and 4, IR.h): each lane gives one e8m0 scale per
//   operand (byte op_sel of a VGPR); lane i + T b gives row (column) i's
//   scale for block b of the k-step, k 32b..32b+31, whichever lanes hold
//   that block's elements (fp8: the runs above, e.g. 16x16x128's block 0
//   is the first runs of lane groups 0 and 1; fp4: lane group b). This is
//   Triton's scaled-MFMA scale layout (lane bits: the row, then the block)
//   over the same operand placements. fp6 (cbsz / blgp 2, 3) packs 32
//   elements in six registers in an order not established here: its dots
//   run decomposed.
#include <llvm/IR/IntrinsicsAMDGPU.h>

#include "codegen/amdgpu/AMDGPUDot.h"

namespace tessera::codegen::amdgpu {

namespace {

class Mfma final : public SwappedFamily {
 public:
  // f16/bf16 operands with an f32 accumulator use v_mfma_f32_32x32x8{f16,
  // bf16_1k} where every wave owns whole 32 x 32 tiles (16 accumulator
  // registers per lane and tile; the same LDS bytes per flop as 16x16x16
  // and half the instructions), else v_mfma_f32_16x16x16{f16,bf16_1k} (4
  // registers, small warp tiles: TensorCoreOp::mmaSmall). i8 operands with
  // an i32 accumulator: v_mfma_i32_16x16x16i8 (gfx90a) or
  // v_mfma_i32_16x16x32_i8 (gfx942, which dropped the 16x16x16 form); sums
  // wrap mod 2^32 (no clamp). The FNUZ fp8 formats (f8e4m3fnuz = fp8,
  // f8e5m2fnuz = bf8, either on either side) with an f32 accumulator use
  // v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8} (gfx942; the i8 form's
  // placement; the operands are swapped, so the instruction's first format
  // is B's).
  //
  // The OCP formats (f8e4m3 = fp8, f8e5m2 = bf8) on gfx950, whose fp8 MFMAs
  // read them: v_mfma_f32_32x32x64_f8f6f4 where every wave owns whole 32 x
  // 32 tiles and K is a multiple of 64, else v_mfma_f32_16x16x128_f8f6f4
  // (K a multiple of 128), else v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8}
  // (ir::mmaLayout picks; the f8f6f4 forms do twice the work per cycle of
  // the 16x16x32 ones). The 32x32x16 fp8 forms are not used.
  //
  // gfx950's f8f6f4 forms take block-scaled dots of the fp8 and fp4
  // elements, any pair (TensorCoreOp::mmaBlockScale, mmaSmallBlockScale:
  // the same intrinsics, with scales); fp4 has no other instruction.
  TensorCoreOp op(const GpuArch& row, DType in, DType inB, DType acc) const override {
    TensorCoreOp t;
    auto ocp = [](DType d) { return d == DType::F8E4M3 || d == DType::F8E5M2; };
    auto mx = [&](DType d) { return ocp(d) || d == DType::F4E2M1; };
    if (mx(in) && mx(inB) && (in == DType::F4E2M1 || inB == DType::F4E2M1) && acc == DType::F32) {
      if (row.f8f6f4MfmaK != 128) return {};
      t.fp4PackedK = 1;
      t.kind = ir::MmaKind::AmdMfma32x32x64;
      t.mma = t.mmaBlockScale = llvm::Intrinsic::amdgcn_mfma_scale_f32_32x32x64_f8f6f4;
      t.small = ir::MmaKind::AmdMfma16x16x128;
      t.mmaSmall = t.mmaSmallBlockScale = llvm::Intrinsic::amdgcn_mfma_scale_f32_16x16x128_f8f6f4;
      return t;
    }
    if (ocp(in) && ocp(inB) && acc == DType::F32) {
      if (row.fp8Mfma != GpuArch::Fp8Mfma::Ocp) return {};
      const bool srcAFp8 = inB == DType::F8E4M3, srcBFp8 = in == DType::F8E4M3;  // swapped, as below
      const llvm::Intrinsic::ID k32 = srcAFp8 ? (srcBFp8 ? llvm::Intrinsic::amdgcn_mfma_f32_16x16x32_fp8_fp8
                                                         : llvm::Intrinsic::amdgcn_mfma_f32_16x16x32_fp8_bf8)
                                              : (srcBFp8 ? llvm::Intrinsic::amdgcn_mfma_f32_16x16x32_bf8_fp8
                                                         : llvm::Intrinsic::amdgcn_mfma_f32_16x16x32_bf8_bf8);
      if (row.f8f6f4MfmaK != 128) {
        t.kind = ir::MmaKind::AmdMfma16x16x32;
        t.mma = k32;
        return t;
      }
      t.kind = ir::MmaKind::AmdMfma32x32x64;
      t.mma = t.mmaBlockScale = llvm::Intrinsic::amdgcn_mfma_scale_f32_32x32x64_f8f6f4;
      t.small = ir::MmaKind::AmdMfma16x16x128;
      t.mmaSmall = t.mmaSmallBlockScale = llvm::Intrinsic::amdgcn_mfma_scale_f32_16x16x128_f8f6f4;
      t.smaller = ir::MmaKind::AmdMfma16x16x32;
      t.mmaSmaller = k32;
      return t;
    }
    auto fnuz = [](DType d) { return d == DType::F8E4M3FNUZ || d == DType::F8E5M2FNUZ; };
    if (fnuz(in) && fnuz(inB) && acc == DType::F32) {
      if (row.fp8Mfma != GpuArch::Fp8Mfma::Fnuz) return {};
      // Swapped operands: the instruction's A is Tessera's B.
      const bool srcAFp8 = inB == DType::F8E4M3FNUZ, srcBFp8 = in == DType::F8E4M3FNUZ;
      t.kind = ir::MmaKind::AmdMfma16x16x32;
      t.mma = srcAFp8 ? (srcBFp8 ? llvm::Intrinsic::amdgcn_mfma_f32_16x16x32_fp8_fp8
                                 : llvm::Intrinsic::amdgcn_mfma_f32_16x16x32_fp8_bf8)
                      : (srcBFp8 ? llvm::Intrinsic::amdgcn_mfma_f32_16x16x32_bf8_fp8
                                 : llvm::Intrinsic::amdgcn_mfma_f32_16x16x32_bf8_bf8);
      return t;
    }
    if (inB != in) return {};
    if (in == DType::I8 && acc == DType::I32) {
      if (row.i8MfmaK == 16) {
        t.kind = ir::MmaKind::AmdMfma16x16x16;
        t.mma = llvm::Intrinsic::amdgcn_mfma_i32_16x16x16i8;
      } else if (row.i8MfmaK == 32) {
        t.kind = ir::MmaKind::AmdMfma16x16x32;
        t.mma = llvm::Intrinsic::amdgcn_mfma_i32_16x16x32_i8;
      }
      return t;
    }
    if (acc != DType::F32 || (in != DType::F16 && in != DType::BF16)) return {};
    const bool f16 = in == DType::F16;
    if (row.f16MfmaK == 32) {
      // gfx950: 32x32x16 where every wave owns whole 32 x 32 tiles, else
      // 16x16x32, else (K not a multiple of 32) gfx942's 16x16x16.
      t.kind = ir::MmaKind::AmdMfma32x32x16;
      t.mma = f16 ? llvm::Intrinsic::amdgcn_mfma_f32_32x32x16_f16 : llvm::Intrinsic::amdgcn_mfma_f32_32x32x16_bf16;
      t.small = ir::MmaKind::AmdMfma16x16x32;
      t.mmaSmall = f16 ? llvm::Intrinsic::amdgcn_mfma_f32_16x16x32_f16 : llvm::Intrinsic::amdgcn_mfma_f32_16x16x32_bf16;
      t.smaller = ir::MmaKind::AmdMfma16x16x16;
      t.mmaSmaller =
          f16 ? llvm::Intrinsic::amdgcn_mfma_f32_16x16x16f16 : llvm::Intrinsic::amdgcn_mfma_f32_16x16x16bf16_1k;
      return t;
    }
    t.kind = ir::MmaKind::AmdMfma32x32x8;
    t.mma = f16 ? llvm::Intrinsic::amdgcn_mfma_f32_32x32x8f16 : llvm::Intrinsic::amdgcn_mfma_f32_32x32x8bf16_1k;
    t.small = ir::MmaKind::AmdMfma16x16x16;
    t.mmaSmall = f16 ? llvm::Intrinsic::amdgcn_mfma_f32_16x16x16f16 : llvm::Intrinsic::amdgcn_mfma_f32_16x16x16bf16_1k;
    return t;
  }
  // Lanes read 4, 8 or 16 bytes of a row: 8 bytes of padding spread 16 rows.
  int64_t padBytes(ir::MmaKind) const override { return 8; }
  // The f8f6f4 forms: fp8's two 16-byte runs, fp4's 32 containers (two
  // 16-byte units read apart, as WMMA's rows).
  static bool f8f6f4(ir::MmaKind k) { return k == ir::MmaKind::AmdMfma16x16x128 || k == ir::MmaKind::AmdMfma32x32x64; }
  static DType elem(const TensorCoreDotPlan& p, unsigned which) { return which ? p.elemB : p.elemA; }
  unsigned operandRuns(const TensorCoreDotPlan& p, unsigned which) const override {
    return f8f6f4(p.op.kind) && elem(p, which) != DType::F4E2M1 ? 2 : 1;
  }
  int64_t swizzleUnit(const TensorCoreDotPlan& p) const override {
    if (f8f6f4(p.op.kind)) return 16;
    if (ir::amdMmaTile(p.op.kind) == 32) return p.kStep * 32 / 64 * p.elemBytes;  // 2 lane groups along K
    return p.kStep * 16 / 64 * p.elemBytes;                                       // 4 lane groups along K
  }
  // fp4 in a mixed pair: a block-scaled dot's operands are u8 containers,
  // one element a byte in bits 2-5 (ir::buildMmaContainers), staged and
  // loaded as fp8's; the instruction takes them two a byte, low nibble
  // first. Per register: x = the four nibbles at bits 0-3 of its bytes, x |
  // x >> 4 holds the pairs (0, 1) and (2, 3) in bytes 0 and 2. fp4 x fp4
  // stays packed (fp4PackedK): loaded as the instruction reads it.
  llvm::Value* finishOperand(llvm::IRBuilderBase& b, llvm::Value* v, const TensorCoreDotPlan& p,
                             unsigned which) const override {
    if (!f8f6f4(p.op.kind) || elem(p, which) != DType::F4E2M1 || p.kPerElem == 2) return v;
    TS_ASSERT(llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements() == 8, "fp4 containers: 32 a lane");
    auto pairs = [&](unsigned r) {
      llvm::Value* x = b.CreateAnd(b.CreateLShr(b.CreateExtractElement(v, r), 2), 0x0F0F0F0Fu);
      return b.CreateOr(x, b.CreateLShr(x, 4));
    };
    llvm::Value* out = llvm::PoisonValue::get(llvm::FixedVectorType::get(b.getInt32Ty(), 4));
    for (unsigned j = 0; j < 4; ++j) {
      llvm::Value *lo = pairs(2 * j), *hi = pairs(2 * j + 1);
      llvm::Value* w = b.CreateOr(b.CreateAnd(lo, 0xFFu), b.CreateAnd(b.CreateLShr(lo, 8), 0xFF00u));
      w = b.CreateOr(w, b.CreateShl(b.CreateAnd(hi, 0xFFu), 16));
      w = b.CreateOr(w, b.CreateAnd(b.CreateShl(hi, 8), 0xFF000000u));
      out = b.CreateInsertElement(out, w, j);
    }
    return out;
  }
  unsigned accRegisters(int64_t T) const override { return static_cast<unsigned>(T * T / 64); }
  // The k-step over the 64 / T lane groups (16x16x16: 4, 16x16x32: 8,
  // 32x32x8: 4, 32x32x16: 8, 16x16x128 and 32x32x64: 32).
  unsigned operandElems(int64_t kStep, int64_t T) const override { return static_cast<unsigned>(kStep * T / 64); }
  // An i32 for four codes, an i64 for eight (16x16x32), <8 x i32> for the
  // f8f6f4 forms' 32.
  llvm::Type* packedOperandType(llvm::IRBuilderBase& b, unsigned elems) const override {
    if (elems > 8) return llvm::FixedVectorType::get(b.getInt32Ty(), elems / 4);
    return b.getIntNTy(8 * elems);
  }
  // The f8f6f4 intrinsics are overloaded on their operand vectors (whose
  // length follows the formats: eight registers for fp8, four for fp4);
  // the instruction's A is Tessera's B.
  llvm::Function* declare(llvm::Module& m, llvm::Intrinsic::ID id, llvm::Type*, llvm::Type* aTy,
                          llvm::Type* bTy) const override {
    if (llvm::Intrinsic::isOverloaded(id)) return llvm::Intrinsic::getOrInsertDeclaration(&m, id, {bTy, aTy});
    return llvm::Intrinsic::getOrInsertDeclaration(&m, id);
  }
  // Swapped: B^T as the instruction's A, A^T as its B; cbsz, abid, blgp 0.
  // gfx950's bf16 forms type their operands <8 x bfloat>, loaded as i16.
  // The f8f6f4 forms (nine operands): cbsz the format of B (the
  // instruction's A), blgp A's (0 e4m3, 1 e5m2, 4 e2m1); op_sel 0, the
  // scales B's and A's (swapped likewise), or 0 for a plain dot (the
  // unscaled instruction, see above).
  llvm::Value* call(llvm::IRBuilderBase& b, llvm::Function* fn, llvm::Value* a, llvm::Value* bOp, llvm::Value* c,
                    const TensorCoreDotPlan& p, llvm::Value* scaleA, llvm::Value* scaleB) const override {
    llvm::FunctionType* ft = fn->getFunctionType();
    llvm::Value *x = b.CreateBitCast(bOp, ft->getParamType(0)), *y = b.CreateBitCast(a, ft->getParamType(1));
    llvm::Value* zero = b.getInt32(0);
    if (fn->arg_size() == 9) {
      auto format = [&](DType d) { return b.getInt32(d == DType::F8E5M2 ? 1 : d == DType::F4E2M1 ? 4 : 0); };
      TS_ASSERT(p.scaled == (scaleA && scaleB), "MFMA scales for a block-scaled dot only");
      return b.CreateCall(fn, {x, y, c, format(p.elemB), format(p.elemA), zero, p.scaled ? scaleB : zero, zero,
                               p.scaled ? scaleA : zero});
    }
    return b.CreateCall(fn, {x, y, c, zero, zero, zero});
  }
};

}  // namespace

const MatrixCoreFamily& mfmaFamily() {
  static const Mfma f;
  return f;
}

}  // namespace tessera::codegen::amdgpu
