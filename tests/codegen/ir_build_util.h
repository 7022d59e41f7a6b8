// Shorthands for tests that build tile IR by hand with ir::Builder: the
// common types, and kernel arguments with the launch-time alignment fact.
#pragma once

#include <string>
#include <utility>

#include "tessera/ir/IR.h"

namespace irtest {

using tessera::DType;
using tessera::ir::Function;
using tessera::ir::MemSpace;
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

}  // namespace irtest
