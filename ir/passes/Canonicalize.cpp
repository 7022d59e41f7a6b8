// Canonicalization: local folds that make the IR smaller and more uniform.
//  * integer arithmetic (mulhi included), bitwise ops and comparisons on
//    constants fold to a constant (two's complement wrap at the type's width);
//  * x+0, 0+x, x-0, x*1, 1*x, x/1, x|0, x^0, x<<0, x>>0 fold to x; for floats only
//    the exact identities x+(-0.0), x-(+0.0) and x*1.0 (x+(+0.0) turns -0.0
//    into +0.0, so it stays);
//  * splat of a constant becomes a constant tile;
//  * broadcast / reshape / cast to the operand's own type and transpose by
//    the identity permutation fold to the operand.
// One walk in program order suffices: operands are remapped before an op is
// folded, so chains of folds resolve in a single pass.
#include <climits>
#include <cmath>
#include <unordered_map>

#include "PassUtils.h"
#include "tessera/ir/Pass.h"

namespace tessera::ir {
namespace {

// The value of an integer of dtype `d` held in an int64: sign-extended for
// the signed types, zero-extended for u8..u32 (u64: its bit pattern), i1
// kept as 0 / 1 (the spelling of true in constants).
int64_t normalize(uint64_t v, DType d) {
  const unsigned width = bitWidth(d);
  if (width == 1) return static_cast<int64_t>(v & 1);
  if (width >= 64) return static_cast<int64_t>(v);
  uint64_t mask = (uint64_t{1} << width) - 1;
  v &= mask;
  if (!isUnsigned(d) && v >> (width - 1)) v |= ~mask;
  return static_cast<int64_t>(v);
}

std::optional<int64_t> intConst(const Value* v) {
  const Op* d = v->definingOp();
  if (!d || d->code() != OpCode::Constant || !v->type().isIntLike()) return std::nullopt;
  auto it = d->attrs().find("value");
  if (it == d->attrs().end() || !std::holds_alternative<int64_t>(it->second)) return std::nullopt;
  return normalize(static_cast<uint64_t>(std::get<int64_t>(it->second)), v->type().dtype());
}

std::optional<double> floatConst(const Value* v) {
  const Op* d = v->definingOp();
  if (!d || d->code() != OpCode::Constant || !v->type().isFloatLike()) return std::nullopt;
  auto it = d->attrs().find("value");
  if (it == d->attrs().end()) return std::nullopt;
  if (auto* x = std::get_if<double>(&it->second)) return *x;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return std::nullopt;
}

bool isIntConst(const Value* v, int64_t c) {
  auto x = intConst(v);
  return x && *x == c;
}

std::optional<int64_t> foldInt(OpCode c, int64_t a, int64_t b, DType d) {
  const unsigned w = bitWidth(d);
  const DType t = d;
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  const int64_t minVal = w >= 64 ? INT64_MIN : -(int64_t{1} << (w - 1));
  if (w == 1 && c != OpCode::And && c != OpCode::Or && c != OpCode::Xor) return std::nullopt;
  if (isUnsigned(d)) {  // a, b are zero-extended (u64: the bits)
    switch (c) {
      case OpCode::Div: return ub == 0 ? std::nullopt : std::optional<int64_t>(normalize(ua / ub, t));
      case OpCode::Rem: return ub == 0 ? std::nullopt : std::optional<int64_t>(normalize(ua % ub, t));
      case OpCode::Min: return ua < ub ? a : b;
      case OpCode::Max: return ua < ub ? b : a;
      case OpCode::Shr:
        if (b < 0 || b >= static_cast<int64_t>(w)) return std::nullopt;
        return normalize(ua >> b, t);  // logical
      case OpCode::MulHi: return normalize(static_cast<uint64_t>((static_cast<unsigned __int128>(ua) * ub) >> w), t);
      default: break;  // the rest is the same bits as signed
    }
  }
  switch (c) {
    case OpCode::Add: return normalize(ua + ub, t);
    case OpCode::Sub: return normalize(ua - ub, t);
    case OpCode::Mul: return normalize(ua * ub, t);
    case OpCode::Div:
      if (b == 0 || (a == minVal && b == -1)) return std::nullopt;  // unspecified: leave to the target
      return normalize(static_cast<uint64_t>(a / b), t);
    case OpCode::Rem:
      if (b == 0 || (a == minVal && b == -1)) return std::nullopt;
      return normalize(static_cast<uint64_t>(a % b), t);
    case OpCode::Min: return a < b ? a : b;
    case OpCode::Max: return a < b ? b : a;
    case OpCode::And: return normalize(ua & ub, t);
    case OpCode::Or: return normalize(ua | ub, t);
    case OpCode::Xor: return normalize(ua ^ ub, t);
    case OpCode::Shl:
      if (b < 0 || b >= static_cast<int64_t>(w)) return std::nullopt;
      return normalize(ua << b, t);
    case OpCode::Shr:
      if (b < 0 || b >= static_cast<int64_t>(w)) return std::nullopt;
      return normalize(static_cast<uint64_t>(a >> b), t);  // arithmetic: a is sign-extended
    case OpCode::MulHi:  // the exact product of the sign-extended values, shifted arithmetically
      return normalize(static_cast<uint64_t>((static_cast<__int128>(a) * b) >> w), t);
    default: return std::nullopt;
  }
}

class Canonicalize : public Pass {
 public:
  const char* name() const override { return "canonicalize"; }

  void run(Function& f) override {
    repl_.clear();
    visit(f.body());
    dead_.clear();
  }

 private:
  Value* resolve(Value* v) const {
    auto it = repl_.find(v);
    return it == repl_.end() ? v : it->second;
  }

  std::unique_ptr<Op> makeConstant(const Op& at, const Type& t, Attr value) {
    return std::make_unique<Op>(OpCode::Constant, std::vector<Value*>{}, std::vector<Type>{t},
                                std::map<std::string, Attr>{{"value", std::move(value)}}, at.loc());
  }

  struct Fold {
    Value* existing = nullptr;  // replace the result by this value, or
    std::unique_ptr<Op> newOp;  // by the result of this new op
  };

  Fold tryFold(Op& op) {
    const OpCode c = op.code();
    Fold r;
    if (op.numResults() != 1) return r;
    const Type& t = op.result()->type();
    if (c >= OpCode::Add && c <= OpCode::MulHi && op.numOperands() == 2) {
      Value* a = op.operand(0);
      Value* b = op.operand(1);
      if (t.isIntLike()) {
        auto ca = intConst(a), cb = intConst(b);
        if (ca && cb) {
          if (auto v = foldInt(c, *ca, *cb, t.dtype())) r.newOp = makeConstant(op, t, *v);
          return r;
        }
        switch (c) {
          case OpCode::Add:
          case OpCode::Or:
          case OpCode::Xor:
            if (isIntConst(b, 0))
              r.existing = a;
            else if (isIntConst(a, 0))
              r.existing = b;
            break;
          case OpCode::Sub:
          case OpCode::Shl:
          case OpCode::Shr:
            if (isIntConst(b, 0)) r.existing = a;
            break;
          case OpCode::Div:  // (`(K + pk - 1) / pk` with pk = 1 keeps K's divisibility)
            if (isIntConst(b, 1)) r.existing = a;
            break;
          case OpCode::Mul:
            if (isIntConst(b, 1))
              r.existing = a;
            else if (isIntConst(a, 1))
              r.existing = b;
            break;
          default: break;
        }
        return r;
      }
      if (t.isFloatLike()) {
        auto fa = floatConst(a), fb = floatConst(b);
        auto isNegZero = [](std::optional<double> x) { return x && *x == 0.0 && std::signbit(*x); };
        auto isPosZero = [](std::optional<double> x) { return x && *x == 0.0 && !std::signbit(*x); };
        auto isOne = [](std::optional<double> x) { return x && *x == 1.0; };
        if (c == OpCode::Add && isNegZero(fb))
          r.existing = a;
        else if (c == OpCode::Add && isNegZero(fa))
          r.existing = b;
        else if (c == OpCode::Sub && isPosZero(fb))
          r.existing = a;
        else if (c == OpCode::Mul && isOne(fb))
          r.existing = a;
        else if (c == OpCode::Mul && isOne(fa))
          r.existing = b;
      }
      return r;
    }
    switch (c) {
      case OpCode::Cmp: {
        auto ca = intConst(op.operand(0)), cb = intConst(op.operand(1));
        auto p = op.attrs().find("pred");
        if (ca && cb && op.operand(0)->type().dtype() != DType::I1 && p != op.attrs().end() &&
            std::holds_alternative<std::string>(p->second))
          if (auto v = foldIntCmp(std::get<std::string>(p->second), *ca, *cb, op.operand(0)->type().dtype()))
            r.newOp = makeConstant(op, t, int64_t{*v ? 1 : 0});
        return r;
      }
      case OpCode::Splat: {
        const Op* d = op.operand(0)->definingOp();
        if (d && d->code() == OpCode::Constant && d->hasAttr("value"))
          r.newOp = makeConstant(op, t, d->attrs().at("value"));
        return r;
      }
      case OpCode::Broadcast:
      case OpCode::Reshape:
      case OpCode::Cast:
      case OpCode::Bitcast:
        if (op.operand(0)->type() == t) r.existing = op.operand(0);
        return r;
      case OpCode::Transpose: {
        auto p = op.attrs().find("perm");
        if (p == op.attrs().end()) return r;
        const auto* perm = std::get_if<std::vector<int64_t>>(&p->second);
        if (!perm) return r;
        for (size_t i = 0; i < perm->size(); ++i)
          if ((*perm)[i] != static_cast<int64_t>(i)) return r;
        r.existing = op.operand(0);
        return r;
      }
      default: return r;
    }
  }

  void visit(Block& b) {
    std::vector<std::unique_ptr<Op>> kept;
    kept.reserve(b.ops().size());
    for (auto& op : b.ops()) {
      for (unsigned i = 0; i < op->numOperands(); ++i) op->setOperand(i, resolve(op->operand(i)));
      for (auto& r : op->regions()) visit(r->block());
      Fold f = tryFold(*op);
      if (f.newOp) {
        f.newOp->setParent(&b);
        repl_[op->result()] = f.newOp->result();
        kept.push_back(std::move(f.newOp));
      } else if (f.existing) {
        repl_[op->result()] = f.existing;
      } else {
        kept.push_back(std::move(op));
        continue;
      }
      // The folded op is pure and all its later uses are remapped; it stays
      // alive until the pass ends so no address in repl_ is reused meanwhile.
      dead_.push_back(std::move(op));
    }
    b.ops() = std::move(kept);
  }

  std::unordered_map<Value*, Value*> repl_;
  std::vector<std::unique_ptr<Op>> dead_;
};

}  // namespace

std::unique_ptr<Pass> createCanonicalizePass() { return std::make_unique<Canonicalize>(); }

}  // namespace tessera::ir
