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
// in columns [t N, (t + 1) N) of those the lowering allocated for the
// kernel (codegen/gpu/LowerAccumulators.cpp); each issue is committed to
// the mbarrier it names. Where each warpgroup holds pairs of 64-row tiles,
// each pair is one M = 128 instruction (row r in lane r) in the
// warpgroup's own columns: A's staging then stores the pair's rows of warp
// q as rows 32q .. 32q + 31 of the instruction's (DotStaging::
// rowGroupTiles), so warp q reads tile 2i + t from lanes 32q + 16t on, half
// the instructions for the same placement. A dot in flight across its loop keeps the
// accumulator there; any other dot waits for its commit and reads the
// result back.
#include <algorithm>
#include <bit>
#include <functional>

#include <llvm/IR/IntrinsicsNVPTX.h>

#include "codegen/nvptx/NVPTXDot.h"
#include "codegen/nvptx/NVPTXTma.h"
#include "codegen/nvptx/NVPTXWgmma.h"
#include "tessera/support/Error.h"
#include "tessera/support/Tcgen05.h"

namespace tessera::codegen::nvptx {

int64_t tcgen05RowTiles(const TensorCoreDotPlan& p) {
  const int64_t W = p.acc.wpb.empty() ? 0 : p.acc.wpb[0];
  return ir::isNvTcgen05(p.op.kind) && W % 4 == 0 && p.M % (32 * W) == 0 && p.N % 16 == 0 ? 2 : 1;
}

uint32_t tcgen05Columns(const TensorCoreDotPlan& p) {
  return static_cast<uint32_t>(p.M / (64 * tcgen05RowTiles(p)) * p.N);
}

// A block-scaled dot's scales in tensor memory (tessera/support/Tcgen05.h,
// "Scales in tensor memory"): after the accumulator, from a 32-column
// boundary, scaleBuffers sets of atoms of 4 columns. In a set, A's atoms
// first, atom (i, j) (instruction i's 128 rows, K-group j of 4 scales) at
// 4 (i G + j); then B's, K-group j's atoms side by side (an instruction
// with N > 128 reads columns n / 32 on from its operand), atom (i, j) at
// 4 (G ceil(M / 128) + j ceil(N / 128) + i).
uint32_t tcgen05ScaleBase(const TensorCoreDotPlan& p) { return (tcgen05Columns(p) + 31) & ~31u; }
uint32_t tcgen05ScaleSetColumns(const TensorCoreDotPlan& p) {
  return static_cast<uint32_t>(tcgen05::kScaleAtomColumns * (p.scaleAtomsA() + p.scaleAtomsB()));
}

bool tcgen05TakesScaled(const ir::BlockedLayout& acc, int64_t M, int64_t N, int64_t scaleBlocks) {
  // The M = 128 shape only (tcgen05RowTiles 2), N to 256, and one set of
  // scales beside the accumulator.
  TensorCoreDotPlan p;
  p.op.kind = acc.mma;
  p.acc = acc;
  p.M = M;
  p.N = N;
  p.scaled = p.scaleAtoms = true;
  p.scaleBlocks = scaleBlocks;
  return tcgen05RowTiles(p) == 2 && N <= 256 && tcgen05ScaleBase(p) + tcgen05ScaleSetColumns(p) <= tcgen05::kColumns;
}

llvm::Value* tcgen05ScaleStagingOffset(llvm::IRBuilderBase& b, const TensorCoreDotPlan& p, unsigned operand,
                                       llvm::Value* row, llvm::Value* block) {
  // Shared memory holds the atoms in ScaleLayouts.h's order, each as
  // tcgen05.cp .32x128b.warpx4 reads it (tcgen05::scaleAtomByte). A's row
  // is the instruction's: its place in A's staging (the warpgroup order).
  auto c = [&](int64_t v) { return b.getInt32(static_cast<uint32_t>(v)); };
  const int64_t G = p.scaleGroups();
  llvm::Value* r = operand ? row : stagedRow(b, p.a, row);
  llvm::Value* atom = b.CreateAdd(b.CreateMul(b.CreateUDiv(r, c(128)), c(G)), b.CreateUDiv(block, c(4)));
  if (operand) atom = b.CreateAdd(atom, c(p.scaleAtomsA()));
  llvm::Value* in = b.CreateAdd(b.CreateAdd(b.CreateMul(b.CreateURem(r, c(32)), c(16)),
                                            b.CreateMul(b.CreateURem(b.CreateUDiv(r, c(32)), c(4)), c(4))),
                                b.CreateURem(block, c(4)));
  return b.CreateAdd(b.CreateMul(atom, c(tcgen05::kScaleAtomBytes)), in);
}

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
// before those of every thread after it. The barrier is the lowering's:
// the block's, or the consumers' of a warp-specialised loop.
void syncThreads(llvm::IRBuilderBase& b, const AccumulatorMemory& mem) {
  TS_ASSERT(mem.barrier != nullptr, "tcgen05 accumulators without their threads' barrier");
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_fence_before_thread_sync, {});
  mem.barrier();
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

using tcgen05::Kind;
using tcgen05::ScaledKind;

ScaledKind scaledKindOf(const TensorCoreDotPlan& p) {
  switch (p.op.mma) {
    case llvm::Intrinsic::nvvm_tcgen05_mma_shared_mxf8f6f4_block_scale_block32: return ScaledKind::MxF8f6f4;
    case llvm::Intrinsic::nvvm_tcgen05_mma_shared_mxf4_block_scale_block32: return ScaledKind::MxF4;
    case llvm::Intrinsic::nvvm_tcgen05_mma_shared_mxf4nvf4_block_scale_block16: return ScaledKind::MxF4Nvf4;
    default: break;
  }
  TS_UNREACHABLE("a block-scaled tcgen05.mma");
}

uint32_t scaledTypeCode(ScaledKind k, DType d) {
  if (k != ScaledKind::MxF8f6f4) {
    TS_ASSERT(d == DType::F4E2M1, "kind::mxf4 of other than e2m1");
    return tcgen05::scode::kFp4E2m1;
  }
  TS_ASSERT(d == DType::F8E4M3 || d == DType::F8E5M2, "kind::mxf8f6f4 of other than fp8 (padded fp6/fp4)");
  return d == DType::F8E4M3 ? tcgen05::scode::kE4m3 : tcgen05::scode::kE5m2;
}

// The instruction's kind and its descriptor's A/B type codes: f16/bf16
// (kind::f16), the OCP fp8 formats (kind::f8f6f4), s8 (kind::i8).
Kind kindOf(const TensorCoreDotPlan& p) {
  if (p.op.kind == ir::MmaKind::NvTcgen05M64K16) return Kind::F16;
  return p.in == DType::I8 ? Kind::I8 : Kind::F8f6f4;
}

uint32_t typeCode(DType d) {
  switch (d) {
    case DType::F16: return tcgen05::code::kF16;
    case DType::BF16: return tcgen05::code::kBf16;
    case DType::F8E4M3: return tcgen05::code::kE4m3;
    case DType::F8E5M2: return tcgen05::code::kE5m2;
    case DType::I8: return tcgen05::code::kS8;
    default: break;
  }
  TS_UNREACHABLE("a tcgen05.mma operand type");
}

bool isZero(const std::vector<llvm::Value*>& acc) {
  return std::all_of(acc.begin(), acc.end(), [](llvm::Value* v) {
    auto* c = llvm::dyn_cast<llvm::Constant>(v);
    return c && c->isNullValue();
  });
}

}  // namespace

namespace {

// The accumulator's placement in tensor memory, for one dot and this warp:
// tile mi's rows of this warp in the warp's lanes (the first 16 of its 32
// for an M = 64 instruction; with M = 128 (T = 2), tile mi = 2i + t in the
// lanes 16t on of instruction i's), from the instruction's N columns (i G +
// g for warpgroup g); moved in chunks of `reps` n-tiles (tcgen05.ld/st
// .16x256b.x<reps>, 4 registers per n-tile). Four n-tiles a move: with
// eight, ptxas holds 32-register tuples and the 128x256 GEMM takes 113
// registers instead of 83 (sm_100a, the static benchmark).
struct Placement {
  DotEmitter& e;
  int64_t W, G, mT, nT, T, reps;
  llvm::Value *laneBits, *group;
  explicit Placement(DotEmitter& em)
      : e(em),
        W(em.wm),
        G(em.wm / 4),
        mT(em.p.M / (16 * em.wm)),
        nT(em.p.N / 8),
        T(tcgen05RowTiles(em.p)),
        reps(std::min<int64_t>(nT, 4)) {
    laneBits = e.b.CreateShl(e.b.CreateURem(e.warp, e.i32(4)), e.i32(16 + 5));  // (32 (warp % 4)) << 16
    group = e.b.CreateUDiv(e.warp, e.i32(4));
  }
  int64_t chunks() const { return nT / reps; }
  llvm::Value* chunkAddr(llvm::Value* base, int64_t mi, int64_t c) {
    llvm::IRBuilderBase& b = e.b;
    const int64_t inst = mi / T, lane = 16 * (mi % T);
    llvm::Value* col =
        b.CreateAdd(e.i32((lane << 16) + inst * G * e.p.N + 8 * reps * c), b.CreateMul(group, e.i32(e.p.N)));
    return tmem(b, b.CreateOr(laneBits, b.CreateAdd(base, col)));
  }
  // The accumulator slot of register r of chunk c of tile mi:
  // (2 mi + h) (2 nT) + 2 ni + s (wgmma's order) for the register's n-tile
  // ni, half h and column s.
  size_t slot(int64_t mi, int64_t c, int64_t r) const {
    return static_cast<size_t>((2 * mi + (r % 4) / 2) * (2 * nT) + 2 * (c * reps + r / 4) + r % 2);
  }
  // f32 cells, or s32 (kind::i8).
  llvm::Type* accTy() const { return e.p.in == DType::I8 ? e.b.getInt32Ty() : e.b.getFloatTy(); }
  llvm::VectorType* vecTy() const {
    return llvm::FixedVectorType::get(e.b.getInt32Ty(), static_cast<unsigned>(4 * reps));
  }
};

void storeAccumulators(Placement& pl, llvm::Value* base, const std::vector<llvm::Value*>& acc) {
  llvm::IRBuilderBase& b = pl.e.b;
  for (int64_t mi = 0; mi < pl.mT; ++mi)
    for (int64_t c = 0; c < pl.chunks(); ++c) {
      llvm::Value* v = llvm::PoisonValue::get(pl.vecTy());
      for (int64_t r = 0; r < 4 * pl.reps; ++r)
        v = b.CreateInsertElement(v, b.CreateBitCast(acc[pl.slot(mi, c, r)], b.getInt32Ty()), r);
      b.CreateIntrinsic(stIntrinsic(pl.reps), {}, {pl.chunkAddr(base, mi, c), v, b.getFalse()});
    }
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_wait_st, {});
}

std::vector<llvm::Value*> loadAccumulators(Placement& pl, llvm::Value* base) {
  llvm::IRBuilderBase& b = pl.e.b;
  std::vector<llvm::Value*> out(static_cast<size_t>(pl.mT * pl.nT * 4));
  for (int64_t mi = 0; mi < pl.mT; ++mi)
    for (int64_t c = 0; c < pl.chunks(); ++c) {
      llvm::Value* v = b.CreateIntrinsic(ldIntrinsic(pl.reps), {}, {pl.chunkAddr(base, mi, c), b.getFalse()});
      for (int64_t r = 0; r < 4 * pl.reps; ++r)
        out[pl.slot(mi, c, r)] = b.CreateBitCast(b.CreateExtractElement(v, r), pl.accTy());
    }
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_wait_ld, {});
  return out;
}

// Thread 0, before a block-scaled dot's MMAs: this issue's set of scale
// atoms (at e.scales in shared memory) copied to its columns at `cols`,
// one tcgen05.cp .32x128b.warpx4 an atom (32 rows of 16 bytes to all four
// lane quarters). The copies and the MMAs after them run in the order the
// thread issues them; the commit after the MMAs tracks both.
void copyScales(DotEmitter& e, llvm::Value* cols) {
  llvm::IRBuilderBase& b = e.b;
  const TensorCoreDotPlan& p = e.p;
  const int64_t G = p.scaleGroups(), mA = p.scaleAtomsA() / G, nB = p.scaleAtomsB() / G;
  // No swizzle: 8-row core matrices of 16-byte rows, SBO = 128 bytes apart.
  const DescriptorBase d = descriptorBase(b, b.CreatePtrToInt(e.scales, b.getInt64Ty()),
                                          descriptorBits(WgmmaSwizzle::None, 0, 8 * 16) | tcgen05::kDescriptorVersion);
  auto copy = [&](int64_t atom, int64_t column) {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_cp_32x128b_warpx4_cg1, {},
                      {tmem(b, b.CreateAdd(cols, b.getInt32(static_cast<uint32_t>(column)))),
                       descriptorAt(b, d, atom * tcgen05::kScaleAtomBytes)});
  };
  const int64_t C = tcgen05::kScaleAtomColumns;
  for (int64_t i = 0; i < mA; ++i)
    for (int64_t j = 0; j < G; ++j) copy(i * G + j, C * (i * G + j));
  for (int64_t i = 0; i < nB; ++i)
    for (int64_t j = 0; j < G; ++j) copy(mA * G + i * G + j, C * (mA * G + j * nB + i));
}

// Thread 0: one MMA per 64-row tile and k-step into the columns at `base`
// (its own load of the address: `base` may be another thread's value), the
// first k-step accumulating where `accumulate` (i1) holds; their commit to
// `bar`. A block-scaled dot copies its scales first (copyScales) and
// issues the kind's block-scaled MMA, each naming its first scale's atom
// columns and byte (the descriptor's scale-factor IDs).
void issueMmas(DotEmitter& e, llvm::Value* thread0, llvm::Value* base, llvm::Value* accumulate, llvm::Value* bar) {
  llvm::IRBuilderBase& b = e.b;
  const TensorCoreDotPlan& p = e.p;
  const int64_t W = e.wm, G = W / 4, mT = p.M / (16 * W), kS = p.K / p.kStep;
  const int64_t T = tcgen05RowTiles(p);
  tcgen05::InstrDesc desc;
  tcgen05::ScaledInstrDesc sdesc;
  uint32_t kindArg = 0;
  if (p.scaled) {
    const ScaledKind sk = scaledKindOf(p);
    sdesc.aType = scaledTypeCode(sk, p.elemA);
    sdesc.bType = scaledTypeCode(sk, p.elemB);
    sdesc.bMnMajor = p.bNMajor;
    sdesc.m = 128;
    sdesc.n = static_cast<uint32_t>(p.N);
    sdesc.ue8m0 = p.scaleBlock == 32;
    TS_ASSERT(T == 2 && (sk == ScaledKind::MxF8f6f4 || !p.bNMajor) &&
                  p.kStep * p.kPerElem == static_cast<int64_t>(tcgen05::kOf(sk)) &&
                  p.scaleBlock * static_cast<int64_t>(tcgen05::scalesPerInstr(sk)) == p.kStep * p.kPerElem,
              "a block-scaled tcgen05.mma the plan does not fit");
  } else {
    const Kind kind = kindOf(p);
    kindArg = static_cast<uint32_t>(kind);
    desc.dType = kind == Kind::I8 ? tcgen05::code::kDS32 : tcgen05::code::kDF32;
    desc.aType = typeCode(p.in);
    desc.bType = typeCode(p.inB);
    desc.bMnMajor = p.bNMajor;
    desc.m = static_cast<uint32_t>(64 * T);
    desc.n = static_cast<uint32_t>(p.N);
  }
  guarded(b, thread0, [&] {
    llvm::Value* scaleCols = nullptr;
    if (p.scaled) {
      TS_ASSERT(e.scales && e.accMemory->scaleSet, "a block-scaled tcgen05 dot without its scales");
      scaleCols = b.CreateAdd(b.CreateAdd(base, b.getInt32(tcgen05ScaleBase(p))),
                              b.CreateMul(e.accMemory->scaleSet, b.getInt32(tcgen05ScaleSetColumns(p))));
      copyScales(e, scaleCols);
    }
    const int64_t SG = p.scaleGroups(), mA = p.scaleAtomsA() / std::max<int64_t>(SG, 1),
                  nB = p.scaleAtomsB() / std::max<int64_t>(SG, 1);
    const DescriptorBase aDesc =
        descriptorBase(b, b.CreatePtrToInt(e.aBase, b.getInt64Ty()), aDescriptorBits(p) | tcgen05::kDescriptorVersion);
    const DescriptorBase bDesc =
        descriptorBase(b, b.CreatePtrToInt(e.bBase, b.getInt64Ty()), bDescriptorBits(p) | tcgen05::kDescriptorVersion);
    for (int64_t inst = 0; inst < mT / T; ++inst)
      for (int64_t g = 0; g < G; ++g) {
        // Storage row 16 T W inst + 64 T g starts the instruction's rows
        // (wgmmaAStaging).
        const int64_t aRow = 16 * T * W * inst + 64 * T * g;
        llvm::Value* d = tmem(b, b.CreateAdd(base, e.i32((inst * G + g) * p.N)));
        for (int64_t ks = 0; ks < kS; ++ks) {
          const int64_t col = ks * p.kStep;
          llvm::Value* a = descriptorAt(b, aDesc, aRow * p.a.rowBytes() + kMajorByteOffset(p.a, col));
          llvm::Value* bv = descriptorAt(b, bDesc, bStepOffset(p, col));
          llvm::Value* enable = ks == 0 ? accumulate : b.getTrue();
          if (!p.scaled) {
            b.CreateIntrinsic(
                llvm::Intrinsic::nvvm_tcgen05_mma_shared, {},
                {d, a, bv, b.getInt32(desc.encode()), enable, b.getInt32(kindArg), b.getInt32(1), b.getInt32(0)});
            continue;
          }
          // The step's first scale: K-group f / 4, byte f % 4 of its cells.
          const int64_t f = col * p.kPerElem / p.scaleBlock, j = f / 4;
          const int64_t C = tcgen05::kScaleAtomColumns, atomA = aRow / 128;
          sdesc.sfA = sdesc.sfB = static_cast<uint32_t>(f % 4);
          llvm::Value* sfa = tmem(b, b.CreateAdd(scaleCols, b.getInt32(static_cast<uint32_t>(C * (atomA * SG + j)))));
          llvm::Value* sfb = tmem(b, b.CreateAdd(scaleCols, b.getInt32(static_cast<uint32_t>(C * (mA * SG + j * nB)))));
          b.CreateIntrinsic(p.op.mma, {},
                            {d, a, bv, b.getInt32(sdesc.encode()), enable, sfa, sfb, b.getInt32(1), b.getInt32(0)});
        }
      }
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_commit_shared_cg1, {}, {bar});
  });
}

}  // namespace

std::vector<llvm::Value*> emitTcgen05Dot(DotEmitter& e, std::vector<llvm::Value*> acc) {
  llvm::IRBuilderBase& b = e.b;
  const TensorCoreDotPlan& p = e.p;
  Placement pl(e);
  TS_ASSERT(ir::isNvTcgen05(p.op.kind) && e.wn == 1 && pl.W % 4 == 0 && p.aFromShared && p.bFromShared &&
                p.a.rowGroupWarps == pl.W && p.a.rowGroupTiles == pl.T && e.accMemory &&
                (p.inFlight ? e.accMemory->resident != nullptr : e.accMemory->waitParity != nullptr),
            "tcgen05 dot without its plan");
  TS_ASSERT(static_cast<int64_t>(acc.size()) == pl.mT * pl.nT * 4, "tcgen05 accumulator slots");
  const AccumulatorMemory& mem = *e.accMemory;
  llvm::Value* thread0 = b.CreateAnd(b.CreateICmpEQ(e.warp, e.i32(0)), b.CreateICmpEQ(e.lane, e.i32(0)));
  const bool zero = isZero(acc);
  if (p.inFlight) {
    // The accumulator enters the memory at the first issue (the dot_wait
    // that last read the columns ended with a barrier), unless it enters
    // the loop as zero: the first issue's first MMA then ignores D. The
    // registers pass through.
    const bool enterZero = zero || mem.entersZero;
    if (!enterZero)
      guarded(b, b.CreateNot(mem.resident), [&] {
        storeAccumulators(pl, mem.address, acc);
        syncThreads(b, mem);
      });
    issueMmas(e, thread0, mem.address, enterZero ? mem.resident : b.getTrue(), mem.commitBarrier);
    return acc;
  }
  // Complete at the issue, in columns other such dots share: each warp
  // writes only its own lanes, but the MMAs write every lane, so every
  // warp's reads of the last result come first (the barrier).
  if (!zero) storeAccumulators(pl, mem.address, acc);
  syncThreads(b, mem);
  issueMmas(e, thread0, mem.address, b.getInt1(!zero), mem.commitBarrier);
  emitMbarrierWait(b, mem.commitBarrier, mem.waitParity);
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_fence_after_thread_sync, {});
  return loadAccumulators(pl, mem.address);
}

uint32_t tcgen05AccumulatorColumns(const TensorCoreDotPlan& p) {
  if (!ir::isNvTcgen05(p.op.kind) || !p.bFromShared) return 0;
  return p.scaleAtoms ? tcgen05ScaleBase(p) + static_cast<uint32_t>(p.scaleBuffers) * tcgen05ScaleSetColumns(p)
                      : tcgen05Columns(p);
}

void allocTensorMemory(llvm::IRBuilderBase& b, llvm::Value* word, llvm::Value* warp, uint32_t columns) {
  guarded(b, b.CreateICmpEQ(warp, b.getInt32(0)),
          [&] { b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_alloc_shared_cg1, {}, {word, b.getInt32(columns)}); });
}

void freeTensorMemory(llvm::IRBuilderBase& b, llvm::Value* base, llvm::Value* warp, uint32_t columns,
                      const std::function<void()>& barrier) {
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_fence_before_thread_sync, {});
  barrier();
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_fence_after_thread_sync, {});
  guarded(b, b.CreateICmpEQ(warp, b.getInt32(0)), [&] {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_dealloc_cg1, {}, {tmem(b, base), b.getInt32(columns)});
  });
}

std::vector<llvm::Value*> loadTcgen05Accumulators(DotEmitter& e) {
  TS_ASSERT(e.accMemory && ir::isNvTcgen05(e.p.op.kind), "tcgen05 accumulators without their memory");
  e.b.CreateIntrinsic(llvm::Intrinsic::nvvm_tcgen05_fence_after_thread_sync, {});
  Placement pl(e);
  return loadAccumulators(pl, e.accMemory->address);
}

}  // namespace tessera::codegen::nvptx
