// IdentityFolder: the IRBuilder folder of the GPU lowering (LowerImpl.h),
// which drops the trivial identities of its unrolled index arithmetic.
#pragma once

#include <llvm/ADT/ArrayRef.h>
#include <llvm/IR/ConstantFolder.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilderFolder.h>
#include <llvm/IR/Instruction.h>
#include <llvm/IR/Intrinsics.h>

namespace tessera::codegen::gpu_lower {

/// ConstantFolder plus the algebraic identities of the lowering's unrolled
/// index arithmetic (x + 0, x * 1, x * 0, x udiv 1, x urem 1, x & 0, x | 0,
/// x >> 0, GEP by 0, select on a constant): the module handed to LLVM is
/// smaller, so printing, verification, the passes and instruction selection
/// all have less to do. Only identities of an instruction's own operands:
/// llvm::InstSimplifyFolder also looks through operands, which is wrong
/// while a loop's phis still miss their back-edge value (it would fold
/// `urem %iv, 3` of a phi whose only incoming value so far is 0 to 0).
class IdentityFolder final : public llvm::IRBuilderFolder {
 public:
  llvm::Value* FoldBinOp(llvm::Instruction::BinaryOps opc, llvm::Value* l, llvm::Value* r) const override {
    if (llvm::Value* v = identity(opc, l, r)) return v;
    return cf_.FoldBinOp(opc, l, r);
  }
  llvm::Value* FoldExactBinOp(llvm::Instruction::BinaryOps opc, llvm::Value* l, llvm::Value* r,
                              bool exact) const override {
    if (llvm::Value* v = identity(opc, l, r)) return v;
    return cf_.FoldExactBinOp(opc, l, r, exact);
  }
  llvm::Value* FoldNoWrapBinOp(llvm::Instruction::BinaryOps opc, llvm::Value* l, llvm::Value* r, bool nuw,
                               bool nsw) const override {
    if (llvm::Value* v = identity(opc, l, r)) return v;
    return cf_.FoldNoWrapBinOp(opc, l, r, nuw, nsw);
  }
  llvm::Value* FoldBinOpFMF(llvm::Instruction::BinaryOps opc, llvm::Value* l, llvm::Value* r,
                            llvm::FastMathFlags fmf) const override {
    return cf_.FoldBinOpFMF(opc, l, r, fmf);
  }
  llvm::Value* FoldUnOpFMF(llvm::Instruction::UnaryOps opc, llvm::Value* v, llvm::FastMathFlags fmf) const override {
    return cf_.FoldUnOpFMF(opc, v, fmf);
  }
  llvm::Value* FoldCmp(llvm::CmpInst::Predicate p, llvm::Value* l, llvm::Value* r) const override {
    return cf_.FoldCmp(p, l, r);
  }
  llvm::Value* FoldGEP(llvm::Type* ty, llvm::Value* ptr, llvm::ArrayRef<llvm::Value*> idx,
                       llvm::GEPNoWrapFlags nw) const override {
    if (idx.size() == 1)
      if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(idx[0]); c && c->isZero() && !ptr->getType()->isVectorTy())
        return ptr;
    return cf_.FoldGEP(ty, ptr, idx, nw);
  }
  llvm::Value* FoldSelect(llvm::Value* c, llvm::Value* t, llvm::Value* f) const override {
    if (auto* k = llvm::dyn_cast<llvm::ConstantInt>(c)) return k->isOne() ? t : f;
    if (t == f) return t;
    return cf_.FoldSelect(c, t, f);
  }
  llvm::Value* FoldExtractValue(llvm::Value* agg, llvm::ArrayRef<unsigned> idx) const override {
    return cf_.FoldExtractValue(agg, idx);
  }
  llvm::Value* FoldInsertValue(llvm::Value* agg, llvm::Value* val, llvm::ArrayRef<unsigned> idx) const override {
    return cf_.FoldInsertValue(agg, val, idx);
  }
  llvm::Value* FoldExtractElement(llvm::Value* vec, llvm::Value* idx) const override {
    return cf_.FoldExtractElement(vec, idx);
  }
  llvm::Value* FoldInsertElement(llvm::Value* vec, llvm::Value* elt, llvm::Value* idx) const override {
    return cf_.FoldInsertElement(vec, elt, idx);
  }
  llvm::Value* FoldShuffleVector(llvm::Value* a, llvm::Value* b, llvm::ArrayRef<int> mask) const override {
    return cf_.FoldShuffleVector(a, b, mask);
  }
  llvm::Value* FoldCast(llvm::Instruction::CastOps op, llvm::Value* v, llvm::Type* to) const override {
    return cf_.FoldCast(op, v, to);
  }
  llvm::Value* FoldBinaryIntrinsic(llvm::Intrinsic::ID id, llvm::Value* l, llvm::Value* r, llvm::Type* ty,
                                   llvm::Instruction* fmf) const override {
    return cf_.FoldBinaryIntrinsic(id, l, r, ty, fmf);
  }
  llvm::Value* CreatePointerCast(llvm::Constant* c, llvm::Type* to) const override {
    return cf_.CreatePointerCast(c, to);
  }
  llvm::Value* CreatePointerBitCastOrAddrSpaceCast(llvm::Constant* c, llvm::Type* to) const override {
    return cf_.CreatePointerBitCastOrAddrSpaceCast(c, to);
  }

 private:
  /// Integer scalars only (floating-point x + 0 is not x for x = -0).
  static llvm::Value* identity(llvm::Instruction::BinaryOps opc, llvm::Value* l, llvm::Value* r) {
    if (!l->getType()->isIntegerTy()) return nullptr;
    auto* cl = llvm::dyn_cast<llvm::ConstantInt>(l);
    auto* cr = llvm::dyn_cast<llvm::ConstantInt>(r);
    using I = llvm::Instruction;
    switch (opc) {
      case I::Add:
      case I::Or:
      case I::Xor:
        if (cr && cr->isZero()) return l;
        if (cl && cl->isZero()) return r;
        return nullptr;
      case I::Sub:
      case I::Shl:
      case I::LShr:
      case I::AShr: return cr && cr->isZero() ? l : nullptr;
      case I::Mul:
        if (cr && cr->isOne()) return l;
        if (cl && cl->isOne()) return r;
        if ((cr && cr->isZero()) || (cl && cl->isZero())) return llvm::ConstantInt::get(l->getType(), 0);
        return nullptr;
      case I::UDiv:
      case I::SDiv: return cr && cr->isOne() ? l : nullptr;
      case I::URem:
      case I::SRem: return cr && cr->isOne() ? llvm::ConstantInt::get(l->getType(), 0) : nullptr;
      case I::And:
        if ((cr && cr->isZero()) || (cl && cl->isZero())) return llvm::ConstantInt::get(l->getType(), 0);
        if (cr && cr->isMinusOne()) return l;
        if (cl && cl->isMinusOne()) return r;
        return nullptr;
      default: return nullptr;
    }
  }
  llvm::ConstantFolder cf_;
};

}  // namespace tessera::codegen::gpu_lower
