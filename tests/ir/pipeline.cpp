// Software pipelining in the tile IR: the new ops (buffer_slot, async copies,
// async_commit, async_wait), the `pipeline` pass, the static proof of the
// schedule (PipelineVerifier) and the shared-memory budget check.
#include <catch2/catch.hpp>

#include <functional>

#include "IrTestKernels.h"
#include "tessera/ir/Parser.h"
#include "tessera/ir/Pass.h"
#include "tessera/ir/Printer.h"
#include "tessera/ir/analysis/ResourceCheck.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

using namespace tessera;
using namespace tessera::ir;
using namespace tessera::ir::testk;

namespace {

Location mm(uint32_t line) { return Location{"mm.cpp", line, 3}; }

/// Sums the 16-element chunks of a[0..n) into out[0..16), one chunk per
/// iteration staged through a shared buffer: the loop as written,
/// `for {stages = S}` over a buffer of `slots` slots.
std::unique_ptr<Function> chunkSum(int64_t S, int64_t slots = -1) {
  if (slots < 0) slots = S;
  auto f = std::make_unique<Function>("chunk_sum", mm(1));
  Value* a = f->addArgument(gptr(DType::F32), "a");
  Value* out = f->addArgument(gptr(DType::F32), "out");
  Value* n = f->addArgument(i32(), "n");
  Builder b(&f->body());
  b.setLoc(mm(3));
  Value* buf = b.alloc(MemSpace::Shared, DType::F32, {slots, 16});
  b.setLoc(mm(4));
  Value* acc0 = b.constant(tileOf(DType::F32, {16}), 0.0);
  Value* lo = b.constant(i32(), int64_t{0});
  Value* step = b.constant(i32(), int64_t{16});
  b.setLoc(mm(5));
  auto r = b.forLoop(lo, n, step, {acc0}, [&](Builder& in, Value* iv, std::vector<Value*> c) {
    in.setLoc(mm(6));
    Value* offs = in.arange(0, 16);
    Value* idx = in.binary(OpCode::Add, in.splat(iv, {16}), offs);
    Value* mask = in.cmp("lt", idx, in.splat(n, {16}));
    Value* ptrs = in.ptrAdd(in.splat(a, {16}), idx);
    in.setLoc(mm(10));
    Value* slot = in.bufferSlot(buf, in.constant(i32(), int64_t{0}));
    in.copy(slot, ptrs, mask);
    in.setLoc(mm(12));
    Value* t = in.localLoad(slot);
    in.setLoc(mm(13));
    return std::vector<Value*>{in.binary(OpCode::Add, c[0], t)};
  });
  f->body().ops().back()->attrs()["stages"] = S;
  b.setLoc(mm(15));
  // One builder call per statement: argument order is unspecified in C++,
  // and the golden below must not depend on the compiler.
  Value* outs = b.splat(out, {16});
  Value* cols = b.arange(0, 16);
  b.store(b.ptrAdd(outs, cols), r[0]);
  b.ret();
  return f;
}

std::unique_ptr<Function> scheduled(int64_t S, int64_t slots = -1) {
  auto f = chunkSum(S, slots);
  createPipelineSchedulePass()->run(*f);
  return f;
}

Op* pipelinedLoop(Function& f) {
  for (auto& op : f.body().ops())
    if (op->code() == OpCode::For && op->hasAttr("pipelined")) return op.get();
  FAIL("no pipelined loop");
  return nullptr;
}

/// The n-th op (0-based) of `code` in `b`.
size_t nth(Block& b, OpCode code, int n = 0) {
  for (size_t i = 0; i < b.ops().size(); ++i)
    if (b.ops()[i]->code() == code && n-- == 0) return i;
  FAIL("op not found");
  return 0;
}

std::string reprint(const std::string& text) { return print(*parseModule(text)->functions.at(0)); }

}  // namespace

TEST_CASE("the pipelining ops verify, print and parse back", "[ir][pipeline]") {
  auto f = std::make_unique<Function>("ops", mm(1));
  Value* a = f->addArgument(gptr(DType::F16), "a");
  Builder b(&f->body());
  b.setLoc(mm(2));
  Value* buf = b.alloc(MemSpace::Shared, DType::F16, {2, 4, 8});
  Value* ptrs = b.splat(a, {4, 8});
  Value* s0 = b.bufferSlot(buf, b.constant(i32(), int64_t{0}));
  Value* s1 = b.bufferSlot(buf, b.constant(i32(), int64_t{1}));
  CHECK(s0->type() == Type::buffer(DType::F16, MemSpace::Shared, {4, 8}));
  b.copyAsync(s0, ptrs);
  b.asyncCommit();
  b.copyAsync(s1, ptrs);
  b.asyncCommit();
  b.asyncWait(1);
  b.barrier();
  Value* t0 = b.localLoad(s0);
  b.asyncWait(0);
  b.barrier();
  Value* t1 = b.localLoad(s1);
  b.store(ptrs, b.binary(OpCode::Add, t0, t1));
  b.ret();
  verify(*f);
  std::string text = print(*f);
  CHECK_THAT(text, Catch::Matchers::Contains("= buffer_slot(%0, %2) : buffer<shared, 4x8xf16>"));
  CHECK_THAT(text, Catch::Matchers::Contains("copy(%3, %1) {async = 1}"));
  CHECK_THAT(text, Catch::Matchers::Contains("async_commit()"));
  CHECK_THAT(text, Catch::Matchers::Contains("async_wait() {pending = 1}"));
  CHECK(reprint(text) == text);
  verify(*parseModule(text)->functions.at(0));

  // The same kernel with the second wait dropped reads slot 1 too early.
  auto& ops = f->body().ops();
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(nth(f->body(), OpCode::AsyncWait, 1)));
  std::string msg = verifyMessage(*f);
  CHECK_THAT(msg, Catch::Matchers::Contains("read-before-wait hazard on buffer %0"));
  CHECK_THAT(msg, Catch::Matchers::Contains("slot 1"));
}

TEST_CASE("loops as written and schedules round-trip through text", "[ir][pipeline]") {
  for (int64_t S : {1, 3}) {
    auto f = chunkSum(S);
    verify(*f);
    std::string text = print(*f);
    CHECK_THAT(text, Catch::Matchers::Contains("{stages = " + std::to_string(S) + "}"));
    CHECK(reprint(text) == text);
    auto g = scheduled(S);
    std::string st = print(*g);
    CHECK_THAT(st, Catch::Matchers::Contains("{pipelined = " + std::to_string(S) + "}"));
    CHECK(reprint(st) == st);
    verify(*parseModule(st)->functions.at(0));
  }
}

TEST_CASE("new-op verifier rules", "[ir][pipeline][verifier]") {
  auto check = [](const std::function<void(Builder&, Value*)>& body, const char* want) {
    Function f("bad", mm(1));
    Value* a = f.addArgument(gptr(DType::F32), "a");
    Builder b(&f.body());
    b.setLoc(mm(7));
    body(b, a);
    b.ret();
    std::string msg = verifyMessage(f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::StartsWith("mm.cpp:7:3: error:"));
    CHECK_THAT(msg, Catch::Matchers::Contains(want));
  };
  check(
      [](Builder& b, Value*) {
        Value* buf = b.alloc(MemSpace::Shared, DType::F32, {2, 4});
        b.bufferSlot(buf, b.constant(i32(), int64_t{2}));
      },
      "slot index 2 is out of range for buffer<shared, 2x4xf32> (2 slots)");
  check(
      [](Builder& b, Value*) {
        Value* buf = b.alloc(MemSpace::Shared, DType::F32, {4});
        b.create(OpCode::BufferSlot, {buf, b.constant(i32(), int64_t{0})},
                 {Type::buffer(DType::F32, MemSpace::Shared, {1})});
      },
      "must be a buffer of rank >= 2");
  check(
      [](Builder& b, Value* a) {
        Value* buf = b.alloc(MemSpace::Local, DType::F32, {4});
        b.copyAsync(buf, b.splat(a, {4}));
      },
      "an async copy needs a shared destination");
  check([](Builder& b, Value*) { b.create(OpCode::AsyncWait, {}, {}, {{"pending", int64_t{-1}}}); },
        "'pending' must be >= 0");
  check([](Builder& b, Value*) { b.create(OpCode::AsyncWait, {}, {}); }, "needs an integer attribute 'pending'");
  check(
      [](Builder& b, Value* a) {
        Value* c = b.constant(i32(), int64_t{0});
        b.forLoop(c, c, c, {}, [](Builder&, Value*, std::vector<Value*>) { return std::vector<Value*>{}; });
        b.block()->ops().back()->attrs()["stages"] = int64_t{0};
      },
      "attribute 'stages' must be 1..32, got 0");
  check(
      [](Builder& b, Value* a) {
        Value* c = b.constant(i32(), int64_t{0});
        b.forLoop(c, c, c, {}, [](Builder&, Value*, std::vector<Value*>) { return std::vector<Value*>{}; });
        b.block()->ops().back()->attrs()["pipelined"] = int64_t{2048};  // was ~30 s in the schedule proof
      },
      "attribute 'pipelined' must be 1..32, got 2048");
  check(
      [](Builder& b, Value* a) {
        Value* buf = b.alloc(MemSpace::Shared, DType::F32, {4});
        b.copyAsync(buf, b.splat(a, {4}));
        b.asyncCommit();
      },
      "is never waited for before the kernel returns");
}

TEST_CASE("the pipeline pass emits the explicit schedule (S = 3 golden)", "[ir][pipeline][passes]") {
  auto f = scheduled(3);
  const char* golden =
      "kernel @chunk_sum(%a: ptr<f32, global>, %out: ptr<f32, global>, %n: i32) {\n"
      "  %0 = alloc() : buffer<shared, 3x16xf32>\n"
      "  %1 = constant() {value = 0x0p+0} : tile<16xf32>\n"
      "  %2 = constant() {value = 0} : i32\n"
      "  %3 = constant() {value = 16} : i32\n"
      "  %4 = constant() {value = 0} : i32\n"
      "  %5 = sub(%n, %2) : i32\n"
      "  %6 = constant() {value = 1} : i32\n"
      "  %7 = sub(%3, %6) : i32\n"
      "  %8 = add(%5, %7) : i32\n"
      "  %9 = div(%8, %3) : i32\n"
      "  %10 = max(%9, %4) : i32\n"
      "  %11 = cmp(%3, %4) {pred = gt} : i1\n"
      "  %12 = select(%11, %10, %4) : i32\n"
      "  %13 = constant() {stage = 0, value = 0} : i32\n"
      "  %14 = splat(%a) {stage = 0} : tile<16xptr<f32, global>>\n"
      "  %15 = splat(%2) {stage = 0} : tile<16xi32>\n"
      "  %16 = arange() {end = 16, stage = 0, start = 0} : tile<16xi32>\n"
      "  %17 = add(%15, %16) {stage = 0} : tile<16xi32>\n"
      "  %18 = ptr_add(%14, %17) {stage = 0} : tile<16xptr<f32, global>>\n"
      "  %19 = splat(%n) {stage = 0} : tile<16xi32>\n"
      "  %20 = cmp(%17, %19) {pred = lt, stage = 0} : tile<16xi1>\n"
      "  %21 = buffer_slot(%0, %13) {stage = 0} : buffer<shared, 16xf32>\n"
      "  copy(%21, %18, %20) {async = 1, stage = 0}\n"
      "  async_commit() {stage = 0}\n"
      "  %22 = constant() {stage = 1, value = 1} : i32\n"
      "  %23 = mul(%22, %3) {stage = 1} : i32\n"
      "  %24 = add(%2, %23) {stage = 1} : i32\n"
      "  %25 = splat(%a) {stage = 1} : tile<16xptr<f32, global>>\n"
      "  %26 = splat(%24) {stage = 1} : tile<16xi32>\n"
      "  %27 = arange() {end = 16, stage = 1, start = 0} : tile<16xi32>\n"
      "  %28 = add(%26, %27) {stage = 1} : tile<16xi32>\n"
      "  %29 = ptr_add(%25, %28) {stage = 1} : tile<16xptr<f32, global>>\n"
      "  %30 = splat(%n) {stage = 1} : tile<16xi32>\n"
      "  %31 = cmp(%28, %30) {pred = lt, stage = 1} : tile<16xi1>\n"
      "  %32 = buffer_slot(%0, %22) {stage = 1} : buffer<shared, 16xf32>\n"
      "  copy(%32, %29, %31) {async = 1, stage = 1}\n"
      "  async_commit() {stage = 1}\n"
      "  %33 = constant() {value = 1} : i32\n"
      "  %34 = for(%4, %12, %33, %1) {pipelined = 3} : tile<16xf32> {\n"
      "  ^(%35: i32, %36: tile<16xf32>):\n"
      "    barrier() {stage = 2}\n"
      "    %37 = constant() {stage = 2, value = 2} : i32\n"
      "    %38 = add(%35, %37) {stage = 2} : i32\n"
      "    %39 = mul(%38, %3) {stage = 2} : i32\n"
      "    %40 = add(%2, %39) {stage = 2} : i32\n"
      "    %41 = constant() {stage = 2, value = 3} : i32\n"
      "    %42 = rem(%38, %41) {stage = 2} : i32\n"
      "    %43 = splat(%a) {stage = 2} : tile<16xptr<f32, global>>\n"
      "    %44 = splat(%40) {stage = 2} : tile<16xi32>\n"
      "    %45 = arange() {end = 16, stage = 2, start = 0} : tile<16xi32>\n"
      "    %46 = add(%44, %45) {stage = 2} : tile<16xi32>\n"
      "    %47 = ptr_add(%43, %46) {stage = 2} : tile<16xptr<f32, global>>\n"
      "    %48 = splat(%n) {stage = 2} : tile<16xi32>\n"
      "    %49 = cmp(%46, %48) {pred = lt, stage = 2} : tile<16xi1>\n"
      "    %50 = buffer_slot(%0, %42) {stage = 2} : buffer<shared, 16xf32>\n"
      "    copy(%50, %47, %49) {async = 1, stage = 2}\n"
      "    async_commit() {stage = 2}\n"
      "    async_wait() {pending = 2, stage = 0}\n"
      "    barrier() {stage = 0}\n"
      "    %51 = constant() {stage = 0, value = 3} : i32\n"
      "    %52 = rem(%35, %51) {stage = 0} : i32\n"
      "    %53 = buffer_slot(%0, %52) {stage = 0} : buffer<shared, 16xf32>\n"
      "    %54 = local_load(%53) {stage = 0} : tile<16xf32>\n"
      "    %55 = add(%36, %54) {stage = 0} : tile<16xf32>\n"
      "    yield(%55)\n"
      "  }\n"
      "  async_wait() {pending = 0}\n"
      "  %56 = splat(%out) : tile<16xptr<f32, global>>\n"
      "  %57 = arange() {end = 16, start = 0} : tile<16xi32>\n"
      "  %58 = ptr_add(%56, %57) : tile<16xptr<f32, global>>\n"
      "  store(%58, %34)\n"
      "  return()\n"
      "}\n";
  CHECK(print(*f, PrintOptions{false}) == golden);
  // Pass-made ops take the loop's location, copies and slots the user's.
  std::string withLocs = print(*f);
  CHECK_THAT(withLocs, Catch::Matchers::Contains("copy(%50, %47, %49) {async = 1, stage = 2} loc(\"mm.cpp\":10:3)"));
  CHECK_THAT(withLocs, Catch::Matchers::Contains("async_wait() {pending = 2, stage = 0} loc(\"mm.cpp\":5:3)"));
}

TEST_CASE("pass output verifies for S = 1, 2, 3, 4, also after the default passes", "[ir][pipeline][passes]") {
  for (int64_t S = 1; S <= 4; ++S) {
    INFO("S = " << S);
    auto f = scheduled(S);
    CHECK_NOTHROW(verify(*f));
    Op* loop = pipelinedLoop(*f);
    CHECK(loop->intAttr("pipelined") == S);
    Block& body = loop->region(0).block();
    // One prefetch copy per iteration, S-1 in the prologue, and the wait
    // leaves S-1 groups in flight.
    int prologueCopies = 0;
    for (auto& op : f->body().ops()) prologueCopies += op->code() == OpCode::Copy;
    CHECK(prologueCopies == S - 1);
    CHECK(body.ops()[nth(body, OpCode::AsyncWait)]->intAttr("pending") == S - 1);
    CHECK(body.ops()[nth(body, OpCode::Copy)]->intAttr("stage") == S - 1);
    CHECK(f->body().ops()[nth(f->body(), OpCode::AsyncWait)]->intAttr("pending") == 0);

    auto g = chunkSum(S);
    PassManager pm;
    pm.add(createPipelineSchedulePass());
    addDefaultPasses(pm);
    CHECK_NOTHROW(pm.run(*g));
    CHECK_NOTHROW(verify(*g));
  }
}

TEST_CASE("illegal schedules are rejected naming the buffer and both ops", "[ir][pipeline][verifier]") {
  SECTION("missing write-after-read barrier") {
    for (int64_t S : {1, 3}) {
      auto f = scheduled(S);
      Block& body = pipelinedLoop(*f)->region(0).block();
      eraseOp(body, nth(body, OpCode::Barrier, 0));
      std::string msg = verifyMessage(*f);
      INFO(msg);
      CHECK_THAT(msg, Catch::Matchers::StartsWith("mm.cpp:10:3: error: pipelined loop: write-after-read hazard on "
                                                  "buffer %0 (allocated at mm.cpp:3:3) slot "));
      CHECK_THAT(msg, Catch::Matchers::Contains(S == 3 ? "slot (i+2) mod 3" : "slot 0"));
      CHECK_THAT(msg, Catch::Matchers::Contains("'copy' at mm.cpp:10:3 may overwrite data 'local_load' at "
                                                "mm.cpp:12:3 still reads; insert a barrier"));
    }
  }
  SECTION("missing barrier after the wait") {
    auto f = scheduled(3);
    Block& body = pipelinedLoop(*f)->region(0).block();
    eraseOp(body, nth(body, OpCode::Barrier, 1));
    std::string msg = verifyMessage(*f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::StartsWith("mm.cpp:12:3: error: pipelined loop: read-before-barrier hazard on "
                                                "buffer %0"));
    CHECK_THAT(msg, Catch::Matchers::Contains("'local_load' at mm.cpp:12:3 reads data that 'copy' at mm.cpp:10:3"));
  }
  SECTION("wait with too large a pending count") {
    auto f = scheduled(3);
    Block& body = pipelinedLoop(*f)->region(0).block();
    body.ops()[nth(body, OpCode::AsyncWait)]->attrs()["pending"] = int64_t{3};
    std::string msg = verifyMessage(*f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::StartsWith("mm.cpp:12:3: error: pipelined loop: read-before-wait hazard on "
                                                "buffer %0"));
    CHECK_THAT(msg, Catch::Matchers::Contains("slot (i) mod 3: 'local_load' at mm.cpp:12:3 reads data that 'copy' "
                                              "at mm.cpp:10:3 (iteration i) may still be copying"));
  }
  SECTION("wrong slot index") {
    auto f = scheduled(3);
    Block& body = pipelinedLoop(*f)->region(0).block();
    // The prefetch (iteration i+2) writes slot i mod 3: the slot being read.
    Op* view = body.ops()[nth(body, OpCode::BufferSlot, 0)].get();
    Op* computeSlot = body.ops()[nth(body, OpCode::Rem, 1)].get();
    view->setOperand(1, computeSlot->result());
    // Move the compute slot index before its new use.
    auto& ops = body.ops();
    size_t from = nth(body, OpCode::Rem, 1), cst = from - 1;
    auto remOp = std::move(ops[from]);
    auto cOp = std::move(ops[cst]);
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(cst), ops.begin() + static_cast<std::ptrdiff_t>(from + 1));
    ops.insert(ops.begin() + 1, std::move(remOp));
    ops.insert(ops.begin() + 1, std::move(cOp));
    std::string msg = verifyMessage(*f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::StartsWith("mm.cpp:10:3: error: pipelined loop: wrong slot on buffer %0"));
    CHECK_THAT(msg, Catch::Matchers::Contains("'copy' at mm.cpp:10:3 copies iteration i+2 into slot (i) mod 3 "
                                              "computed by 'buffer_slot' at mm.cpp:10:3, but that iteration's slot "
                                              "is (i+2) mod 3"));
  }
  SECTION("stage count lowered without adding buffers") {
    // A 3-stage schedule over a buffer with 2 slots (slot = iteration mod 2).
    auto f = scheduled(3);
    f->body().ops()[0]->result()->setType(Type::buffer(DType::F32, MemSpace::Shared, {2, 16}));
    Block& body = pipelinedLoop(*f)->region(0).block();
    for (auto& op : body.ops())
      if (op->code() == OpCode::Constant && op->intAttr("value") == 3) op->attrs()["value"] = int64_t{2};
    std::string msg = verifyMessage(*f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::StartsWith("mm.cpp:10:3: error: pipelined loop: write-after-write hazard on "
                                                "buffer %0"));
    CHECK_THAT(msg, Catch::Matchers::Contains("'copy' at mm.cpp:10:3 (iteration i+2) may overwrite the slot while "
                                              "'copy' at mm.cpp:10:3 (iteration i) is still in flight and before "
                                              "'local_load' at mm.cpp:12:3 reads its data"));
    CHECK_THAT(msg, Catch::Matchers::Contains("the buffer has 2 slots but the loop keeps 3 stages in flight"));
  }
  SECTION("copies in flight at the loop exit") {
    auto f = scheduled(2);
    eraseOp(f->body(), nth(f->body(), OpCode::AsyncWait));
    std::string msg = verifyMessage(*f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::StartsWith("mm.cpp:5:3: error: pipelined loop: async copies ('copy' at "
                                                "mm.cpp:10:3) may still be in flight when the loop exits"));
  }
  SECTION("a group that is never waited for") {
    auto f = scheduled(2);
    Block& body = pipelinedLoop(*f)->region(0).block();
    // No wait at all: reads see in-flight data at once.
    eraseOp(body, nth(body, OpCode::AsyncWait));
    CHECK_THAT(verifyMessage(*f), Catch::Matchers::Contains("read-before-wait hazard"));
  }
}

TEST_CASE("loops as written must be schedulable", "[ir][pipeline][verifier]") {
  SECTION("staged buffer with the wrong number of slots") {
    auto f = chunkSum(3, 2);
    std::string msg = verifyMessage(*f);
    CHECK_THAT(msg, Catch::Matchers::StartsWith("mm.cpp:10:3: error: pipelined loop: buffer %0 (allocated at "
                                                "mm.cpp:3:3) has 2 slots but the loop keeps 3 stages in flight"));
  }
  SECTION("addresses depending on a carried value") {
    auto f = chunkSum(2);
    Block& body = f->body().ops()[nth(f->body(), OpCode::For)]->region(0).block();
    Op* copy = body.ops()[nth(body, OpCode::Copy)].get();
    // mask := (carried accumulator < 0)
    Builder b;
    b.setInsertionPoint(&body, nth(body, OpCode::Copy));
    b.setLoc(mm(9));
    Value* m = b.cmp("lt", body.arg(1), b.constant(tileOf(DType::F32, {16}), 0.0));
    copy->setOperand(2, m);
    CHECK_THAT(verifyMessage(*f), Catch::Matchers::Contains("cannot depend on a loop-carried value"));
  }
  SECTION("staged slot written by something else") {
    auto f = chunkSum(2);
    Block& body = f->body().ops()[nth(f->body(), OpCode::For)]->region(0).block();
    Op* load = body.ops()[nth(body, OpCode::LocalLoad)].get();
    Builder b;
    b.setInsertionPoint(&body, nth(body, OpCode::LocalLoad) + 1);
    b.setLoc(mm(14));
    b.localStore(load->operand(0), load->result());
    CHECK_THAT(verifyMessage(*f), Catch::Matchers::StartsWith("mm.cpp:14:3: error: pipelined loop: the staged slot "
                                                              "written by 'copy' at mm.cpp:10:3 may only be read"));
  }
  SECTION("pass refuses nothing it accepted") {
    auto f = chunkSum(2);
    CHECK_NOTHROW(createPipelineSchedulePass()->run(*f));
  }
}

TEST_CASE("shared-memory budget check names buffers and suggests a fix", "[ir][pipeline][resources]") {
  auto kernel = [](int64_t S, int64_t bm, int64_t bk) {
    auto f = std::make_unique<Function>("gemm", mm(1));
    Builder b(&f->body());
    b.setLoc(mm(20));
    Value* sa = b.alloc(MemSpace::Shared, DType::F16, {S, bm, bk});
    b.setLoc(mm(21));
    Value* sb = b.alloc(MemSpace::Shared, DType::F16, {S, bk, bm});
    Value* c = b.constant(i32(), int64_t{0});
    b.setLoc(mm(22));
    b.forLoop(c, c, b.constant(i32(), int64_t{1}), {}, [&](Builder& in, Value*, std::vector<Value*>) {
      in.localLoad(in.bufferSlot(sa, in.constant(i32(), int64_t{0})));
      in.localLoad(in.bufferSlot(sb, in.constant(i32(), int64_t{0})));
      return std::vector<Value*>{};
    });
    f->body().ops().back()->attrs()["stages"] = S;
    b.ret();
    return f;
  };
  // 4 x 128x64 x f16 = 64 KiB per buffer, 128 KiB in total.
  auto f = kernel(4, 128, 64);
  CHECK(sharedMemoryBytes(*f) == 2 * 4 * 128 * 64 * 2);
  REQUIRE(sharedMemoryLimit("sm_90a"));
  CHECK_NOTHROW(checkSharedMemory(*f, *sharedMemoryLimit("sm_90a"), "sm_90a"));
  CHECK_FALSE(sharedMemoryLimit("sm_90"));  // not a target: sm_90a is
  try {
    checkSharedMemory(*f, *sharedMemoryLimit("sm_86"), "sm_86");
    FAIL("accepted");
  } catch (const ResourceError& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::StartsWith("mm.cpp:1:3: error: kernel @gemm needs 128 KiB (131072 bytes) of "
                                                "shared memory per program but sm_86 allows 99 KiB (101376 bytes)"));
    CHECK_THAT(msg, Catch::Matchers::Contains("%0: 4x128x64 x f16 = 65536 bytes (64 KiB), 4 pipeline slots, "
                                              "allocated at mm.cpp:20:3"));
    CHECK_THAT(msg, Catch::Matchers::Contains("%1: 4x64x128 x f16 = 65536 bytes (64 KiB), 4 pipeline slots, "
                                              "allocated at mm.cpp:21:3"));
    CHECK_THAT(msg,
               Catch::Matchers::Contains("suggestion: with stages = 3 instead of 4 the shared buffers take 96 KiB"));
  }
  // On 64 KiB targets even 2 stages (64 KiB) fit; 1 stage of 128x256 tiles does not: halve tiles.
  try {
    checkSharedMemory(*kernel(4, 128, 64), *sharedMemoryLimit("gfx942"), "gfx942");
    FAIL("accepted");
  } catch (const ResourceError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("with stages = 2 instead of 4 the shared buffers take 64 KiB"));
  }
  try {
    checkSharedMemory(*kernel(1, 128, 256), *sharedMemoryLimit("gfx1100"), "gfx1100");
    FAIL("accepted");
  } catch (const ResourceError& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::Contains("total 128 KiB > limit 64 KiB on gfx1100; suggestion: halve the tile "
                                              "sizes that shape the largest buffers, e.g. %0 1x128x256 -> 1x128x128, "
                                              "%1 1x256x128 -> 1x256x64 (64 KiB in total)"));
  }
  CHECK(sharedMemoryLimit("sm_80") == 163 * 1024);
  CHECK(sharedMemoryLimit("sm_89") == 99 * 1024);
  CHECK(sharedMemoryLimit("gfx90a") == 64 * 1024);
  CHECK_FALSE(sharedMemoryLimit("sm_52").has_value());
}

namespace {

/// chunk_sum per row r of `rows` rows, the pipelined loop nested in a plain
/// loop over the rows and a branch (rows with r < limit only): the loop as
/// written.
const char* kNestedText =
    "kernel @row_sums(%a: ptr<f32, global>, %out: ptr<f32, global>, %n: i32, %rows: i32, %limit: i32) {\n"
    "  %0 = alloc() : buffer<shared, 3x16xf32> loc(\"nest.cpp\":3:3)\n"
    "  %1 = constant() {value = 0.0} : tile<16xf32>\n"
    "  %2 = constant() {value = 0} : i32\n"
    "  %3 = constant() {value = 16} : i32\n"
    "  %4 = constant() {value = 1} : i32\n"
    "  for(%2, %rows, %4) loc(\"nest.cpp\":2:3) {\n"
    "  ^(%r: i32):\n"
    "    %5 = cmp(%r, %limit) {pred = lt} : i1\n"
    "    if(%5) loc(\"nest.cpp\":4:3) {\n"
    "      %6 = mul(%r, %n) : i32\n"
    "      %7 = for(%2, %n, %3, %1) {stages = 3} : tile<16xf32> loc(\"nest.cpp\":5:3) {\n"
    "      ^(%iv: i32, %c: tile<16xf32>):\n"
    "        %8 = arange() {end = 16, start = 0} : tile<16xi32>\n"
    "        %9 = splat(%iv) : tile<16xi32>\n"
    "        %10 = add(%9, %8) : tile<16xi32>\n"
    "        %11 = splat(%n) : tile<16xi32>\n"
    "        %12 = cmp(%10, %11) {pred = lt} : tile<16xi1>\n"
    "        %13 = splat(%6) : tile<16xi32>\n"
    "        %14 = add(%13, %10) : tile<16xi32>\n"
    "        %15 = splat(%a) : tile<16xptr<f32, global>>\n"
    "        %16 = ptr_add(%15, %14) : tile<16xptr<f32, global>>\n"
    "        %17 = constant() {value = 0} : i32\n"
    "        %18 = buffer_slot(%0, %17) : buffer<shared, 16xf32>\n"
    "        copy(%18, %16, %12) loc(\"nest.cpp\":10:3)\n"
    "        %19 = local_load(%18) : tile<16xf32> loc(\"nest.cpp\":12:3)\n"
    "        %20 = add(%c, %19) : tile<16xf32>\n"
    "        yield(%20)\n"
    "      }\n"
    "      %21 = mul(%r, %3) : i32\n"
    "      %22 = splat(%21) : tile<16xi32>\n"
    "      %23 = arange() {end = 16, start = 0} : tile<16xi32>\n"
    "      %24 = add(%22, %23) : tile<16xi32>\n"
    "      %25 = splat(%out) : tile<16xptr<f32, global>>\n"
    "      %26 = ptr_add(%25, %24) : tile<16xptr<f32, global>>\n"
    "      store(%26, %7)\n"
    "      yield()\n"
    "    } else {\n"
    "      yield()\n"
    "    }\n"
    "    yield()\n"
    "  }\n"
    "  return()\n"
    "}\n";

std::unique_ptr<Function> nestedScheduled() {
  auto f = std::move(parseModule(kNestedText, "nest.tir")->functions.at(0));
  createPipelineSchedulePass()->run(*f);
  return f;
}

/// The block holding the nested pipelined loop.
Block& nestedBlock(Function& f) {
  Block* found = nullptr;
  walk(f.body(), [&](Op& op) {
    if (op.code() == OpCode::For && op.hasAttr("pipelined")) found = op.parent();
  });
  REQUIRE(found != nullptr);
  return *found;
}

}  // namespace

TEST_CASE("a pipelined loop nested in a loop and a branch is scheduled in its block and proved",
          "[ir][pipeline][nested]") {
  auto f = nestedScheduled();
  REQUIRE(verifyMessage(*f) == "<accepted>");
  Block& b = nestedBlock(*f);
  // barrier (the previous row's last reads), prologue of 2 copies, the loop,
  // the drain, in the branch's block.
  CHECK(b.ops()[nth(b, OpCode::Barrier)]->code() == OpCode::Barrier);
  CHECK(nth(b, OpCode::Barrier) < nth(b, OpCode::Copy));
  CHECK(nth(b, OpCode::AsyncCommit, 1) < nth(b, OpCode::For));
  CHECK(b.ops()[nth(b, OpCode::For) + 1]->code() == OpCode::AsyncWait);
  // The text round-trips.
  const std::string text = print(*f);
  CHECK(print(*parseModule(text, "nest.tir")->functions.at(0)) == text);
}

TEST_CASE("wrong nested pipelines are rejected", "[ir][pipeline][nested][verifier]") {
  SECTION("no barrier before the prologue: the previous row's reads race the refill") {
    auto f = nestedScheduled();
    Block& b = nestedBlock(*f);
    eraseOp(b, nth(b, OpCode::Barrier));
    std::string msg = verifyMessage(*f);
    INFO(msg);
    // One row's last read meets the next row's prologue copy: the hazard
    // crosses an iteration of the outer loop, and the message says so.
    CHECK_THAT(msg, Catch::Matchers::StartsWith("nest.cpp:10:3: error: iteration leak: one iteration of 'for' at "
                                                "nest.cpp:2:3 leaves buffer %0 (allocated at nest.cpp:3:3) slot"));
    CHECK_THAT(msg, Catch::Matchers::Contains("read by 'local_load' at nest.cpp:12:3 with no barrier after it; the "
                                              "next iteration's 'copy' at nest.cpp:10:3 may overwrite the slot"));
  }
  SECTION("copies still in flight where the branch ends") {
    auto f = nestedScheduled();
    Block& b = nestedBlock(*f);
    eraseOp(b, nth(b, OpCode::For) + 1);  // the drain
    std::string msg = verifyMessage(*f);
    INFO(msg);
    CHECK_THAT(msg, Catch::Matchers::Contains("may still be in flight when the loop exits; follow the loop with "
                                              "async_wait {pending = 0}"));
  }
  SECTION("a pipelined loop inside a pipelined loop") {
    std::string text = kNestedText;
    const std::string outer = "  for(%2, %rows, %4) loc(";
    text.replace(text.find(outer), outer.size(), "  for(%2, %rows, %4) {stages = 2} loc(");
    auto f = std::move(parseModule(text, "nest.tir")->functions.at(0));
    CHECK_THAT(verifyMessage(*f), Catch::Matchers::Contains("pipelined loop: cannot be nested in the pipelined loop at "
                                                            "nest.cpp:2:3"));
  }
}

TEST_CASE("a copy masked by the loop's own bound needs no guard of its own", "[ir][pipeline][passes]") {
  // The nested kernel's copy is masked by iv + arange(16) < n, n the loop's
  // upper bound: past the last iteration every lane is off already. Masked
  // by another bound (rows), the schedule adds the iteration guard k < n.
  for (bool ownBound : {true, false}) {
    INFO((ownBound ? "iv + r < n" : "iv + r < rows"));
    std::string text = kNestedText;
    if (!ownBound) {
      const std::string bound = "        %11 = splat(%n) : tile<16xi32>\n";
      text.replace(text.find(bound), bound.size(), "        %11 = splat(%rows) : tile<16xi32>\n");
    }
    auto f = std::move(parseModule(text, "nest.tir")->functions.at(0));
    createPipelineSchedulePass()->run(*f);
    REQUIRE(verifyMessage(*f) == "<accepted>");
    int copies = 0;
    walk(f->body(), [&](Op& op) {
      if (op.code() != OpCode::Copy) return;
      ++copies;
      const Op* mask = op.operand(2)->definingOp();
      CHECK(mask->code() == (ownBound ? OpCode::Cmp : OpCode::And));
    });
    CHECK(copies == 3);
  }
}
