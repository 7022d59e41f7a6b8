// ir::matchTiledAccess: which copies are a box of a row-major tensor (the
// TMA form), however the index arithmetic is written.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tessera/ir/Parser.h"
#include "tessera/ir/analysis/AxisInfo.h"
#include "tessera/ir/analysis/TiledAccess.h"

using namespace tessera::ir;

namespace {

struct Variant {
  bool strideFirst = false;  // splat(K) * rows instead of rows * splat(K)
  bool startFirst = false;   // splat(r0) + arange instead of arange + splat(r0)
  std::string mask = "and";  // and | rows | none | causal | shifted
  bool alignedK = true;
};

std::string kernel(const Variant& v) {
  std::string kAttr = v.alignedK ? " {divisibility = 16}" : "";
  std::string t =
      "kernel @t(%a: ptr<f16, global> {divisibility = 16}, %M: i32 {divisibility = 16}, %K: i32" + kAttr +
      ", %r0: i32, %c0: i32) {\n"
      "  %0 = arange() {end = 16, start = 0} : tile<16xi32>\n"
      "  %1 = splat(%r0) : tile<16xi32>\n" +
      std::string(v.startFirst ? "  %2 = add(%1, %0) : tile<16xi32>\n" : "  %2 = add(%0, %1) : tile<16xi32>\n") +
      "  %3 = expand_dims(%2) {axis = 1} : tile<16x1xi32>\n"
      "  %4 = arange() {end = 32, start = 0} : tile<32xi32>\n"
      "  %5 = splat(%c0) : tile<32xi32>\n"
      "  %6 = add(%5, %4) : tile<32xi32>\n"
      "  %7 = expand_dims(%6) {axis = 0} : tile<1x32xi32>\n"
      "  %8 = splat(%K) : tile<16x1xi32>\n" +
      std::string(v.strideFirst ? "  %9 = mul(%8, %3) : tile<16x1xi32>\n" : "  %9 = mul(%3, %8) : tile<16x1xi32>\n") +
      "  %10 = splat(%a) : tile<16x1xptr<f16, global>>\n"
      "  %11 = ptr_add(%10, %9) : tile<16x1xptr<f16, global>>\n"
      "  %12 = broadcast(%11) : tile<16x32xptr<f16, global>>\n"
      "  %13 = broadcast(%7) : tile<16x32xi32>\n"
      "  %14 = ptr_add(%12, %13) : tile<16x32xptr<f16, global>>\n"
      "  %15 = splat(%M) : tile<16x1xi32>\n"
      "  %16 = cmp(%3, %15) {pred = lt} : tile<16x1xi1>\n"
      "  %17 = splat(%K) : tile<1x32xi32>\n"
      "  %18 = cmp(%7, %17) {pred = lt} : tile<1x32xi1>\n"
      "  %19 = broadcast(%16) : tile<16x32xi1>\n"
      "  %20 = broadcast(%18) : tile<16x32xi1>\n"
      "  %21 = and(%19, %20) : tile<16x32xi1>\n"
      "  %22 = broadcast(%3) : tile<16x32xi32>\n"
      "  %23 = cmp(%13, %22) {pred = lt} : tile<16x32xi1>\n"
      "  %24 = add(%3, %15) : tile<16x1xi32>\n"
      "  %25 = cmp(%24, %15) {pred = lt} : tile<16x1xi1>\n"
      "  %26 = broadcast(%25) : tile<16x32xi1>\n"
      "  %27 = alloc() : buffer<shared, 16x32xf16>\n";
  if (v.mask == "and") t += "  copy(%27, %14, %21) {async = 1}\n";
  if (v.mask == "rows") t += "  copy(%27, %14, %19) {async = 1}\n";
  if (v.mask == "none") t += "  copy(%27, %14) {async = 1}\n";
  if (v.mask == "causal") t += "  copy(%27, %14, %23) {async = 1}\n";
  if (v.mask == "shifted") t += "  copy(%27, %14, %26) {async = 1}\n";
  return t + "  async_commit()\n  async_wait() {pending = 0}\n  return()\n}\n";
}

std::optional<TiledAccess> match(const Variant& v) {
  // The result names the module's values: it stays alive for the test.
  static std::vector<std::unique_ptr<Module>> keep;
  keep.push_back(parseModule(kernel(v), "tiled.tir"));
  const Function& f = *keep.back()->functions.at(0);
  AxisAnalysis ax(f);
  for (auto& op : f.body().ops())
    if (op->code() == OpCode::Copy) return matchTiledAccess(f, *op, ax);
  FAIL("no copy");
  return std::nullopt;
}

}  // namespace

TEST_CASE("tiled access: a masked row-major box in any operand order", "[ir][tma]") {
  for (bool strideFirst : {false, true})
    for (bool startFirst : {false, true}) {
      INFO("strideFirst " << strideFirst << " startFirst " << startFirst);
      auto t = match({strideFirst, startFirst});
      REQUIRE(t);
      CHECK(t->source == 0);
      CHECK(t->dtype == tessera::DType::F16);
      CHECK(t->tileRows == 16);
      CHECK(t->tileCols == 32);
      CHECK(t->rowStride.arg == 2);
      CHECK(t->rowStride.scale == 1);
      REQUIRE(t->rows);
      CHECK(t->rows->arg == 1);
      REQUIRE(t->cols);
      CHECK(t->cols->arg == 2);
      CHECK(t->rowStart.str() == "1*r0");
      CHECK(t->colStart.str() == "1*c0");
      CHECK(t->aligned);
    }
}

TEST_CASE("tiled access: masks of other shapes do not match", "[ir][tma]") {
  auto rows = match({false, false, "rows"});
  REQUIRE(rows);
  CHECK(rows->rows);
  CHECK_FALSE(rows->cols);  // unbounded: the user's promise, as for the copy
  auto none = match({false, false, "none"});
  REQUIRE(none);
  CHECK_FALSE(none->rows);
  // A causal mask compares columns with rows; a bound on other indices than
  // the pointer's says nothing TMA can express.
  CHECK_FALSE(match({false, false, "causal"}));
  CHECK_FALSE(match({false, false, "shifted"}));
}

TEST_CASE("tiled access: a row stride not known to be 16-byte aligned is not TMA's", "[ir][tma]") {
  auto t = match({false, false, "and", /*alignedK=*/false});
  REQUIRE(t);
  CHECK_FALSE(t->aligned);
}

TEST_CASE("tiled access: a K^T tile of one head of [heads, n, 64] is a transposed box of a 3-D stack", "[ir][tma]") {
  // kt[d][j] = k[(h * n + n0 + j) * 64 + d], masked by n0 + j < n: the
  // columns (d) run along the tile's dim 0; the head is a plane of n rows.
  const std::string text =
      "kernel @t(%k: ptr<f16, global> {divisibility = 16}, %n: i32, %h: i32, %n0: i32) {\n"
      "  %0 = constant() {value = 64} : i32\n"
      "  %1 = mul(%h, %n) : i32\n"
      "  %2 = mul(%1, %0) : i32\n"
      "  %3 = ptr_add(%k, %2) : ptr<f16, global>\n"
      "  %4 = arange() {end = 64, start = 0} : tile<64xi32>\n"
      "  %5 = expand_dims(%4) {axis = 1} : tile<64x1xi32>\n"
      "  %6 = arange() {end = 32, start = 0} : tile<32xi32>\n"
      "  %7 = splat(%n0) : tile<32xi32>\n"
      "  %8 = add(%7, %6) : tile<32xi32>\n"
      "  %9 = expand_dims(%8) {axis = 0} : tile<1x32xi32>\n"
      "  %10 = splat(%0) : tile<1x32xi32>\n"
      "  %11 = mul(%9, %10) : tile<1x32xi32>\n"
      "  %12 = splat(%3) : tile<1x32xptr<f16, global>>\n"
      "  %13 = ptr_add(%12, %11) : tile<1x32xptr<f16, global>>\n"
      "  %14 = broadcast(%13) : tile<64x32xptr<f16, global>>\n"
      "  %15 = broadcast(%5) : tile<64x32xi32>\n"
      "  %16 = ptr_add(%14, %15) : tile<64x32xptr<f16, global>>\n"
      "  %17 = splat(%n) : tile<1x32xi32>\n"
      "  %18 = cmp(%9, %17) {pred = lt} : tile<1x32xi1>\n"
      "  %19 = broadcast(%18) : tile<64x32xi1>\n"
      "  %20 = load(%16, %19) : tile<64x32xf16>\n"
      "  store(%16, %20, %19)\n"
      "  return()\n"
      "}\n";
  auto m = parseModule(text, "kt.tir");
  const Function& f = *m->functions.at(0);
  AxisAnalysis ax(f);
  const Op* load = nullptr;
  for (auto& op : f.body().ops())
    if (op->code() == OpCode::Load) load = op.get();
  REQUIRE(load);
  auto t = matchTiledAccess(f, *load, ax);
  REQUIRE(t);
  CHECK(t->transposed);
  CHECK(t->tileRows == 32);
  CHECK(t->tileCols == 64);
  CHECK(t->rowStride.arg == -1);
  CHECK(t->rowStride.scale == 64);
  REQUIRE(t->rows);
  CHECK(t->rows->arg == 1);
  CHECK_FALSE(t->cols);
  CHECK(t->rank == 3);
  CHECK(t->planeStride.arg == 1);
  CHECK(t->planeStride.scale == 64);
  CHECK(t->rowStart.str() == "1*n0");
  CHECK(t->zStart.str() == "1*h");
  CHECK(t->aligned);
}
