#include "tessera/ir/Builder.h"

#include "tessera/support/Error.h"

namespace tessera::ir {

Op* Builder::create(OpCode code, std::vector<Value*> operands, std::vector<Type> resultTypes,
                    std::map<std::string, Attr> attrs) {
  TS_ASSERT(block_ != nullptr, "builder has no insertion point");
  for (Value* v : operands) TS_ASSERT(v != nullptr, std::string(opName(code)) + ": null operand");
  auto op = std::make_unique<Op>(code, std::move(operands), resultTypes, std::move(attrs), loc_);
  if (pos_) return block_->insert((*pos_)++, std::move(op));
  return block_->push(std::move(op));
}

Value* Builder::programId(int axis) {
  return create(OpCode::ProgramId, {}, {Type::scalar(DType::I32)}, {{"axis", int64_t{axis}}})->result();
}
Value* Builder::numPrograms(int axis) {
  return create(OpCode::NumPrograms, {}, {Type::scalar(DType::I32)}, {{"axis", int64_t{axis}}})->result();
}
Value* Builder::constant(Type t, double value) {
  return create(OpCode::Constant, {}, {std::move(t)}, {{"value", value}})->result();
}
Value* Builder::constant(Type t, int64_t value) {
  return create(OpCode::Constant, {}, {std::move(t)}, {{"value", value}})->result();
}
Value* Builder::splat(Value* scalar, Shape shape) {
  return create(OpCode::Splat, {scalar}, {Type::tile(scalar->type(), std::move(shape))})->result();
}
Value* Builder::arange(int64_t start, int64_t end) {
  return create(OpCode::Arange, {}, {Type::tile(Type::scalar(DType::I32), {end - start})},
                {{"start", start}, {"end", end}})
      ->result();
}
Value* Builder::broadcast(Value* v, Shape shape) {
  return create(OpCode::Broadcast, {v}, {v->type().withShape(std::move(shape))})->result();
}
Value* Builder::expandDims(Value* v, int axis) {
  Shape s = v->type().shape();
  TS_ASSERT(axis >= 0 && axis <= static_cast<int>(s.size()), "expand_dims axis");
  s.insert(s.begin() + axis, 1);
  return create(OpCode::ExpandDims, {v}, {v->type().withShape(s)}, {{"axis", int64_t{axis}}})->result();
}
Value* Builder::reshape(Value* v, Shape shape) {
  return create(OpCode::Reshape, {v}, {v->type().withShape(std::move(shape))})->result();
}
Value* Builder::transpose(Value* v, std::vector<int64_t> perm) {
  const Shape& s = v->type().shape();
  Shape r;
  for (int64_t p : perm) {
    TS_ASSERT(p >= 0 && p < static_cast<int64_t>(s.size()), "transpose perm");
    r.push_back(s[static_cast<size_t>(p)]);
  }
  return create(OpCode::Transpose, {v}, {v->type().withShape(r)}, {{"perm", std::move(perm)}})->result();
}
Value* Builder::gather(Value* src, Value* index, int axis) {
  TS_ASSERT(axis >= 0 && axis < src->type().rank(), "gather axis");
  return create(OpCode::Gather, {src, index}, {src->type().withShape(index->type().shape())}, {{"axis", int64_t{axis}}})
      ->result();
}
Value* Builder::join(Value* a, Value* b) {
  Shape s = a->type().shape();
  s.push_back(2);
  return create(OpCode::Join, {a, b}, {a->type().withShape(s)})->result();
}
std::pair<Value*, Value*> Builder::split(Value* x) {
  Shape s = x->type().shape();
  TS_ASSERT(!s.empty(), "split of a value that is not a tile");
  s.pop_back();
  Type t = x->type().withShape(s);
  Op* op = create(OpCode::Split, {x}, {t, t});
  return {op->result(0), op->result(1)};
}
Value* Builder::binary(OpCode code, Value* a, Value* b) { return create(code, {a, b}, {a->type()})->result(); }
Value* Builder::unary(OpCode code, Value* a) { return create(code, {a}, {a->type()})->result(); }
Value* Builder::fma(Value* a, Value* b, Value* c) { return create(OpCode::Fma, {a, b, c}, {a->type()})->result(); }
Value* Builder::cmp(const std::string& pred, Value* a, Value* b) {
  return create(OpCode::Cmp, {a, b}, {a->type().withDType(DType::I1)}, {{"pred", pred}})->result();
}
Value* Builder::select(Value* c, Value* a, Value* b) {
  return create(OpCode::Select, {c, a, b}, {a->type()})->result();
}
Value* Builder::cast(Value* v, DType to) { return create(OpCode::Cast, {v}, {v->type().withDType(to)})->result(); }
Value* Builder::bitcast(Value* v, DType to) {
  return create(OpCode::Bitcast, {v}, {v->type().withDType(to)})->result();
}
Value* Builder::ptrAdd(Value* p, Value* offsets) { return create(OpCode::PtrAdd, {p, offsets}, {p->type()})->result(); }
Value* Builder::load(Value* ptr, Value* mask, Value* other) {
  std::vector<Value*> ops{ptr};
  if (mask) ops.push_back(mask);
  if (other) {
    TS_ASSERT(mask != nullptr, "load: `other` needs a mask");
    ops.push_back(other);
  }
  Type t = ptr->type().isTile() ? Type::tile(Type::scalar(ptr->type().dtype()), ptr->type().shape())
                                : Type::scalar(ptr->type().dtype());
  return create(OpCode::Load, std::move(ops), {t})->result();
}
void Builder::store(Value* ptr, Value* value, Value* mask) {
  std::vector<Value*> ops{ptr, value};
  if (mask) ops.push_back(mask);
  create(OpCode::Store, std::move(ops), {});
}
Value* Builder::atomic(AtomicKind kind, Value* ptr, Value* value, Value* mask, MemOrder order, MemScope scope) {
  std::vector<Value*> ops{ptr, value};
  if (mask) ops.push_back(mask);
  return create(OpCode::AtomicRmw, std::move(ops), {value->type()},
                {{"kind", std::string(name(kind))},
                 {"order", std::string(name(order))},
                 {"scope", std::string(name(scope))}})
      ->result();
}
Value* Builder::atomicCas(Value* ptr, Value* cmp, Value* value, Value* mask, MemOrder order, MemScope scope) {
  std::vector<Value*> ops{ptr, cmp, value};
  if (mask) ops.push_back(mask);
  return create(OpCode::AtomicCas, std::move(ops), {value->type()},
                {{"order", std::string(name(order))}, {"scope", std::string(name(scope))}})
      ->result();
}
void Builder::fence(MemOrder order, MemScope scope) {
  create(OpCode::Fence, {}, {}, {{"order", std::string(name(order))}, {"scope", std::string(name(scope))}});
}
Value* Builder::alloc(MemSpace space, DType elem, Shape shape) {
  return create(OpCode::Alloc, {}, {Type::buffer(elem, space, std::move(shape))})->result();
}
Value* Builder::localLoad(Value* buffer) {
  const Type& b = buffer->type();
  return create(OpCode::LocalLoad, {buffer}, {Type::tile(Type::scalar(b.dtype()), b.shape())})->result();
}
void Builder::localStore(Value* buffer, Value* tile) { create(OpCode::LocalStore, {buffer, tile}, {}); }
void Builder::copy(Value* dst, Value* src, Value* mask) {
  std::vector<Value*> ops{dst, src};
  if (mask) ops.push_back(mask);
  create(OpCode::Copy, std::move(ops), {});
}
void Builder::barrier() { create(OpCode::Barrier, {}, {}); }
void Builder::clusterBarrier() { create(OpCode::ClusterBarrier, {}, {}); }
Value* Builder::remoteBuffer(Value* buffer, Value* rank) {
  return create(OpCode::RemoteBuffer, {buffer, rank}, {buffer->type()})->result();
}
Value* Builder::cancelProgram() { return create(OpCode::CancelProgram, {}, {Type::scalar(DType::I32)})->result(); }
Value* Builder::clusterRank() { return create(OpCode::ClusterRank, {}, {Type::scalar(DType::I32)})->result(); }
Value* Builder::clusterSize() { return create(OpCode::ClusterSize, {}, {Type::scalar(DType::I32)})->result(); }
void Builder::assertTrue(Value* cond, const std::string& message) {
  create(OpCode::Assert, {cond}, {}, {{"message", message}});
}
void Builder::probe(const std::string& name, bool end) {
  create(OpCode::Probe, {}, {}, {{"name", name}, {"end", int64_t{end}}});
}
Value* Builder::bufferSlot(Value* buffer, Value* index) {
  const Type& b = buffer->type();
  TS_ASSERT(b.isBuffer() && b.rank() >= 2, "buffer_slot of a non-multi-buffered value");
  Shape s(b.shape().begin() + 1, b.shape().end());
  return create(OpCode::BufferSlot, {buffer, index}, {Type::buffer(b.dtype(), b.space(), s)})->result();
}
Op* Builder::copyAsync(Value* dst, Value* src, Value* mask) {
  std::vector<Value*> ops{dst, src};
  if (mask) ops.push_back(mask);
  return create(OpCode::Copy, std::move(ops), {}, {{"async", int64_t{1}}});
}
Op* Builder::asyncCommit() { return create(OpCode::AsyncCommit, {}, {}); }
Op* Builder::asyncWait(int64_t pending) { return create(OpCode::AsyncWait, {}, {}, {{"pending", pending}}); }
Op* Builder::dotWait(const std::vector<Value*>& values, int64_t pending) {
  std::vector<Type> types;
  for (Value* v : values) types.push_back(v->type());
  return create(OpCode::DotWait, values, types, {{"pending", pending}});
}
Value* Builder::reduce(const std::string& kind, Value* v, int axis) {
  Shape s = v->type().shape();
  TS_ASSERT(axis >= 0 && axis < static_cast<int>(s.size()), "reduce axis");
  s.erase(s.begin() + axis);
  Type t = kind == "argmax" || kind == "argmin" ? Type::scalar(DType::I32) : v->type().element();
  if (!s.empty()) t = Type::tile(t, s);
  return create(OpCode::Reduce, {v}, {t}, {{"kind", kind}, {"axis", int64_t{axis}}})->result();
}
Value* Builder::dot(Value* a, Value* b, Value* acc) {
  return create(OpCode::Dot, {a, b, acc}, {acc->type()})->result();
}

Value* Builder::dotScaled(Value* a, Value* aScale, const std::string& aFormat, Value* b, Value* bScale,
                          const std::string& bFormat, Value* acc, Value* tensorScale) {
  std::vector<Value*> ops{a, aScale, b, bScale, acc};
  if (tensorScale) ops.push_back(tensorScale);
  return create(OpCode::DotScaled, std::move(ops), {acc->type()}, {{"a_format", aFormat}, {"b_format", bFormat}})
      ->result();
}
Value* Builder::scan(Value* v, int axis, const std::function<Value*(Builder&, Value*, Value*)>& combine) {
  TS_ASSERT(axis >= 0 && axis < v->type().rank(), "scan axis");
  Op* op = create(OpCode::Scan, {v}, {v->type()}, {{"axis", int64_t{axis}}});
  Block& b = op->addRegion()->block();
  Value* a = b.addArgument(v->type().element());
  Value* x = b.addArgument(v->type().element());
  Builder inner(&b);
  inner.setLoc(loc_);
  Value* r = combine(inner, a, x);
  inner.setLoc(loc_);
  inner.yield({r});
  return op->result();
}
void Builder::yield(std::vector<Value*> values) { create(OpCode::Yield, std::move(values), {}); }
void Builder::ret() { create(OpCode::Return, {}, {}); }

std::vector<Value*> Builder::forLoop(
    Value* lo, Value* hi, Value* step, std::vector<Value*> inits,
    const std::function<std::vector<Value*>(Builder&, Value*, std::vector<Value*>)>& body) {
  std::vector<Value*> operands{lo, hi, step};
  std::vector<Type> types;
  for (Value* v : inits) {
    operands.push_back(v);
    types.push_back(v->type());
  }
  Op* op = create(OpCode::For, operands, types);
  Block& b = op->addRegion()->block();
  Value* iv = b.addArgument(lo->type());
  std::vector<Value*> carried;
  for (auto& t : types) carried.push_back(b.addArgument(t));
  Builder inner(&b);
  inner.setLoc(loc_);
  auto yielded = body(inner, iv, carried);
  inner.setLoc(loc_);
  inner.yield(std::move(yielded));
  std::vector<Value*> results;
  for (auto& r : op->results()) results.push_back(r.get());
  return results;
}

std::vector<Value*> Builder::whileLoop(std::vector<Value*> inits,
                                       const std::function<std::vector<Value*>(Builder&, std::vector<Value*>)>& body) {
  std::vector<Type> types;
  for (Value* v : inits) types.push_back(v->type());
  Op* op = create(OpCode::While, inits, types);
  Block& b = op->addRegion()->block();
  std::vector<Value*> carried;
  for (auto& t : types) carried.push_back(b.addArgument(t));
  Builder inner(&b);
  inner.setLoc(loc_);
  auto yielded = body(inner, carried);
  inner.setLoc(loc_);
  inner.yield(std::move(yielded));
  std::vector<Value*> results;
  for (auto& r : op->results()) results.push_back(r.get());
  return results;
}

std::vector<Value*> Builder::ifElse(Value* cond, std::vector<Type> types,
                                    const std::function<std::vector<Value*>(Builder&)>& thenBody,
                                    const std::function<std::vector<Value*>(Builder&)>& elseBody) {
  Op* op = create(OpCode::If, {cond}, std::move(types));
  for (int i = 0; i < 2; ++i) {
    Block& b = op->addRegion()->block();
    Builder inner(&b);
    inner.setLoc(loc_);
    auto ys = i == 0 ? thenBody(inner) : (elseBody ? elseBody(inner) : std::vector<Value*>{});
    inner.setLoc(loc_);
    inner.yield(std::move(ys));
  }
  std::vector<Value*> results;
  for (auto& r : op->results()) results.push_back(r.get());
  return results;
}

}  // namespace tessera::ir
