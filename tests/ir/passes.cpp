// The passes, each on a small input, and the pass manager's contract.
#include <catch2/catch.hpp>

#include "IrTestKernels.h"
#include "tessera/ir/Parser.h"
#include "tessera/ir/Pass.h"
#include "tessera/ir/Printer.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

using namespace tessera;
using namespace tessera::ir;
using namespace tessera::ir::testk;

namespace {

std::unique_ptr<Function> parseOne(const std::string& text) {
  auto m = parseModule(text, "pass.tir");
  REQUIRE(m->functions.size() == 1);
  auto f = std::move(m->functions[0]);
  verify(*f);
  return f;
}

std::string runPass(std::unique_ptr<Pass> p, Function& f) {
  PassManager pm;
  pm.add(std::move(p));
  pm.run(f);
  PrintOptions o;
  o.locations = false;
  return print(f, o);
}

size_t countOps(Function& f, OpCode c) {
  size_t n = 0;
  walk(f.body(), [&](Op& op) { n += op.code() == c; });
  return n;
}

}  // namespace

TEST_CASE("cse merges identical pure ops, also from enclosing blocks", "[ir][passes][cse]") {
  auto f = parseOne(R"(kernel @k(%p: ptr<i32, global>, %a: i32, %b: i32) {
    %0 = add(%a, %b) : i32
    %1 = add(%a, %b) : i32
    %2 = add(%b, %a) : i32
    store(%p, %0)
    store(%p, %1)
    store(%p, %2)
    %3 = for(%a, %b, %a, %a) : i32 {
    ^(%4: i32, %5: i32):
      %6 = add(%a, %b) : i32
      yield(%6)
    }
    store(%p, %3)
    return()
  })");
  std::string out = runPass(createCSEPass(), *f);
  CHECK(out ==
        "kernel @k(%p: ptr<i32, global>, %a: i32, %b: i32) {\n"
        "  %0 = add(%a, %b) : i32\n"
        "  %1 = add(%b, %a) : i32\n"  // operand order matters: not the same op
        "  store(%p, %0)\n"
        "  store(%p, %0)\n"
        "  store(%p, %1)\n"
        "  %2 = for(%a, %b, %a, %a) : i32 {\n"
        "  ^(%3: i32, %4: i32):\n"
        "    yield(%0)\n"
        "  }\n"
        "  store(%p, %2)\n"
        "  return()\n"
        "}\n");
}

TEST_CASE("cse keeps loads, allocs and ops that differ in attributes or types", "[ir][passes][cse]") {
  auto f = parseOne(R"(kernel @k(%p: ptr<f32, global>) {
    %0 = load(%p) : f32
    store(%p, %0)
    %1 = load(%p) : f32
    store(%p, %1)
    %2 = alloc() : buffer<shared, 16xf32>
    %3 = alloc() : buffer<shared, 16xf32>
    %4 = constant() {value = 0x0p+0} : f32
    %5 = constant() {value = -0x0p+0} : f32
    %6 = constant() {value = 0} : i32
    %7 = constant() {value = 0} : i64
    %8 = program_id() {axis = 0} : i32
    %9 = program_id() {axis = 1} : i32
    %10 = program_id() {axis = 0} : i32
    return()
  })");
  runPass(createCSEPass(), *f);
  CHECK(countOps(*f, OpCode::Load) == 2);
  CHECK(countOps(*f, OpCode::Alloc) == 2);
  CHECK(countOps(*f, OpCode::Constant) == 4);
  CHECK(countOps(*f, OpCode::ProgramId) == 2);
}

TEST_CASE("dce removes dead chains and pure loops but keeps effects", "[ir][passes][dce]") {
  auto f = parseOne(R"(kernel @k(%p: ptr<f32, global>, %n: i32) {
    %0 = load(%p) : f32
    %1 = exp(%0) : f32
    %2 = mul(%1, %1) : f32
    %3 = constant() {value = 0x1p+0} : f32
    store(%p, %3)
    %4 = constant() {value = 0} : i32
    %5 = for(%4, %n, %n, %3) : f32 {
    ^(%6: i32, %7: f32):
      %8 = add(%7, %7) : f32
      yield(%8)
    }
    %9 = for(%4, %n, %n, %3) : f32 {
    ^(%10: i32, %11: f32):
      %12 = atomic_rmw(%p, %11) {kind = add, order = relaxed, scope = device} : f32
      %13 = sqrt(%11) : f32
      yield(%11)
    }
    return()
  })");
  std::string out = runPass(createDeadCodeEliminationPass(), *f);
  CHECK(out ==
        "kernel @k(%p: ptr<f32, global>, %n: i32) {\n"
        "  %0 = constant() {value = 0x1p+0} : f32\n"
        "  store(%p, %0)\n"
        "  %1 = constant() {value = 0} : i32\n"
        "  %2 = for(%1, %n, %n, %0) : f32 {\n"
        "  ^(%3: i32, %4: f32):\n"
        "    %5 = atomic_rmw(%p, %4) {kind = add, order = relaxed, scope = device} : f32\n"
        "    yield(%4)\n"
        "  }\n"
        "  return()\n"
        "}\n");
}

TEST_CASE("canonicalize folds identities, integer constants and splats", "[ir][passes][canonicalize]") {
  auto f = parseOne(R"(kernel @k(%p: ptr<i8, global>, %q: ptr<f32, global>, %x: i8, %y: f32) {
    %0 = constant() {value = 0} : i8
    %1 = add(%x, %0) : i8
    %2 = constant() {value = 1} : i8
    %3 = mul(%2, %1) : i8
    store(%p, %3)
    %4 = constant() {value = 100} : i8
    %5 = add(%4, %4) : i8
    %6 = sub(%5, %2) : i8
    store(%p, %6)
    %7 = constant() {value = -128} : i8
    %8 = constant() {value = -1} : i8
    %9 = div(%7, %8) : i8
    store(%p, %9)
    %10 = constant() {value = 0x0p+0} : f32
    %11 = add(%y, %10) : f32
    store(%q, %11)
    %12 = constant() {value = -0x0p+0} : f32
    %13 = add(%y, %12) : f32
    store(%q, %13)
    %14 = splat(%y) : tile<4xf32>
    %15 = broadcast(%14) : tile<4xf32>
    %16 = reshape(%15) : tile<4xf32>
    %17 = splat(%12) : tile<4xf32>
    %18 = add(%16, %17) : tile<4xf32>
    %19 = splat(%q) : tile<4xptr<f32, global>>
    store(%19, %18)
    %20 = cmp(%4, %8) {pred = gt} : i1
    %21 = select(%20, %y, %y) : f32
    store(%q, %21)
    return()
  })");
  PassManager pm;
  pm.add(createCanonicalizePass());
  pm.add(createDeadCodeEliminationPass());
  pm.run(*f);
  PrintOptions o;
  o.locations = false;
  CHECK(print(*f, o) ==
        "kernel @k(%p: ptr<i8, global>, %q: ptr<f32, global>, %x: i8, %y: f32) {\n"
        "  store(%p, %x)\n"                       // x+0, 1*x
        "  %0 = constant() {value = -57} : i8\n"  // 100+100 wraps to -56, minus 1
        "  store(%p, %0)\n"
        "  %1 = constant() {value = -128} : i8\n"  // INT_MIN / -1 stays unfolded
        "  %2 = constant() {value = -1} : i8\n"
        "  %3 = div(%1, %2) : i8\n"
        "  store(%p, %3)\n"
        "  %4 = constant() {value = 0x0p+0} : f32\n"  // y + 0.0 is not y for y = -0.0
        "  %5 = add(%y, %4) : f32\n"
        "  store(%q, %5)\n"
        "  store(%q, %y)\n"                              // y + -0.0 is y
        "  %6 = splat(%y) : tile<4xf32>\n"               // broadcast, reshape to own type gone,
        "  %7 = splat(%q) : tile<4xptr<f32, global>>\n"  // splat(-0.0) became a constant and the add folded
        "  store(%7, %6)\n"
        "  %8 = constant() {value = 1} : i1\n"  // 100 > -1
        "  %9 = select(%8, %y, %y) : f32\n"
        "  store(%q, %9)\n"
        "  return()\n"
        "}\n");
}

TEST_CASE("the pass manager runs in order, reports, verifies and blames", "[ir][passes]") {
  SECTION("default pipeline order and names") {
    auto f = softmax();
    PassManager pm;
    addDefaultPasses(pm);
    pm.add(createVerifyPass());
    std::vector<std::string> seen;
    pm.setAfterPass([&](const std::string& name, const Function&) { seen.push_back(name); });
    pm.run(*f);
    CHECK(seen == std::vector<std::string>{"canonicalize", "cse", "dce", "verify"});
    CHECK(countOps(*f, OpCode::Store) == 1);
    CHECK(print(*parseModule(print(*f))) == print(*f));
  }
  SECTION("the default pipeline keeps every test kernel valid and printable") {
    for (auto make : {softmax, loopKernel, ifKernel, sharedDotKernel, atomicKernel, dtypeKernel}) {
      auto f = make();
      size_t stores = countOps(*f, OpCode::Store);
      PassManager pm;
      addDefaultPasses(pm);
      REQUIRE_NOTHROW(pm.run(*f));
      CHECK(countOps(*f, OpCode::Store) == stores);
      CHECK(print(*parseModule(print(*f))) == print(*f));
    }
  }
  SECTION("a pass that breaks the IR is an internal error naming it") {
    struct Breaker : Pass {
      const char* name() const override { return "breaker"; }
      void run(Function& f) override { f.body().ops().pop_back(); }  // drops `return`
    };
    auto f = softmax();
    PassManager pm;
    pm.add(std::make_unique<Breaker>());
    CHECK_THROWS_AS(pm.run(*f), InternalError);
    auto g = softmax();
    PassManager pm2;
    pm2.add(std::make_unique<Breaker>());
    CHECK_THROWS_WITH(pm2.run(*g), Catch::Matchers::Contains("after pass 'breaker'"));
  }
  SECTION("malformed input is the user's VerifyError, not a pass bug") {
    auto f = parseOne("kernel @k(%n: i32) {\n  return()\n}\n");
    Builder b;
    b.setInsertionPoint(&f->body(), 0);
    b.unary(OpCode::Exp, f->arg(0));
    PassManager pm;
    addDefaultPasses(pm);
    CHECK_THROWS_AS(pm.run(*f), VerifyError);
  }
}

TEST_CASE("replaced uses reach nested regions", "[ir][passes][canonicalize]") {
  auto f = parseOne(R"(kernel @k(%p: ptr<i32, global>, %a: i32, %c: i1) {
    %0 = constant() {value = 0} : i32
    %1 = add(%a, %0) : i32
    if(%c) {
      store(%p, %1)
      yield()
    } else {
      %2 = sub(%1, %0) : i32
      store(%p, %2)
      yield()
    }
    return()
  })");
  runPass(createCanonicalizePass(), *f);
  runPass(createDeadCodeEliminationPass(), *f);
  PrintOptions o;
  o.locations = false;
  CHECK(print(*f, o) ==
        "kernel @k(%p: ptr<i32, global>, %a: i32, %c: i1) {\n"
        "  if(%c) {\n"
        "    store(%p, %a)\n"
        "    yield()\n"
        "  } else {\n"
        "    store(%p, %a)\n"
        "    yield()\n"
        "  }\n"
        "  return()\n"
        "}\n");
}
