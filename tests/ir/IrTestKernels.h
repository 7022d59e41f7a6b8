// Kernels built with the Builder, and helpers, shared by the tests of the
// ir/ folder.
#pragma once

#include <limits>
#include <memory>
#include <string>

#include "tessera/ir/Builder.h"
#include "tessera/ir/IR.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

namespace tessera::ir::testk {

/// Removes the op at position `i` of `b` (tests that break a schedule).
inline void eraseOp(Block& b, size_t i) { b.ops().erase(b.ops().begin() + static_cast<std::ptrdiff_t>(i)); }

/// The verifier's message for `f`, or "<accepted>".
inline std::string verifyMessage(const Function& f) {
  try {
    verify(f);
  } catch (const VerifyError& e) {
    return e.what();
  }
  return "<accepted>";
}

inline Location loc(uint32_t line, uint32_t col = 5) { return Location{"kern.cpp", line, col}; }
inline Type f32() { return Type::scalar(DType::F32); }
inline Type i32() { return Type::scalar(DType::I32); }
inline Type gptr(DType d) { return Type::ptr(d, MemSpace::Global); }
inline Type tileOf(DType d, Shape s) { return Type::tile(Type::scalar(d), std::move(s)); }

/// Row softmax: one program per row of `cols` <= 128 elements.
inline std::unique_ptr<Function> softmax() {
  auto f = std::make_unique<Function>("softmax", loc(1, 1));
  Value* out = f->addArgument(gptr(DType::F32), "out");
  Value* in = f->addArgument(gptr(DType::F32), "in");
  f->argAttrs().back()["divisibility"] = int64_t{16};
  Value* cols = f->addArgument(i32(), "cols");
  Builder b(&f->body());
  b.setLoc(loc(2));
  Value* row = b.programId(0);
  Value* offs = b.arange(0, 128);
  Value* mask = b.cmp("lt", offs, b.splat(cols, {128}));
  Value* base = b.binary(OpCode::Mul, row, cols);
  b.setLoc(loc(3));
  Value* inRow = b.ptrAdd(in, base);
  Value* ptrs = b.ptrAdd(b.splat(inRow, {128}), offs);
  Value* ninf = b.constant(tileOf(DType::F32, {128}), -std::numeric_limits<double>::infinity());
  Value* x = b.load(ptrs, mask, ninf);
  b.setLoc(loc(4));
  Value* m = b.reduce("max", x, 0);
  Value* e = b.unary(OpCode::Exp, b.binary(OpCode::Sub, x, b.splat(m, {128})));
  Value* s = b.reduce("sum", e, 0);
  Value* y = b.binary(OpCode::Div, e, b.splat(s, {128}));
  b.setLoc(loc(5));
  Value* optrs = b.ptrAdd(b.splat(b.ptrAdd(out, base), {128}), offs);
  b.store(optrs, y, mask);
  b.ret();
  return f;
}

/// A loop carrying a tile and a scalar, with a 2-D broadcast inside.
inline std::unique_ptr<Function> loopKernel() {
  auto f = std::make_unique<Function>("loop", loc(10, 1));
  Value* p = f->addArgument(gptr(DType::F32), "p");
  Value* n = f->addArgument(i32(), "n");
  Builder b(&f->body());
  b.setLoc(loc(11));
  Value* zero = b.constant(i32(), int64_t{0});
  Value* one = b.constant(i32(), int64_t{1});
  Value* acc0 = b.constant(tileOf(DType::F32, {16}), 0.0);
  Value* cnt0 = b.constant(f32(), 0.5);
  auto res = b.forLoop(zero, n, one, {acc0, cnt0}, [&](Builder& ib, Value* iv, std::vector<Value*> c) {
    ib.setLoc(loc(12));
    Value* offs = ib.binary(OpCode::Add, ib.arange(0, 16),
                            ib.splat(ib.binary(OpCode::Mul, iv, ib.constant(i32(), int64_t{16})), {16}));
    Value* v = ib.load(ib.ptrAdd(ib.splat(p, {16}), offs));
    Value* e2 = ib.expandDims(v, 0);        // 1x16
    Value* bc = ib.broadcast(e2, {4, 16});  // 4x16
    Value* tr = ib.transpose(bc, {1, 0});   // 16x4
    Value* rs = ib.reshape(tr, {64});
    Value* r = ib.reduce("sum", ib.reshape(rs, {16, 4}), 1);  // 16
    return std::vector<Value*>{ib.binary(OpCode::Add, c[0], r), ib.binary(OpCode::Add, c[1], ib.constant(f32(), 1.0))};
  });
  b.setLoc(loc(13));
  b.store(b.ptrAdd(b.splat(p, {16}), b.arange(0, 16)), res[0]);
  b.store(p, res[1]);
  b.ret();
  return f;
}

/// if/else yielding a tile and a scalar; a result-less if too.
inline std::unique_ptr<Function> ifKernel() {
  auto f = std::make_unique<Function>("branch", loc(20, 1));
  Value* p = f->addArgument(gptr(DType::I64), "p");
  Value* k = f->addArgument(Type::scalar(DType::I64), "k");
  Builder b(&f->body());
  b.setLoc(loc(21));
  Value* c = b.cmp("gt", k, b.constant(Type::scalar(DType::I64), int64_t{3}));
  auto r = b.ifElse(
      c, {tileOf(DType::I64, {8}), Type::scalar(DType::I64)},
      [&](Builder& ib) {
        return std::vector<Value*>{ib.splat(k, {8}),
                                   ib.binary(OpCode::Shl, k, ib.constant(Type::scalar(DType::I64), int64_t{2}))};
      },
      [&](Builder& ib) {
        Value* t = ib.cast(ib.arange(0, 8), DType::I64);
        return std::vector<Value*>{t, ib.unary(OpCode::Neg, k)};
      });
  b.ifElse(
      c, {},
      [&](Builder& ib) {
        ib.store(p, r[1]);
        return std::vector<Value*>{};
      },
      [&](Builder&) { return std::vector<Value*>{}; });
  b.store(b.ptrAdd(b.splat(p, {8}), b.arange(0, 8)), r[0]);
  b.ret();
  return f;
}

/// Shared memory: alloc, copy from global, barrier, local_load/store; dot.
inline std::unique_ptr<Function> sharedDotKernel() {
  auto f = std::make_unique<Function>("shared_dot", loc(30, 1));
  Value* a = f->addArgument(gptr(DType::F16), "a");
  Value* c = f->addArgument(gptr(DType::F32), "c");
  Value* q = f->addArgument(gptr(DType::I8), "q");
  Builder b(&f->body());
  b.setLoc(loc(31));
  Value* buf = b.alloc(MemSpace::Shared, DType::F16, {16, 16});
  Value* rows = b.broadcast(
      b.expandDims(b.binary(OpCode::Mul, b.arange(0, 16), b.constant(tileOf(DType::I32, {16}), int64_t{16})), 1),
      {16, 16});
  Value* colsT = b.broadcast(b.expandDims(b.arange(0, 16), 0), {16, 16});
  Value* idx = b.binary(OpCode::Add, rows, colsT);
  Value* ptrs = b.ptrAdd(b.splat(a, {16, 16}), idx);
  Value* m = b.cmp("lt", idx, b.constant(tileOf(DType::I32, {16, 16}), int64_t{200}));
  b.copy(buf, ptrs, m);
  b.barrier();
  Value* t = b.localLoad(buf);
  Value* lb = b.alloc(MemSpace::Local, DType::F16, {16, 16});
  b.localStore(lb, t);
  Value* t2 = b.localLoad(lb);
  Value* acc = b.constant(tileOf(DType::F32, {16, 16}), 0.0);
  Value* d = b.dot(t, t2, acc);
  b.store(b.ptrAdd(b.splat(c, {16, 16}), idx), d);
  Value* qp = b.ptrAdd(b.splat(q, {16, 16}), idx);
  Value* qi = b.load(qp);
  Value* qd = b.dot(qi, qi, b.constant(tileOf(DType::I32, {16, 16}), int64_t{0}));
  b.store(b.ptrAdd(b.splat(c, {16, 16}), idx), b.cast(qd, DType::F32));
  b.ret();
  return f;
}

/// Atomics on global pointers, masked and not.
inline std::unique_ptr<Function> atomicKernel() {
  auto f = std::make_unique<Function>("atomics", loc(40, 1));
  Value* p = f->addArgument(gptr(DType::F32), "sum");
  Value* q = f->addArgument(gptr(DType::I32), "hi");
  Builder b(&f->body());
  b.setLoc(loc(41));
  Value* pid = b.programId(0);
  Value* np = b.numPrograms(2);
  Value* old = b.atomic(AtomicKind::Add, p, b.cast(pid, DType::F32));
  Value* ptrs = b.ptrAdd(b.splat(q, {32}), b.arange(0, 32));
  Value* m = b.cmp("ne", b.arange(0, 32), b.splat(np, {32}));
  b.atomic(AtomicKind::Max, ptrs, b.splat(pid, {32}), m);
  b.atomic(AtomicKind::Add, p, old);
  b.ret();
  return f;
}

/// Every scalar dtype as a constant, every cast between two dtypes, and
/// float attributes that need exact spelling.
inline std::unique_ptr<Function> dtypeKernel() {
  auto f = std::make_unique<Function>("dtypes", Location{});
  Value* out = f->addArgument(gptr(DType::F64), "out");
  Builder b(&f->body());
  std::vector<Value*> consts;
  for (DType d : kAllDTypes) {
    if (isMx(d)) continue;  // host formats: no kernel value has them
    Type t = Type::scalar(d);
    Value* c = isFloat(d) ? b.constant(t, 0.1) : b.constant(t, int64_t{d == DType::I1 ? 1 : -7});
    consts.push_back(c);
    consts.push_back(isFloat(d) ? b.constant(tileOf(d, {2, 2, 2}), -0.0) : b.constant(tileOf(d, {4}), int64_t{0}));
  }
  Value* acc = b.constant(Type::scalar(DType::F64), std::numeric_limits<double>::quiet_NaN());
  for (Value* c : consts) {
    if (c->type().isTile()) continue;
    for (DType to : kAllDTypes) {
      if (isMx(to)) continue;
      Value* k = b.cast(c, to);
      acc = b.binary(OpCode::Add, acc, b.cast(k, DType::F64));
    }
  }
  acc = b.binary(OpCode::Add, acc, b.constant(Type::scalar(DType::F64), std::numeric_limits<double>::infinity()));
  acc = b.binary(OpCode::Add, acc, b.constant(Type::scalar(DType::F64), 5e-324));  // denormal
  acc = b.binary(OpCode::Add, acc, b.constant(Type::scalar(DType::F64), 1.0 / 3.0));
  b.store(out, acc);
  b.ret();
  return f;
}

}  // namespace tessera::ir::testk
