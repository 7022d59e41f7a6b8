// The machine's tensor memory and tcgen05 hooks, called as
// codegen/nvptx/NVPTXTcgen05Dot.cpp's protocol has them: warp 0 allocates,
// thread 0 initialises the mbarrier, issues the MMAs and commits them to
// it, every thread waits on the barrier and reads its warp's lanes back,
// warp 0 frees the memory. Each misuse is reported naming the op.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "tessera/runtime/Emulator.h"
#include "tessera/support/EmuAbi.h"
#include "tessera/support/Tcgen05.h"
#include "SharedAccess.h"

using namespace tessera::emu;
namespace tc = tessera::tcgen05;

namespace {

// Shared layout: A (64 x 16 f16, K-major, no swizzle) at 0, B^T (16 x 16,
// K-major) at 2048, the mbarrier at 2560, the TMEM address at 2568. The
// canonical layout without a swizzle: 8 rows x 16 bytes per core matrix,
// the two along K LBO = 128 bytes apart, 8-row groups SBO = 256 apart.
constexpr uint32_t kA = 0, kB = 2048, kBar = 2560, kSlot = 2568;
constexpr uint64_t kLbo = 128, kSbo = 256;

enum class Fault { None, Leak, ForeignLane, EarlyWrite, BadColumns, OldDescriptor, Unallocated, WrongKind };

struct Params {
  Fault fault;
  float* out;  // 128 threads x 8 registers
};

const std::vector<std::string> kOps = {
    "store operands", "tcgen05.alloc at k.cpp:1", "mbarrier.init",  "barrier",
    "load address",   "tcgen05.mma at k.cpp:6",   "tcgen05.commit", "store A early at k.cpp:8",
    "try_wait",       "tcgen05.ld at k.cpp:10",   "store out",      "tcgen05.dealloc"};

uint16_t halfOf(int v) {  // small non-negative integers
  if (v == 0) return 0;
  int e = 0;
  while ((2 << e) <= v) ++e;
  return static_cast<uint16_t>((e + 15) << 10 | ((v << (10 - e)) & 0x3FF));
}
float aOf(int r, int k) { return float((r + k) % 3); }
float bOf(int k, int j) { return float((j + 2 * k) % 4); }

uint64_t desc(uint32_t start, bool version = true) {
  return (uint64_t{start} >> 4) | (kLbo >> 4) << 16 | (kSbo >> 4) << 32 | (version ? tc::kDescriptorVersion : 0);
}
uint32_t kmajor(uint32_t row, uint32_t k) { return (row / 8) * kSbo + (row % 8) * 16 + (k / 8) * kLbo + (k % 8) * 2; }

using tessera::emu::test::sload;
using tessera::emu::test::sstore;

void kernel(void* const* args) {
  auto& p = *static_cast<Params*>(args[0]);
  auto* sh = static_cast<unsigned char*>(tessera_emu_shared_base());
  const int t = tessera_emu_thread_id_x(), warp = t / 32;
  if (t == 0) {
    for (int r = 0; r < 64; ++r)
      for (int k = 0; k < 16; ++k)
        sstore(reinterpret_cast<uint16_t*>(sh + kA + kmajor(r, k)), halfOf(int(aOf(r, k))), 0);
    for (int j = 0; j < 16; ++j)
      for (int k = 0; k < 16; ++k)
        sstore(reinterpret_cast<uint16_t*>(sh + kB + kmajor(j, k)), halfOf(int(bOf(k, j))), 0);
  }
  if (warp == 0) tessera_emu_tcgen05_alloc(sh + kSlot, p.fault == Fault::BadColumns ? 48 : 32, 1);
  if (t == 0) tessera_emu_mbarrier_init(sh + kBar, 1, 2);
  tessera_emu_barrier(3);
  const uint32_t base = sload(reinterpret_cast<uint32_t*>(sh + kSlot), 4);
  if (t == 0) {
    tc::InstrDesc id;  // kind::f16: f16 A and B, f32 D, both K-major, M = 64
    id.n = 16;
    const uint32_t d = p.fault == Fault::Unallocated ? base + 32 : base;
    const bool old = p.fault == Fault::OldDescriptor;
    // D = A B, then D += A B: twice the product.
    const auto f16 = int32_t(tc::Kind::F16);
    // kind::i8 reading kind::f16's descriptor (an f32 D, which i8 has not).
    const auto first = p.fault == Fault::WrongKind ? int32_t(tc::Kind::I8) : f16;
    tessera_emu_tcgen05_mma(int32_t(d), desc(kA, !old), desc(kB), int32_t(id.encode()), 0, first, 5);
    tessera_emu_tcgen05_mma(int32_t(d), desc(kA), desc(kB), int32_t(id.encode()), 1, f16, 5);
    if (p.fault == Fault::EarlyWrite) sstore(reinterpret_cast<uint16_t*>(sh + kA + 2), uint16_t{0}, 7);
    tessera_emu_tcgen05_commit(sh + kBar, 6);
  }
  tessera_emu_mbarrier_try_wait(sh + kBar, 0, 8);
  // The warp's 16 rows: lanes 32 (warp % 4) on (M = 64's data path).
  const uint32_t quarter = p.fault == Fault::ForeignLane ? 0 : uint32_t(warp % 4);
  uint32_t regs[8];
  tessera_emu_tcgen05_ld(int32_t(base + tc::address(32 * quarter, 0)), 2, regs, 9);
  for (int r = 0; r < 8; ++r) {
    float v;
    std::memcpy(&v, &regs[r], 4);
    *static_cast<float*>(tessera_emu_global_access(p.out + t * 8 + r, 4, TESSERA_EMU_STORE, 10)) = v;
  }
  tessera_emu_barrier(3);
  if (warp == 0 && p.fault != Fault::Leak) tessera_emu_tcgen05_dealloc(int32_t(base), 32, 11);
}

LaunchReport run(Fault fault, std::vector<float>& out) {
  out.assign(128 * 8, -1.0f);
  Params p{fault, out.data()};
  void* args[] = {&p};
  return tessera::emu::test::launchOneBlock(&kernel, args, "tcgen05_kernel", 2576, kOps, out);
}

}  // namespace

TEST_CASE("tcgen05.mma accumulates in tensor memory and tcgen05.ld hands each warp its rows", "[emu][tcgen05]") {
  std::vector<float> out;
  LaunchReport rep = run(Fault::None, out);
  INFO(rep.summary());
  REQUIRE_FALSE(rep.hasErrors());
  for (int t = 0; t < 128; ++t)
    for (uint32_t r = 0; r < 8; ++r) {
      const int row = 16 * (t / 32) + int(tc::ld16x256bRow(uint32_t(t % 32), r));
      const int col = int(tc::ld16x256bColumn(uint32_t(t % 32), r));
      float want = 0;
      for (int k = 0; k < 16; ++k) want += aOf(row, k) * bOf(k, col);
      INFO("thread " << t << " register " << r << " = (" << row << ", " << col << ")");
      CHECK(out[size_t(t * 8) + r] == 2 * want);
    }
}

TEST_CASE("tcgen05 misuse is reported naming the op", "[emu][tcgen05]") {
  std::vector<float> out;
  auto only = [&](Fault f, IssueKind k, int32_t op, const std::string& text) {
    CHECK(tessera::emu::test::firstIssueMismatch(run(f, out), k, op, text).empty());
  };
  SECTION("memory left allocated at exit") {
    only(Fault::Leak, IssueKind::CollectiveMisuse, 1, "32 columns of tensor memory allocated");
  }
  SECTION("a warp reading lanes that are not its own") {
    only(Fault::ForeignLane, IssueKind::CollectiveMisuse, 9, "may access lanes 32 to 63 only");
  }
  SECTION("an operand written before the MMA's commit") {
    only(Fault::EarlyWrite, IssueKind::SharedRace, 7, "tcgen05.mma read");
  }
  SECTION("an allocation of a column count that is not a power of two") {
    only(Fault::BadColumns, IssueKind::CollectiveMisuse, 1, "32 to 512, a power of two");
  }
  SECTION("a descriptor without tcgen05's version") {
    only(Fault::OldDescriptor, IssueKind::CollectiveMisuse, 5, "modelled: version 1");
  }
  SECTION("an instruction descriptor its kind cannot take") {
    only(Fault::WrongKind, IssueKind::CollectiveMisuse, 5, "of kind 3 (modelled: kind::f16");
  }
  SECTION("an accumulator in columns not allocated") {
    only(Fault::Unallocated, IssueKind::CollectiveMisuse, 5, "which are not all allocated");
  }
}
