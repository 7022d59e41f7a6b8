// Blackwell's tensor memory and tcgen05 instructions on the SIMT machine:
// the block's 128 x 512 cells of tensor memory, allocated and freed in
// 32-column granules; tcgen05.mma computed at the issue from the operands
// its descriptors name (kind::f16, kind::f8f6f4 with the fp8 formats,
// kind::i8; cta_group::1, M = 64 or 128; the block-scaled kind::mxf8f6f4
// (fp8), mxf4 and mxf4nvf4 at M = 128, scales read from tensor memory;
// tcgen05.cp .32x128b.warpx4 filling it from shared memory), its
// operand bytes in flight until the issuing thread's commit; the commit one
// arrival on its mbarrier; tcgen05.ld / st .16x256b moving a lane's
// registers, each warp confined to its 32 lanes (tessera/support/Tcgen05.h).
// Misuse (memory not allocated, a lane outside the warp's, a descriptor or
// an instruction descriptor this machine does not model, an allocation
// left at exit) is reported naming the op.
#include <bit>
#include <cmath>
#include <functional>
#include <cstring>
#include <string>

#include "EmulatorImpl.h"
#include "Matrix.h"
#include "SmemDescriptor.h"
#include "tessera/support/Fp8.h"
#include "tessera/support/MxFormats.h"
#include "tessera/support/Tcgen05.h"

namespace tessera::emu::detail {

namespace {

template <class What>
[[noreturn]] void tcMisuse(Worker& w, Fiber* f, int32_t op, const What& what) {
  w.opMisuse(IssueKind::CollectiveMisuse, f, op, what);
}

std::string num(uint64_t v) { return std::to_string(v); }

// The granules of `columns` columns from `column`.
uint32_t granules(uint32_t column, uint32_t columns) {
  const uint32_t n = columns / 32;
  return (n >= 32 ? ~0u : (1u << n) - 1) << (column / 32);
}

}  // namespace

void Worker::tcgen05Alloc(Fiber* f, void* dst, int32_t columns, int32_t op) {
  if (columns < 32 || columns > static_cast<int32_t>(tcgen05::kColumns) ||
      !std::has_single_bit(static_cast<uint32_t>(columns)))
    tcMisuse(*this, f, op,
             [&] { return "tcgen05.alloc of " + std::to_string(columns) + " columns (32 to 512, a power of two)"; });
  if (f->lane != 0) return;  // warp-wide: lane 0 stands for the warp
  if (tmem.empty()) tmem.assign(size_t{tcgen05::kLanes} * tcgen05::kColumns, 0);
  const uint32_t cols = static_cast<uint32_t>(columns);
  // The first free run, aligned to its size.
  for (uint32_t c = 0; c + cols <= tcgen05::kColumns; c += cols) {
    if (tmemUsed & granules(c, cols)) continue;
    tmemUsed |= granules(c, cols);
    tmemAllocOp = op;
    const uint32_t addr = tcgen05::address(0, c);
    std::memcpy(sharedAccess(f, dst, 4, TESSERA_EMU_STORE, op), &addr, 4);
    return;
  }
  tcMisuse(*this, f, op, [&] {
    return "tcgen05.alloc of " + num(cols) + " columns while " + num(32 * std::popcount(tmemUsed)) +
           " of the 512 are allocated and not freed (the block would wait forever)";
  });
}

void Worker::tcgen05Dealloc(Fiber* f, uint32_t addr, int32_t columns, int32_t op) {
  if (f->lane != 0) return;
  const uint32_t c = tcgen05::columnOf(addr);
  if (tcgen05::laneOf(addr) != 0 || columns < 32 || c % 32 != 0 || c + static_cast<uint32_t>(columns) > 512 ||
      (tmemUsed & granules(c, static_cast<uint32_t>(columns))) != granules(c, static_cast<uint32_t>(columns)))
    tcMisuse(*this, f, op, [&] {
      return "tcgen05.dealloc of " + std::to_string(columns) + " columns at " + hex(addr) +
             ", which are not all allocated";
    });
  tmemUsed &= ~granules(c, static_cast<uint32_t>(columns));
}

// The arithmetic of every kind: D (m x n, in `d`'s columns) from A (m x K)
// and B (K x n) read through their descriptors. Each row of A and B holds
// 32 bytes of K, read in 16-byte pieces (checked shared reads, in flight
// until the thread's commit) of `perPiece` elements; `value(type, piece,
// e)` is element e of a piece, exact in double. B is K-major, or N-major
// (1- and 2-byte elements: a piece holds 16 / eb n of one k). Floating
// point without scales: D (+)= A B, each product exact in f32, summed in
// f32 in k order from D (Matrix.cpp's model of the tensor cores' sums);
// `integer`: exact, added to D mod 2^32; with `scaleA` / `scaleB` (row,
// k): the scaled products summed in double from D, rounded once (as the
// block-scaled mma.sync, Matrix.cpp).
struct Worker::Tcgen05Mma {
  uint32_t d, m, n, K, perPiece, eb, aType, bType;
  bool bMnMajor, accumulate, integer;
  std::function<double(uint32_t, const unsigned char*, uint32_t)> value;
  std::function<double(uint32_t, uint32_t)> scaleA, scaleB;
};

void Worker::tcgen05Compute(Fiber* f, const Tcgen05Mma& mma, uint64_t aDesc, uint64_t bDesc, int32_t op) {
  // The smem descriptors: wgmma's fields, version 1 (bits 46-47), no base
  // offset or absolute LBO mode, the swizzle's code in bits 61-63 (0, 2,
  // 4, 6: wgmma's 0, 1, 2, 3 at 62-63).
  auto smem = [&](uint64_t desc, const char* which) {
    const unsigned layout = static_cast<unsigned>(desc >> 61);
    if ((desc & (uint64_t{3} << 46)) != tcgen05::kDescriptorVersion || ((desc >> 49) & 0xF) != 0 || (layout & 1))
      tcMisuse(*this, f, op, [&] {
        return std::string("tcgen05.mma with the ") + which + " descriptor " + hex(desc) +
               " (modelled: version 1, no base offset, swizzle none / 128 / 64 / 32 bytes)";
      });
    return SmemDescriptor::wgmma((desc & ~(uint64_t{7} << 61)) | (uint64_t{layout / 2} << 62));
  };
  const SmemDescriptor ad = smem(aDesc, "A"), bd = smem(bDesc, "B");
  const uint32_t lane0 = tcgen05::laneOf(mma.d), col0 = tcgen05::columnOf(mma.d), m = mma.m, n = mma.n, K = mma.K;
  if (lane0 != 0 || col0 + n > tcgen05::kColumns ||
      (tmemUsed & granules(col0 & ~31u, (col0 % 32 + n + 31) / 32 * 32)) !=
          granules(col0 & ~31u, (col0 % 32 + n + 31) / 32 * 32))
    tcMisuse(*this, f, op, [&] {
      return "tcgen05.mma writing " + num(n) + " columns at " + hex(mma.d) + ", which are not all allocated";
    });
  auto piece = [&](const SmemDescriptor& sd, uint64_t a) {
    a = sd.swizzled(a);
    const auto* p = static_cast<const unsigned char*>(sharedAccess(f, shared + a, 16, kAsyncLoad, op));
    if (a + 16 <= sharedBytes) {
      tcgen05Reads.emplace_back(static_cast<uint32_t>(a), op);
      markMmaRead(static_cast<uint32_t>(a), op, static_cast<uint16_t>(f->linear), +1);
    }
    return p;
  };
  const uint32_t per = mma.perPiece, eb = mma.eb;
  std::vector<double> A(size_t{m} * K), B(size_t{K} * n);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t k0 = 0; k0 < K; k0 += per) {
      const unsigned char* p = piece(ad, ad.kMajor(r, k0 / per * 16));
      for (uint32_t e = 0; e < per; ++e) A[r * K + k0 + e] = mma.value(mma.aType, p, e);
    }
  // B N-major: each 16-byte piece holds 16 / eb n of one k.
  for (uint32_t j = 0; j < n; j += mma.bMnMajor ? per : 1)
    for (uint32_t k0 = 0; k0 < K; k0 += mma.bMnMajor ? 1 : per) {
      const unsigned char* p = mma.bMnMajor ? piece(bd, bd.nMajor(k0, j * eb)) : piece(bd, bd.kMajor(j, k0 / per * 16));
      for (uint32_t e = 0; e < per; ++e)
        B[mma.bMnMajor ? k0 * n + j + e : (k0 + e) * n + j] = mma.value(mma.bType, p, e);
    }
  for (uint32_t r = 0; r < m; ++r) {
    uint32_t* row = &tmem[size_t{tcgen05::laneOfRow(m, r)} * tcgen05::kColumns + col0];
    for (uint32_t j = 0; j < n; ++j) {
      if (mma.integer) {
        int64_t sum = 0;
        for (uint32_t k = 0; k < K; ++k) sum += static_cast<int64_t>(A[r * K + k]) * static_cast<int64_t>(B[k * n + j]);
        row[j] = (mma.accumulate ? row[j] : 0u) + static_cast<uint32_t>(sum);
        continue;
      }
      float acc = 0;
      if (mma.accumulate) std::memcpy(&acc, &row[j], 4);
      if (mma.scaleA) {
        double sum = acc;
        for (uint32_t k = 0; k < K; ++k) sum += A[r * K + k] * B[k * n + j] * mma.scaleA(r, k) * mma.scaleB(j, k);
        acc = static_cast<float>(sum);
      } else {
        for (uint32_t k = 0; k < K; ++k) acc += static_cast<float>(A[r * K + k]) * static_cast<float>(B[k * n + j]);
      }
      std::memcpy(&row[j], &acc, 4);
    }
  }
}

void Worker::tcgen05Mma(Fiber* f, uint32_t d, uint64_t aDesc, uint64_t bDesc, uint32_t idesc, bool accumulate,
                        int32_t kindArg, int32_t op) {
  const auto kind = static_cast<tcgen05::Kind>(kindArg);
  tcgen05::InstrDesc id;
  if ((kind != tcgen05::Kind::F16 && kind != tcgen05::Kind::F8f6f4 && kind != tcgen05::Kind::I8) ||
      !tcgen05::InstrDesc::decode(idesc, kind, id) ||
      (kind == tcgen05::Kind::F16 && id.dType != tcgen05::code::kDF32) || id.aMnMajor || (id.m != 64 && id.m != 128) ||
      id.n < 8 || id.n > 256 || id.n % (id.m == 64 ? 8 : 16) != 0)
    tcMisuse(*this, f, op, [&] {
      return "tcgen05.mma with the instruction descriptor " + hex(idesc) + " of kind " + num(uint64_t(kindArg)) +
             " (modelled: kind::f16 (f16/bf16), kind::f8f6f4 (e4m3/e5m2) or kind::i8 (s8/u8), dense, f32 or s32 D, "
             "K-major A, M 64 or 128, N a multiple of 8 or 16 up to 256)";
    });
  // 16 2-byte elements a piece (kind::f16), 16 1-byte ones (f8f6f4, i8):
  // every value exact in double (an f16, bf16 or fp8 value is exact in
  // f32; an 8-bit integer in both).
  Tcgen05Mma mma;
  mma.d = d;
  mma.m = id.m;
  mma.n = id.n;
  mma.eb = kind == tcgen05::Kind::F16 ? 2 : 1;
  mma.K = 32 / mma.eb;
  mma.perPiece = 16 / mma.eb;
  mma.aType = id.aType;
  mma.bType = id.bType;
  mma.bMnMajor = id.bMnMajor;
  mma.accumulate = accumulate;
  mma.integer = kind == tcgen05::Kind::I8;
  mma.value = [kind](uint32_t type, const unsigned char* p, uint32_t e) -> double {
    switch (kind) {
      case tcgen05::Kind::F16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * e, 2);
        return type == tcgen05::code::kBf16 ? bf16ToFloat(h) : halfToFloat(h);
      }
      case tcgen05::Kind::F8f6f4: return fp8Decode(type == tcgen05::code::kE4m3 ? DType::F8E4M3 : DType::F8E5M2, p[e]);
      case tcgen05::Kind::I8: return type == tcgen05::code::kS8 ? double(static_cast<int8_t>(p[e])) : double(p[e]);
      case tcgen05::Kind::Tf32: break;
    }
    return 0;
  };
  tcgen05Compute(f, mma, aDesc, bDesc, op);
}

void Worker::tcgen05MmaScaled(Fiber* f, uint32_t d, uint64_t aDesc, uint64_t bDesc, uint32_t idesc, bool accumulate,
                              uint32_t sfa, uint32_t sfb, int32_t kindArg, int32_t op) {
  const auto kind = static_cast<tcgen05::ScaledKind>(kindArg);
  tcgen05::ScaledInstrDesc id;
  if (kindArg < 0 || kindArg > static_cast<int32_t>(tcgen05::ScaledKind::MxF4Nvf4) ||
      !tcgen05::ScaledInstrDesc::decode(idesc, kind, id) || id.m != 128 || id.n < 8 || id.n > 256 || id.n % 8 != 0)
    tcMisuse(*this, f, op, [&] {
      return "block-scaled tcgen05.mma with the instruction descriptor " + hex(idesc) + " of kind " +
             num(uint64_t(kindArg)) +
             " (modelled: kind::mxf8f6f4 (e4m3/e5m2, ue8m0, scale IDs 0-3), kind::mxf4 (e2m1, ue8m0, IDs 0 or 2) or "
             "kind::mxf4nvf4 (e2m1, ID 0), dense, K-major A (and packed fp4 B), M 128, N a multiple of 8 up to 256)";
    });
  // The scales: row r's (A) or column j's (B) from the cell (lane r % 128,
  // column c0 + r / 32) of the columns c0 the operand names, byte ID + h
  // for the instruction's h-th scale (tessera/support/Tcgen05.h).
  const uint32_t per = tcgen05::scalesPerInstr(kind), K = tcgen05::kOf(kind), block = K / per;
  auto columnsOf = [&](uint32_t addr, uint32_t rows, const char* which) {
    const uint32_t lane = tcgen05::laneOf(addr), col = tcgen05::columnOf(addr), cols = (rows + 31) / 32;
    const uint32_t first = col & ~31u, span = (col % 32 + cols + 31) / 32 * 32;
    if (lane != 0 || tmem.empty() || col + cols > tcgen05::kColumns ||
        (tmemUsed & granules(first, span)) != granules(first, span))
      tcMisuse(*this, f, op, [&] {
        return std::string("block-scaled tcgen05.mma reading the scales of ") + which + " (" + num(cols) +
               " columns) at " + hex(addr) + ", which are not all allocated (or not at lane 0)";
      });
    return col;
  };
  const uint32_t ca = columnsOf(sfa, id.m, "A"), cb = columnsOf(sfb, id.n, "B");
  auto scale = [this, &id](uint32_t col0, uint32_t r, uint32_t byte) -> double {
    const uint32_t cell = tmem[size_t{tcgen05::scaleLane(r)} * tcgen05::kColumns + col0 + tcgen05::scaleColumn(r)];
    const uint8_t c = static_cast<uint8_t>(cell >> (8 * byte));
    if (id.ue8m0) return e8m0Decode(c);
    // UE4M3: e4m3 without a sign; a code with bit 7 set has no meaning in
    // the PTX ISA, which the compiler never writes: NaN, so it shows.
    return c & 0x80 ? std::nan("") : static_cast<double>(fp8Decode(DType::F8E4M3, c));
  };
  Tcgen05Mma mma;
  mma.d = d;
  mma.m = id.m;
  mma.n = id.n;
  mma.eb = 1;
  mma.K = K;
  mma.perPiece = K / 2;  // 16 bytes of 32 a row
  mma.aType = id.aType;
  mma.bType = id.bType;
  mma.bMnMajor = id.bMnMajor;
  mma.accumulate = accumulate;
  mma.integer = false;
  // fp8 codes a byte; fp4 two a byte, the even k in the low nibble.
  mma.value = [kind](uint32_t type, const unsigned char* p, uint32_t e) -> double {
    if (kind == tcgen05::ScaledKind::MxF8f6f4)
      return fp8Decode(type == tcgen05::scode::kE4m3 ? DType::F8E4M3 : DType::F8E5M2, p[e]);
    return mxElementDecode(DType::F4E2M1, static_cast<uint8_t>(p[e / 2] >> (4 * (e % 2)) & 0xF));
  };
  mma.scaleA = [=](uint32_t r, uint32_t k) { return scale(ca, r, id.sfA + k / block); };
  mma.scaleB = [=](uint32_t j, uint32_t k) { return scale(cb, j, id.sfB + k / block); };
  tcgen05Compute(f, mma, aDesc, bDesc, op);
}

void Worker::tcgen05Cp(Fiber* f, uint32_t taddr, uint64_t sdesc, int32_t op) {
  // .32x128b.warpx4: 32 rows of 16 bytes from shared memory (a descriptor
  // without a swizzle: row x at start + (x / 8) SBO + (x % 8) 16), row x
  // to lane x of every lane quarter, its 4 words to 4 columns from taddr's;
  // the bytes in flight until the thread's commit, as an MMA's.
  const uint32_t lane0 = tcgen05::laneOf(taddr), col0 = tcgen05::columnOf(taddr);
  const uint32_t first = col0 & ~31u, span = (col0 % 32 + 4 + 31) / 32 * 32;
  if (lane0 != 0 || tmem.empty() || col0 + 4 > tcgen05::kColumns ||
      (tmemUsed & granules(first, span)) != granules(first, span))
    tcMisuse(*this, f, op, [&] {
      return "tcgen05.cp.32x128b.warpx4 to " + hex(taddr) + ": 4 columns from lane 0 that are not all allocated";
    });
  if ((sdesc & (uint64_t{3} << 46)) != tcgen05::kDescriptorVersion || ((sdesc >> 49) & 0xF) != 0 || (sdesc >> 61) != 0)
    tcMisuse(*this, f, op, [&] {
      return "tcgen05.cp with the shared-memory descriptor " + hex(sdesc) +
             " (modelled: version 1, no base offset, no swizzle)";
    });
  const SmemDescriptor sd = SmemDescriptor::wgmma(sdesc);
  for (uint32_t x = 0; x < 32; ++x) {
    const uint64_t a = sd.kMajor(x, 0);
    const auto* p = static_cast<const unsigned char*>(sharedAccess(f, shared + a, 16, kAsyncLoad, op));
    if (a + 16 <= sharedBytes) {
      tcgen05Reads.emplace_back(static_cast<uint32_t>(a), op);
      markMmaRead(static_cast<uint32_t>(a), op, static_cast<uint16_t>(f->linear), +1);
    }
    for (uint32_t q = 0; q < 4; ++q) std::memcpy(&tmem[size_t{32 * q + x} * tcgen05::kColumns + col0], p, 16);
  }
}

void Worker::tcgen05Commit(Fiber* f, void* bar, int32_t op) {
  // The MMAs are complete (computed at their issue): their operand bytes
  // leave flight, and the barrier gets its arrival.
  for (const auto& [off, readOp] : tcgen05Reads) markMmaRead(off, readOp, 0, -1);
  tcgen05Reads.clear();
  mbarrierArrive(f, bar, op);
}

void Worker::tcgen05Move(Fiber* f, uint32_t addr, int32_t reps, uint32_t* regs, bool store, int32_t op) {
  const char* inst = store ? "tcgen05.st.16x256b" : "tcgen05.ld.16x256b";
  const uint32_t lane0 = tcgen05::laneOf(addr), col0 = tcgen05::columnOf(addr), quarter = f->warp % 4;
  // The warp's 32 lanes only, 16 of them from the address's lane.
  if (lane0 / 32 != quarter || lane0 % 32 > 16)
    tcMisuse(*this, f, op, [&] {
      return std::string(inst) + " at lane " + num(lane0) + " by warp " + num(f->warp) + ", which may access lanes " +
             num(32 * quarter) + " to " + num(32 * quarter + 31) + " only";
    });
  const uint32_t cols = 8 * static_cast<uint32_t>(reps);
  const uint32_t first = col0 & ~31u, span = (col0 % 32 + cols + 31) / 32 * 32;
  if (tmem.empty() || col0 + cols > tcgen05::kColumns || (tmemUsed & granules(first, span)) != granules(first, span))
    tcMisuse(*this, f, op, [&] {
      return std::string(inst) + " of " + num(cols) + " columns at " + hex(addr) + ", which are not all allocated";
    });
  for (uint32_t r = 0; r < 4 * static_cast<uint32_t>(reps); ++r) {
    uint32_t& cell = tmem[size_t{lane0 + tcgen05::ld16x256bRow(f->lane, r)} * tcgen05::kColumns + col0 +
                          tcgen05::ld16x256bColumn(f->lane, r)];
    if (store)
      cell = regs[r];
    else
      regs[r] = cell;
  }
}

void Worker::tcgen05BlockEnd() {
  if (tmemUsed && !aborted)
    report(IssueKind::CollectiveMisuse, 0, -1, tmemAllocOp, -1, [&] {
      return where(0) + ": the block exits with " + num(32 * std::popcount(tmemUsed)) +
             " columns of tensor memory allocated (free them with tcgen05.dealloc before the kernel returns) [" +
             opLabel(*cfg, tmemAllocOp) + "]";
    });
  tmemUsed = 0;
  for (const auto& [off, readOp] : tcgen05Reads) markMmaRead(off, readOp, 0, -1);
  tcgen05Reads.clear();
}

}  // namespace tessera::emu::detail

// ---- hooks --------------------------------------------------------------------
using tessera::emu::detail::current;
using tessera::emu::detail::Fiber;

extern "C" {

void tessera_emu_tcgen05_alloc(void* dst, int32_t columns, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->tcgen05Alloc(f, dst, columns, opId);
}

void tessera_emu_tcgen05_dealloc(int32_t addr, int32_t columns, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->tcgen05Dealloc(f, static_cast<uint32_t>(addr), columns, opId);
}

void tessera_emu_tcgen05_mma(int32_t d, uint64_t aDesc, uint64_t bDesc, int32_t idesc, int32_t enable, int32_t kind,
                             int32_t opId) {
  Fiber* f = current(__func__);
  f->w->tcgen05Mma(f, static_cast<uint32_t>(d), aDesc, bDesc, static_cast<uint32_t>(idesc), enable != 0, kind, opId);
}

void tessera_emu_tcgen05_mma_scaled(int32_t d, uint64_t aDesc, uint64_t bDesc, int32_t idesc, int32_t enable,
                                    int32_t sfa, int32_t sfb, int32_t kind, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->tcgen05MmaScaled(f, static_cast<uint32_t>(d), aDesc, bDesc, static_cast<uint32_t>(idesc), enable != 0,
                         static_cast<uint32_t>(sfa), static_cast<uint32_t>(sfb), kind, opId);
}

void tessera_emu_tcgen05_cp(int32_t taddr, uint64_t sdesc, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->tcgen05Cp(f, static_cast<uint32_t>(taddr), sdesc, opId);
}

void tessera_emu_tcgen05_commit(void* bar, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->tcgen05Commit(f, bar, opId);
}

void tessera_emu_tcgen05_ld(int32_t addr, int32_t reps, uint32_t* regs, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->tcgen05Move(f, static_cast<uint32_t>(addr), reps, regs, false, opId);
}

void tessera_emu_tcgen05_st(int32_t addr, int32_t reps, const uint32_t* regs, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->tcgen05Move(f, static_cast<uint32_t>(addr), reps, const_cast<uint32_t*>(regs), true, opId);
}

}  // extern "C"
