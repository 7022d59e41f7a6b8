// Hopper's warpgroup MMA on NVIDIA (sm_90a: Targets.def's wgmma column):
// wgmma.mma_async (NVPTXWgmma.h: the instruction texts, which the emulator
// shares) reading B, and A where the planner puts it there, from shared
// memory through matrix descriptors, in the swizzled layouts those name;
// A otherwise from mma.sync's fragments (NVPTXMmaSync.cpp). The
// accumulator is mma.sync's placement, so every dot the planner cannot
// give wgmma keeps mma.sync on the same registers.
#include <algorithm>

#include <llvm/IR/IntrinsicsNVPTX.h>

#include "codegen/nvptx/NVPTXDot.h"
#include "codegen/nvptx/NVPTXWgmma.h"
#include "tessera/support/Error.h"
#include "tessera/support/Tcgen05.h"

namespace tessera::codegen::nvptx {

DotStaging wgmmaBStaging(int64_t K, int64_t N, unsigned elemBytes) {
  // Rows of at most 128 bytes (the widest swizzle), column blocks beyond.
  const int64_t maxRow = 128 / static_cast<int64_t>(elemBytes), rowElems = std::min<int64_t>(N, maxRow);
  return {K, N, rowElems, true, 16 / static_cast<int64_t>(elemBytes), elemBytes, N > maxRow ? maxRow : 0};
}

uint64_t wgmmaBAlign(const DotStaging& s) { return static_cast<uint64_t>(8 * s.rowBytes()); }

DotStaging wgmmaAStaging(int64_t M, int64_t K, int64_t warps, unsigned elemBytes, int64_t tiles) {
  DotStaging s = wgmmaBStaging(M, K, elemBytes);
  s.rowGroupWarps = warps;
  s.rowGroupTiles = tiles;
  return s;
}

namespace {
WgmmaSwizzle swizzleOf(const DotStaging& s) {
  const WgmmaSwizzle sw = s.rowBytes() == 128  ? WgmmaSwizzle::B128
                          : s.rowBytes() == 64 ? WgmmaSwizzle::B64
                                               : WgmmaSwizzle::B32;
  TS_ASSERT(s.swizzle && s.rowBytes() == static_cast<int64_t>(swizzleBytes(sw)), "a descriptor's swizzled staging");
  return sw;
}

WgmmaFp8 fp8(DType d) {
  return d == DType::F8E4M3 ? WgmmaFp8::E4M3 : d == DType::F8E5M2 ? WgmmaFp8::E5M2 : WgmmaFp8::None;
}
}  // namespace

// K-major (N x K): 8-row groups of n SBO = 8 rows apart. N-major (K x N):
// 8-row groups of k SBO apart, column blocks LBO = a block apart.
uint64_t bDescriptorBits(const TensorCoreDotPlan& p) {
  const DotStaging& st = p.b;
  const uint64_t blockBytes = static_cast<uint64_t>(st.rows * st.rowBytes());
  return descriptorBits(swizzleOf(st), p.bNMajor ? blockBytes : 16, static_cast<uint64_t>(8 * st.rowBytes()));
}

uint64_t aDescriptorBits(const TensorCoreDotPlan& p) {
  return descriptorBits(swizzleOf(p.a), 16, static_cast<uint64_t>(8 * p.a.rowBytes()));
}

int64_t kMajorByteOffset(const DotStaging& s, int64_t col) {
  const int64_t eb = s.elemBytes;
  return s.blockCols ? (col / s.blockCols) * s.rows * s.rowBytes() + (col % s.blockCols) * eb : col * eb;
}

// K-major: k-step col is bytes into its row (of its block); N-major: 16
// rows (k) further per step.
int64_t bStepOffset(const TensorCoreDotPlan& p, int64_t col) {
  return p.bNMajor ? col * p.b.rowBytes() : kMajorByteOffset(p.b, col);
}

// A descriptor is the operand's base descriptor plus (offset >> 4) in its
// start-address field: every operand lies below 2^18 bytes of the shared
// window, so the sum never carries out of the field's 14 bits and one
// 32-bit add gives each k-step's descriptor from the base.
DescriptorBase descriptorBase(llvm::IRBuilderBase& b, llvm::Value* addr64, uint64_t constBits) {
  llvm::Value* lo = b.CreateTrunc(b.CreateAnd(b.CreateLShr(addr64, 4), b.getInt64(0x3FFF)), b.getInt32Ty());
  return {b.CreateOr(lo, b.getInt32(static_cast<uint32_t>(constBits))), b.getInt64(constBits & ~uint64_t{0xFFFFFFFF})};
}

llvm::Value* descriptorAt(llvm::IRBuilderBase& b, const DescriptorBase& d, int64_t off) {
  TS_ASSERT(off % 16 == 0 && off < (int64_t{1} << 18), "matrix descriptor offset");
  llvm::Value* lo = off ? b.CreateAdd(d.lo, b.getInt32(static_cast<uint32_t>(off >> 4)), "", true, true) : d.lo;
  return b.CreateOr(b.CreateZExt(lo, b.getInt64Ty()), d.hi, "", /*IsDisjoint=*/true);
}

namespace {
void useWgmmaSharedA(TensorCoreDotPlan& p) {
  TS_ASSERT(p.bFromShared && p.M % (16 * p.acc.wpb[0]) == 0, "wgmma A from shared memory without a wgmma plan");
  p.a = wgmmaAStaging(p.M, p.K, p.acc.wpb[0], p.elemBytes, tcgen05RowTiles(p));
  p.aFromShared = true;
  p.aAlign = wgmmaBAlign(p.a);
  p.aBytes = p.a.bytes();
}

void useWgmma(TensorCoreDotPlan& p, bool kMajor) {
  TS_ASSERT(ir::isNvWarpgroupPlaced(p.op.kind) &&
                (p.elemBytes == 2 || (p.elemBytes == 1 && (kMajor || ir::isNvTcgen05(p.op.kind)))) &&
                p.acc.wpb[1] == 1 && p.N <= 256 && p.N >= 16,
            "wgmma plan of a dot that does not fit it");
  // K-major: one swizzled row of K per n (blocks of 128 bytes beyond
  // that): wgmmaBStaging's layout of B^T. wgmma's fp8 is K-major only;
  // tcgen05 reads 1-byte B N-major too.
  p.b = kMajor ? wgmmaBStaging(p.N, p.K, p.elemBytes) : wgmmaBStaging(p.K, p.N, p.elemBytes);
  p.bTransposed = kMajor;
  p.bFromShared = true;
  p.bNMajor = !kMajor;
  p.bAlign = wgmmaBAlign(p.b);
}

void useMmaSync(TensorCoreDotPlan& p) {
  if (p.op.kind == ir::MmaKind::NvWgmmaM64K16 || p.op.kind == ir::MmaKind::NvTcgen05M64K16)
    p.op.kind = ir::MmaKind::NvMmaM16N8K16;
  if (p.op.kind == ir::MmaKind::NvWgmmaM64K32 || p.op.kind == ir::MmaKind::NvTcgen05M64K32)
    p.op.kind = ir::MmaKind::NvMmaM16N8K32;
}

// wgmma over A fragments `aFrags` ((ks * mT + mi) * 4 + q, as loaded for
// mma.sync) and the accumulator slots; B at bBase (useWgmma's layout).
std::vector<llvm::Value*> wgmmaDot(DotEmitter& e, std::vector<llvm::Value*> aFrags, std::vector<llvm::Value*> acc,
                                   int64_t mT, int64_t nT, int64_t kS) {
  llvm::IRBuilderBase& b = e.b;
  const TensorCoreDotPlan& p = e.p;
  const int64_t wm = e.wm;
  llvm::Value *warp = e.warp, *aBase = e.aBase, *bBase = e.bBase;
  auto i32 = [&](int64_t v) { return e.i32(v); };
  TS_ASSERT(static_cast<int64_t>(acc.size()) == mT * nT * 4 &&
                static_cast<int64_t>(aFrags.size()) == (p.aFromShared ? 0 : kS * mT * 4),
            "wgmma fragment counts");
  for (llvm::Value*& x : aFrags) x = b.CreateBitCast(x, b.getInt32Ty());
  auto slot = [&](int64_t mi, int64_t ni, int64_t h, int64_t s) { return (2 * mi + h) * (2 * nT) + ni * 2 + s; };
  // The registers the instructions read, through the fence: A first.
  std::vector<llvm::Value*> regs(aFrags);
  regs.insert(regs.end(), acc.begin(), acc.end());
  regs = emitWgmmaPassThrough(b, -1, regs);
  std::copy(regs.begin(), regs.begin() + static_cast<long>(aFrags.size()), aFrags.begin());
  std::copy(regs.begin() + static_cast<long>(aFrags.size()), regs.end(), acc.begin());
  // The descriptor: B's start address (shared window, bits 4-17) per
  // k-step, the rest constant (NVPTXWgmma.h, bDescriptorBits).
  const DotStaging& st = p.b;
  TS_ASSERT(st.swizzle && p.bAlign % wgmmaBAlign(st) == 0 && st.rows == (p.bNMajor ? p.K : p.N), "wgmma B staging");
  const DescriptorBase bDesc = descriptorBase(b, b.CreatePtrToInt(bBase, b.getInt64Ty()), bDescriptorBits(p));
  // A from shared memory (K-major, wgmmaAStaging): the warpgroup's 64
  // rows of tile mi start at storage row 16 W mi + 64 (warp / 4).
  const DotStaging& sa = p.a;
  DescriptorBase aDesc{nullptr, nullptr};
  if (p.aFromShared) {
    TS_ASSERT(sa.swizzle && sa.rowGroupWarps == wm, "wgmma A staging");
    // The warpgroup index through a shuffle from lane 0: ptxas then knows
    // it is warp-uniform and builds the descriptors in uniform registers
    // (the wgmma operand) instead of moving each one over.
    llvm::Value* g = b.CreateUDiv(warp, i32(4));
    g = b.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_idx_i32, {}, {b.getInt32(0xFFFFFFFFu), g, i32(0), i32(0x1F)});
    llvm::Value* group = b.CreateZExt(g, b.getInt64Ty());
    llvm::Value* aAddr = b.CreateAdd(b.CreatePtrToInt(aBase, b.getInt64Ty()),
                                     b.CreateMul(group, b.getInt64(static_cast<uint64_t>(64 * sa.rowBytes()))));
    aDesc = descriptorBase(b, aAddr, aDescriptorBits(p));
  }
  const WgmmaForm form{static_cast<int>(p.N), p.in == DType::BF16, p.bNMajor, p.aFromShared, fp8(p.in), fp8(p.inB)};
  for (int64_t ks = 0; ks < kS; ++ks) {
    const int64_t col = ks * p.kStep;
    llvm::Value* desc = descriptorAt(b, bDesc, bStepOffset(p, col));
    for (int64_t mi = 0; mi < mT; ++mi) {
      std::vector<llvm::Value*> a;
      if (p.aFromShared)
        a.push_back(descriptorAt(b, aDesc, mi * 16 * wm * sa.rowBytes() + kMajorByteOffset(sa, col)));
      else
        a.assign(aFrags.begin() + (ks * mT + mi) * 4, aFrags.begin() + (ks * mT + mi + 1) * 4);
      std::vector<llvm::Value*> d;
      for (int64_t ni = 0; ni < nT; ++ni)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t s = 0; s < 2; ++s) d.push_back(acc[slot(mi, ni, h, s)]);
      d = emitWgmma(b, form, a, desc, d);
      size_t i = 0;
      for (int64_t ni = 0; ni < nT; ++ni)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t s = 0; s < 2; ++s) acc[slot(mi, ni, h, s)] = d[i++];
    }
  }
  b.CreateIntrinsic(llvm::Intrinsic::nvvm_wgmma_commit_group_sync_aligned, {});
  // In flight: the results go straight to the next wgmma of the same
  // shape (its accumulator, which PTX allows before the wait) or to the
  // program's dot_wait.
  if (p.inFlight) return acc;
  return emitWgmmaPassThrough(b, 0, acc);
}
}  // namespace

void planWgmmaForm(TensorCoreDotPlan& p, const DotOperandSources& s) {
  if (!ir::isNvWarpgroupPlaced(p.op.kind) || !s.planned) return;
  if (ir::isNvTcgen05(p.op.kind)) {
    // tcgen05 reads A from shared memory (or tensor memory), never from
    // registers, and holds the accumulator of every 64-row tile in its own
    // N columns of tensor memory: a dot whose A is in registers, whose B
    // is held in registers, or whose tiles need more than the 512 columns
    // keeps mma.sync on the same placement; so does one that completes at
    // every issue of a loop (attention's Q K^T, a dequantised dot), whose
    // accumulator would go into tensor memory and back every iteration
    // (the decomposed dot_scaled GEMM: 255 registers and 152 bytes of
    // spills on sm_100a, none with mma.sync). A 1-byte B (fp8, i8) read
    // in place is N-major, the K x N slot as copied (the slot only tcgen05
    // reads, NVPTXTargetInfo's directDotStaging); staged by the dot, it is
    // K-major, the N x K staging mma.sync's plan has; so is a B read in
    // place through its transpose (B^T given: s.bSlotKMajor).
    // A block-scaled dot has no mma.sync form here: tcgen05 it is, even
    // where it completes at every issue (gpuScaledDotNative let it through
    // only where its tiles fit; the planner stages its operands in shared
    // memory); its scales go to the tensor memory in atoms
    // (NVPTXTcgen05Dot.cpp). Packed fp4 is K-major only.
    if (p.scaled) {
      useWgmma(p, s.bGlobalAlongK || s.bSlotKMajor || (p.elemBytes == 1 && !s.bInSlot) || p.kPerElem == 2);
      useWgmmaSharedA(p);
      p.scaleAtoms = true;
      TS_ASSERT(!s.bFragmentsHeld && !s.aInRegisters && tcgen05RowTiles(p) == 2 &&
                    tcgen05AccumulatorColumns(p) <= tcgen05::kColumns,
                "a block-scaled dot tcgen05 cannot take");
      return;
    }
    if (s.bFragmentsHeld || s.aInRegisters || s.completesInLoop || tcgen05Columns(p) > tcgen05::kColumns) {
      TS_ASSERT(p.elemBytes != 1 || !s.bInSlot || s.bSlotKMajor, "a 1-byte B slot stored for tcgen05 read by mma.sync");
      useMmaSync(p);
      return;
    }
    useWgmma(p, s.bGlobalAlongK || s.bSlotKMajor || (p.elemBytes == 1 && !s.bInSlot));
    useWgmmaSharedA(p);
    return;
  }
  if (s.bFragmentsHeld) {
    useMmaSync(p);  // fragments held in registers across the loop: mma.sync's
  } else if (p.elemBytes == 1) {
    // fp8: B K-major (its N x K staging), A from registers (ldmatrix, as
    // mma.sync's fragments): the only forms wgmma has for 8-bit operands.
    useWgmma(p, true);
  } else {
    useWgmma(p, s.bGlobalAlongK || s.bSlotKMajor);
    // A from shared memory too, unless its fragments are registers
    // already (a chained dot's accumulator, or held across the loop).
    if (!s.aInRegisters) useWgmmaSharedA(p);
  }
}

std::vector<llvm::Value*> emitWgmmaDot(DotEmitter& e, std::vector<llvm::Value*> acc) {
  const TensorCoreDotPlan& p = e.p;
  const int64_t mT = p.M / (16 * e.wm), nT = p.N / (8 * e.wn), kS = p.K / p.kStep;
  TS_ASSERT(e.wn == 1, "wgmma with warps along N");
  if (p.aFromShared) return wgmmaDot(e, {}, std::move(acc), mT, nT, kS);
  // Only A's fragments are loaded as mma.sync's (collected in e.loaded),
  // then handed to the warpgroup instruction.
  e.only = 0;
  emitMmaSyncDot(e, {});
  e.only = -1;
  std::vector<llvm::Value*> aFrags = std::move(e.loaded);
  e.loaded.clear();
  return wgmmaDot(e, std::move(aFrags), std::move(acc), mT, nT, kS);
}

}  // namespace tessera::codegen::nvptx
