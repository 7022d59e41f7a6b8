// Layouts by memory access: loads and stores take the layout that coalesces
// their pointer tile, whatever the order of the index math's operands, and
// the index math is computed in that layout.
#include <catch2/catch.hpp>

#include "../ir_build_util.h"

#include <random>
#include <regex>

#include "../../../codegen/GpuTargets.h"
#include "../emu_util.h"
#include "tessera/ir/Builder.h"
#include "tessera/ir/Verifier.h"
#include "tessera/ir/analysis/AxisInfo.h"
#include "tessera/ir/analysis/LayoutStats.h"
#include "tessera/Compile.h"

using namespace emutest;
using namespace tessera;
using namespace tessera::ir;

namespace {

Location L(uint32_t line) { return Location{"gpu_layout.cpp", line, 3}; }
using namespace irtest;

constexpr int64_t kBM = 32, kBN = 128;

/// A GEMV partial: program (i, j) writes
///   out[j * m + r] = sum_{c in block j, c < n} a[r * ld + c] * x[c]
/// for the kBM rows r of block i, through the pointer tile
/// `a + rows[:, None] * ld + cols[None, :]` (`swapped`: written
/// `cols[None, :] + rows[:, None] * ld`, the mask's operands swapped too).
std::unique_ptr<Function> gemvPartial(bool swapped) {
  auto f = std::make_unique<Function>("gemv_partial", L(1));
  Value* out = arg(*f, gptr(), "out", true);
  Value* a = arg(*f, gptr(), "a", true);
  Value* x = arg(*f, gptr(), "x", true);
  Value* m = arg(*f, i32(), "m", false);
  Value* n = arg(*f, i32(), "n", false);
  Value* ld = arg(*f, i32(), "ld", true);
  Builder b(&f->body());
  b.setLoc(L(2));
  Shape s{kBM, kBN};
  Value* rows = b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, b.programId(0), b.constant(i32(), kBM)), {kBM}),
                         b.arange(0, kBM));
  Value* cols = b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, b.programId(1), b.constant(i32(), kBN)), {kBN}),
                         b.arange(0, kBN));
  Value* rowMask = b.cmp("lt", rows, b.splat(m, {kBM}));
  Value* colMask = b.cmp("lt", cols, b.splat(n, {kBN}));
  Value* r2 = b.broadcast(b.binary(OpCode::Mul, b.expandDims(rows, 1), b.splat(ld, {kBM, 1})), s);
  Value* c2 = b.broadcast(b.expandDims(cols, 0), s);
  Value* off = swapped ? b.binary(OpCode::Add, c2, r2) : b.binary(OpCode::Add, r2, c2);
  Value* rm = b.broadcast(b.expandDims(rowMask, 1), s);
  Value* cm = b.broadcast(b.expandDims(colMask, 0), s);
  Value* mask = swapped ? b.binary(OpCode::And, cm, rm) : b.binary(OpCode::And, rm, cm);
  Value* av = b.load(b.ptrAdd(b.splat(a, s), off), mask, b.constant(ftile(s), 0.0));
  Value* xv = b.load(b.ptrAdd(b.splat(x, {kBN}), cols), colMask, b.constant(ftile({kBN}), 0.0));
  Value* xb = b.broadcast(b.expandDims(xv, 0), s);
  Value* prod = swapped ? b.binary(OpCode::Mul, xb, av) : b.binary(OpCode::Mul, av, xb);
  Value* sum = b.reduce("sum", prod, 1);
  Value* outRow = b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, b.programId(1), m), {kBM}), rows);
  b.store(b.ptrAdd(b.splat(out, {kBM}), outRow), sum, rowMask);
  b.ret();
  return f;
}

/// A column-major access: out[r + c * ld] = 2 * a[r + c * ld] for a 128 x 8
/// tile whose rows are contiguous (threads go along dim 0), rows < m.
std::unique_ptr<Function> columnScale() {
  const Shape s{128, 8};
  auto f = std::make_unique<Function>("column_scale", L(20));
  Value* out = arg(*f, gptr(), "out", false);
  Value* a = arg(*f, gptr(), "a", false);
  Value* m = arg(*f, i32(), "m", false);
  Value* ld = arg(*f, i32(), "ld", false);
  Builder b(&f->body());
  b.setLoc(L(21));
  Value* rows = b.arange(0, 128);
  Value* off = b.binary(OpCode::Add, b.broadcast(b.expandDims(rows, 1), s),
                        b.broadcast(b.binary(OpCode::Mul, b.expandDims(b.arange(0, 8), 0), b.splat(ld, {1, 8})), s));
  Value* mask = b.broadcast(b.expandDims(b.cmp("lt", rows, b.splat(m, {128})), 1), s);
  Value* v = b.load(b.ptrAdd(b.splat(a, s), off), mask);
  b.store(b.ptrAdd(b.splat(out, s), off), b.binary(OpCode::Mul, v, b.constant(ftile(s), 2.0)), mask);
  b.ret();
  return f;
}

/// A column walk: out[r] = a[r * ld] for 128 rows; consecutive lanes are
/// ld elements apart (ld unknown): no contiguity to coalesce.
std::unique_ptr<Function> columnWalk() {
  auto f = std::make_unique<Function>("column_walk", L(30));
  Value* out = arg(*f, gptr(), "out", true);
  Value* a = arg(*f, gptr(), "a", true);
  Value* ld = arg(*f, i32(), "ld", false);
  Builder b(&f->body());
  b.setLoc(L(31));
  Value* rows = b.arange(0, 128);
  Value* v = b.load(b.ptrAdd(b.splat(a, {128}), b.binary(OpCode::Mul, rows, b.splat(ld, {128}))));
  b.store(b.ptrAdd(b.splat(out, {128}), rows), v);
  b.ret();
  return f;
}

ir::LayoutSummary layoutSummary(const codegen::Artifact& a) {
  auto it = a.dumps.extra.find("layout-stats");
  REQUIRE(it != a.dumps.extra.end());
  INFO(it->second);
  auto s = ir::LayoutSummary::parse(it->second);
  REQUIRE(s);
  return *s;
}

std::string layoutDump(const codegen::Artifact& a) {
  for (auto& [pass, text] : a.dumps.tileIR)
    if (pass == "layout") return text;
  return {};
}

/// The layout attribute of the first `load` producing `type`.
std::string loadLayout(const std::string& dump, const std::string& type) {
  std::smatch mt;
  std::regex re("= load\\([^)]*\\) \\{layout = \"([^\"]*)\"[^}]*\\} : " + type);
  if (!std::regex_search(dump, mt, re)) return {};
  return mt[1];
}

std::vector<float> smallInts(size_t n, unsigned seed) {
  // Small integers: every product and partial sum is exact in f32, so the
  // kernel must match the reference exactly whatever its summation order.
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-4, 4);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(rng));
  return v;
}

}  // namespace

TEST_CASE("gpu layout: a GEMV pointer tile is loaded with threads along the contiguous dim", "[gpu][layout]") {
  auto f = gemvPartial(false);
  verify(*f);
  struct Want {
    const char* target;
    const char* layout;
  };
  // 128-bit loads (a and ld divisible by 16), a warp along a 128-wide row;
  // 32 x 128 elements over 128 (256) threads: no replication.
  for (const Want& w : {Want{"nvptx:sm_80", "#blocked<spt=[1, 4], tpw=[1, 32], wpb=[4, 1], order=[1, 0]>"},
                        Want{"amdgpu:gfx942", "#blocked<spt=[1, 4], tpw=[2, 32], wpb=[4, 1], order=[1, 0]>"}}) {
    auto art = codegen::compileGpu(*f, codegen::Target::parse(w.target), {}, {});
    std::string dump = layoutDump(*art);
    INFO(w.target << "\n" << dump);
    CHECK(loadLayout(dump, "tile<32x128xf32>") == w.layout);
    // The pointer tile and its index math are computed in the load's layout.
    std::regex ptrLine("ptr_add\\([^)]*\\) \\{layout = \"([^\"]*)\"\\} : tile<32x128xptr");
    std::smatch mt;
    REQUIRE(std::regex_search(dump, mt, ptrLine));
    CHECK(mt[1] == w.layout);
  }
}

TEST_CASE("gpu layout: the pointer expression's operand order does not change the code", "[gpu][layout]") {
  for (const char* target : {"nvptx:sm_80", "nvptx:sm_90a"}) {
    auto a = codegen::compileGpu(*gemvPartial(false), codegen::Target::parse(target), {}, {});
    auto b = codegen::compileGpu(*gemvPartial(true), codegen::Target::parse(target), {}, {});
    INFO(target);
    CHECK(loadLayout(layoutDump(*a), "tile<32x128xf32>") == loadLayout(layoutDump(*b), "tile<32x128xf32>"));
    CHECK(a->binary.ptx == b->binary.ptx);
  }
}

TEST_CASE("gpu layout: the GEMV partial runs on the emulator for both vendors", "[gpu][layout][emu]") {
  for (bool swapped : {false, true}) {
    auto f = gemvPartial(swapped);
    for (const char* target : {"nvptx:sm_80", "amdgpu:gfx942"}) {
      Lowered l = lowerForEmulator(*f, target);
      struct Shape2 {
        int m, n;
      };
      // Multiples of the 32 x 128 tile and not.
      for (Shape2 sh : {Shape2{64, 256}, Shape2{45, 200}}) {
        INFO(target << (swapped ? " swapped" : "") << ", m = " << sh.m << ", n = " << sh.n);
        const int ld = (sh.n + 15) / 16 * 16;
        const int gm = (sh.m + int(kBM) - 1) / int(kBM), gn = (sh.n + int(kBN) - 1) / int(kBN);
        auto a = smallInts(size_t(sh.m) * ld, 31);
        auto x = smallInts(size_t(sh.n), 32);
        std::vector<float> out(size_t(gn) * sh.m, -1000.0f);
        Args args;
        args.add(out.data()).add(a.data()).add(x.data()).add(int32_t(sh.m)).add(int32_t(sh.n)).add(int32_t(ld));
        emu::LaunchConfig c = config(l.k, uint32_t(gm), l.art->binary.threadsPerBlock);
        c.grid[1] = uint32_t(gn);
        c.sharedBytes = l.k.dynamicSharedOffset + (l.k.amd ? 0 : l.art->binary.sharedBytes);
        addBuffer(c, out), addBuffer(c, a), addBuffer(c, x);
        emu::LaunchReport rep = emu::launch(l.k.threadFn, args.args(), c);
        CHECK_FALSE(rep.hasErrors());
        for (int j = 0; j < gn; ++j)
          for (int r = 0; r < sh.m; ++r) {
            float want = 0;
            for (int col = j * int(kBN); col < std::min(sh.n, (j + 1) * int(kBN)); ++col)
              want += a[size_t(r) * ld + col] * x[size_t(col)];
            INFO("block " << j << ", row " << r);
            REQUIRE(out[size_t(j) * sh.m + r] == want);
          }
      }
    }
  }
}

TEST_CASE("gpu layout: a column-major access lays threads along dim 0 and runs on the emulator", "[gpu][layout][emu]") {
  auto f = columnScale();
  verify(*f);
  for (const char* target : {"nvptx:sm_80", "amdgpu:gfx942"}) {
    Lowered l = lowerForEmulator(*f, target);
    std::string dump = layoutDump(*l.art);
    INFO(target << "\n" << dump);
    CHECK(loadLayout(dump, "tile<128x8xf32>").find("order=[0, 1]") != std::string::npos);
    for (int m : {128, 100}) {
      INFO("m = " << m);
      const int ld = 131;
      auto a = smallInts(size_t(ld) * 8, 33);
      std::vector<float> out(a.size(), -1000.0f);
      Args args;
      args.add(out.data()).add(a.data()).add(int32_t(m)).add(int32_t(ld));
      emu::LaunchConfig c = config(l.k, 1, l.art->binary.threadsPerBlock);
      c.sharedBytes = l.k.dynamicSharedOffset + (l.k.amd ? 0 : l.art->binary.sharedBytes);
      addBuffer(c, out), addBuffer(c, a);
      emu::LaunchReport rep = emu::launch(l.k.threadFn, args.args(), c);
      CHECK_FALSE(rep.hasErrors());
      for (int col = 0; col < 8; ++col)
        for (int r = 0; r < ld; ++r) {
          size_t i = size_t(col) * ld + size_t(r);
          INFO("col " << col << ", row " << r);
          REQUIRE(out[i] == (r < m ? 2 * a[i] : -1000.0f));
        }
    }
  }
}

TEST_CASE("gpu layout stats: the GEMV partial's accesses are coalesced, vectorised and not replicated",
          "[gpu][layout]") {
  // As launched with aligned buffers and sizes (m and n multiples of 16 too:
  // otherwise the masks `rows < m`, `cols < n` may change within a vector).
  tessera::Kernel k = assumeAligned(tessera::Kernel(std::shared_ptr<const Function>(gemvPartial(false))));
  struct Want {
    const char* target;
    int64_t vectorisable;
  };
  // x's 128 elements on sm_80's 128 threads: one each, so its 4-wide vectors
  // would hold each element 4 times and it is not vectorisable; on gfx942's
  // 256 threads it is replicated anyway and keeps them.
  for (const Want& w : {Want{"nvptx:sm_80", 2}, Want{"amdgpu:gfx942", 3}}) {
    const char* target = w.target;
    auto art = codegen::compileGpu(k.ir(), codegen::Target::parse(target), {}, {});
    INFO(target << "\n" << art->dumps.extra["layout-stats"]);
    ir::LayoutSummary s = layoutSummary(*art);
    CHECK(s.accesses == 3);  // a, x, out
    CHECK(s.contiguous == 3);
    CHECK(s.coalesced == 3);
    CHECK(s.vectorisable == w.vectorisable);
    CHECK(s.vectorised == w.vectorisable);
    CHECK(s.maxExcessReplication == 1);
    // At least the row sums (a slice of the tile's layout) move to the
    // store's layout; every conversion is listed.
    CHECK(s.sharedConversions >= 1);
    const std::string& dump = art->dumps.extra["layout-stats"];
    size_t listed = 0;
    for (size_t at = dump.find("conversion at "); at != std::string::npos; at = dump.find("conversion at ", at + 1))
      ++listed;
    CHECK(int64_t(listed) == s.sharedConversions);
    CHECK(dump.find("conversion at store") != std::string::npos);
  }
}

TEST_CASE("gpu layout: the default layout narrows its vectors so that no element of a tile has two threads",
          "[gpu][layout]") {
  struct Case {
    std::vector<int64_t> shape;
    int64_t vec;
    int warps, warpSize;
    ir::VectorCap cap;
    int64_t spt;  // elements per thread along the last dim
    int64_t replication;
  };
  using C = ir::VectorCap;
  const C avoid = C::NoAvoidableCopies;
  for (const Case& c : {
           // A 256-element row chunk (the tutorial softmax): 4-wide vectors
           // would cover it with 64 of 256 threads (gfx942) or 64 of 128
           // (sm_80), every element held 4 / 2 times.
           Case{{256}, 4, 4, 64, avoid, 1, 1},
           Case{{256}, 4, 4, 32, avoid, 2, 1},
           Case{{1024}, 4, 4, 32, avoid, 4, 1},  // enough elements: the full vector
           Case{{16, 64}, 4, 4, 64, avoid, 4, 1},
           Case{{16, 32}, 4, 4, 64, avoid, 2, 1},  // rope's half rows on gfx942
           Case{{32, 32}, 8, 8, 32, avoid, 4, 1},  // a 32x32 f16 tile on 256 threads
           Case{{4, 256}, 4, 4, 32, avoid, 4, 1},
           // Fewer elements than threads: replicated whatever the width, so
           // the widest vector (one access per thread either way).
           Case{{128}, 4, 4, 64, avoid, 4, 8},
           Case{{1, 32}, 4, 4, 32, avoid, 4, 16},
           // Register-staged copies: fewest copies also below one per thread.
           Case{{128}, 4, 4, 64, C::FewestCopies, 1, 2},
           Case{{256}, 4, 4, 64, C::FewestCopies, 1, 1},
           // Hardware async copies keep the widest vectors.
           Case{{256}, 4, 4, 64, C::WidestVectors, 4, 4},
       }) {
    ir::BlockedLayout b = ir::defaultBlocked(c.shape, c.vec, c.warps, c.warpSize, c.cap);
    ir::Layout l = ir::Layout::blocked(b);
    int64_t elems = 1;
    for (int64_t e : c.shape) elems *= e;
    const int64_t slots = static_cast<int64_t>(ir::slotTable(l, c.shape).size());
    INFO(l.str() << " for " << c.shape.size() << "-d tile of " << elems << ", vec " << c.vec << ", " << c.warps << "x"
                 << c.warpSize << " threads");
    CHECK(b.spt.back() == c.spt);
    CHECK(slots * c.warps * c.warpSize == c.replication * elems);
  }
}

TEST_CASE("gpu layout stats: a column walk is not contiguous, lanes across the contiguous dim are not coalesced",
          "[gpu][layout]") {
  {
    auto art = codegen::compileGpu(*columnWalk(), codegen::Target::parse("nvptx:sm_80"), {}, {});
    INFO(art->dumps.extra["layout-stats"]);
    ir::LayoutSummary s = layoutSummary(*art);
    CHECK(s.accesses == 2);
    CHECK(s.contiguous == 1);  // the store to out[r]; the walk down a column is not
    CHECK(s.coalesced == 1);
    CHECK(art->dumps.extra["layout-stats"].find("load tile<128xptr<f32, global>> @ gpu_layout.cpp:31:3: width 1 of "
                                                "1, not contiguous") != std::string::npos);
  }
  // The column-major tile of columnScale, judged as if it were accessed with
  // lanes along dim 1 (a row-major layout) instead of the lowering's own
  // layout, whose lanes run down the contiguous dim 0.
  auto f = columnScale();
  ir::AxisAnalysis axis(*f);
  ir::LayoutAnalysis la(*f, axis, 4, 32);
  const ir::Op* load = nullptr;
  ir::walk(f->body(), [&](ir::Op& op) {
    if (op.code() == OpCode::Load) load = &op;
  });
  REQUIRE(load);
  ir::LoweringRecord across, along;
  across.accesses.push_back({load, ir::Layout::blocked(ir::defaultBlocked({128, 8}, 1, 4, 32)), 1});
  along.accesses.push_back({load, la.accessLayout(*load), 1});
  ir::LayoutStats a = ir::layoutStats(axis, la, across), b = ir::layoutStats(axis, la, along);
  INFO(a.str() << b.str());
  CHECK(a.summary.contiguous == 1);
  CHECK(a.summary.coalesced == 0);
  CHECK(a.str().find("NOT coalesced") != std::string::npos);
  CHECK(b.summary.coalesced == 1);
}
