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

namespace tessera::codegen::nvptx {

DotStaging wgmmaBStaging(int64_t K, int64_t N, unsigned elemBytes) {
  // Rows of at most 128 bytes (the widest swizzle), column blocks beyond.
  const int64_t maxRow = 128 / static_cast<int64_t>(elemBytes), rowElems = std::min<int64_t>(N, maxRow);
  return {K, N, rowElems, true, 16 / static_cast<int64_t>(elemBytes), elemBytes, N > maxRow ? maxRow : 0};
}

uint64_t wgmmaBAlign(const DotStaging& s) { return static_cast<uint64_t>(8 * s.rowBytes()); }

DotStaging wgmmaAStaging(int64_t M, int64_t K, int64_t warps) {
  DotStaging s = wgmmaBStaging(M, K);
  s.rowGroupWarps = warps;
  return s;
}

namespace {
void useWgmmaSharedA(TensorCoreDotPlan& p) {
  TS_ASSERT(p.bFromShared && p.M % (16 * p.acc.wpb[0]) == 0, "wgmma A from shared memory without a wgmma plan");
  p.a = wgmmaAStaging(p.M, p.K, p.acc.wpb[0]);
  p.aFromShared = true;
  p.aAlign = wgmmaBAlign(p.a);
  p.aBytes = p.a.bytes();
}

void useWgmma(TensorCoreDotPlan& p, bool kMajor) {
  TS_ASSERT(ir::isNvWgmma(p.op.kind) && (p.elemBytes == 2 || (p.elemBytes == 1 && kMajor)) && p.acc.wpb[1] == 1 &&
                p.N <= 256 && p.N >= 16,
            "wgmma plan of a dot that does not fit it");
  // K-major: one swizzled row of K per n (blocks of 128 bytes beyond
  // that): wgmmaBStaging's layout of B^T. fp8 is K-major only.
  p.b = kMajor ? wgmmaBStaging(p.N, p.K, p.elemBytes) : wgmmaBStaging(p.K, p.N, p.elemBytes);
  p.bTransposed = kMajor;
  p.bFromShared = true;
  p.bNMajor = !kMajor;
  p.bAlign = wgmmaBAlign(p.b);
}

void useMmaSync(TensorCoreDotPlan& p) {
  if (p.op.kind == ir::MmaKind::NvWgmmaM64K16) p.op.kind = ir::MmaKind::NvMmaM16N8K16;
  if (p.op.kind == ir::MmaKind::NvWgmmaM64K32) p.op.kind = ir::MmaKind::NvMmaM16N8K32;
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
  // k-step, the rest constant (NVPTXWgmma.h). K-major (N x K): 8-row
  // groups of n SBO = 8 rows apart; k-step ks 32 bytes into its row (of
  // its block). N-major (K x N): 8-row groups of k SBO apart, column
  // blocks LBO = a block apart; k-step ks 16 rows further.
  const DotStaging& st = p.b;
  const auto sw = st.rowBytes() == 128  ? WgmmaSwizzle::B128
                  : st.rowBytes() == 64 ? WgmmaSwizzle::B64
                                        : WgmmaSwizzle::B32;
  TS_ASSERT(st.swizzle && st.rowBytes() == static_cast<int64_t>(swizzleBytes(sw)) && p.bAlign % wgmmaBAlign(st) == 0 &&
                st.rows == (p.bNMajor ? p.K : p.N),
            "wgmma B staging");
  const uint64_t blockBytes = static_cast<uint64_t>(st.rows * st.rowBytes());
  const uint64_t bits = descriptorBits(sw, p.bNMajor ? blockBytes : 16, static_cast<uint64_t>(8 * st.rowBytes()));
  llvm::Value* addr = b.CreatePtrToInt(bBase, b.getInt64Ty());
  auto fp8 = [](DType d) {
    return d == DType::F8E4M3 ? WgmmaFp8::E4M3 : d == DType::F8E5M2 ? WgmmaFp8::E5M2 : WgmmaFp8::None;
  };
  const WgmmaForm form{static_cast<int>(p.N), p.in == DType::BF16, p.bNMajor, p.aFromShared, fp8(p.in), fp8(p.inB)};
  // A from shared memory (K-major, wgmmaAStaging): the warpgroup's 64
  // rows of tile mi start at storage row 16 W mi + 64 (warp / 4).
  const DotStaging& sa = p.a;
  uint64_t aBits = 0;
  llvm::Value* aAddr = nullptr;
  if (p.aFromShared) {
    const auto swA = sa.rowBytes() == 128  ? WgmmaSwizzle::B128
                     : sa.rowBytes() == 64 ? WgmmaSwizzle::B64
                                           : WgmmaSwizzle::B32;
    TS_ASSERT(sa.swizzle && sa.rowGroupWarps == wm && sa.rowBytes() == static_cast<int64_t>(swizzleBytes(swA)),
              "wgmma A staging");
    aBits = descriptorBits(swA, 16, static_cast<uint64_t>(8 * sa.rowBytes()));
    // The warpgroup index through a shuffle from lane 0: ptxas then knows
    // it is warp-uniform and builds the descriptors in uniform registers
    // (the wgmma operand) instead of moving each one over.
    llvm::Value* g = b.CreateUDiv(warp, i32(4));
    g = b.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_idx_i32, {}, {b.getInt32(0xFFFFFFFFu), g, i32(0), i32(0x1F)});
    llvm::Value* group = b.CreateZExt(g, b.getInt64Ty());
    aAddr = b.CreateAdd(b.CreatePtrToInt(aBase, b.getInt64Ty()),
                        b.CreateMul(group, b.getInt64(static_cast<uint64_t>(64 * sa.rowBytes()))));
  }
  // A descriptor is the operand's base descriptor plus (offset >> 4) in
  // its start-address field: every operand lies below 2^18 bytes of the
  // shared window, so the sum never carries out of the field's 14 bits
  // and one 32-bit add gives each k-step's descriptor from the base.
  auto baseDesc = [&](llvm::Value* base, uint64_t constBits) {
    llvm::Value* lo = b.CreateTrunc(b.CreateAnd(b.CreateLShr(base, 4), b.getInt64(0x3FFF)), b.getInt32Ty());
    return std::pair{b.CreateOr(lo, b.getInt32(static_cast<uint32_t>(constBits))),
                     b.getInt64(constBits & ~uint64_t{0xFFFFFFFF})};
  };
  auto descAt = [&](std::pair<llvm::Value*, llvm::Value*> d, int64_t off) {
    TS_ASSERT(off % 16 == 0 && off < (int64_t{1} << 18), "wgmma descriptor offset");
    llvm::Value* lo = off ? b.CreateAdd(d.first, b.getInt32(static_cast<uint32_t>(off >> 4)), "", true, true) : d.first;
    return b.CreateOr(b.CreateZExt(lo, b.getInt64Ty()), d.second, "", /*IsDisjoint=*/true);
  };
  const auto bDesc = baseDesc(addr, bits);
  std::pair<llvm::Value*, llvm::Value*> aDesc{nullptr, nullptr};
  if (p.aFromShared) aDesc = baseDesc(aAddr, aBits);
  // K-major byte offset of column `col` in staging `s` (its block, then
  // its place in the row).
  auto kMajorOff = [](const DotStaging& s, int64_t col) {
    const int64_t eb = s.elemBytes;
    return s.blockCols ? (col / s.blockCols) * s.rows * s.rowBytes() + (col % s.blockCols) * eb : col * eb;
  };
  for (int64_t ks = 0; ks < kS; ++ks) {
    const int64_t col = ks * p.kStep;
    llvm::Value* desc = descAt(bDesc, p.bNMajor ? col * st.rowBytes() : kMajorOff(st, col));
    for (int64_t mi = 0; mi < mT; ++mi) {
      std::vector<llvm::Value*> a;
      if (p.aFromShared)
        a.push_back(descAt(aDesc, mi * 16 * wm * sa.rowBytes() + kMajorOff(sa, col)));
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
  if (!ir::isNvWgmma(p.op.kind) || !s.planned) return;
  if (s.bFragmentsHeld) {
    useMmaSync(p);  // fragments held in registers across the loop: mma.sync's
  } else if (p.elemBytes == 1) {
    // fp8: B K-major (its N x K staging), A from registers (ldmatrix, as
    // mma.sync's fragments): the only forms wgmma has for 8-bit operands.
    useWgmma(p, true);
  } else {
    useWgmma(p, s.bGlobalAlongK);
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
