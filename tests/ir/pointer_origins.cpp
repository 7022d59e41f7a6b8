// ir::PointerOrigins: the kernel arguments each pointer may point into,
// which the work analysis and the bounds-checked compiles read.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tessera/ir/Parser.h"
#include "tessera/ir/analysis/PointerOrigin.h"

using namespace tessera::ir;

TEST_CASE("pointer origins follow offsets, selects and loop-carried pointers", "[ir][analysis]") {
  std::unique_ptr<Module> m = parseModule(R"(kernel @t(%a: ptr<f32, global>, %b: ptr<f32, global>, %n: i32, %c: i1) {
  %0 = arange() {end = 32, start = 0} : tile<32xi32>
  %1 = splat(%a) : tile<32xptr<f32, global>>
  %2 = ptr_add(%1, %0) : tile<32xptr<f32, global>>
  %3 = select(%c, %a, %b) : ptr<f32, global>
  %4 = constant() {value = 0} : i32
  %5 = constant() {value = 1} : i32
  %6 = for(%4, %n, %5, %b) : ptr<f32, global> {
  ^(%7: i32, %8: ptr<f32, global>):
    %9 = ptr_add(%8, %5) : ptr<f32, global>
    yield(%9)
  }
  %10 = load(%2) : tile<32xf32>
  %11 = load(%3) : f32
  %12 = load(%6) : f32
  return()
}
)",
                                          "origins.tir");
  const Function& f = *m->functions.at(0);
  PointerOrigins o(f);
  std::vector<const Op*> loads;
  for (auto& op : f.body().ops())
    if (op->code() == OpCode::Load) loads.push_back(op.get());
  REQUIRE(loads.size() == 3);
  CHECK(o.of(loads[0]->operand(0)) == std::vector<unsigned>{0});     // ptr_add of a splat of %a
  CHECK(o.of(loads[1]->operand(0)) == std::vector<unsigned>{0, 1});  // either argument
  CHECK(o.of(loads[2]->operand(0)) == std::vector<unsigned>{1});     // carried from %b
  CHECK(o.of(f.arg(2)).empty());                                     // not a pointer
}
