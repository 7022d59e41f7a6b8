// The rewrite of vendor intrinsics (rewriteIntrinsics, EmuPasses.h) as one
// class over three files: the dispatch by namespace, the helpers both
// vendors use and the matrix instructions' fragment buffers
// (EmuIntrinsics.cpp), NVIDIA's llvm.nvvm.* (EmuIntrinsicsNvvm.cpp) and AMD's
// llvm.amdgcn.* (EmuIntrinsicsAmdgcn.cpp). Private to codegen/emu: includes
// LLVM headers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Intrinsics.h>

#include "codegen/emu/EmuPasses.h"

namespace tessera::codegen::emu::intrinsics {

using llvm::IRBuilder;
using llvm::Value;

/// Whether the name parts `t` (the intrinsic's name split at '.') hold `s`.
inline bool has(const std::vector<std::string>& t, const char* s) {
  return std::find(t.begin(), t.end(), s) != t.end();
}

/// A CompileError: the intrinsic of `c` is not modelled (`why`, when given).
[[noreturn]] void unsupported(const llvm::CallInst& c, const std::string& why = "");

class Lowerer {
 public:
  explicit Lowerer(EmuModule& e) : em(e) {}

  // Returns the replacement of the call's value (nullptr for void calls).
  Value* lower(llvm::CallInst& c);

 private:
  EmuModule& em;
  std::map<llvm::Function*, Value*> implicitArgs_, dispatchPackets_;

  // A call of hook `name`, typed by its row of EmuHooks.def (a mismatch with
  // `args` is caught by the module verifier).
  Value* callHook(IRBuilder<>& b, llvm::StringRef name, llvm::ArrayRef<Value*> args = {}) {
    return b.CreateCall(em.hook(name), args);
  }
  Value* dimHook(IRBuilder<>& b, const char* what, const std::string& axis, const llvm::CallInst& c) {
    if (axis != "x" && axis != "y" && axis != "z") unsupported(c);
    return callHook(b, std::string("tessera_emu_") + what + "_" + axis);
  }
  Value* laneId(IRBuilder<>& b) { return callHook(b, "tessera_emu_lane_id"); }
  Value* barrier(IRBuilder<>& b, llvm::CallInst& c) {
    callHook(b, "tessera_emu_barrier", {b.getInt32(em.opId(c))});
    return nullptr;
  }
  Value* unary(IRBuilder<>& b, llvm::Intrinsic::ID id, Value* x) { return b.CreateUnaryIntrinsic(id, x); }
  Value* recip(IRBuilder<>& b, Value* x) { return b.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0), x); }

  // Bits of a value as i32 / i64 for the 32-bit lane-exchange hooks, and back.
  Value* toBits(IRBuilder<>& b, Value* v, unsigned bits) {
    if (v->getType()->isPointerTy()) return b.CreatePtrToInt(v, b.getIntNTy(bits));
    return b.CreateBitCast(v, b.getIntNTy(bits));
  }
  Value* fromBits(IRBuilder<>& b, Value* v, llvm::Type* t) {
    if (t->isPointerTy()) return b.CreateIntToPtr(v, t);
    return b.CreateBitCast(v, t);
  }
  // Applies a 32-bit lane exchange `op` to any value of at most 64 bits, as
  // the AMDGPU backend splits 64-bit readlane into two.
  Value* laneExchange(IRBuilder<>& b, const llvm::CallInst& c, Value* v, const std::function<Value*(Value*)>& op);

  // ---- NVIDIA (EmuIntrinsicsNvvm.cpp) -----------------------------------------
  Value* nvvm(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t);
  Value* cpAsync(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t);
  Value* nvvmMath(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t);
  // tcgen05.* (EmuTcgen05.cpp).
  Value* tcgen05(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t);
  // The i32 tensor-memory address a `ptr addrspace(6)` operand stands for.
  Value* tmemAddress(IRBuilder<>& b, const llvm::CallInst& c, Value* p);
  std::map<llvm::Function*, Value*> tmemBuffers_;  // 128 bytes per function: tcgen05.ld/st registers

  // ---- AMD (EmuIntrinsicsAmdgcn.cpp) ------------------------------------------
  Value* amdgcn(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t);
  Value* frameBuffer(llvm::Function* f, unsigned bytes, const char* name, IRBuilder<>& b);
  void put(IRBuilder<>& b, Value* buf, unsigned off, Value* v);
  Value* implicitArgs(llvm::Function* f);
  Value* dispatchPacket(llvm::Function* f);

  // ---- matrix instructions ---------------------------------------------------
  // The hooks take pointers to the lane's fragment registers: one set of
  // four 64-byte buffers per function (calls are sequential in a thread),
  // in the GPU's private address space, passed as flat pointers.
  struct MatrixScratch {
    Value *a, *b, *c, *d;
  };
  std::map<llvm::Function*, MatrixScratch> matrixScratch_;
  MatrixScratch matrixScratch(llvm::Function* f);
  // Stores operands (scalars, vectors) consecutively into `buf`.
  void pack(IRBuilder<>& b, Value* buf, llvm::ArrayRef<Value*> vals);
  // Reads a result of type `t` (a vector, or a struct of scalars) from `buf`.
  Value* unpack(IRBuilder<>& b, Value* buf, llvm::Type* t);
  Value* matrixCall(IRBuilder<>& b, llvm::CallInst& c, const char* hook, int32_t mode, std::vector<unsigned> aIdx,
                    std::vector<unsigned> bIdx, std::vector<unsigned> cIdx);
};

}  // namespace tessera::codegen::emu::intrinsics
