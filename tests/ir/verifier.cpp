// Verifier rejections: each malformed kernel must raise VerifyError naming
// the op and the user's location, and well-formed kernels must pass.
#include <catch2/catch.hpp>

#include <functional>

#include "IrTestKernels.h"
#include "tessera/ir/Parser.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

using namespace tessera;
using namespace tessera::ir;
using namespace tessera::ir::testk;

namespace {

// Builds kernel @bad(%p: ptr<f32, global>, %n: i32) with `body` at
// location bad.cpp:7:9 and returns the verifier's message.
std::string rejection(const std::function<void(Builder&, Value* p, Value* n)>& body, bool addReturn = true) {
  Function f("bad", Location{"bad.cpp", 1, 1});
  Value* p = f.addArgument(gptr(DType::F32), "p");
  Value* n = f.addArgument(i32(), "n");
  Builder b(&f.body());
  b.setLoc({"bad.cpp", 7, 9});
  body(b, p, n);
  if (addReturn) b.ret();
  try {
    verify(f);
  } catch (const VerifyError& e) {
    return e.what();
  }
  return "<accepted>";
}

void expectRejected(const std::string& msg, const char* op, const char* detail) {
  INFO(msg);
  CHECK_THAT(msg, Catch::Matchers::StartsWith(std::string("bad.cpp:7:9: error: '") + op + "' "));
  CHECK_THAT(msg, Catch::Matchers::Contains(detail));
  CHECK_THAT(msg, Catch::Matchers::Contains("\n"));  // followed by the op's text
}

}  // namespace

TEST_CASE("the verifier rejects malformed ops, naming op, rule and location", "[ir][verifier]") {
  Type t16 = tileOf(DType::F32, {16});

  SECTION("binary operands of different types") {
    expectRejected(
        rejection([&](Builder& b, Value*, Value* n) { b.create(OpCode::Add, {n, b.constant(f32(), 1.0)}, {i32()}); }),
        "add", "operand types differ: i32 vs f32");
  }
  SECTION("float-only op on integers") {
    expectRejected(rejection([&](Builder& b, Value*, Value* n) { b.unary(OpCode::Exp, n); }), "exp",
                   "needs float operands, got i32");
  }
  SECTION("the new float-only ops on integers") {
    for (OpCode c : {OpCode::Sin, OpCode::Cos, OpCode::Sigmoid, OpCode::Log1p, OpCode::Expm1, OpCode::Round,
                     OpCode::Ceil, OpCode::Trunc}) {
      INFO(opName(c));
      expectRejected(rejection([&](Builder& b, Value*, Value* n) { b.unary(c, n); }), opName(c),
                     "needs float operands, got i32");
    }
  }
  SECTION("bitcast between widths, or of i1") {
    expectRejected(rejection([&](Builder& b, Value*, Value* n) { b.bitcast(n, DType::F64); }), "bitcast",
                   "needs dtypes of the same width: i32 (32 bits) to f64 (64 bits)");
    expectRejected(rejection([&](Builder& b, Value*, Value* n) { b.bitcast(b.cmp("lt", n, n), DType::I8); }), "bitcast",
                   "i1 has no bit layout to reinterpret");
  }
  SECTION("integer-only op on floats") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     Value* c = b.constant(f32(), 1.0);
                     b.binary(OpCode::Shl, c, c);
                   }),
                   "shl", "needs integer operands, got f32");
  }
  SECTION("cmp result must be i1") {
    expectRejected(rejection([&](Builder& b, Value*, Value* n) {
                     b.create(OpCode::Cmp, {n, n}, {i32()}, {{"pred", std::string("lt")}});
                   }),
                   "cmp", "result type i32 should be i1");
  }
  SECTION("cmp with an unknown predicate") {
    expectRejected(rejection([&](Builder& b, Value*, Value* n) { b.cmp("ult", n, n); }), "cmp",
                   "unknown predicate 'ult'");
  }
  SECTION("select condition of the wrong shape") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     Value* x = b.constant(t16, 0.0);
                     Value* c = b.constant(tileOf(DType::I1, {8}), int64_t{1});
                     b.create(OpCode::Select, {c, x, x}, {t16});
                   }),
                   "select", "condition tile<8xi1> must be i1 with the shape of tile<16xf32>");
  }
  SECTION("load mask of the wrong shape") {
    expectRejected(rejection([&](Builder& b, Value* p, Value*) {
                     Value* ptrs = b.ptrAdd(b.splat(p, {16}), b.arange(0, 16));
                     b.load(ptrs, b.constant(tileOf(DType::I1, {32}), int64_t{1}));
                   }),
                   "load", "mask tile<32xi1> must be i1 with the shape of the pointer");
  }
  SECTION("store value not matching the pointee") {
    expectRejected(rejection([&](Builder& b, Value* p, Value* n) { b.store(p, n); }), "store",
                   "value i32 does not match the pointee: expected f32");
  }
  SECTION("atomics need global pointers") {
    Function f("bad", Location{"bad.cpp", 1, 1});
    Value* sp = f.addArgument(Type::ptr(DType::F32, MemSpace::Shared), "s");
    Builder b(&f.body());
    b.setLoc({"bad.cpp", 7, 9});
    b.atomic(AtomicKind::Add, sp, b.constant(f32(), 1.0));
    b.ret();
    try {
      verify(f);
      FAIL("accepted");
    } catch (const VerifyError& e) {
      expectRejected(e.what(), "atomic_rmw", "needs global pointers, got ptr<f32, shared>");
    }
  }
  SECTION("splat must produce a tile of its operand") {
    expectRejected(
        rejection([&](Builder& b, Value*, Value*) { b.create(OpCode::Splat, {b.constant(f32(), 1.0)}, {f32()}); }),
        "splat", "result f32 must be a tile of f32");
  }
  SECTION("broadcast may only stretch size-1 dims") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.broadcast(b.constant(tileOf(DType::F32, {2, 4}), 0.0), {4, 4});
                   }),
                   "broadcast", "dim 0 is neither equal nor 1");
  }
  SECTION("reshape must keep the element count") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) { b.reshape(b.constant(t16, 0.0), {4, 8}); }), "reshape",
                   "element counts differ");
  }
  SECTION("transpose perm must be a permutation") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     Value* x = b.constant(tileOf(DType::F32, {2, 4}), 0.0);
                     b.create(OpCode::Transpose, {x}, {x->type()}, {{"perm", std::vector<int64_t>{0, 0}}});
                   }),
                   "transpose", "perm is not a permutation");
  }
  SECTION("reduce axis out of range and unknown kind") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.create(OpCode::Reduce, {b.constant(t16, 0.0)}, {f32()},
                              {{"kind", std::string("sum")}, {"axis", int64_t{1}}});
                   }),
                   "reduce", "axis 1 is out of range for tile<16xf32>");
    expectRejected(rejection([&](Builder& b, Value*, Value*) { b.reduce("prod", b.constant(t16, 0.0), 0); }), "reduce",
                   "unknown kind 'prod'");
  }
  SECTION("argmax yields i32") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.create(OpCode::Reduce, {b.constant(t16, 0.0)}, {f32()},
                              {{"kind", std::string("argmax")}, {"axis", int64_t{0}}});
                   }),
                   "reduce", "result type f32 should be i32");
  }
  SECTION("argmin yields i32") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.create(OpCode::Reduce, {b.constant(t16, 0.0)}, {f32()},
                              {{"kind", std::string("argmin")}, {"axis", int64_t{0}}});
                   }),
                   "reduce", "result type f32 should be i32");
  }
  SECTION("gather: index shape, dtype and rank") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.gather(b.constant(tileOf(DType::F32, {4, 8}), 0.0),
                              b.constant(tileOf(DType::I32, {3, 2}), int64_t{0}), 1);
                   }),
                   "gather", "index shape 3x2 must equal the source shape 4x8 except along axis 1 (dim 0 differs)");
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.gather(b.constant(tileOf(DType::F32, {4, 8}), 0.0), b.constant(tileOf(DType::F32, {4, 8}), 0.0),
                              0);
                   }),
                   "gather", "index tile<4x8xf32> must be a tile of integers (not i1)");
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.gather(b.constant(tileOf(DType::F32, {4, 8}), 0.0),
                              b.constant(tileOf(DType::I64, {4}), int64_t{0}), 0);
                   }),
                   "gather", "index tile<4xi64> must have the rank of the source tile<4x8xf32>");
  }
  SECTION("join: one type, and no rank above 4") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.join(b.constant(tileOf(DType::F32, {2, 4, 8, 2}), 0.0),
                            b.constant(tileOf(DType::F32, {2, 4, 8, 2}), 0.0));
                   }),
                   "join", "joining tile<2x4x8x2xf32> would give a tile of rank 5, above the maximum of 4");
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.join(b.constant(tileOf(DType::F32, {8}), 0.0), b.constant(tileOf(DType::I32, {8}), int64_t{0}));
                   }),
                   "join", "operand types differ: tile<8xf32>, tile<8xi32>");
  }
  SECTION("split: a last dim of 2") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) { b.split(b.constant(tileOf(DType::F32, {8, 3}), 0.0)); }),
                   "split", "operand tile<8x3xf32> must have rank 2 or more and a last dim of 2");
  }
  SECTION("program_id axis out of range") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) { b.programId(3); }), "program_id",
                   "axis 3 is out of range 0..2");
  }
  SECTION("arange needs end > start") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.create(OpCode::Arange, {}, {tileOf(DType::I32, {1})},
                              {{"start", int64_t{4}}, {"end", int64_t{4}}});
                   }),
                   "arange", "end 4 must be greater than start 4");
  }
  SECTION("tile rank above 4") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) { b.constant(tileOf(DType::F32, {2, 2, 2, 2, 2}), 0.0); }),
                   "constant", "rank must be 1..4");
  }
  SECTION("dot shapes must contract and accumulate in f32") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     Value* a = b.constant(tileOf(DType::F16, {16, 8}), 0.0);
                     b.dot(a, a, b.constant(tileOf(DType::F32, {16, 16}), 0.0));
                   }),
                   "dot", "shapes do not contract: tile<16x8xf16> x tile<16x8xf16>");
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     Value* a = b.constant(tileOf(DType::F16, {16, 16}), 0.0);
                     b.dot(a, a, b.constant(tileOf(DType::F16, {16, 16}), 0.0));
                   }),
                   "dot", "accumulator tile<16x16xf16> must be f32");
  }
  SECTION("copy source must match the buffer") {
    expectRejected(rejection([&](Builder& b, Value* p, Value*) {
                     Value* buf = b.alloc(MemSpace::Shared, DType::F32, {16});
                     b.copy(buf, b.ptrAdd(b.splat(p, {8}), b.arange(0, 8)));
                   }),
                   "copy", "source tile<8xptr<f32, global>> must be tile<16xptr<f32, global>>");
  }
  SECTION("alloc in global memory") {
    expectRejected(rejection([&](Builder& b, Value*, Value*) {
                     b.create(OpCode::Alloc, {}, {Type::buffer(DType::F32, MemSpace::Global, {16})});
                   }),
                   "alloc", "a buffer lives in shared or local memory");
  }
  SECTION("for loop yield type mismatch") {
    expectRejected(rejection([&](Builder& b, Value*, Value* n) {
                     Value* z = b.constant(i32(), int64_t{0});
                     b.forLoop(z, n, b.constant(i32(), int64_t{1}), {b.constant(f32(), 0.0)},
                               [&](Builder&, Value* iv, std::vector<Value*>) { return std::vector<Value*>{iv}; });
                   }),
                   "yield", "operand #0 has type i32 but the enclosing 'for' result #0 is f32");
  }
  SECTION("for bounds of mixed types") {
    expectRejected(rejection([&](Builder& b, Value*, Value* n) {
                     b.forLoop(b.constant(Type::scalar(DType::I64), int64_t{0}), n, n, {},
                               [&](Builder&, Value*, std::vector<Value*>) { return std::vector<Value*>{}; });
                   }),
                   "for", "lo, hi, step must be one integer scalar type, got i64, i32, i32");
  }
  SECTION("if condition must be an i1 scalar") {
    expectRejected(rejection([&](Builder& b, Value*, Value* n) {
                     b.ifElse(
                         n, {}, [](Builder&) { return std::vector<Value*>{}; },
                         [](Builder&) { return std::vector<Value*>{}; });
                   }),
                   "if", "condition i32 must be an i1 scalar");
  }
  SECTION("a value from inside a region does not escape it") {
    expectRejected(rejection([&](Builder& b, Value* p, Value* n) {
                     Value* inner = nullptr;
                     Value* z = b.constant(i32(), int64_t{0});
                     b.forLoop(z, n, z, {}, [&](Builder& ib, Value*, std::vector<Value*>) {
                       inner = ib.constant(f32(), 2.0);
                       return std::vector<Value*>{};
                     });
                     b.store(p, inner);
                   }),
                   "store", "operand #1 (%2) is not defined before this use");
  }
  SECTION("use before definition in the same block") {
    expectRejected(rejection([&](Builder& b, Value*, Value* n) {
                     Value* x = b.binary(OpCode::Add, n, n);
                     Value* y = b.binary(OpCode::Mul, x, x);
                     b.block()->ops()[0]->setOperand(1, y);
                   }),
                   "add", "operand #1 (%1) is not defined before this use");
  }
  SECTION("terminator in the middle of a block, or missing") {
    expectRejected(rejection([&](Builder& b, Value*, Value* n) {
                     b.ret();
                     b.binary(OpCode::Add, n, n);
                   }),
                   "return", "must be the last op of its block");
    expectRejected(rejection(
                       [&](Builder& b, Value*, Value* n) {
                         b.binary(OpCode::Add, n, n);
                         b.yield({});
                       },
                       false),
                   "yield", "cannot appear in the kernel body");
    expectRejected(rejection([&](Builder& b, Value*, Value* n) { b.binary(OpCode::Add, n, n); }, false), "add",
                   "ends a block that must end in 'return'");
  }
  SECTION("wrong operand count") {
    expectRejected(rejection([&](Builder& b, Value*, Value* n) { b.create(OpCode::Neg, {n, n}, {i32()}); }), "neg",
                   "expects 1 operands, got 2");
  }
}

TEST_CASE("unknown locations fall back to the kernel name", "[ir][verifier]") {
  Function f("noloc", Location{});
  Value* n = f.addArgument(i32(), "n");
  Builder b(&f.body());
  b.unary(OpCode::Sqrt, n);
  b.ret();
  try {
    verify(f);
    FAIL("accepted");
  } catch (const VerifyError& e) {
    CHECK_THAT(e.what(),
               Catch::Matchers::StartsWith("noloc: error: 'sqrt' needs float operands, got i32\n%0 = sqrt(%n) : i32"));
  }
  Function g("empty", Location{});
  CHECK_THROWS_WITH(verify(g), Catch::Matchers::Contains("kernel body must end in 'return'"));
}

TEST_CASE("parsed IR goes through the same verifier", "[ir][verifier]") {
  auto m = parseModule(
      "kernel @k(%p: ptr<f32, global>) {\n"
      "  %0 = constant() {value = 1} : i32 loc(\"k.py\":3:4)\n"
      "  store(%p, %0) loc(\"k.py\":4:4)\n"
      "  return()\n"
      "}\n");
  CHECK_THROWS_WITH(verify(*m),
                    Catch::Matchers::StartsWith("k.py:4:4: error: 'store' value i32 does not match the pointee"));
}
