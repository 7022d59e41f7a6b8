// Asynchronous dots in the tile IR (IR.h, "Asynchronous dots"): the
// `async-dots` pass's schedule, and the verifier's proof of it: wrong
// protocols (a wait that retires too little, a missing barrier, a result
// used in flight, a dot never retired) are rejected naming the buffer and
// both ops.
#include <catch2/catch.hpp>

#include <string>

#include "IrTestKernels.h"
#include "tessera/ir/Parser.h"
#include "tessera/ir/Pass.h"
#include "tessera/ir/Printer.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

using namespace tessera;
using namespace tessera::ir;
using tessera::ir::testk::eraseOp;
using tessera::ir::testk::verifyMessage;

namespace {

/// C (16 x 16) = A (16 x K) B (K x 16), both operands staged through
/// S-slot shared buffers: the loop as written.
std::string gemmText(int64_t S) {
  const std::string s = std::to_string(S);
  return "kernel @mm(%a: ptr<f16, global>, %b: ptr<f16, global>, %c: ptr<f32, global>, %K: i32) {\n"
         "  %0 = alloc() : buffer<shared, " +
         s +
         "x16x16xf16>\n"
         "  %1 = alloc() : buffer<shared, " +
         s +
         "x16x16xf16>\n"
         "  %2 = constant() {value = 0.0} : tile<16x16xf32>\n"
         "  %3 = constant() {value = 0} : i32\n"
         "  %4 = constant() {value = 16} : i32\n"
         "  %5 = arange() {end = 16, start = 0} : tile<16xi32>\n"
         "  %6 = for(%3, %K, %4, %2) {stages = " +
         s +
         "} : tile<16x16xf32> {\n"
         "  ^(%iv: i32, %acc: tile<16x16xf32>):\n"
         "    %7 = expand_dims(%5) {axis = 1} : tile<16x1xi32>\n"
         "    %8 = splat(%K) : tile<16x1xi32>\n"
         "    %9 = mul(%7, %8) : tile<16x1xi32>\n"
         "    %10 = broadcast(%9) : tile<16x16xi32>\n"
         "    %11 = splat(%iv) : tile<16xi32>\n"
         "    %12 = add(%11, %5) : tile<16xi32>\n"
         "    %13 = expand_dims(%12) {axis = 0} : tile<1x16xi32>\n"
         "    %14 = broadcast(%13) : tile<16x16xi32>\n"
         "    %15 = add(%10, %14) : tile<16x16xi32>\n"
         "    %16 = splat(%a) : tile<16x16xptr<f16, global>>\n"
         "    %17 = ptr_add(%16, %15) : tile<16x16xptr<f16, global>>\n"
         "    %18 = constant() {value = 0} : i32\n"
         "    %19 = buffer_slot(%0, %18) : buffer<shared, 16x16xf16>\n"
         "    copy(%19, %17) loc(\"mm.cpp\":10:3)\n"
         "    %20 = expand_dims(%12) {axis = 1} : tile<16x1xi32>\n"
         "    %21 = constant() {value = 16} : tile<16x1xi32>\n"
         "    %22 = mul(%20, %21) : tile<16x1xi32>\n"
         "    %23 = broadcast(%22) : tile<16x16xi32>\n"
         "    %24 = expand_dims(%5) {axis = 0} : tile<1x16xi32>\n"
         "    %25 = broadcast(%24) : tile<16x16xi32>\n"
         "    %26 = add(%23, %25) : tile<16x16xi32>\n"
         "    %27 = splat(%b) : tile<16x16xptr<f16, global>>\n"
         "    %28 = ptr_add(%27, %26) : tile<16x16xptr<f16, global>>\n"
         "    %29 = buffer_slot(%1, %18) : buffer<shared, 16x16xf16>\n"
         "    copy(%29, %28) loc(\"mm.cpp\":11:3)\n"
         "    %30 = local_load(%19) : tile<16x16xf16> loc(\"mm.cpp\":12:3)\n"
         "    %31 = local_load(%29) : tile<16x16xf16> loc(\"mm.cpp\":13:3)\n"
         "    %32 = dot(%30, %31, %acc) : tile<16x16xf32> loc(\"mm.cpp\":14:3)\n"
         "    yield(%32)\n"
         "  }\n"
         "  %33 = expand_dims(%5) {axis = 1} : tile<16x1xi32>\n"
         "  %34 = constant() {value = 16} : tile<16x1xi32>\n"
         "  %35 = mul(%33, %34) : tile<16x1xi32>\n"
         "  %36 = broadcast(%35) : tile<16x16xi32>\n"
         "  %37 = expand_dims(%5) {axis = 0} : tile<1x16xi32>\n"
         "  %38 = broadcast(%37) : tile<16x16xi32>\n"
         "  %39 = add(%36, %38) : tile<16x16xi32>\n"
         "  %40 = splat(%c) : tile<16x16xptr<f32, global>>\n"
         "  %41 = ptr_add(%40, %39) : tile<16x16xptr<f32, global>>\n"
         "  store(%41, %6) loc(\"mm.cpp\":20:3)\n"
         "  return()\n"
         "}\n";
}

std::unique_ptr<Function> parsed(int64_t S) {
  auto m = parseModule(gemmText(S), "mm.tir");
  return std::move(m->functions.at(0));
}

/// The loop as written, scheduled by `pipeline` then `async-dots`.
std::unique_ptr<Function> asyncScheduled(int64_t S) {
  auto f = parsed(S);
  createPipelineSchedulePass()->run(*f);
  createAsyncDotsPass()->run(*f);
  return f;
}

Op* loopOf(Function& f) {
  for (auto& op : f.body().ops())
    if (op->code() == OpCode::For) return op.get();
  FAIL("no loop");
  return nullptr;
}

size_t indexOf(const Block& b, OpCode c, int nth = 0) {
  for (size_t i = 0; i < b.ops().size(); ++i)
    if (b.ops()[i]->code() == c && nth-- == 0) return i;
  FAIL("op not found");
  return 0;
}

}  // namespace

TEST_CASE("async-dots keeps the dot in flight one iteration and refills its slots after the wait",
          "[ir][pipeline][async-dots]") {
  for (int64_t S : {2, 3, 4}) {
    INFO("S = " << S);
    auto f = asyncScheduled(S);
    REQUIRE(verifyMessage(*f) == "<accepted>");
    Block& body = loopOf(*f)->region(0).block();
    const auto& ops = body.ops();
    // wait (S-2), barrier, ..., dot {async}, dot_wait {1}, barrier, copies, commit, yield.
    CHECK(ops[0]->code() == OpCode::AsyncWait);
    CHECK(ops[0]->intAttr("pending") == S - 2);
    CHECK(ops[1]->code() == OpCode::Barrier);
    const size_t dot = indexOf(body, OpCode::Dot), wait = indexOf(body, OpCode::DotWait);
    CHECK(ops[dot]->intAttr("async") == 1);
    CHECK(ops[wait]->intAttr("pending") == 1);
    CHECK(ops[wait]->numOperands() == 0);
    CHECK(wait > dot);
    CHECK(ops[wait + 1]->code() == OpCode::Barrier);
    CHECK(indexOf(body, OpCode::Copy) > wait);
    CHECK(ops[ops.size() - 2]->code() == OpCode::AsyncCommit);
    // After the loop: the copies' drain, then the accumulator's completion,
    // whose result the store takes.
    Block& top = f->body();
    const size_t done = indexOf(top, OpCode::DotWait);
    CHECK(top.ops()[done - 1]->code() == OpCode::AsyncWait);
    CHECK(top.ops()[done]->intAttr("pending") == 0);
    CHECK(top.ops()[done]->operand(0) == loopOf(*f)->result(0));
    const Op& store = *top.ops()[indexOf(top, OpCode::Store)];
    CHECK(store.operand(1) == top.ops()[done]->result(0));
    // Prints and parses back to the same text.
    const std::string text = print(*f);
    CHECK(print(*parseModule(text, "mm.tir")->functions.at(0)) == text);
  }
}

TEST_CASE("async-dots leaves loops alone where the predicate or the form says no", "[ir][pipeline][async-dots]") {
  SECTION("the target keeps no dot in flight") {
    auto f = parsed(3);
    createPipelineSchedulePass()->run(*f);
    const std::string before = print(*f);
    createAsyncDotsPass([](const Op&) { return false; })->run(*f);
    CHECK(print(*f) == before);
  }
  SECTION("a single stage has nothing to overlap") {
    auto f = parsed(1);
    createPipelineSchedulePass()->run(*f);
    const std::string before = print(*f);
    createAsyncDotsPass()->run(*f);
    CHECK(print(*f) == before);
  }
  SECTION("the accumulator is read by something else in the loop") {
    std::string text = gemmText(3);
    const std::string yield = "    yield(%32)\n";
    text.replace(text.find(yield), yield.size(),
                 "    %90 = add(%32, %acc) : tile<16x16xf32>\n"
                 "    yield(%90)\n");
    auto f = std::move(parseModule(text, "mm.tir")->functions.at(0));
    createPipelineSchedulePass()->run(*f);
    const std::string before = print(*f);
    createAsyncDotsPass()->run(*f);
    CHECK(print(*f) == before);
  }
}

TEST_CASE("wrong async-dot protocols are rejected naming the buffer and both ops",
          "[ir][pipeline][verifier][async-dots]") {
  SECTION("a wait that leaves the previous dot in flight") {
    auto f = asyncScheduled(3);
    Block& body = loopOf(*f)->region(0).block();
    body.ops()[indexOf(body, OpCode::DotWait)]->attrs()["pending"] = int64_t{2};
    std::string msg = verifyMessage(*f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::Contains("error: pipelined loop: write-after-read hazard on buffer %0"));
    CHECK_THAT(msg, Catch::Matchers::Contains("slot (i+2) mod 3: 'copy' at mm.cpp:10:3"));
    CHECK_THAT(msg, Catch::Matchers::Contains("may overwrite data that the async dot 'dot' at mm.cpp:14:3"));
    CHECK_THAT(msg, Catch::Matchers::Contains("may still be reading (its operand 'local_load' at mm.cpp:12:3"));
    CHECK_THAT(msg, Catch::Matchers::Contains("a dot_wait whose 'pending' count retires that dot, then a barrier"));
  }
  SECTION("no wait in the loop") {
    auto f = asyncScheduled(3);
    Block& body = loopOf(*f)->region(0).block();
    eraseOp(body, indexOf(body, OpCode::DotWait));
    CHECK_THAT(verifyMessage(*f),
               Catch::Matchers::Contains("may overwrite data that the async dot 'dot' at mm.cpp:14:3"));
  }
  SECTION("no barrier between the wait and the refill") {
    auto f = asyncScheduled(3);
    Block& body = loopOf(*f)->region(0).block();
    eraseOp(body, indexOf(body, OpCode::DotWait) + 1);
    std::string msg = verifyMessage(*f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::Contains("write-after-read hazard on buffer %0"));
    CHECK_THAT(msg, Catch::Matchers::Contains("still reads; insert a barrier between them"));
  }
  SECTION("the accumulator used while in flight") {
    auto f = asyncScheduled(3);
    Block& top = f->body();
    const size_t done = indexOf(top, OpCode::DotWait);
    Op& store = *top.ops()[indexOf(top, OpCode::Store)];
    store.setOperand(1, loopOf(*f)->result(0));
    std::string msg = verifyMessage(*f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::Contains("error: the result of the async dot 'dot' at mm.cpp:14:3"));
    CHECK_THAT(msg, Catch::Matchers::Contains("is used by 'store' at mm.cpp:20:3"));
    CHECK_THAT(msg, Catch::Matchers::Contains("use the result of a dot_wait {pending = 0} instead"));
    (void)done;
  }
  SECTION("the dot never retired before the kernel returns") {
    auto f = asyncScheduled(2);
    Block& top = f->body();
    const size_t done = indexOf(top, OpCode::DotWait);
    Op& store = *top.ops()[indexOf(top, OpCode::Store)];
    eraseOp(top, indexOf(top, OpCode::Store));
    eraseOp(top, done);
    (void)store;
    std::string msg = verifyMessage(*f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::Contains("error: async dot 'dot' at mm.cpp:14:3"));
    CHECK_THAT(msg,
               Catch::Matchers::Contains("may still be in flight when the kernel returns; add dot_wait {pending = 0}"));
  }
  SECTION("a wait that completes values must retire everything") {
    auto f = asyncScheduled(3);
    Block& top = f->body();
    top.ops()[indexOf(top, OpCode::DotWait)]->attrs()["pending"] = int64_t{1};
    CHECK_THAT(verifyMessage(*f),
               Catch::Matchers::Contains("'dot_wait' completes its operands only with 'pending' = 0, got 1"));
  }
  SECTION("an async dot in a loop as written") {
    std::string text = gemmText(1);
    const std::string dot = "dot(%30, %31, %acc) :";
    text.replace(text.find(dot), dot.size(), "dot(%30, %31, %acc) {async = 1} :");
    auto f = std::move(parseModule(text, "mm.tir")->functions.at(0));
    CHECK_THAT(verifyMessage(*f), Catch::Matchers::Contains("a loop as written ('stages') holds no async operations"));
  }
}
