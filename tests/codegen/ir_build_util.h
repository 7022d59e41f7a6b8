// Shorthands for tests that build tile IR by hand with ir::Builder: the
// common types, and kernel arguments with the launch-time alignment fact.
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "tessera/ir/Builder.h"
#include "tessera/ir/IR.h"

namespace irtest {

using tessera::DType;
using tessera::ir::Builder;
using tessera::ir::Function;
using tessera::ir::Location;
using tessera::ir::MemSpace;
using tessera::ir::OpCode;
using tessera::ir::Shape;
using tessera::ir::Type;
using tessera::ir::Value;

inline Type i32() { return Type::scalar(DType::I32); }
inline Type f32() { return Type::scalar(DType::F32); }
inline Type gptr() { return Type::ptr(DType::F32, MemSpace::Global); }
inline Type ftile(Shape s) { return Type::tile(f32(), std::move(s)); }

/// Adds an argument; `div16` marks it {divisibility = 16}, as a launch with
/// 16-byte aligned buffers and sizes that are multiples of 16 specialises.
inline Value* arg(Function& f, Type t, const std::string& name, bool div16) {
  Value* v = f.addArgument(std::move(t), name);
  if (f.argAttrs().size() < f.numArgs()) f.argAttrs().resize(f.numArgs());
  if (div16) f.argAttrs().back()["divisibility"] = int64_t{16};
  return v;
}

/// out[i] = x[i] + y[i] for i < n; `block` elements per program. Ops are
/// located in `file` (line 1 the kernel, 2 the loads, 3 the store);
/// `div16` as for arg().
inline std::unique_ptr<Function> vecAdd(const std::string& file, int64_t block, bool div16) {
  auto L = [&](uint32_t line) { return Location{file, line, 3}; };
  auto f = std::make_unique<Function>("vec_add", L(1));
  Value* out = arg(*f, gptr(), "out", div16);
  Value* x = arg(*f, gptr(), "x", div16);
  Value* y = arg(*f, gptr(), "y", div16);
  Value* n = arg(*f, i32(), "n", div16);
  Builder b(&f->body());
  b.setLoc(L(2));
  Value* pid = b.programId(0);
  Value* start = b.binary(OpCode::Mul, pid, b.constant(i32(), block));
  Value* offs = b.binary(OpCode::Add, b.splat(start, {block}), b.arange(0, block));
  Value* mask = b.cmp("lt", offs, b.splat(n, {block}));
  Value* xv = b.load(b.ptrAdd(b.splat(x, {block}), offs), mask);
  Value* yv = b.load(b.ptrAdd(b.splat(y, {block}), offs), mask);
  b.setLoc(L(3));
  b.store(b.ptrAdd(b.splat(out, {block}), offs), b.binary(OpCode::Add, xv, yv), mask);
  b.ret();
  return f;
}

/// Row softmax, one row of `cols` <= B elements per program: two block
/// reductions (max, sum). Located in `file`, lines 10 and 11.
inline std::unique_ptr<Function> softmax(const std::string& file, int64_t B, bool div16) {
  auto L = [&](uint32_t line) { return Location{file, line, 3}; };
  auto f = std::make_unique<Function>("softmax", L(10));
  Value* out = arg(*f, gptr(), "out", div16);
  Value* in = arg(*f, gptr(), "in", div16);
  Value* cols = arg(*f, i32(), "cols", div16);
  Builder b(&f->body());
  b.setLoc(L(11));
  Value* row = b.programId(0);
  Value* offs = b.arange(0, B);
  Value* mask = b.cmp("lt", offs, b.splat(cols, {B}));
  Value* base = b.binary(OpCode::Mul, row, cols);
  Value* ptrs = b.ptrAdd(b.splat(b.ptrAdd(in, base), {B}), offs);
  Value* x = b.load(ptrs, mask, b.constant(ftile({B}), -std::numeric_limits<double>::infinity()));
  Value* m = b.reduce("max", x, 0);
  Value* e = b.unary(OpCode::Exp, b.binary(OpCode::Sub, x, b.splat(m, {B})));
  Value* s = b.reduce("sum", e, 0);
  Value* y = b.binary(OpCode::Div, e, b.splat(s, {B}));
  b.store(b.ptrAdd(b.splat(b.ptrAdd(out, base), {B}), offs), y, mask);
  b.ret();
  return f;
}

}  // namespace irtest
