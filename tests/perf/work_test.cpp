// The work analysis (ir/analysis/Work.h, perf::launchWork): flops and
// compulsory bytes of a launch, counted by hand for bundled examples and
// for IR written to exercise trip counts, program-dependent bounds, `if`s
// and pointer provenance. Deterministic: nothing is timed.
#include <catch2/catch.hpp>

#include "registry.h"
#include "tessera/ir/analysis/Work.h"
#include "tessera/perf/Bench.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ex = tessera::examples;
using Catch::Matchers::Contains;

namespace {

ts::perf::Work exampleWork(const std::string& name, std::vector<int64_t> shape) {
  ex::RunContext ctx;
  ctx.shape = std::move(shape);
  ex::Launch l = ex::find(name)->prepare(ctx);
  return ts::perf::launchWork(l.kernel, l.grid, l.args);
}

const ts::ir::WorkEstimate::ArgTraffic* traffic(const ts::ir::WorkEstimate& w, const std::string& name) {
  for (const auto& a : w.args)
    if (a.name == name) return &a;
  return nullptr;
}

ts::ir::WorkEstimate tirWork(const std::string& text, std::array<uint64_t, 3> grid,
                             std::vector<std::optional<int64_t>> scalars,
                             std::vector<std::optional<uint64_t>> buffers = {}) {
  ts::Kernel k = ts::parseKernel(text, "work_test.tir");
  ts::ir::LaunchFacts facts;
  facts.grid = grid;
  facts.scalars = std::move(scalars);
  facts.bufferBytes = std::move(buffers);
  return ts::ir::estimateWork(k.ir(), facts);
}

}  // namespace

TEST_CASE("work: vector_add counts one add per lane and the buffers' bytes once", "[perf][work]") {
  ts::perf::Work w = exampleWork("vector_add", {1000});  // one program of 1024 lanes
  CHECK(w.source == "ir");
  CHECK(w.flops == 1024);  // masked-off lanes are computed too
  CHECK(w.ir.flopsOf(ts::ir::FlopUnit::Vector, ts::DType::F32) == 1024);
  // Compulsory bytes: each buffer's 4000 bytes, not the 4096 the tiles span.
  CHECK(w.bytes == 12000);
  CHECK(w.ir.bytesRead() == 8000);
  CHECK(w.ir.bytesWritten() == 4000);
  CHECK(w.ir.accessedBytes() == 3 * 4096);
  REQUIRE(traffic(w.ir, "out") != nullptr);
  CHECK(traffic(w.ir, "out")->bytesWritten == 4000);
  CHECK(traffic(w.ir, "out")->bytesRead == 0);
  CHECK(traffic(w.ir, "out")->boundedByBuffer);
  CHECK(traffic(w.ir, "a")->bytesRead == 4000);
  CHECK(w.ir.notes.empty());
}

TEST_CASE("work: softmax per row is two reductions, a subtraction, an exp, a division and a multiply", "[perf][work]") {
  ts::perf::Work w = exampleWork("softmax", {4, 1000});  // BLOCK = 1024, one program per row
  // max: 1023, sub: 1024, exp: 1024, sum: 1023, 1/sum: 1, multiply: 1024.
  CHECK(w.flops == 4 * 5119.0);
  CHECK(w.ir.transcendentals == 4 * 1024.0);
  CHECK(w.bytes == 2 * 4 * 1000 * 4.0);
  CHECK(w.ir.intensity() == Approx(4 * 5119.0 / 32000));
}

TEST_CASE("work: gemm_f32 counts 2 M N K per tile dot times the K trips from the argument", "[perf][work]") {
  // CPU blocks 256 x 256 x 64: grid (2, 1), ceil(150 / 64) = 3 trips; no activation.
  ts::perf::Work w = exampleWork("gemm_f32", {300, 200, 150, 0});
  const double dot = 2.0 * 256 * 256 * 64 * 3 * 2;
  CHECK(w.ir.flopsOf(ts::ir::FlopUnit::Dot, ts::DType::F32) == dot);
  CHECK(w.ir.flopsOf(ts::ir::FlopUnit::Vector, ts::DType::F32) == 2 * 256 * 256.0);  // the bias add
  // A, B and bias read once, C written once, however often the tiles re-read them.
  CHECK(traffic(w.ir, "a")->bytesRead == 300 * 150 * 4.0);
  CHECK(traffic(w.ir, "b")->bytesRead == 150 * 200 * 4.0);
  CHECK(traffic(w.ir, "bias")->bytesRead == 200 * 4.0);
  CHECK(traffic(w.ir, "c")->bytesWritten == 300 * 200 * 4.0);
  CHECK(traffic(w.ir, "a")->accessedRead == 256 * 64 * 4.0 * 3 * 2);
}

TEST_CASE("work: f16 and bf16 dots are classed by their operand dtype", "[perf][work]") {
  ts::perf::Work w = exampleWork("gemm_f16", {64, 64, 64, 0});
  CHECK(w.ir.flopsOf(ts::ir::FlopUnit::Dot, ts::DType::F16) == 2.0 * 256 * 256 * 64);
  CHECK(w.ir.flopsOf(ts::ir::FlopUnit::Dot, ts::DType::F32) == 0);
  ts::perf::Work b = exampleWork("gemm_bf16", {64, 64, 64, 0});
  CHECK(b.ir.flopsOf(ts::ir::FlopUnit::Dot, ts::DType::BF16) == 2.0 * 256 * 256 * 64);
  CHECK(ts::ir::flopClassName(ts::ir::FlopUnit::Dot, ts::DType::BF16) == "bf16 dot");
}

TEST_CASE("work: a loop bound that depends on the program id is counted program by program", "[perf][work]") {
  // Program p runs p + 1 iterations of a 16-lane fma: a triangle.
  const char* text = R"(kernel @tri(%out: ptr<f32, global>) {
  %0 = program_id() {axis = 0} : i32
  %1 = constant() {value = 0} : i32
  %2 = constant() {value = 1} : i32
  %3 = add(%0, %2) : i32
  %4 = constant() {value = 1.0} : tile<16xf32>
  %5 = for(%1, %3, %2, %4) : tile<16xf32> {
  ^(%i: i32, %acc: tile<16xf32>):
    %6 = fma(%acc, %acc, %acc) : tile<16xf32>
    yield(%6)
  }
  %7 = arange() {end = 16, start = 0} : tile<16xi32>
  %8 = splat(%out) : tile<16xptr<f32, global>>
  %9 = ptr_add(%8, %7) : tile<16xptr<f32, global>>
  store(%9, %5)
  return()
}
)";
  ts::ir::WorkEstimate w = tirWork(text, {10, 1, 1}, {});
  CHECK(w.totalFlops() == 2.0 * 16 * (10 * 11 / 2));  // sum of 1..10 iterations
  CHECK(w.notes.empty());
  // A large grid is sampled evenly and scaled, and says so.
  ts::ir::WorkEstimate big = tirWork(text, {100000, 1, 1}, {});
  CHECK(big.totalFlops() == Approx(2.0 * 16 * (100000.0 * 100001 / 2)).epsilon(0.01));
  REQUIRE(big.notes.size() == 1);
  CHECK_THAT(big.notes[0], Contains("evenly spaced programs"));
}

// A loop nest whose inner bound is the outer induction variable (a
// triangle: the inner body runs 0 + 1 + ... + (n - 1) times).
const char* const kTriangle = R"(kernel @nested(%out: ptr<f32, global>, %n: i32) {
  %0 = constant() {value = 0} : i32
  %1 = constant() {value = 1} : i32
  %2 = constant() {value = 2.0} : f32
  %3 = for(%0, %n, %1, %2) : f32 {
  ^(%i: i32, %a: f32):
    %4 = for(%0, %i, %1, %a) : f32 {
    ^(%j: i32, %b: f32):
      %5 = mul(%b, %b) : f32
      yield(%5)
    }
    yield(%4)
  }
  store(%out, %3)
  return()
}
)";

TEST_CASE("work: a nested loop bound on the outer induction variable (a triangle) is exact", "[perf][work]") {
  const char* text = kTriangle;
  // Small n: iterated; the inner loop runs 0 + 1 + ... + (n - 1) times.
  CHECK(tirWork(text, {1, 1, 1}, {std::nullopt, 10}).totalFlops() == 45);
  // Large n: the outer loop is counted at its middle iteration, exact for a triangle.
  ts::ir::WorkEstimate w = tirWork(text, {1, 1, 1}, {std::nullopt, 1001});
  CHECK(w.totalFlops() == 1001.0 * 500);
  REQUIRE(!w.notes.empty());
  CHECK_THAT(w.notes[0], Contains("middle iteration"));
}

TEST_CASE("work: what the launch does not determine is counted once and named", "[perf][work]") {
  const char* text = R"(kernel @unknown(%out: ptr<f32, global>, %n: i32, %x: f32) {
  %0 = constant() {value = 0} : i32
  %1 = constant() {value = 1} : i32
  %2 = for(%0, %n, %1, %x) : f32 {
  ^(%i: i32, %a: f32):
    %3 = add(%a, %a) : f32
    yield(%3)
  }
  %4 = constant() {value = 0.0} : f32
  %5 = cmp(%x, %4) {pred = gt} : i1
  %6 = if(%5) : f32 {
    %7 = mul(%2, %2) : f32
    yield(%7)
  } else {
    yield(%2)
  }
  store(%out, %6)
  return()
}
)";
  ts::ir::WorkEstimate w = tirWork(text, {1, 1, 1}, {});  // n unknown
  CHECK(w.totalFlops() == 2);                             // the loop body once, the `if` both ways
  REQUIRE(w.notes.size() == 2);
  CHECK_THAT(w.notes[0], Contains("for: trip count unknown"));
  CHECK_THAT(w.notes[1], Contains("both branches counted"));
  // Given n, the trip count is known; the float condition still is not.
  ts::ir::WorkEstimate known = tirWork(text, {1, 1, 1}, {std::nullopt, 7});
  CHECK(known.totalFlops() == 8);
  CHECK(known.notes.size() == 1);
}

TEST_CASE("work: an in-place update reads and writes its buffer, an atomic both, through loop-carried pointers",
          "[perf][work]") {
  const char* text = R"(kernel @inplace(%x: ptr<f32, global>, %hist: ptr<i32, global>, %n: i32) {
  %0 = program_id() {axis = 0} : i32
  %1 = constant() {value = 64} : i32
  %2 = mul(%0, %1) : i32
  %3 = arange() {end = 64, start = 0} : tile<64xi32>
  %4 = splat(%2) : tile<64xi32>
  %5 = add(%4, %3) : tile<64xi32>
  %6 = splat(%x) : tile<64xptr<f32, global>>
  %7 = ptr_add(%6, %5) : tile<64xptr<f32, global>>
  %8 = constant() {value = 0} : i32
  %9 = constant() {value = 2} : i32
  %10 = constant() {value = 1} : i32
  %11 = for(%8, %9, %10, %7) : tile<64xptr<f32, global>> {
  ^(%i: i32, %p: tile<64xptr<f32, global>>):
    %12 = load(%p) : tile<64xf32>
    %13 = mul(%12, %12) : tile<64xf32>
    store(%p, %13)
    yield(%p)
  }
  %14 = constant() {value = 1} : i32
  %15 = atomic_rmw(%hist, %14) {kind = add, order = relaxed, scope = device} : i32
  return()
}
)";
  ts::ir::WorkEstimate w = tirWork(text, {4, 1, 1}, {}, {uint64_t{256 * 4}, uint64_t{4}, std::nullopt});
  REQUIRE(traffic(w, "x") != nullptr);
  CHECK(traffic(w, "x")->accessedRead == 4 * 2 * 64 * 4.0);  // 4 programs, 2 trips, through the carried pointer
  CHECK(traffic(w, "x")->bytesRead == 1024);                 // bounded by the buffer
  CHECK(traffic(w, "x")->bytesWritten == 1024);
  CHECK(traffic(w, "hist")->bytesRead == 4);
  CHECK(traffic(w, "hist")->bytesWritten == 4);
  CHECK(w.totalFlops() == 4 * 2 * 64.0);
}

TEST_CASE("work: without buffer sizes the accessed bytes are the count, and integer math is not flops",
          "[perf][work]") {
  const char* text = R"(kernel @copy(%out: ptr<i32, global>, %in: ptr<i32, global>) {
  %0 = arange() {end = 128, start = 0} : tile<128xi32>
  %1 = splat(%in) : tile<128xptr<i32, global>>
  %2 = ptr_add(%1, %0) : tile<128xptr<i32, global>>
  %3 = load(%2) : tile<128xi32>
  %4 = add(%3, %3) : tile<128xi32>
  %5 = splat(%out) : tile<128xptr<i32, global>>
  %6 = ptr_add(%5, %0) : tile<128xptr<i32, global>>
  store(%6, %4)
  return()
}
)";
  ts::ir::WorkEstimate w = tirWork(text, {3, 1, 1}, {});
  CHECK(w.totalFlops() == 0);
  CHECK(w.bytes() == 2 * 3 * 128 * 4.0);
  CHECK(w.intensity() == 0);
}

TEST_CASE("work: gather, join and split move data without flops or traffic, argmin counts as a reduction",
          "[perf][work][tileops]") {
  // 8x8 f32 loaded and stored once (256 bytes each way); the data movement
  // adds nothing; argmin along axis 1 folds 64 elements into 8: 56 flops,
  // like the subtraction's 64.
  auto w = tirWork(R"(
kernel @moves(%out: ptr<f32, global>, %in: ptr<f32, global>, %am: ptr<i32, global>) {
  %0 = arange() {end = 64, start = 0} : tile<64xi32>
  %1 = splat(%in) : tile<64xptr<f32, global>>
  %2 = ptr_add(%1, %0) : tile<64xptr<f32, global>>
  %3 = load(%2) : tile<64xf32>
  %4 = reshape(%3) : tile<8x8xf32>
  %5 = reshape(%0) : tile<8x8xi32>
  %6 = constant() {value = 7} : tile<8x8xi32>
  %7 = sub(%6, %5) : tile<8x8xi32>
  %8 = gather(%4, %7) {axis = 0} : tile<8x8xf32>
  %9 = join(%8, %4) : tile<8x8x2xf32>
  %10:2 = split(%9) : tile<8x8xf32>, tile<8x8xf32>
  %12 = sub(%10, %11) : tile<8x8xf32>
  %13 = reduce(%12) {axis = 1, kind = argmin} : tile<8xi32>
  %14 = arange() {end = 8, start = 0} : tile<8xi32>
  %15 = splat(%am) : tile<8xptr<i32, global>>
  %16 = ptr_add(%15, %14) : tile<8xptr<i32, global>>
  store(%16, %13)
  %17 = reshape(%12) : tile<64xf32>
  %18 = splat(%out) : tile<64xptr<f32, global>>
  %19 = ptr_add(%18, %0) : tile<64xptr<f32, global>>
  store(%19, %17)
  return()
}
)",
                   {1, 1, 1}, {std::nullopt, std::nullopt, std::nullopt});
  CHECK(w.flopsOf(ts::ir::FlopUnit::Vector, ts::DType::F32) == 64 + 56);
  CHECK(w.bytesRead() == 256);
  CHECK(w.bytesWritten() == 256 + 32);
  CHECK(w.notes.empty());
}

TEST_CASE("work: the main loop is the loop that runs most, with its iterations over the launch and its stages",
          "[perf][work]") {
  // gemm_f32 on the CPU: grid (2, 1), ceil(150 / 64) = 3 K trips each.
  ts::ir::WorkEstimate g = exampleWork("gemm_f32", {300, 200, 150, 0}).ir;
  CHECK(g.hotLoop.iterations == 2 * 3);
  CHECK(g.hotLoop.stages >= 1);
  CHECK_THAT(g.hotLoop.loc, Contains("gemm"));
  // No loop: no iterations.
  CHECK(exampleWork("vector_add", {1000}).ir.hotLoop.iterations == 0);
  // Nested loops: the inner one runs most (a triangle: 0 + 1 + ... + 9 per
  // program, 3 programs), not the outer one.
  ts::ir::WorkEstimate n = tirWork(kTriangle, {3, 1, 1}, {std::nullopt, 10});
  CHECK(n.hotLoop.iterations == 3 * 45);
  CHECK(n.hotLoop.stages == 1);
}

TEST_CASE("work: a dot_scaled counts 2 M N K as the bf16 dot it runs as, K in elements (fp4: two a byte)",
          "[perf][work][mx]") {
  const ts::ir::WorkEstimate w = tirWork(R"(
kernel @scaled(%c: ptr<f32, global>) {
  %0 = constant() {value = 34} : tile<32x32xu8>
  %1 = constant() {value = 127} : tile<32x2xu8>
  %2 = constant() {value = 34} : tile<16x64xu8>
  %3 = constant() {value = 127} : tile<16x2xu8>
  %4 = constant() {value = 0.0} : tile<32x16xf32>
  %5 = dot_scaled(%0, %1, %2, %3, %4) {a_format = mxfp4, b_format = mxfp8_e4m3} : tile<32x16xf32>
  %6 = splat(%c) : tile<32x16xptr<f32, global>>
  store(%6, %5)
  return()
}
)",
                                         {1, 1, 1}, {});
  CHECK(w.flopsOf(ts::ir::FlopUnit::Dot, ts::DType::BF16) == 2.0 * 32 * 16 * 64);
  CHECK(w.flopsOf(ts::ir::FlopUnit::Dot, ts::DType::U8) == 0);
}
