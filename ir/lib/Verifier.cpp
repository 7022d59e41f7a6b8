// The verifier: checks every op against the semantics in IR.h. Messages read
//   <file:line:col>: error: '<op>' <what is wrong>
//   <the op's printed text>
// with the kernel name in place of an unknown location.
#include "tessera/ir/Verifier.h"

#include <algorithm>
#include <climits>
#include <unordered_set>

#include "PrinterDetail.h"
#include "tessera/ir/Atomics.h"
#include "tessera/support/Error.h"

namespace tessera::ir {
namespace {

// Tiles live in registers; this bound only keeps element-count arithmetic
// (reshape, numElements) far away from overflow on malformed input.
constexpr int64_t kMaxTileElements = int64_t{1} << 31;

std::string ts(const Type& t) { return t.str(); }

class Verifier {
 public:
  explicit Verifier(const Function& f) : f_(f), names_(f) {}

  void run() {
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

 private:
  static constexpr size_t kMaxNameLength = 1024;
  static bool isIdentifier(const std::string& n) {
    if (n.empty() || n.size() > kMaxNameLength) return false;
    auto alpha = [](unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    if (!alpha(static_cast<unsigned char>(n[0]))) return false;
    for (unsigned char c : n)
      if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
    return true;
  }

  // ---- diagnostics -----------------------------------------------------------
  std::string where(const Location& l) const { return l.known() ? l.str() : f_.name(); }

  [[noreturn]] void fail(const Op& op, const std::string& msg) const {
    throw VerifyError(where(op.loc()) + ": error: '" + op.name() + "' " + msg + "\n" +
                      detail::opHeader(op, names_, true));
  }
  [[noreturn]] void failKernel(const std::string& msg) const {
    throw VerifyError(where(f_.loc()) + ": error: kernel @" + f_.name() + ": " + msg);
  }

  static std::optional<std::string> typeProblem(const Type& t) {
    switch (t.kind()) {
      case Type::Kind::None: return "missing type";
      case Type::Kind::Scalar:
      case Type::Kind::Pointer: return std::nullopt;
      case Type::Kind::Tile:
      case Type::Kind::Buffer: {
        if (t.rank() < 1 || t.rank() > kMaxTileRank) return "rank must be 1.." + std::to_string(kMaxTileRank);
        int64_t n = 1;
        for (int64_t d : t.shape()) {
          if (d <= 0) return std::string("dimensions must be positive");
          if (n > kMaxTileElements / d) return std::string("too many elements");
          n *= d;
        }
        if (t.isBuffer() && t.space() == MemSpace::Global)
          return std::string("a buffer lives in shared or local memory");
        return std::nullopt;
      }
    }
    return "unknown type kind";
  }

  // ---- attribute access that reports instead of asserting --------------------
  int64_t intAttr(const Op& op, const char* k) const {
    auto it = op.attrs().find(k);
    if (it == op.attrs().end() || !std::holds_alternative<int64_t>(it->second))
      fail(op, std::string("needs an integer attribute '") + k + "'");
    return std::get<int64_t>(it->second);
  }
  const std::string& strAttr(const Op& op, const char* k) const {
    auto it = op.attrs().find(k);
    if (it == op.attrs().end() || !std::holds_alternative<std::string>(it->second))
      fail(op, std::string("needs a string attribute '") + k + "'");
    return std::get<std::string>(it->second);
  }
  /// The order and scope of an atomic or a fence; returns the order.
  MemOrder memAttrs(const Op& op) const {
    auto order = parseMemOrder(strAttr(op, "order"));
    if (!order) fail(op, "unknown order '" + strAttr(op, "order") + "' (expected relaxed, acquire, release, acq_rel)");
    if (!parseMemScope(strAttr(op, "scope")))
      fail(op, "unknown scope '" + strAttr(op, "scope") + "' (expected program, device, system)");
    return *order;
  }
  const std::vector<int64_t>& intsAttr(const Op& op, const char* k) const {
    auto it = op.attrs().find(k);
    if (it == op.attrs().end() || !std::holds_alternative<std::vector<int64_t>>(it->second))
      fail(op, std::string("needs an integer-list attribute '") + k + "'");
    return std::get<std::vector<int64_t>>(it->second);
  }

  // ---- arity -----------------------------------------------------------------
  void operands(const Op& op, unsigned lo, unsigned hi) const {
    unsigned n = op.numOperands();
    if (n < lo || n > hi) {
      std::string want = lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
      fail(op, "expects " + want + " operands, got " + std::to_string(n));
    }
  }
  void results(const Op& op, unsigned n) const {
    if (op.numResults() != n)
      fail(op, "expects " + std::to_string(n) + " results, got " + std::to_string(op.numResults()));
  }
  void checkJoinRank(const Op& op) const {
    const Type& a = op.operand(0)->type();
    if (a.rank() + 1 > kMaxTileRank)
      fail(op, "joining " + ts(a) + " would give a tile of rank " + std::to_string(a.rank() + 1) +
                   ", above the maximum of " + std::to_string(kMaxTileRank));
  }
  const Type& in(const Op& op, unsigned i) const { return op.operand(i)->type(); }
  const Type& out(const Op& op) const { return op.result(0)->type(); }

  void resultIs(const Op& op, const Type& want) const {
    if (out(op) != want) fail(op, "result type " + ts(out(op)) + " should be " + ts(want));
  }
  void maskFor(const Op& op, unsigned i, const Type& ptrT) const {
    const Type& m = in(op, i);
    if (!m.isNumeric() || m.dtype() != DType::I1 || m.shape() != ptrT.shape())
      fail(op, "mask " + ts(m) + " must be i1 with the shape of the pointer " + ts(ptrT));
  }

  // ---- structure -------------------------------------------------------------
  void verifyBlock(const Block& b, const Op* owner, int depth = 0) {
    std::vector<const Value*> added;
    for (auto& a : b.args()) {
      visible_.insert(a.get());
      added.push_back(a.get());
    }
    const OpCode term = owner ? OpCode::Yield : OpCode::Return;
    for (size_t i = 0; i < b.ops().size(); ++i) {
      const Op& op = *b.ops()[i];
      if (op.parent() != &b) fail(op, "is not linked to the block that holds it");
      bool last = i + 1 == b.ops().size();
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

  void checkYield(const Op& owner, const Block& b, const char* which) const {
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
  void checkFp8Use(const Op& op) const {
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
      case OpCode::DotWait:
      case OpCode::For:
      case OpCode::If:
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

  void verifyOp(const Op& op, const Op* owner) {
    const OpCode c = op.code();
    checkFp8Use(op);
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
    switch (c) {
      case OpCode::ProgramId:
      case OpCode::NumPrograms: {
        operands(op, 0, 0);
        results(op, 1);
        int64_t axis = intAttr(op, "axis");
        if (axis < 0 || axis > 2) fail(op, "axis " + std::to_string(axis) + " is out of range 0..2");
        resultIs(op, Type::scalar(DType::I32));
        return;
      }
      case OpCode::Constant: {
        operands(op, 0, 0);
        results(op, 1);
        if (!out(op).isNumeric()) fail(op, "result type " + ts(out(op)) + " must be a scalar or a tile of scalars");
        auto it = op.attrs().find("value");
        if (it == op.attrs().end()) fail(op, "needs a 'value' attribute");
        bool isInt = std::holds_alternative<int64_t>(it->second);
        bool isFlt = std::holds_alternative<double>(it->second);
        if (out(op).isIntLike() && !isInt) fail(op, "of integer type " + ts(out(op)) + " needs an integer value");
        if (out(op).isFloatLike() && !isInt && !isFlt)
          fail(op, "of float type " + ts(out(op)) + " needs a numeric value");
        return;
      }
      case OpCode::Splat: {
        operands(op, 1, 1);
        results(op, 1);
        const Type& s = in(op, 0);
        if (!s.isScalar() && !s.isPointer()) fail(op, "operand " + ts(s) + " must be a scalar or a pointer");
        if (!out(op).isTile() || out(op).element() != s)
          fail(op, "result " + ts(out(op)) + " must be a tile of " + ts(s));
        return;
      }
      case OpCode::Arange: {
        operands(op, 0, 0);
        results(op, 1);
        int64_t start = intAttr(op, "start"), end = intAttr(op, "end");
        if (end <= start)
          fail(op, "end " + std::to_string(end) + " must be greater than start " + std::to_string(start));
        if (start < INT32_MIN || end > int64_t{INT32_MAX} + 1) fail(op, "range must fit in i32");
        resultIs(op, Type::tile(Type::scalar(DType::I32), {end - start}));
        return;
      }
      case OpCode::Broadcast: {
        operands(op, 1, 1);
        results(op, 1);
        const Type& s = in(op, 0);
        const Type& r = out(op);
        if (!s.isTile() || !r.isTile() || s.element() != r.element() || s.rank() != r.rank())
          fail(op, "cannot broadcast " + ts(s) + " to " + ts(r) + " (tiles of one element type and rank)");
        for (int i = 0; i < s.rank(); ++i)
          if (s.shape()[i] != r.shape()[i] && s.shape()[i] != 1)
            fail(op, "cannot broadcast " + ts(s) + " to " + ts(r) + ": dim " + std::to_string(i) +
                         " is neither equal nor 1");
        return;
      }
      case OpCode::ExpandDims: {
        operands(op, 1, 1);
        results(op, 1);
        const Type& s = in(op, 0);
        if (!s.isTile()) fail(op, "operand " + ts(s) + " must be a tile");
        int64_t axis = intAttr(op, "axis");
        if (axis < 0 || axis > s.rank()) fail(op, "axis " + std::to_string(axis) + " is out of range for " + ts(s));
        Shape sh = s.shape();
        sh.insert(sh.begin() + axis, 1);
        resultIs(op, s.withShape(sh));
        return;
      }
      case OpCode::Reshape: {
        operands(op, 1, 1);
        results(op, 1);
        const Type& s = in(op, 0);
        const Type& r = out(op);
        if (!s.isTile() || !r.isTile() || s.element() != r.element())
          fail(op, "cannot reshape " + ts(s) + " to " + ts(r) + " (tiles of one element type)");
        if (s.numElements() != r.numElements())
          fail(op, "cannot reshape " + ts(s) + " to " + ts(r) + ": element counts differ");
        return;
      }
      case OpCode::Transpose: {
        operands(op, 1, 1);
        results(op, 1);
        const Type& s = in(op, 0);
        if (!s.isTile()) fail(op, "operand " + ts(s) + " must be a tile");
        const auto& perm = intsAttr(op, "perm");
        std::vector<int64_t> sorted = perm;
        std::sort(sorted.begin(), sorted.end());
        bool ok = static_cast<int>(perm.size()) == s.rank();
        for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int64_t>(i);
        if (!ok) fail(op, "perm is not a permutation of the " + std::to_string(s.rank()) + " dims of " + ts(s));
        Shape sh;
        for (int64_t p : perm) sh.push_back(s.shape()[static_cast<size_t>(p)]);
        resultIs(op, s.withShape(sh));
        return;
      }
      case OpCode::Gather: {
        operands(op, 2, 2);
        results(op, 1);
        const Type& s = in(op, 0);
        const Type& idx = in(op, 1);
        if (!s.isTile() || !s.isNumeric()) fail(op, "source " + ts(s) + " must be a tile of numbers");
        if (!idx.isTile() || !idx.isIntLike() || idx.dtype() == DType::I1)
          fail(op, "index " + ts(idx) + " must be a tile of integers (not i1)");
        int64_t axis = intAttr(op, "axis");
        if (axis < 0 || axis >= s.rank()) fail(op, "axis " + std::to_string(axis) + " is out of range for " + ts(s));
        if (idx.rank() != s.rank()) fail(op, "index " + ts(idx) + " must have the rank of the source " + ts(s));
        for (int d = 0; d < s.rank(); ++d)
          if (d != axis && idx.shape()[d] != s.shape()[d])
            fail(op, "index shape " + shapeStr(idx.shape()) + " must equal the source shape " + shapeStr(s.shape()) +
                         " except along axis " + std::to_string(axis) + " (dim " + std::to_string(d) + " differs)");
        resultIs(op, s.withShape(idx.shape()));
        return;
      }
      case OpCode::Join: {
        operands(op, 2, 2);
        results(op, 1);
        const Type& a = in(op, 0);
        if (!a.isTile() || !a.isNumeric()) fail(op, "operand " + ts(a) + " must be a tile of numbers");
        if (in(op, 1) != a) fail(op, "operand types differ: " + ts(a) + ", " + ts(in(op, 1)));
        checkJoinRank(op);
        Shape sh = a.shape();
        sh.push_back(2);
        resultIs(op, a.withShape(sh));
        return;
      }
      case OpCode::Split: {
        operands(op, 1, 1);
        results(op, 2);
        const Type& x = in(op, 0);
        if (!x.isTile() || !x.isNumeric()) fail(op, "operand " + ts(x) + " must be a tile of numbers");
        if (x.rank() < 2 || x.shape().back() != 2)
          fail(op, "operand " + ts(x) + " must have rank 2 or more and a last dim of 2");
        Shape sh(x.shape().begin(), x.shape().end() - 1);
        Type want = x.withShape(sh);
        for (unsigned i = 0; i < 2; ++i)
          if (op.result(i)->type() != want)
            fail(op, "result " + std::to_string(i) + " type " + ts(op.result(i)->type()) + " should be " + ts(want));
        return;
      }
      case OpCode::Fma: {
        operands(op, 3, 3);
        results(op, 1);
        const Type& a = in(op, 0);
        if (in(op, 1) != a || in(op, 2) != a)
          fail(op, "operand types differ: " + ts(a) + ", " + ts(in(op, 1)) + ", " + ts(in(op, 2)));
        if (!a.isFloatLike()) fail(op, "needs float operands, got " + ts(a));
        resultIs(op, a);
        return;
      }
      case OpCode::Cmp: {
        operands(op, 2, 2);
        results(op, 1);
        const Type& a = in(op, 0);
        if (a != in(op, 1)) fail(op, "operand types differ: " + ts(a) + " vs " + ts(in(op, 1)));
        if (!a.isNumeric()) fail(op, "needs numeric operands, got " + ts(a));
        const std::string& p = strAttr(op, "pred");
        if (p != "eq" && p != "ne" && p != "lt" && p != "le" && p != "gt" && p != "ge")
          fail(op, "unknown predicate '" + p + "' (expected eq, ne, lt, le, gt, ge)");
        resultIs(op, a.withDType(DType::I1));
        return;
      }
      case OpCode::Select: {
        operands(op, 3, 3);
        results(op, 1);
        const Type& cnd = in(op, 0);
        const Type& a = in(op, 1);
        if (a != in(op, 2)) fail(op, "value types differ: " + ts(a) + " vs " + ts(in(op, 2)));
        if (a.isBuffer()) fail(op, "cannot select buffers");
        if (!cnd.isNumeric() || cnd.dtype() != DType::I1 || cnd.shape() != a.shape())
          fail(op, "condition " + ts(cnd) + " must be i1 with the shape of " + ts(a));
        resultIs(op, a);
        return;
      }
      case OpCode::Cast: {
        operands(op, 1, 1);
        results(op, 1);
        const Type& s = in(op, 0);
        const Type& r = out(op);
        if (!s.isNumeric() || !r.isNumeric()) fail(op, "casts numbers only: " + ts(s) + " to " + ts(r));
        if (s.shape() != r.shape()) fail(op, "cannot change the shape: " + ts(s) + " to " + ts(r));
        return;
      }
      case OpCode::Bitcast: {
        operands(op, 1, 1);
        results(op, 1);
        const Type& s = in(op, 0);
        const Type& r = out(op);
        if (!s.isNumeric() || !r.isNumeric()) fail(op, "reinterprets numbers only: " + ts(s) + " to " + ts(r));
        if (s.shape() != r.shape()) fail(op, "cannot change the shape: " + ts(s) + " to " + ts(r));
        if (s.dtype() == DType::I1 || r.dtype() == DType::I1)
          fail(op, "i1 has no bit layout to reinterpret: " + ts(s) + " to " + ts(r));
        if (bitWidth(s.dtype()) != bitWidth(r.dtype()))
          fail(op, "needs dtypes of the same width: " + ts(s) + " (" + std::to_string(bitWidth(s.dtype())) +
                       " bits) to " + ts(r) + " (" + std::to_string(bitWidth(r.dtype())) + " bits)");
        return;
      }
      case OpCode::PtrAdd: {
        operands(op, 2, 2);
        results(op, 1);
        const Type& p = in(op, 0);
        const Type& o = in(op, 1);
        if (!p.isPointerLike()) fail(op, "first operand " + ts(p) + " must be a pointer or a tile of pointers");
        if (!o.isIntLike() || o.dtype() == DType::I1 || o.shape() != p.shape())
          fail(op, "offsets " + ts(o) + " must be integers with the shape of " + ts(p));
        resultIs(op, p);
        return;
      }
      case OpCode::Load: {
        operands(op, 1, 3);
        results(op, 1);
        const Type& p = in(op, 0);
        if (!p.isPointerLike()) fail(op, "operand " + ts(p) + " must be a pointer or a tile of pointers");
        Type want = p.withDType(p.dtype());
        resultIs(op, want);
        if (op.numOperands() >= 2) maskFor(op, 1, p);
        if (op.numOperands() == 3 && in(op, 2) != want)
          fail(op, "'other' " + ts(in(op, 2)) + " must have the result type " + ts(want));
        return;
      }
      case OpCode::Store: {
        operands(op, 2, 3);
        results(op, 0);
        const Type& p = in(op, 0);
        if (!p.isPointerLike()) fail(op, "operand " + ts(p) + " must be a pointer or a tile of pointers");
        Type want = p.withDType(p.dtype());
        if (in(op, 1) != want) fail(op, "value " + ts(in(op, 1)) + " does not match the pointee: expected " + ts(want));
        if (op.numOperands() == 3) maskFor(op, 2, p);
        return;
      }
      case OpCode::AtomicRmw:
      case OpCode::AtomicCas: {
        const bool cas = op.code() == OpCode::AtomicCas;
        operands(op, cas ? 3 : 2, cas ? 4 : 3);
        results(op, 1);
        const Type& p = in(op, 0);
        if (!p.isPointerLike()) fail(op, "operand " + ts(p) + " must be a pointer or a tile of pointers");
        if (p.space() != MemSpace::Global) fail(op, "needs global pointers, got " + ts(p));
        Type want = p.withDType(p.dtype());
        for (unsigned i = 1; i < valueOperand(op.code()) + 1; ++i)
          if (in(op, i) != want)
            fail(op, (i == 1 && cas ? "compare value " : "value ") + ts(in(op, i)) +
                         " does not match the pointee: expected " + ts(want));
        if (want.dtype() == DType::I1) fail(op, "is not defined on i1");
        if (!cas) {
          auto kind = parseAtomicKind(strAttr(op, "kind"));
          if (!kind)
            fail(op, "unknown kind '" + strAttr(op, "kind") + "' (expected add, min, max, and, or, xor, xchg)");
          if (isFloat(want.dtype()) && !takesFloats(*kind))
            fail(op, std::string("kind ") + name(*kind) + " is not defined on " + ts(want));
        }
        memAttrs(op);
        if (op.numOperands() == maskOperand(op.code()) + 1) maskFor(op, maskOperand(op.code()), p);
        resultIs(op, want);
        return;
      }
      case OpCode::Fence:
        operands(op, 0, 0);
        results(op, 0);
        if (!acquires(memAttrs(op)) && !releases(memAttrs(op)))
          fail(op, "a relaxed fence orders nothing (expected acquire, release or acq_rel)");
        return;
      case OpCode::Alloc: {
        operands(op, 0, 0);
        results(op, 1);
        const Type& r = out(op);
        if (!r.isBuffer() || (r.space() != MemSpace::Shared && r.space() != MemSpace::Local))
          fail(op, "result " + ts(r) + " must be a shared or local buffer");
        return;
      }
      case OpCode::LocalLoad: {
        operands(op, 1, 1);
        results(op, 1);
        const Type& b = in(op, 0);
        if (!b.isBuffer()) fail(op, "operand " + ts(b) + " must be a buffer");
        resultIs(op, Type::tile(Type::scalar(b.dtype()), b.shape()));
        return;
      }
      case OpCode::LocalStore: {
        operands(op, 2, 2);
        results(op, 0);
        const Type& b = in(op, 0);
        if (!b.isBuffer()) fail(op, "first operand " + ts(b) + " must be a buffer");
        Type want = Type::tile(Type::scalar(b.dtype()), b.shape());
        if (in(op, 1) != want)
          fail(op, "value " + ts(in(op, 1)) + " does not match buffer " + ts(b) + ": expected " + ts(want));
        return;
      }
      case OpCode::Copy: {
        operands(op, 2, 3);
        results(op, 0);
        const Type& b = in(op, 0);
        const Type& s = in(op, 1);
        if (!b.isBuffer()) fail(op, "destination " + ts(b) + " must be a buffer");
        Type want = Type::tile(Type::ptr(b.dtype(), MemSpace::Global), b.shape());
        if (s != want) fail(op, "source " + ts(s) + " must be " + ts(want) + " to fill " + ts(b));
        if (op.numOperands() == 3) maskFor(op, 2, s);
        if (op.hasAttr("async")) {
          int64_t a = intAttr(op, "async");
          if (a != 0 && a != 1) fail(op, "attribute 'async' must be 0 or 1, got " + std::to_string(a));
          if (a == 1 && b.space() != MemSpace::Shared)
            fail(op, "an async copy needs a shared destination, got " + ts(b));
        }
        return;
      }
      case OpCode::Barrier:
        operands(op, 0, 0);
        results(op, 0);
        return;
      case OpCode::BufferSlot: {
        operands(op, 2, 2);
        results(op, 1);
        const Type& b = in(op, 0);
        const Type& i = in(op, 1);
        if (!b.isBuffer() || b.rank() < 2)
          fail(op, "operand " + ts(b) + " must be a buffer of rank >= 2 (slots x tile)");
        if (!i.isScalar() || !i.isIntLike() || i.dtype() == DType::I1)
          fail(op, "index " + ts(i) + " must be an integer scalar");
        resultIs(op, Type::buffer(b.dtype(), b.space(), Shape(b.shape().begin() + 1, b.shape().end())));
        // A constant index is checked here; others by the pipeline verifier
        // where they matter (slots written by async copies).
        const Op* d = op.operand(1)->definingOp();
        if (d && d->code() == OpCode::Constant) {
          auto it = d->attrs().find("value");
          if (it != d->attrs().end() && std::holds_alternative<int64_t>(it->second)) {
            int64_t v = std::get<int64_t>(it->second);
            if (v < 0 || v >= b.shape()[0])
              fail(op, "slot index " + std::to_string(v) + " is out of range for " + ts(b) + " (" +
                           std::to_string(b.shape()[0]) + " slots)");
          }
        }
        return;
      }
      case OpCode::AsyncCommit:
        operands(op, 0, 0);
        results(op, 0);
        return;
      case OpCode::AsyncWait: {
        operands(op, 0, 0);
        results(op, 0);
        int64_t n = intAttr(op, "pending");
        if (n < 0) fail(op, "'pending' must be >= 0, got " + std::to_string(n));
        return;
      }
      case OpCode::WarpSpecialize: {
        operands(op, 0, 0);
        results(op, 0);
        if (op.numRegions() != 1 || op.region(0).block().numArgs() != 0)
          fail(op, "needs one region without arguments (the producer's code)");
        int64_t w = intAttr(op, "warps");
        if (w < 1 || w > 32) fail(op, "'warps' must be in [1, 32], got " + std::to_string(w));
        checkYield(op, op.region(0).block(), "producer");
        return;
      }
      case OpCode::StageAcquire:
      case OpCode::StageCommit:
      case OpCode::StageWait:
      case OpCode::StageRelease: {
        operands(op, 1, op.code() == OpCode::StageRelease ? 2 : 1);
        results(op, 0);
        const Type& i = in(op, 0);
        if (!i.isScalar() || !i.isIntLike() || i.dtype() == DType::I1)
          fail(op, "slot index " + ts(i) + " must be an integer scalar");
        if (op.numOperands() == 2 && in(op, 1) != Type::scalar(DType::I1))
          fail(op, "condition " + ts(in(op, 1)) + " must be an i1 scalar");
        int64_t n = intAttr(op, "slots");
        if (n < 1) fail(op, "'slots' must be >= 1, got " + std::to_string(n));
        return;
      }
      case OpCode::Reduce: {
        operands(op, 1, 1);
        results(op, 1);
        const Type& s = in(op, 0);
        if (!s.isTile() || !s.isNumeric()) fail(op, "operand " + ts(s) + " must be a tile of numbers");
        const std::string& kind = strAttr(op, "kind");
        if (!isReduceKind(kind)) fail(op, "unknown kind '" + kind + "' (expected sum, max, min, argmax, argmin)");
        int64_t axis = intAttr(op, "axis");
        if (axis < 0 || axis >= s.rank()) fail(op, "axis " + std::to_string(axis) + " is out of range for " + ts(s));
        Shape sh = s.shape();
        sh.erase(sh.begin() + axis);
        Type want = (kind == "argmax" || kind == "argmin" ? Type::scalar(DType::I32) : s.element()).withShape(sh);
        resultIs(op, want);
        return;
      }
      case OpCode::Scan: {
        operands(op, 1, 1);
        results(op, 1);
        const Type& s = in(op, 0);
        if (!s.isTile() || !s.isNumeric() || s.dtype() == DType::I1)
          fail(op, "operand " + ts(s) + " must be a tile of numbers (not i1)");
        resultIs(op, s);
        int64_t axis = intAttr(op, "axis");
        if (axis < 0 || axis >= s.rank()) fail(op, "axis " + std::to_string(axis) + " is out of range for " + ts(s));
        if (op.numRegions() != 1) fail(op, "needs exactly one region (the combine function)");
        const Block& b = op.region(0).block();
        const Type elem = s.element();
        if (b.numArgs() != 2 || b.arg(0)->type() != elem || b.arg(1)->type() != elem)
          fail(op, "combine region needs two arguments of type " + ts(elem));
        // The combine function is evaluated many times, in an order the
        // backend picks: it must be a pure function of scalars.
        for (auto& inner : b.ops()) {
          if (inner->code() == OpCode::Yield) continue;
          if (!isElementwise(inner->code()) && inner->code() != OpCode::Constant)
            fail(*inner, "cannot appear in the combine region of 'scan' (only elementwise ops and constants)");
          for (Value* v : inner->operands())
            if (v && !v->type().isScalar())
              fail(*inner, "uses " + ts(v->type()) + " in the combine region of 'scan' (only scalars)");
          for (auto& r : inner->results())
            if (!r->type().isScalar())
              fail(*inner, "yields " + ts(r->type()) + " in the combine region of 'scan' (only scalars)");
        }
        const Op* y = b.terminator();
        if (!y || y->code() != OpCode::Yield) fail(op, "combine region must end in 'yield'");
        if (y->numOperands() != 1 || !y->operand(0) || y->operand(0)->type() != elem)
          fail(*y, "must yield one " + ts(elem) + " (the combined value)");
        return;
      }
      case OpCode::Dot: {
        operands(op, 3, 3);
        results(op, 1);
        const Type& a = in(op, 0);
        const Type& b = in(op, 1);
        const Type& acc = in(op, 2);
        if (!a.isNumeric() || !b.isNumeric() || !acc.isNumeric() || a.rank() != 2 || b.rank() != 2 || acc.rank() != 2)
          fail(op, "needs rank-2 tiles, got " + ts(a) + ", " + ts(b) + ", " + ts(acc));
        if (a.shape()[1] != b.shape()[0] || acc.shape()[0] != a.shape()[0] || acc.shape()[1] != b.shape()[1])
          fail(op, "shapes do not contract: " + ts(a) + " x " + ts(b) + " -> " + ts(acc));
        // Two fp8 operands may differ in format (e4m3 x e5m2, as the tensor
        // cores take them).
        if (a.dtype() != b.dtype() && !(isFp8(a.dtype()) && isFp8(b.dtype())))
          fail(op, "operand dtypes differ: " + ts(a) + " vs " + ts(b));
        DType d = a.dtype();
        if (d != DType::F16 && d != DType::BF16 && d != DType::F32 && d != DType::I8 && !isFp8(d))
          fail(op, "operands must be f16, bf16, f32, i8 or fp8 (f8e4m3, f8e5m2 and their fnuz variants), got " + ts(a));
        DType accD = d == DType::I8 ? DType::I32 : DType::F32;
        if (acc.dtype() != accD)
          fail(op, "accumulator " + ts(acc) + " must be " + name(accD) + " for " + name(d) + " operands");
        resultIs(op, acc);
        if (op.hasAttr("async")) {
          int64_t x = intAttr(op, "async");
          if (x != 0 && x != 1) fail(op, "attribute 'async' must be 0 or 1, got " + std::to_string(x));
        }
        return;
      }
      case OpCode::DotWait: {
        if (op.numResults() != op.numOperands())
          fail(op, "has " + std::to_string(op.numOperands()) + " operands but " + std::to_string(op.numResults()) +
                       " results (it returns its operands)");
        for (unsigned i = 0; i < op.numOperands(); ++i)
          if (in(op, i) != op.result(i)->type())
            fail(op, "result #" + std::to_string(i) + " has type " + ts(op.result(i)->type()) + " but operand #" +
                         std::to_string(i) + " is " + ts(in(op, i)));
        int64_t n = intAttr(op, "pending");
        if (n < 0) fail(op, "'pending' must be >= 0, got " + std::to_string(n));
        if (op.numOperands() != 0 && n != 0)
          fail(op, "completes its operands only with 'pending' = 0, got " + std::to_string(n) +
                       " (a wait that leaves dots in flight takes no operands)");
        return;
      }
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
        return;
      }
      case OpCode::If: {
        operands(op, 1, 1);
        if (in(op, 0) != Type::scalar(DType::I1)) fail(op, "condition " + ts(in(op, 0)) + " must be an i1 scalar");
        if (op.numRegions() != 2) fail(op, "needs a then region and an else region");
        for (unsigned i = 0; i < 2; ++i) {
          if (op.region(i).block().numArgs() != 0) fail(op, "regions take no arguments");
          checkYield(op, op.region(i).block(), i == 0 ? "then" : "else");
        }
        return;
      }
      case OpCode::Yield:
        results(op, 0);
        if (!owner || !hasRegions(owner->code()))
          fail(op, "must terminate the region of 'for', 'if', 'scan' or 'warp_specialize'");
        return;  // types are checked against the owner by checkYield
      case OpCode::Return:
        operands(op, 0, 0);
        results(op, 0);
        return;
      default: break;  // kBinary / kUnary ops are checked above; a new op without a rule fails below
    }
    fail(op, "has an unknown opcode");
  }

  void checkElementwiseDType(const Op& op, const Type& t) const {
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

  const Function& f_;
  detail::ValueNames names_;
  std::unordered_set<const Value*> visible_;
};

}  // namespace

void verify(const Function& f) { Verifier(f).run(); }

void verify(const Module& m) {
  for (auto& f : m.functions) verify(*f);
}

}  // namespace tessera::ir
