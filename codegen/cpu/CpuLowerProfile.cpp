// Probes of a profiled CPU compile (tessera/support/Profile.h).
//
// A program is one thread: it has one slot, found from its linear id, and
// records when that id is below the header's `programs`. The clock is the
// time-stamp counter read with rdtscp, whose auxiliary value (the core
// number Linux keeps in IA32_TSC_AUX) is the slot's unit, so a trace's
// tracks are the cores the worker threads ran on; the runtime converts
// the counts to nanoseconds with the counter's rate measured around the
// launch. Targets without rdtscp read LLVM's cycle counter and unit 0.
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/cpu/CpuLowerImpl.h"
#include "tessera/support/Profile.h"

namespace tessera::codegen::cpu::detail {

std::pair<llvm::Value*, llvm::Value*> Lowering::readClock() {
  if (llvm::Triple(tgt_.triple).isX86()) {
    llvm::Value* r = b_.CreateCall(llvm::Intrinsic::getOrInsertDeclaration(&mod_, llvm::Intrinsic::x86_rdtscp));
    return {b_.CreateExtractValue(r, 0), b_.CreateExtractValue(r, 1)};
  }
  return {b_.CreateCall(llvm::Intrinsic::getOrInsertDeclaration(&mod_, llvm::Intrinsic::readcyclecounter)), nullptr};
}

void Lowering::initProfile(llvm::Value* buf) {
  buf->setName("profile.buffer");
  auto* i8 = b_.getInt8Ty();
  auto* i32 = b_.getInt32Ty();
  auto* i64t = b_.getInt64Ty();
  auto at = [&](llvm::Value* base, llvm::Value* off) { return b_.CreateInBoundsGEP(i8, base, off); };
  llvm::Value* cap = b_.CreateLoad(i32, at(buf, i64(ProfileHeader::kCapacity)), "profile.capacity");
  llvm::Value* programs = b_.CreateLoad(i32, at(buf, i64(ProfileHeader::kPrograms)), "profile.programs");
  profCapMask_ = b_.CreateSub(cap, b_.getInt32(1));
  llvm::Value* id = b_.CreateZExt(pid_[2], i64t);
  for (int a : {1, 0}) id = b_.CreateAdd(b_.CreateMul(id, b_.CreateZExt(grid_[a], i64t)), b_.CreateZExt(pid_[a], i64t));
  // Profile.h: the slot headers after the header (one slot per program),
  // the records after all of them (programs + 1 slots, the spare one last).
  llvm::Value* recorded = b_.CreateZExt(programs, i64t);
  profOn_ = b_.CreateICmpULT(id, recorded, "profile.on");
  profSlot_ = at(buf, b_.CreateAdd(i64(ProfileHeader::kBytes), b_.CreateMul(id, i64(ProfileSlotHeader::kBytes))));
  llvm::Value* recordsAt = b_.CreateAdd(i64(ProfileHeader::kBytes),
                                        b_.CreateMul(b_.CreateAdd(recorded, i64(1)), i64(ProfileSlotHeader::kBytes)));
  profRecords_ =
      at(buf,
         b_.CreateAdd(recordsAt, b_.CreateMul(b_.CreateMul(id, b_.CreateZExt(cap, i64t)), i64(ProfileRecord::kBytes))));
  profCount_ = llvm::IRBuilder<>(allocaBlock_).CreateAlloca(i32, nullptr, "profile.count");
  b_.CreateStore(b_.getInt32(0), profCount_);
}

void Lowering::emitProbe(const ir::Op& op) {
  if (!probes_) return;
  const uint32_t event = probes_->event(op);
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  auto* rec = llvm::BasicBlock::Create(ctx_, "probe", fn);
  auto* join = llvm::BasicBlock::Create(ctx_, "probe.end", fn);
  b_.CreateCondBr(profOn_, rec, join);
  b_.SetInsertPoint(rec);
  auto [now, core] = readClock();  // first: what follows is the probe's own cost
  auto* i8 = b_.getInt8Ty();
  llvm::Value* n = b_.CreateLoad(b_.getInt32Ty(), profCount_);
  llvm::Value* slotAt = b_.CreateZExt(b_.CreateAnd(n, profCapMask_), b_.getInt64Ty());
  llvm::Value* r = b_.CreateInBoundsGEP(i8, profRecords_, b_.CreateMul(slotAt, i64(ProfileRecord::kBytes)));
  b_.CreateStore(now, b_.CreateInBoundsGEP(i8, r, i64(ProfileRecord::kTime)));
  b_.CreateStore(b_.getInt32(event), b_.CreateInBoundsGEP(i8, r, i64(ProfileRecord::kEvent)));
  llvm::Value* next = b_.CreateAdd(n, b_.getInt32(1));
  b_.CreateStore(next, profCount_);
  b_.CreateStore(next, b_.CreateInBoundsGEP(i8, profSlot_, i64(ProfileSlotHeader::kCount)));
  b_.CreateStore(core ? core : b_.getInt32(0), b_.CreateInBoundsGEP(i8, profSlot_, i64(ProfileSlotHeader::kUnit)));
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
}

}  // namespace tessera::codegen::cpu::detail
