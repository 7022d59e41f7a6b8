// The machine's block-scaled tcgen05.mma and tcgen05.cp, called as
// codegen/nvptx/NVPTXTcgen05Dot.cpp's protocol has them: the threads store
// the operands and the scales' atoms in shared memory, warp 0 allocates,
// thread 0 copies the atoms to tensor memory (.32x128b.warpx4), issues the
// block-scaled MMA naming them and commits, every warp reads its lanes
// back. Every row of A and column of B has a scale of its own, so a scale
// read from the wrong lane, column or byte shows. Misuse is reported
// naming the op.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/runtime/Emulator.h"
#include "tessera/support/EmuAbi.h"
#include "tessera/support/Fp8.h"
#include "tessera/support/MxFormats.h"
#include "tessera/support/Tcgen05.h"
#include "SharedAccess.h"

using namespace tessera::emu;
namespace tc = tessera::tcgen05;
using tessera::DType;

namespace {

// Shared layout: A (128 rows x 32 bytes, K-major, no swizzle) at 0, B^T (N
// = 16 rows x 32 bytes) at 4096, A's scale atom at 4608, B's at 5120, the
// mbarrier at 5632, the TMEM address at 5640. Without a swizzle: 8-row
// core matrices of 16-byte rows, the two along K LBO = 128 bytes apart,
// 8-row groups SBO = 256 apart; an atom's 32 rows of 16 bytes SBO = 128.
constexpr uint32_t kA = 0, kB = 4096, kSfa = 4608, kSfb = 5120, kBar = 5632, kSlot = 5640;
constexpr uint32_t kN = 16;
constexpr uint64_t kLbo = 128, kSbo = 256;

enum class Fault { None, Fp4, EarlyScaleWrite, CopyUnallocated, BadScaleId, ScalesUnallocated };

struct Params {
  Fault fault;
  float* out;  // 128 threads x 2 halves x 8 registers
};

const std::vector<std::string> kOps = {"store operands",
                                       "tcgen05.alloc",
                                       "mbarrier.init",
                                       "barrier",
                                       "load address",
                                       "tcgen05.cp at k.cpp:5",
                                       "tcgen05.mma at k.cpp:6",
                                       "tcgen05.commit",
                                       "store scale early at k.cpp:8",
                                       "try_wait",
                                       "tcgen05.ld",
                                       "store out",
                                       "tcgen05.dealloc"};

uint64_t desc(uint32_t start, uint64_t sbo = kSbo, uint64_t lbo = kLbo) {
  return (uint64_t{start} >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | tc::kDescriptorVersion;
}
uint32_t kmajor(uint32_t row, uint32_t byte) {
  return (row / 8) * kSbo + (row % 8) * 16 + (byte / 16) * kLbo + byte % 16;
}

// Codes: fp8 e4m3 of small integers (exact), or two e2m1 codes a byte.
float valueA(int r, int k) { return float((r + 3 * k) % 5) - 2; }
float valueB(int k, int j) { return float((2 * j + k) % 3) - 1; }
// e8m0 scales 2^((r % 7) - 3) and 2^((j % 5) - 2): each row its own.
uint8_t scaleA(int r) { return uint8_t(127 + r % 7 - 3); }
uint8_t scaleB(int j) { return uint8_t(127 + j % 5 - 2); }

uint8_t codeOf(bool fp4, float v) {
  return fp4 ? tessera::mxElementEncode(DType::F4E2M1, v) : tessera::fp8Encode(DType::F8E4M3, v);
}

using tessera::emu::test::sload;
using tessera::emu::test::sstore;

void kernel(void* const* args) {
  auto& p = *static_cast<Params*>(args[0]);
  auto* sh = static_cast<unsigned char*>(tessera_emu_shared_base());
  const int t = tessera_emu_thread_id_x(), warp = t / 32;
  const bool fp4 = p.fault == Fault::Fp4 || p.fault == Fault::BadScaleId;
  const int K = fp4 ? 64 : 32;
  if (t == 0) {
    // 32 bytes of K a row: a code a byte, or two (the even k low).
    auto put = [&](uint32_t base, int row, int k, float v) {
      auto* at = sh + base + kmajor(uint32_t(row), uint32_t(fp4 ? k / 2 : k));
      const uint8_t c = codeOf(fp4, v);
      const uint8_t old = fp4 && k % 2 ? sload(at, 0) : uint8_t(0);
      sstore(at, uint8_t(fp4 ? (k % 2 ? old | c << 4 : c) : c), 0);
    };
    for (int r = 0; r < 128; ++r)
      for (int k = 0; k < K; ++k) put(kA, r, k, valueA(r, k));
    for (int j = 0; j < int(kN); ++j)
      for (int k = 0; k < K; ++k) put(kB, j, k, valueB(k, j));
    // The atoms: scale s of row r at byte scaleAtomByte(r, s); an mxf4
    // instruction reads two (its k 0-31 and 32-63), the same here.
    for (uint32_t r = 0; r < 128; ++r)
      for (uint32_t s = 0; s < 4; ++s) {
        sstore(sh + kSfa + tc::scaleAtomByte(r, s), scaleA(int(r)), 0);
        sstore(sh + kSfb + tc::scaleAtomByte(r, s), r < kN ? scaleB(int(r)) : uint8_t(127), 0);
      }
  }
  if (warp == 0) tessera_emu_tcgen05_alloc(sh + kSlot, 32, 1);
  if (t == 0) tessera_emu_mbarrier_init(sh + kBar, 1, 2);
  tessera_emu_barrier(3);
  const uint32_t base = sload(reinterpret_cast<uint32_t*>(sh + kSlot), 4);
  // Columns: D 0-15, A's scales 16-19, B's 20-23.
  const uint32_t sfa = base + 16, sfb = base + 20;
  if (t == 0) {
    tessera_emu_tcgen05_cp(int32_t(p.fault == Fault::CopyUnallocated ? base + 30 : sfa), desc(kSfa, 128, 0), 5);
    tessera_emu_tcgen05_cp(int32_t(sfb), desc(kSfb, 128, 0), 5);
    tc::ScaledInstrDesc id;
    id.aType = id.bType = fp4 ? tc::scode::kFp4E2m1 : tc::scode::kE4m3;
    id.n = kN;
    id.sfA = id.sfB = p.fault == Fault::BadScaleId ? 1 : fp4 ? 2 : 3;  // the atom's last scale(s)
    const auto kind = int32_t(fp4 ? tc::ScaledKind::MxF4 : tc::ScaledKind::MxF8f6f4);
    const uint32_t a = p.fault == Fault::ScalesUnallocated ? base + 40 : sfa;
    tessera_emu_tcgen05_mma_scaled(int32_t(base), desc(kA), desc(kB), int32_t(id.encode()), 0, int32_t(a), int32_t(sfb),
                                   kind, 6);
    if (p.fault == Fault::EarlyScaleWrite) sstore(sh + kSfa + 17, uint8_t(1), 8);
    tessera_emu_tcgen05_commit(sh + kBar, 7);
  }
  tessera_emu_mbarrier_try_wait(sh + kBar, 0, 9);
  // Warp w's 32 rows (M = 128: row r in lane r), 16 rows at a time.
  for (uint32_t half = 0; half < 2; ++half) {
    uint32_t regs[8];
    tessera_emu_tcgen05_ld(int32_t(base + tc::address(32 * uint32_t(warp) + 16 * half, 0)), 2, regs, 10);
    for (int r = 0; r < 8; ++r) {
      float v;
      std::memcpy(&v, &regs[r], 4);
      *static_cast<float*>(tessera_emu_global_access(p.out + (2 * t + int(half)) * 8 + r, 4, TESSERA_EMU_STORE, 11)) =
          v;
    }
  }
  tessera_emu_barrier(3);
  if (warp == 0) tessera_emu_tcgen05_dealloc(int32_t(base), 32, 12);
}

LaunchReport run(Fault fault, std::vector<float>& out) {
  out.assign(128 * 16, -1.0f);
  Params p{fault, out.data()};
  void* args[] = {&p};
  return tessera::emu::test::launchOneBlock(&kernel, args, "tcgen05_scaled_kernel", 5648, kOps, out);
}

}  // namespace

TEST_CASE("tcgen05: the block-scaled instruction descriptor has the PTX ISA's fields", "[emu][tcgen05][mx]") {
  // E4M3 x E4M3, UE8M0 scales, M = 128, N = 128, both K-major: the value
  // CUTLASS's and DeepGEMM's encoders give.
  tc::ScaledInstrDesc d;
  d.n = 128;
  CHECK(d.encode() == 0x08A00000u);
  // Scale IDs at 29-30 (A) and 4-5 (B); NVFP4's UE4M3 clears bit 23.
  d.sfA = 2;
  d.sfB = 3;
  CHECK(d.encode() == (0x08A00000u | 2u << 29 | 3u << 4));
  tc::ScaledInstrDesc back;
  REQUIRE(tc::ScaledInstrDesc::decode(d.encode(), tc::ScaledKind::MxF8f6f4, back));
  CHECK((back.sfA == 2 && back.sfB == 3 && back.n == 128 && back.m == 128 && back.ue8m0));
  // kind::mxf4 takes IDs 0 and 2 only, mxf4nvf4 0 only, and e2m1's code 1.
  tc::ScaledInstrDesc f;
  f.aType = f.bType = tc::scode::kFp4E2m1;
  f.n = 64;
  f.sfA = f.sfB = 2;
  CHECK(tc::ScaledInstrDesc::decode(f.encode(), tc::ScaledKind::MxF4, back));
  CHECK_FALSE(tc::ScaledInstrDesc::decode(f.encode(), tc::ScaledKind::MxF4Nvf4, back));
  f.sfA = 1;
  CHECK_FALSE(tc::ScaledInstrDesc::decode(f.encode(), tc::ScaledKind::MxF4, back));
  f.sfA = f.sfB = 0;
  f.ue8m0 = false;
  CHECK(tc::ScaledInstrDesc::decode(f.encode(), tc::ScaledKind::MxF4Nvf4, back));
  CHECK_FALSE(tc::ScaledInstrDesc::decode(f.encode(), tc::ScaledKind::MxF4, back));  // MX is e8m0 only
  // The scale atom: row r of 128, scale s at 16 (r % 32) + 4 (r / 32) + s.
  CHECK(tc::scaleAtomByte(0, 0) == 0);
  CHECK(tc::scaleAtomByte(33, 2) == 16 + 4 + 2);
  CHECK(tc::scaleAtomByte(127, 3) == 31 * 16 + 12 + 3);
}

TEST_CASE("tcgen05: a block-scaled MMA reads every row's and column's scale from the copied atoms",
          "[emu][tcgen05][mx]") {
  for (Fault f : {Fault::None, Fault::Fp4}) {
    const bool fp4 = f == Fault::Fp4;
    const int K = fp4 ? 64 : 32;
    INFO((fp4 ? "kind::mxf4" : "kind::mxf8f6f4"));
    std::vector<float> out;
    LaunchReport rep = run(f, out);
    INFO(rep.summary());
    REQUIRE_FALSE(rep.hasErrors());
    for (int t = 0; t < 128; ++t)
      for (int half = 0; half < 2; ++half)
        for (uint32_t r = 0; r < 8; ++r) {
          const int row = 32 * (t / 32) + 16 * half + int(tc::ld16x256bRow(uint32_t(t % 32), r));
          const int col = int(tc::ld16x256bColumn(uint32_t(t % 32), r));
          double want = 0;
          for (int k = 0; k < K; ++k)
            want += double(valueA(row, k)) * valueB(k, col) * tessera::e8m0Decode(scaleA(row)) *
                    tessera::e8m0Decode(scaleB(col));
          INFO("thread " << t << " register " << r << " = (" << row << ", " << col << ")");
          CHECK(out[size_t((2 * t + half) * 8) + r] == float(want));
        }
  }
}

TEST_CASE("tcgen05: block-scaled misuse is reported naming the op", "[emu][tcgen05][mx]") {
  std::vector<float> out;
  auto only = [&](Fault f, IssueKind k, int32_t op, const std::string& text) {
    CHECK(tessera::emu::test::firstIssueMismatch(run(f, out), k, op, text).empty());
  };
  SECTION("a scale atom written before the copy's commit") {
    only(Fault::EarlyScaleWrite, IssueKind::SharedRace, 8, "tcgen05.cp at k.cpp:5");
  }
  SECTION("a copy into columns not allocated") {
    only(Fault::CopyUnallocated, IssueKind::CollectiveMisuse, 5, "not all allocated");
  }
  SECTION("a scale-factor ID kind::mxf4 does not take (its two scales start at byte 0 or 2)") {
    only(Fault::BadScaleId, IssueKind::CollectiveMisuse, 6, "kind::mxf4 (e2m1, ue8m0, IDs 0 or 2)");
  }
  SECTION("scales read from columns not allocated") {
    only(Fault::ScalesUnallocated, IssueKind::CollectiveMisuse, 6, "reading the scales of A");
  }
}
