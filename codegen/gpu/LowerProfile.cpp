// Probes of a profiled GPU compile (GpuOptions::profile; the buffer and
// its records: tessera/support/Profile.h).
//
// The buffer's address is the kernel's last parameter. At entry each warp
// finds its slot -- (linear program id * warps + warp) -- and whether it
// records: the warps of the first `programs` programs the runtime asked
// for; the others write into a spare program's slots no one reads. A probe
// is straight-line code: one clock read (GpuTargetInfo::profileClock, made
// warp-uniform), two stores of the record and one of the count, every lane
// storing the same values to the same addresses (one transaction each). A
// branch around it, on lane 0 or on the program, splits the loop it
// measures into blocks the schedulers cannot move code across.
// The count lives in a register (promoted from an alloca once the kernel
// is emitted) and is stored with every record, so a kernel that ends
// anywhere leaves its count right.
//
// Probes are placed by the IR (the user's scopes and ir/passes/
// InsertProbes.cpp) and their scopes numbered by ir::ProbeScopes: this
// file only emits them.
#include <llvm/IR/Dominators.h>
#include <llvm/Transforms/Utils/PromoteMemToReg.h>

#include "codegen/gpu/LowerImpl.h"
#include "tessera/ir/analysis/ProbeScopes.h"
#include "tessera/support/Profile.h"

namespace tessera::codegen::gpu_lower {

void Lower::numberProbes() {
  probes_.reset();
  if (o_.profile) probes_.emplace(f_);
}

void Lower::profileParams(std::vector<llvm::Type*>& params) {
  if (o_.profile) params.push_back(llvm::PointerType::get(ctx_, t_.globalAS()));
}

void Lower::initProfile(llvm::Function* fn) {
  profSlot_ = profRecords_ = profCapMask_ = nullptr;
  profCount_ = nullptr;
  if (!o_.profile) return;
  llvm::Value* buf = fn->getArg(fn->arg_size() - 1);
  buf->setName("profile.buffer");
  auto* i8 = b_.getInt8Ty();
  auto* i32t = b_.getInt32Ty();
  auto* i64t = b_.getInt64Ty();
  auto field = [&](llvm::Value* base, llvm::Value* at) { return b_.CreateInBoundsGEP(i8, base, at); };
  llvm::Value* cap = b_.CreateLoad(i32t, field(buf, b_.getInt64(ProfileHeader::kCapacity)), "profile.capacity");
  llvm::Value* programs = b_.CreateLoad(i32t, field(buf, b_.getInt64(ProfileHeader::kPrograms)), "profile.programs");
  profCapMask_ = b_.CreateSub(cap, i32(1));
  // The linear program id, x fastest (i64: grids reach 2^40 programs).
  llvm::Value* pid = b_.CreateZExt(t_.blockId(b_, 2), i64t);
  for (int a : {1, 0})
    pid =
        b_.CreateAdd(b_.CreateMul(pid, b_.CreateZExt(t_.gridDim(b_, a), i64t)), b_.CreateZExt(t_.blockId(b_, a), i64t));
  const uint64_t warps = blockThreads() / t_.warpSize();
  // Programs past the recorded ones write into the buffer's spare program
  // (Profile.h), which no one reads: the probes need no branch.
  llvm::Value* recorded = b_.CreateZExt(programs, i64t);
  pid = b_.CreateSelect(b_.CreateICmpULT(pid, recorded), pid, recorded);
  llvm::Value* slotIndex = b_.CreateAdd(b_.CreateMul(pid, b_.getInt64(warps)), b_.CreateZExt(warp_, i64t));
  // Profile.h: the slot headers after the header, the records after all
  // of them ((programs + 1) * warps slots).
  llvm::Value* slots = b_.CreateMul(b_.CreateAdd(recorded, b_.getInt64(1)), b_.getInt64(warps));
  profSlot_ = field(buf, b_.CreateAdd(b_.getInt64(ProfileHeader::kBytes),
                                      b_.CreateMul(slotIndex, b_.getInt64(ProfileSlotHeader::kBytes))));
  llvm::Value* recordsAt =
      b_.CreateAdd(b_.getInt64(ProfileHeader::kBytes), b_.CreateMul(slots, b_.getInt64(ProfileSlotHeader::kBytes)));
  profRecords_ = field(buf, b_.CreateAdd(recordsAt, b_.CreateMul(b_.CreateMul(slotIndex, b_.CreateZExt(cap, i64t)),
                                                                 b_.getInt64(ProfileRecord::kBytes))));
  {
    llvm::IRBuilderBase::InsertPointGuard g(b_);
    llvm::BasicBlock& entry = fn->getEntryBlock();
    b_.SetInsertPoint(&entry, entry.getFirstInsertionPt());
    profCount_ = b_.CreateAlloca(i32t, nullptr, "profile.count");
    b_.CreateStore(i32(0), profCount_);
  }
  b_.CreateStore(t_.warpUniform(b_, t_.profileUnit(b_)), field(profSlot_, b_.getInt64(ProfileSlotHeader::kUnit)));
}

void Lower::emitProbe(const ir::Op& op) {
  if (!o_.profile) return;
  const uint32_t event = probes_->event(op);
  {
    // The clock first: what follows is the probe's own cost.
    llvm::Value* now = t_.warpUniform(b_, t_.profileClock(b_));
    auto* i8 = b_.getInt8Ty();
    auto* i64t = b_.getInt64Ty();
    llvm::Value* n = b_.CreateLoad(b_.getInt32Ty(), profCount_);
    llvm::Value* at = b_.CreateZExt(b_.CreateAnd(n, profCapMask_), i64t);
    llvm::Value* rec = b_.CreateInBoundsGEP(i8, profRecords_, b_.CreateMul(at, b_.getInt64(ProfileRecord::kBytes)));
    b_.CreateStore(now, b_.CreateInBoundsGEP(i8, rec, b_.getInt64(ProfileRecord::kTime)));
    b_.CreateStore(i32(event), b_.CreateInBoundsGEP(i8, rec, b_.getInt64(ProfileRecord::kEvent)));
    llvm::Value* next = b_.CreateAdd(n, i32(1));
    b_.CreateStore(next, profCount_);
    b_.CreateStore(next, b_.CreateInBoundsGEP(i8, profSlot_, b_.getInt64(ProfileSlotHeader::kCount)));
  }
}

void Lower::finishProfile(llvm::Function* fn) {
  if (!profCount_) return;
  // The count into registers here: not every target's pipeline promotes
  // allocas (AMDGPU's would put it in LDS, one slot per thread).
  llvm::DominatorTree dt(*fn);
  llvm::PromoteMemToReg({profCount_}, dt);
  profCount_ = nullptr;
}

}  // namespace tessera::codegen::gpu_lower
