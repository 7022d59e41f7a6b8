// Blackwell's tensor cores on NVIDIA (sm_100a, sm_103a: Targets.def's
// tcgen05 column): tcgen05.mma, issued by one thread, reads A and B from
// shared memory through matrix descriptors (the swizzled stagings wgmma
// reads, planWgmmaForm) and accumulates in tensor memory (TMEM), which the
// CTA allocates and frees and the warps read back into registers.
//
// Each 64-row tile of the dot is one M = 64 instruction: its data path puts
// rows 16q .. 16q + 15 in TMEM lanes 32q .. 32q + 15, the lanes warp q of a
// warpgroup may read, and tcgen05.ld.16x256b hands every lane exactly the
// mma.m16n8k16 C fragments of those rows (tessera/support/Tcgen05.h). So
// the accumulator keeps the warpgroup placement of wgmma and mma.sync
// (ir::MmaKind::NvTcgen05M64K16), tile t = mi * G + g (g the warpgroup)
// in columns [t N, (t + 1) N). The dot is complete when it returns: the
// MMAs' completion reaches the threads through tcgen05.commit on an
// mbarrier in the dot's own shared scratch (instrScratch: the barrier at 0,
// the TMEM address the allocation writes at 8).
#include <algorithm>
#include <bit>

#include <llvm/IR/IntrinsicsNVPTX.h>

#include "codegen/nvptx/NVPTXDot.h"
#include "codegen/nvptx/NVPTXTma.h"
#include "tessera/support/Error.h"
#include "tessera/support/Tcgen05.h"

namespace tessera::codegen::nvptx {

uint32_t tcgen05Columns(const TensorCoreDotPlan& p) { return static_cast<uint32_t>(p.M / 64 * p.N); }

namespace {

constexpr unsigned kTmemAS = 6;  // NVPTX's tensor-memory address space

// `body` in a block entered only where `cond` holds.
template <class Body>
void guarded(llvm::IRBuilderBase& b, llvm::Value* cond, Body&& body) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  auto* then = llvm::BasicBlock::Create(b.getContext(), "tc.then", fn);
  auto* join = llvm::BasicBlock::Create(b.getContext(), "tc.join", fn);
  b.CreateCondBr(cond, then, join);
  b.SetInsertPoint(then);
  body();
  b.CreateBr(join);
  b.SetInsertPoint(join);
}

llvm::Value* tmem(llvm::IRBuilderBase& b, llvm::Value* addr) {
  return b.CreateIntToPtr(addr, llvm::PointerType::get(b.getContext(), kTmemAS));
}

// Every thread's tensor-memory accesses before the barrier are ordered
// before those of every thread after it.
void syncThreads(llvm::IRBuilderBase& b) {
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_fence_before_thread_sync, {});
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier_cta_sync_aligned_all, {}, {b.getInt32(0)});
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_fence_after_thread_sync, {});
}

llvm::Intrinsic::ID ldIntrinsic(int64_t reps) {
  switch (reps) {
    case 1: return llvm::Intrinsic::nvvm_tcgen05_ld_16x256b_x1;
    case 2: return llvm::Intrinsic::nvvm_tcgen05_ld_16x256b_x2;
    case 4: return llvm::Intrinsic::nvvm_tcgen05_ld_16x256b_x4;
    case 8: return llvm::Intrinsic::nvvm_tcgen05_ld_16x256b_x8;
  }
  TS_UNREACHABLE("tcgen05.ld.16x256b repetitions");
}

llvm::Intrinsic::ID stIntrinsic(int64_t reps) {
  switch (reps) {
    case 1: return llvm::Intrinsic::nvvm_tcgen05_st_16x256b_x1;
    case 2: return llvm::Intrinsic::nvvm_tcgen05_st_16x256b_x2;
    case 4: return llvm::Intrinsic::nvvm_tcgen05_st_16x256b_x4;
    case 8: return llvm::Intrinsic::nvvm_tcgen05_st_16x256b_x8;
  }
  TS_UNREACHABLE("tcgen05.st.16x256b repetitions");
}

bool isZero(const std::vector<llvm::Value*>& acc) {
  return std::all_of(acc.begin(), acc.end(), [](llvm::Value* v) {
    auto* c = llvm::dyn_cast<llvm::Constant>(v);
    return c && c->isNullValue();
  });
}

}  // namespace

std::vector<llvm::Value*> emitTcgen05Dot(DotEmitter& e, std::vector<llvm::Value*> acc) {
  llvm::IRBuilderBase& b = e.b;
  const TensorCoreDotPlan& p = e.p;
  const int64_t W = e.wm, G = W / 4, mT = p.M / (16 * W), nT = p.N / 8, kS = p.K / p.kStep;
  TS_ASSERT(ir::isNvTcgen05(p.op.kind) && e.wn == 1 && W % 4 == 0 && p.aFromShared && p.bFromShared &&
                p.a.rowGroupWarps == W && e.instrScratch && !p.inFlight,
            "tcgen05 dot without its plan");
  TS_ASSERT(static_cast<int64_t>(acc.size()) == mT * nT * 4, "tcgen05 accumulator slots");
  const uint32_t columns = tcgen05Columns(p);
  TS_ASSERT(columns <= tcgen05::kColumns, "tcgen05 dot over the tensor memory");
  const uint32_t allocColumns = std::max<uint32_t>(32, std::bit_ceil(columns));
  auto i32 = [&](int64_t v) { return e.i32(v); };
  auto slot = [&](int64_t mi, int64_t ni, int64_t h, int64_t s) { return (2 * mi + h) * (2 * nT) + ni * 2 + s; };
  llvm::Value* warp0 = b.CreateICmpEQ(e.warp, i32(0));
  llvm::Value* thread0 = b.CreateAnd(warp0, b.CreateICmpEQ(e.lane, i32(0)));
  llvm::Value* bar = e.instrScratch;
  llvm::Value* addrSlot = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), e.instrScratch, 8);

  // Tensor memory (warp 0, all its lanes) and the completion barrier.
  guarded(b, warp0, [&] {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_alloc_shared_cg1, {}, {addrSlot, b.getInt32(allocColumns)});
  });
  guarded(b, thread0, [&] {
    emitMbarrierInit(b, bar, 1);
    emitMbarrierInitFence(b);
  });
  syncThreads(b);
  llvm::Value* base = b.CreateAlignedLoad(b.getInt32Ty(), addrSlot, llvm::Align(4), "tmem.base");

  // This warp's TMEM lanes and the first column of its 64-row tile mi.
  llvm::Value* laneBits = b.CreateShl(b.CreateURem(e.warp, i32(4)), i32(16 + 5));  // (32 (warp % 4)) << 16
  llvm::Value* group = b.CreateUDiv(e.warp, i32(4));
  auto tileColumn = [&](int64_t mi) { return b.CreateAdd(i32(mi * G * p.N), b.CreateMul(group, i32(p.N))); };
  const int64_t reps = std::min<int64_t>(nT, 8);
  auto* vecTy = llvm::FixedVectorType::get(b.getInt32Ty(), static_cast<unsigned>(4 * reps));
  // Moves this warp's fragments of tile mi, chunk c (reps n-tiles) between
  // TMEM and `acc`.
  auto chunkAddr = [&](int64_t mi, int64_t c) {
    return tmem(b, b.CreateAdd(b.CreateOr(base, laneBits), b.CreateAdd(tileColumn(mi), i32(8 * reps * c))));
  };
  auto reg = [&](int64_t c, int64_t r) { return slot(0, c * reps + r / 4, (r % 4) / 2, r % 2); };

  // The accumulator into TMEM, unless it is zero (the first MMA then
  // ignores D).
  const bool zero = isZero(acc);
  if (!zero) {
    for (int64_t mi = 0; mi < mT; ++mi)
      for (int64_t c = 0; c < nT / reps; ++c) {
        llvm::Value* v = llvm::PoisonValue::get(vecTy);
        for (int64_t r = 0; r < 4 * reps; ++r)
          v = b.CreateInsertElement(v, b.CreateBitCast(acc[(2 * mi) * (2 * nT) + reg(c, r)], b.getInt32Ty()), r);
        b.CreateIntrinsic(stIntrinsic(reps), {}, {chunkAddr(mi, c), v, b.getFalse()});
      }
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_wait_st, {});
    syncThreads(b);
  }

  // The MMAs, issued by one thread, and their commit to the barrier.
  const tcgen05::InstrDesc desc{true, p.in == DType::BF16, p.in == DType::BF16, false, p.bNMajor, 64,
                                static_cast<uint32_t>(p.N)};
  guarded(b, thread0, [&] {
    const DescriptorBase aDesc = descriptorBase(b, b.CreatePtrToInt(e.aBase, b.getInt64Ty()),
                                                aDescriptorBits(p) | tcgen05::kDescriptorVersion);
    const DescriptorBase bDesc = descriptorBase(b, b.CreatePtrToInt(e.bBase, b.getInt64Ty()),
                                                bDescriptorBits(p) | tcgen05::kDescriptorVersion);
    llvm::Value* tmemBase = b.CreateAlignedLoad(b.getInt32Ty(), addrSlot, llvm::Align(4));
    for (int64_t mi = 0; mi < mT; ++mi)
      for (int64_t g = 0; g < G; ++g) {
        // Storage row 16 W mi + 64 g starts the tile (wgmmaAStaging).
        const int64_t aRow = 16 * W * mi + 64 * g;
        llvm::Value* d = tmem(b, b.CreateAdd(tmemBase, i32((mi * G + g) * p.N)));
        for (int64_t ks = 0; ks < kS; ++ks) {
          const int64_t col = ks * p.kStep;
          llvm::Value* a = descriptorAt(b, aDesc, aRow * p.a.rowBytes() + kMajorByteOffset(p.a, col));
          llvm::Value* bv = descriptorAt(b, bDesc, bStepOffset(p, col));
          b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_mma_shared, {},
                            {d, a, bv, b.getInt32(desc.encode()), b.getInt1(!(zero && ks == 0)), b.getInt32(0),
                             b.getInt32(1), b.getInt32(0)});
        }
      }
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_commit_shared_cg1, {}, {bar});
  });
  emitMbarrierWait(b, bar, i32(0));
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_fence_after_thread_sync, {});

  // The accumulator back into registers.
  std::vector<llvm::Value*> out(acc.size());
  for (int64_t mi = 0; mi < mT; ++mi)
    for (int64_t c = 0; c < nT / reps; ++c) {
      llvm::Value* v = b.CreateIntrinsic(ldIntrinsic(reps), {}, {chunkAddr(mi, c), b.getFalse()});
      for (int64_t r = 0; r < 4 * reps; ++r)
        out[(2 * mi) * (2 * nT) + reg(c, r)] = b.CreateBitCast(b.CreateExtractElement(v, r), b.getFloatTy());
    }
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_wait_ld, {});

  // Every warp's loads are done before warp 0 frees the memory and thread
  // 0 the barrier (the scratch is reused by later ops).
  syncThreads(b);
  guarded(b, warp0, [&] {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_dealloc_cg1, {}, {tmem(b, base), b.getInt32(allocColumns)});
  });
  guarded(b, thread0, [&] { b.CreateIntrinsic(llvm::Intrinsic::nvvm_mbarrier_inval_shared, {}, {bar}); });
  return out;
}

}  // namespace tessera::codegen::nvptx
