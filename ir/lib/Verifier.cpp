// The verifier: checks every op against the semantics in IR.h. The
// checker (VerifierImpl.h) walks the blocks here and checks the control-flow
// ops; each other family of ops has its file (VerifyValues.cpp,
// VerifyMemory.cpp, VerifyCompute.cpp).
#include "tessera/ir/Verifier.h"

#include "VerifierImpl.h"

namespace tessera::ir {
namespace detail {

void Verifier::run() {
  // The kernel's name becomes a symbol in PTX, AMDGCN and host objects and
  // the name a driver looks the kernel up by: a C identifier is the one
  // spelling every one of them accepts unchanged.
  if (!isIdentifier(f_.name()))
    failKernel("the kernel name must be a C identifier ([A-Za-z_][A-Za-z0-9_]*, at most " +
               std::to_string(kMaxNameLength) + " characters), so it is a valid symbol on every target");
  for (unsigned i = 0; i < f_.numArgs(); ++i) {
    const Type& t = f_.arg(i)->type();
    if (auto why = typeProblem(t))
      failKernel("argument " + names_.name(f_.arg(i)) + " has an invalid type " + ts(t) + ": " + *why);
    if (t.isBuffer())
      failKernel("argument " + names_.name(f_.arg(i)) + " cannot be a buffer (buffers come from 'alloc')");
    visible_.insert(f_.arg(i));
  }
  if (f_.argAttrs().size() != f_.numArgs()) failKernel("argument attribute list does not match the argument count");
  const Block& body = f_.body();
  // A non-empty body's last op is checked with the others, so the message
  // can quote it.
  if (body.ops().empty()) failKernel("kernel body must end in 'return'");
  verifyBlock(body, nullptr);
  // Schedules of async copies are checked once every op is well formed.
  verifyPipelines(f_);
}

void Verifier::verifyBlock(const Block& b, const Op* owner, int depth) {
  std::vector<const Value*> added;
  for (auto& a : b.args()) {
    visible_.insert(a.get());
    added.push_back(a.get());
  }
  const OpCode term = owner ? OpCode::Yield : OpCode::Return;
  // Profiling scopes nest within their block: a trace's slices must.
  std::vector<const Op*> scopes;
  for (size_t i = 0; i < b.ops().size(); ++i) {
    const Op& op = *b.ops()[i];
    if (op.parent() != &b) fail(op, "is not linked to the block that holds it");
    bool last = i + 1 == b.ops().size();
    // (Attributes of the wrong kind are verifyOp's to report.)
    const int64_t* probeEnd = op.code() == OpCode::Probe && op.hasAttr("end") && op.hasAttr("name")
                                  ? std::get_if<int64_t>(&op.attrs().at("end"))
                                  : nullptr;
    const std::string* probeName = probeEnd ? std::get_if<std::string>(&op.attrs().at("name")) : nullptr;
    if (probeName && *probeEnd == 0) {
      scopes.push_back(&op);
    } else if (probeName && *probeEnd == 1) {
      if (scopes.empty() || scopes.back()->strAttr("name") != *probeName)
        fail(op, "ends profiling scope '" + *probeName + "', " +
                     (scopes.empty() ? std::string("which is not open in this block")
                                     : "but the innermost open scope is '" + scopes.back()->strAttr("name") + "'"));
      scopes.pop_back();
    }
    if (isTerminator(op.code()) && !scopes.empty())
      fail(*scopes.back(), "begins profiling scope '" + scopes.back()->strAttr("name") +
                               "', which is not ended before the end of its block");
    if (isTerminator(op.code())) {
      if (op.code() != term)
        fail(op, owner ? std::string("cannot appear in the region of '") + owner->name() + "' (expected 'yield')"
                       : std::string("cannot appear in the kernel body (expected 'return')"));
      if (!last) fail(op, "is a terminator and must be the last op of its block");
    } else if (last) {
      fail(op, std::string("ends a block that must end in '") + opName(term) + "'");
    }
    for (unsigned k = 0; k < op.numOperands(); ++k) {
      const Value* v = op.operand(k);
      if (!v) fail(op, "operand #" + std::to_string(k) + " is null");
      if (!visible_.count(v))
        fail(op, "operand #" + std::to_string(k) + " (" + names_.name(v) +
                     ") is not defined before this use in this block or an enclosing one");
    }
    // A join of rank-3 tiles is named as such, not by its result's rank.
    if (op.code() == OpCode::Join && op.numOperands() >= 1 && op.operand(0)->type().isTile()) checkJoinRank(op);
    for (auto& r : op.results())
      if (auto why = typeProblem(r->type())) fail(op, "has an invalid result type " + ts(r->type()) + ": " + *why);
    if (op.numRegions() != 0 && !hasRegions(op.code())) fail(op, "takes no regions");
    verifyOp(op, owner);
    for (auto& r : op.regions()) {
      for (auto& a : r->block().args())
        if (auto why = typeProblem(a->type()))
          fail(op, "has an invalid region argument type " + ts(a->type()) + ": " + *why);
      // Checked before recursing: the verifier is the first layer to see
      // hand-built IR, and must not overflow the stack on it itself.
      if (depth >= kMaxRegionDepth) fail(op, "nests regions more than " + std::to_string(kMaxRegionDepth) + " deep");
      verifyBlock(r->block(), &op, depth + 1);
    }
    for (auto& r : op.results()) {
      visible_.insert(r.get());
      added.push_back(r.get());
    }
  }
  // Values of a region never escape it.
  for (const Value* v : added) visible_.erase(v);
}

void Verifier::checkYield(const Op& owner, const Block& b, const char* which) const {
  const Op* y = b.terminator();
  if (!y || y->code() != OpCode::Yield) fail(owner, std::string(which) + " region must end in 'yield'");
  if (y->numOperands() != owner.numResults())
    fail(*y, "yields " + std::to_string(y->numOperands()) + " values but the enclosing '" + owner.name() + "' has " +
                 std::to_string(owner.numResults()) + " results");
  for (unsigned i = 0; i < y->numOperands(); ++i)
    if (y->operand(i) && y->operand(i)->type() != owner.result(i)->type())
      fail(*y, "operand #" + std::to_string(i) + " has type " + ts(y->operand(i)->type()) + " but the enclosing '" +
                   owner.name() + "' result #" + std::to_string(i) + " is " + ts(owner.result(i)->type()));
}

// ---- per-op rules ----------------------------------------------------------
// The 8-bit floats are storage types (DTypes.def): the ops that only move
// or convert values, and dot, take them; any arithmetic needs a cast first.
void Verifier::checkFp8Use(const Op& op) const {
  switch (op.code()) {
    case OpCode::Constant:
    case OpCode::Splat:
    case OpCode::Broadcast:
    case OpCode::ExpandDims:
    case OpCode::Reshape:
    case OpCode::Transpose:
    case OpCode::Gather:
    case OpCode::Join:
    case OpCode::Split:
    case OpCode::Select:
    case OpCode::Cast:
    case OpCode::Bitcast:
    case OpCode::Load:
    case OpCode::Store:
    case OpCode::Alloc:
    case OpCode::LocalLoad:
    case OpCode::LocalStore:
    case OpCode::Copy:
    case OpCode::BufferSlot:
    case OpCode::Dot:
    case OpCode::DotScaled:
    case OpCode::DotWait:
    case OpCode::For:
    case OpCode::If:
    case OpCode::While:
    case OpCode::Yield:
    case OpCode::Return: return;
    default: break;
  }
  auto check = [&](const Value* v) {
    if (v && v->type().isNumeric() && isFp8(v->type().dtype()))
      fail(op, "is not defined on the 8-bit storage float " + ts(v->type()) +
                   "; cast to f16, bf16 or f32 first (fp8 values are loaded, stored, moved, cast and used by dot)");
  };
  for (const Value* v : op.operands()) check(v);
  for (unsigned i = 0; i < op.numResults(); ++i) check(op.result(i));
}

void Verifier::verifyOp(const Op& op, const Op* owner) {
  const OpCode c = op.code();
  checkFp8Use(op);
  // Another program's buffer is reached by plain loads and stores only:
  // async copies, tensor copies and pipeline slots are the program's own
  // (cp.async and TMA write shared::cta), and a view carried through
  // control flow would hide whose memory it names.
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    const Op* d = op.operand(i)->definingOp();
    if (!d || d->code() != OpCode::RemoteBuffer) continue;
    if ((c == OpCode::LocalLoad || c == OpCode::LocalStore) && i == 0) continue;
    fail(op,
         "takes another program's buffer (remote_buffer), which only local_load and local_store reach; load "
         "the tile, or store it through the view");
  }
  // The elementwise math of Ops.def's kBinary / kUnary rows: one type in,
  // the same type out.
  if (isBinary(c) || isUnary(c)) {
    const unsigned n = isBinary(c) ? 2 : 1;
    operands(op, n, n);
    results(op, 1);
    const Type& a = in(op, 0);
    if (n == 2 && in(op, 1) != a) fail(op, "operand types differ: " + ts(a) + " vs " + ts(in(op, 1)));
    checkElementwiseDType(op, a);
    resultIs(op, a);
    return;
  }
  if (verifyValueOp(op) || verifyMemoryOp(op) || verifyComputeOp(op) || verifyControlOp(op, owner)) return;
  // kBinary / kUnary ops are checked above; a new op without a rule fails here.
  fail(op, "has an unknown opcode");
}

bool Verifier::verifyControlOp(const Op& op, const Op* owner) {
  const OpCode c = op.code();
  switch (c) {
    case OpCode::For: {
      if (op.numOperands() < 3) fail(op, "expects lo, hi, step and the initial values");
      const Type& lo = in(op, 0);
      if (!lo.isScalar() || !lo.isIntLike() || lo.dtype() == DType::I1 || in(op, 1) != lo || in(op, 2) != lo)
        fail(op, "lo, hi, step must be one integer scalar type, got " + ts(lo) + ", " + ts(in(op, 1)) + ", " +
                     ts(in(op, 2)));
      unsigned n = op.numOperands() - 3;
      if (op.numResults() != n)
        fail(op, "has " + std::to_string(n) + " initial values but " + std::to_string(op.numResults()) + " results");
      for (unsigned i = 0; i < n; ++i)
        if (in(op, 3 + i) != op.result(i)->type())
          fail(op, "initial value #" + std::to_string(i) + " has type " + ts(in(op, 3 + i)) + " but result #" +
                       std::to_string(i) + " is " + ts(op.result(i)->type()));
      if (op.numRegions() != 1) fail(op, "needs exactly one region");
      const Block& b = op.region(0).block();
      if (b.numArgs() != n + 1)
        fail(op, "region needs " + std::to_string(n + 1) + " arguments (iv and carried values), got " +
                     std::to_string(b.numArgs()));
      if (b.arg(0)->type() != lo)
        fail(op, "induction variable has type " + ts(b.arg(0)->type()) + ", expected " + ts(lo));
      for (unsigned i = 0; i < n; ++i)
        if (b.arg(i + 1)->type() != op.result(i)->type())
          fail(op, "region argument #" + std::to_string(i + 1) + " has type " + ts(b.arg(i + 1)->type()) +
                       ", expected " + ts(op.result(i)->type()));
      checkYield(op, b, "its");
      for (const char* k : {"stages", "pipelined"})
        if (op.hasAttr(k) && (intAttr(op, k) < 1 || intAttr(op, k) > kMaxPipelineStages))
          fail(op, std::string("attribute '") + k + "' must be 1.." + std::to_string(kMaxPipelineStages) + ", got " +
                       std::to_string(intAttr(op, k)));
      if (op.hasAttr("stages") && op.hasAttr("pipelined"))
        fail(op, "cannot be both a loop as written ('stages') and a scheduled loop ('pipelined')");
      return true;
    }
    case OpCode::While: {
      const unsigned n = op.numOperands();
      if (op.numResults() != n)
        fail(op, "has " + std::to_string(n) + " initial values but " + std::to_string(op.numResults()) + " results");
      for (unsigned i = 0; i < n; ++i) {
        if (in(op, i) != op.result(i)->type())
          fail(op, "initial value #" + std::to_string(i) + " has type " + ts(in(op, i)) + " but result #" +
                       std::to_string(i) + " is " + ts(op.result(i)->type()));
        // Scalars only: a carried tile would need a layout both lowerings
        // agree on at the back edge, which only `for` plans.
        if (!in(op, i).isScalar())
          fail(op, "carries " + ts(in(op, i)) + " (initial value #" + std::to_string(i) +
                       "); a while loop carries scalars only: carry tiles in a for loop");
      }
      if (op.numRegions() != 1) fail(op, "needs exactly one region");
      const Block& b = op.region(0).block();
      if (b.numArgs() != n)
        fail(op, "region needs " + std::to_string(n) + " arguments (the carried values), got " +
                     std::to_string(b.numArgs()));
      for (unsigned i = 0; i < n; ++i)
        if (b.arg(i)->type() != op.result(i)->type())
          fail(op, "region argument #" + std::to_string(i) + " has type " + ts(b.arg(i)->type()) + ", expected " +
                       ts(op.result(i)->type()));
      const Op* y = b.terminator();
      if (!y || y->code() != OpCode::Yield) fail(op, "its region must end in 'yield'");
      if (y->numOperands() != n + 1)
        fail(*y, "yields " + std::to_string(y->numOperands()) + " values but the enclosing 'while' needs " +
                     std::to_string(n + 1) + " (the condition, then " + std::to_string(n) + " carried values)");
      if (y->operand(0)->type() != Type::scalar(DType::I1))
        fail(*y, "yields the condition " + ts(y->operand(0)->type()) + " of 'while', which must be an i1 scalar");
      for (unsigned i = 0; i < n; ++i)
        if (y->operand(i + 1)->type() != op.result(i)->type())
          fail(*y, "operand #" + std::to_string(i + 1) + " has type " + ts(y->operand(i + 1)->type()) +
                       " but the enclosing 'while' result #" + std::to_string(i) + " is " + ts(op.result(i)->type()));
      return true;
    }
    case OpCode::If: {
      operands(op, 1, 1);
      if (in(op, 0) != Type::scalar(DType::I1)) fail(op, "condition " + ts(in(op, 0)) + " must be an i1 scalar");
      if (op.numRegions() != 2) fail(op, "needs a then region and an else region");
      for (unsigned i = 0; i < 2; ++i) {
        if (op.region(i).block().numArgs() != 0) fail(op, "regions take no arguments");
        checkYield(op, op.region(i).block(), i == 0 ? "then" : "else");
      }
      return true;
    }
    case OpCode::Yield:
      results(op, 0);
      if (!owner || !hasRegions(owner->code()))
        fail(op, "must terminate the region of 'for', 'if', 'while', 'scan' or 'warp_specialize'");
      return true;  // types are checked against the owner by checkYield
    case OpCode::Return:
      operands(op, 0, 0);
      results(op, 0);
      return true;
    default: return false;
  }
}

void Verifier::checkElementwiseDType(const Op& op, const Type& t) const {
  if (!t.isNumeric()) fail(op, "needs numeric operands, got " + ts(t));
  const OpCode c = op.code();
  DType d = t.dtype();
  if (needsFloat(c)) {
    if (!t.isFloatLike()) fail(op, "needs float operands, got " + ts(t));
    return;
  }
  switch (c) {
    case OpCode::And:
    case OpCode::Or:
    case OpCode::Xor:
    case OpCode::Not:
      if (!t.isIntLike()) fail(op, "needs integer or i1 operands, got " + ts(t));
      return;
    case OpCode::Shl:
    case OpCode::Shr:
    case OpCode::MulHi:
      if (!t.isIntLike() || d == DType::I1) fail(op, "needs integer operands, got " + ts(t));
      return;
    case OpCode::Min:
    case OpCode::Max: return;
    default:  // add sub mul div rem neg abs: arithmetic, meaningless on booleans
      if (d == DType::I1) fail(op, "is not defined on i1, got " + ts(t));
      return;
  }
}

}  // namespace detail

void verify(const Function& f) { detail::Verifier(f).run(); }

void verify(const Module& m) {
  for (auto& f : m.functions) verify(*f);
}

}  // namespace tessera::ir
