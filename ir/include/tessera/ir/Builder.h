// Builder: creates ops at an insertion point, inferring result types.
//
// The builder checks nothing beyond what it needs to infer a type; the
// Verifier is the single place that decides whether IR is well formed. The
// DSL validates user input before it calls the builder, so user mistakes get
// DslError with the user's line, not a verifier message.
#pragma once

#include <functional>
#include <utility>

#include "tessera/ir/IR.h"
#include "tessera/ir/Atomics.h"

namespace tessera::ir {

class Builder {
 public:
  explicit Builder(Block* block = nullptr) : block_(block) {}
  void setInsertionPointToEnd(Block* b) {
    block_ = b;
    pos_.reset();
  }
  void setInsertionPoint(Block* b, size_t pos) {
    block_ = b;
    pos_ = pos;
  }
  Block* block() const { return block_; }
  void setLoc(Location loc) { loc_ = std::move(loc); }
  const Location& loc() const { return loc_; }

  /// Generic creation: every other method funnels through here.
  Op* create(OpCode code, std::vector<Value*> operands, std::vector<Type> resultTypes,
             std::map<std::string, Attr> attrs = {});

  Value* programId(int axis);
  Value* numPrograms(int axis);
  Value* clusterRank();
  /// `cancel_program()`: a not-yet-started program's axis-0 id, or -1 (IR.h).
  Value* cancelProgram();
  Value* clusterSize();
  Value* constant(Type t, double value);   // float-typed t
  Value* constant(Type t, int64_t value);  // integer-typed t
  Value* splat(Value* scalar, Shape shape);
  Value* arange(int64_t start, int64_t end);
  Value* broadcast(Value* v, Shape shape);
  Value* expandDims(Value* v, int axis);
  Value* reshape(Value* v, Shape shape);
  Value* transpose(Value* v, std::vector<int64_t> perm);
  /// out[.., i_axis, ..] = src[.., index[.., i_axis, ..], ..] (IR.h): index's
  /// shape, src's dtype.
  Value* gather(Value* src, Value* index, int axis);
  /// A tile with a trailing dim of 2: a at [..., 0], b at [..., 1].
  Value* join(Value* a, Value* b);
  /// The two halves (x[..., 0], x[..., 1]) of a tile whose last dim is 2.
  std::pair<Value*, Value*> split(Value* x);
  Value* binary(OpCode code, Value* a, Value* b);  // Add..MulHi, Pow (kBinary in Ops.def)
  Value* unary(OpCode code, Value* a);             // Neg..Expm1 (kUnary in Ops.def)
  Value* fma(Value* a, Value* b, Value* c);
  Value* cmp(const std::string& pred, Value* a, Value* b);
  Value* select(Value* c, Value* a, Value* b);
  Value* cast(Value* v, DType to);
  Value* bitcast(Value* v, DType to);  // same bit width (the verifier checks)
  Value* ptrAdd(Value* p, Value* offsets);
  Value* load(Value* ptr, Value* mask = nullptr, Value* other = nullptr);
  void store(Value* ptr, Value* value, Value* mask = nullptr);
  Value* atomic(AtomicKind kind, Value* ptr, Value* value, Value* mask = nullptr, MemOrder order = MemOrder::Relaxed,
                MemScope scope = MemScope::Device);
  Value* atomicCas(Value* ptr, Value* cmp, Value* value, Value* mask = nullptr, MemOrder order = MemOrder::Relaxed,
                   MemScope scope = MemScope::Device);
  void fence(MemOrder order, MemScope scope);
  Value* alloc(MemSpace space, DType elem, Shape shape);
  Value* localLoad(Value* buffer);
  void localStore(Value* buffer, Value* tile);
  void copy(Value* dstBuffer, Value* srcPtrs, Value* mask = nullptr);
  void barrier();
  void clusterBarrier();
  /// `buffer` (shared) as the cluster's program `rank` holds it.
  Value* remoteBuffer(Value* buffer, Value* rank);
  /// A profiling scope's begin (end = false) or end.
  void probe(const std::string& name, bool end);
  /// `assert(cond) {message}` (IR.h, "Assertions").
  void assertTrue(Value* cond, const std::string& message);
  /// View of slot `index` of a multi-buffered buffer (IR.h).
  Value* bufferSlot(Value* buffer, Value* index);
  /// An asynchronous global -> shared copy (`copy {async = 1}`).
  Op* copyAsync(Value* dstBuffer, Value* srcPtrs, Value* mask = nullptr);
  Op* asyncCommit();
  Op* asyncWait(int64_t pending);
  /// dot_wait(values...) {pending}: results are the values, completed.
  Op* dotWait(const std::vector<Value*>& values, int64_t pending);
  Value* reduce(const std::string& kind, Value* v, int axis);
  Value* dot(Value* a, Value* b, Value* acc);
  /// dot_scaled(a, a_scale, b, b_scale, acc [, tensorScale]) {a_format, b_format} (IR.h).
  Value* dotScaled(Value* a, Value* aScale, const std::string& aFormat, Value* b, Value* bScale,
                   const std::string& bFormat, Value* acc, Value* tensorScale = nullptr);
  /// Creates a `scan` of `v` along `axis` and builds its combine region
  /// with `combine(builder, a, b)`, which returns the combined scalar.
  Value* scan(Value* v, int axis, const std::function<Value*(Builder&, Value*, Value*)>& combine);
  void yield(std::vector<Value*> values);
  void ret();

  /// Creates a `for` op and builds its body with `body(builder, iv, carried)`
  /// which returns the values to yield. Returns the op's results.
  std::vector<Value*> forLoop(Value* lo, Value* hi, Value* step, std::vector<Value*> inits,
                              const std::function<std::vector<Value*>(Builder&, Value*, std::vector<Value*>)>& body);
  /// Creates a `while` op (a do-while over scalars) and builds its body with
  /// `body(builder, carried)`, which returns the condition (an i1 scalar)
  /// followed by the next carried values. Returns the op's results.
  std::vector<Value*> whileLoop(std::vector<Value*> inits,
                                const std::function<std::vector<Value*>(Builder&, std::vector<Value*>)>& body);
  /// Creates an `if` op with result types `types`.
  std::vector<Value*> ifElse(Value* cond, std::vector<Type> types,
                             const std::function<std::vector<Value*>(Builder&)>& thenBody,
                             const std::function<std::vector<Value*>(Builder&)>& elseBody);

 private:
  Block* block_ = nullptr;
  std::optional<size_t> pos_;
  Location loc_;
};

}  // namespace tessera::ir
