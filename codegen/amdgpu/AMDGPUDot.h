// AMD's matrix-core dot families behind GpuTargetInfo's dot hooks
// (codegen/gpu/GpuDot.h): MFMA on CDNA (AMDGPUMfma.cpp) and WMMA on RDNA3
// (AMDGPUWmma.cpp) and RDNA4 (AMDGPUWmmaGfx12.cpp), which share their operand staging and fragment loop
// (AMDGPUMatrixCore.cpp) and differ in what a family says here: the
// fragment layouts, the registers and the call. Private to codegen/amdgpu:
// includes LLVM headers.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/gpu/GpuDot.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen::amdgpu {

class MatrixCoreFamily {
 public:
  virtual ~MatrixCoreFamily() = default;
  /// The instruction table of the family on architecture `row`, for an `a`
  /// by `b` dot into `acc` (GpuTargetInfo::tensorCore); kind None where the
  /// architecture has no instruction for it.
  virtual TensorCoreOp op(const GpuArch& row, DType a, DType b, DType acc) const = 0;
  /// Bytes a staging row is padded by, so the lanes of one read of 16
  /// consecutive rows spread over the banks.
  virtual int64_t padBytes(ir::MmaKind k) const = 0;
  /// Bytes one lane reads of a row per instruction, up to a 16-byte chunk:
  /// the unit an XOR swizzle of the staging permutes (swizzleStaging).
  virtual int64_t swizzleUnit(const TensorCoreDotPlan& p) const = 0;
  /// The runs along K a lane's operand `which` (0: A, 1: B) of one k-step
  /// is read as: 1 (one run), or 2 (MFMA's f8f6f4 forms with fp8 elements:
  /// two 16-byte runs, half a k-step apart).
  virtual unsigned operandRuns(const TensorCoreDotPlan&, unsigned which) const { return 1; }
  /// Operand `which`'s registers as the instruction reads them, from what
  /// the lane loaded (`packedOperandType`): the loaded value itself but for
  /// the fp4 elements of MFMA's f8f6f4 forms, which it takes two a byte.
  virtual llvm::Value* finishOperand(llvm::IRBuilderBase& b, llvm::Value* loaded, const TensorCoreDotPlan& p,
                                     unsigned which) const {
    return loaded;
  }
  /// Accumulator registers per lane of a T x T tile; operand elements one
  /// lane holds per k-step.
  virtual unsigned accRegisters(int64_t T) const = 0;
  virtual unsigned operandElems(int64_t kStep, int64_t T) const = 0;
  /// 8-bit operands (i8, fp8): the register type of `elems` packed codes.
  virtual llvm::Type* packedOperandType(llvm::IRBuilderBase& b, unsigned elems) const = 0;
  /// The instruction's declaration for these accumulator and operand types
  /// (A's and B's registers, finishOperand's).
  virtual llvm::Function* declare(llvm::Module& m, llvm::Intrinsic::ID id, llvm::Type* accTy, llvm::Type* aTy,
                                  llvm::Type* bTy) const = 0;
  /// The block-tile row of A's fragment row `i` (a lane's index within its
  /// group) in the warp's first tile.
  virtual llvm::Value* aRow0(DotEmitter& e, llvm::Value* i, int64_t T) const = 0;
  /// The k offset of lane group `q` within a k-step (`elems`: the elements
  /// of one run, operandRuns).
  virtual llvm::Value* kOffset(DotEmitter& e, llvm::Value* q, unsigned elems) const = 0;
  /// Accumulator slot of register r of tile (mi, ni), in the #mma layout's
  /// order (Layout.h).
  virtual int64_t slot(int64_t mi, int64_t ni, int64_t r, int64_t nT, unsigned regs) const = 0;
  /// One instruction: D = A B + C for the operand registers as loaded
  /// (`p`: the operands' dtypes); for a block-scaled dot (p.scaled) with
  /// this lane's i32 e8m0 scale of A's row and of B's column (byte 0),
  /// else nullptr.
  virtual llvm::Value* call(llvm::IRBuilderBase& b, llvm::Function* fn, llvm::Value* a, llvm::Value* bOp,
                            llvm::Value* c, const TensorCoreDotPlan& p, llvm::Value* scaleA,
                            llvm::Value* scaleB) const = 0;
};

/// The families fed with swapped operands (Tessera's B^T as the
/// instruction's A, A^T as its B): MFMA and RDNA4's WMMA. Their
/// accumulator registers are then columns of C (C^T), and they place
/// fragments alike: lane i of group q reads row i of the warp's first tile,
/// at k offset q times the run's elements (on RDNA4, half-wave h reads k
/// 8h..8h+7 of its row).
class SwappedFamily : public MatrixCoreFamily {
 public:
  llvm::Value* aRow0(DotEmitter& e, llvm::Value* i, int64_t T) const override {
    return e.b.CreateAdd(e.b.CreateMul(e.wp0, e.i32(T)), i);
  }
  llvm::Value* kOffset(DotEmitter& e, llvm::Value* q, unsigned elems) const override {
    return e.b.CreateMul(q, e.i32(elems));
  }
  int64_t slot(int64_t mi, int64_t ni, int64_t r, int64_t nT, unsigned regs) const override {
    return (mi * nT + ni) * int64_t{regs} + r;
  }
};

/// The families (AMDGPUMfma.cpp, AMDGPUWmma.cpp, AMDGPUWmmaGfx12.cpp), the
/// one of an architecture (Targets.def's matrixCore and wmmaLaneElems) and
/// the one of an MMA kind.
const MatrixCoreFamily& mfmaFamily();
const MatrixCoreFamily& wmmaFamily();
const MatrixCoreFamily& wmmaGfx12Family();
const MatrixCoreFamily* matrixCoreFamily(const GpuArch& row);
const MatrixCoreFamily& matrixCoreFamily(ir::MmaKind k);

/// The staging of a matrix-core dot (AMDGPUMatrixCore.cpp): A M x K, B
/// transposed to N x K, rows padded by the family's padBytes; MFMA
/// 32x32's B rows permuted for its waves along N (mfmaColWarps).
void planMatrixCoreStaging(TensorCoreDotPlan& p);
/// Operands XOR-swizzled instead of padded (stagingIndex), in units of what
/// one lane reads of a row per instruction: WMMA 16 bytes (its 32-byte run
/// is two units, read apart), MFMA 8 bytes (16 for the 8-element runs of gfx950's f16 forms and each
/// 16-byte run of its f8f6f4 forms). The
/// permutation is Triton's swizzled shared layout for the same operands
/// (gfx1100: vec 8, perPhase 2, maxPhase 4 on 64-byte rows; gfx942: vec 4,
/// perPhase 2, maxPhase 8): the rows of one read stay on distinct banks and
/// the staging holds no padding. MFMA 32x32's B keeps its row permutation
/// (mfmaColWarps), swizzled after it. False (and `p` kept) for units other
/// than 8 or 16 bytes (1-byte operands of MFMA 32x32), and rows that are
/// not a power of two units (at least two).
bool swizzleMatrixCoreStaging(TensorCoreDotPlan& p);
/// The fragment loads (plain LDS loads) and instructions of the whole K
/// extent (with e.only set: one operand's fragments into e.loaded).
std::vector<llvm::Value*> emitMatrixCoreDot(DotEmitter& e, std::vector<llvm::Value*> acc);

}  // namespace tessera::codegen::amdgpu
