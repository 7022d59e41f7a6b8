// Symbolic evaluation of index arithmetic (see TiledAccess.h). A tile of
// integers is a polynomial in its indices (one variable per dimension) over
// uniform scalars; a tile of pointers is a pointer argument plus such a
// polynomial (in elements). Only what index arithmetic is made of is
// evaluated (constants, arange, splat, broadcast, expand_dims, add, sub,
// mul, integer casts, ptr_add); anything else makes the copy not tiled.
#include "tessera/ir/analysis/TiledAccess.h"

#include <algorithm>
#include <array>
#include <functional>
#include <unordered_map>

namespace tessera::ir {

namespace {

constexpr size_t kMaxTerms = 64;  // a bound on the work for adversarial IR
constexpr int kMaxDepth = 200;

struct Mono {
  std::vector<const Value*> factors;  // sorted
  std::array<uint8_t, 4> pow{};       // powers of the index of each dimension
  auto operator<=>(const Mono&) const = default;
  bool indexFree() const { return pow == std::array<uint8_t, 4>{}; }
};
using Poly = std::map<Mono, int64_t>;

void addTo(Poly& p, const Mono& m, int64_t c) {
  if (c == 0) return;
  auto [it, fresh] = p.try_emplace(m, c);
  if (!fresh && (it->second += c) == 0) p.erase(it);
}

std::optional<Poly> add(const Poly& a, const Poly& b, int64_t sign) {
  Poly r = a;
  for (auto& [m, c] : b) addTo(r, m, sign * c);
  if (r.size() > kMaxTerms) return std::nullopt;
  return r;
}

std::optional<Poly> mul(const Poly& a, const Poly& b) {
  if (a.size() * b.size() > kMaxTerms) return std::nullopt;
  Poly r;
  for (auto& [ma, ca] : a)
    for (auto& [mb, cb] : b) {
      Mono m;
      m.factors = ma.factors;
      m.factors.insert(m.factors.end(), mb.factors.begin(), mb.factors.end());
      std::sort(m.factors.begin(), m.factors.end());
      for (size_t d = 0; d < 4; ++d) {
        if (ma.pow[d] + mb.pow[d] > 3) return std::nullopt;
        m.pow[d] = static_cast<uint8_t>(ma.pow[d] + mb.pow[d]);
      }
      addTo(r, m, ca * cb);
    }
  return r;
}

Poly constant(int64_t v) {
  Poly p;
  addTo(p, Mono{}, v);
  return p;
}

// Pointer tiles: a base pointer (a kernel argument) plus an offset.
struct PtrPoly {
  const Value* base = nullptr;
  Poly off;
};

class Evaluator {
 public:
  explicit Evaluator(const Function& f) {
    for (unsigned i = 0; i < f.numArgs(); ++i) args_[f.arg(i)] = i;
  }
  std::optional<unsigned> argIndex(const Value* v) const {
    auto it = args_.find(v);
    return it == args_.end() ? std::nullopt : std::optional<unsigned>(it->second);
  }

  std::optional<Poly> ints(const Value* v, int depth = 0) {
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    std::optional<Poly> r = depth > kMaxDepth ? std::nullopt : evalInts(v, depth + 1);
    memo_[v] = r;
    return r;
  }

  std::optional<PtrPoly> ptrs(const Value* v, int depth = 0) {
    if (depth > kMaxDepth) return std::nullopt;
    const Op* op = v->definingOp();
    if (!op) {
      if (args_.count(v) && v->type().isPointer()) return PtrPoly{v, {}};
      return std::nullopt;
    }
    switch (op->code()) {
      case OpCode::Splat: return ptrs(op->operand(0), depth + 1);
      case OpCode::Broadcast: {
        auto p = ptrs(op->operand(0), depth + 1);
        if (p) p->off = broadcast(p->off, op->operand(0)->type().shape(), v->type().shape());
        return p;
      }
      case OpCode::ExpandDims: {
        auto p = ptrs(op->operand(0), depth + 1);
        if (p) p->off = expand(p->off, op->intAttr("axis"));
        return p;
      }
      case OpCode::PtrAdd: {
        auto p = ptrs(op->operand(0), depth + 1);
        auto o = ints(op->operand(1), depth + 1);
        if (!p || !o) return std::nullopt;
        auto s = add(p->off, *o, 1);
        if (!s) return std::nullopt;
        p->off = std::move(*s);
        return p;
      }
      default: return std::nullopt;
    }
  }

  // The index of dimension d of a value whose dimension of size 1 is
  // broadcast is always 0 there: terms in it vanish.
  static Poly broadcast(const Poly& p, const Shape& from, const Shape& to) {
    Poly r;
    for (auto& [m, c] : p) {
      bool zero = false;
      for (size_t d = 0; d < from.size() && d < 4; ++d)
        if (from[d] == 1 && d < to.size() && to[d] != 1 && m.pow[d]) zero = true;
      if (!zero) addTo(r, m, c);
    }
    return r;
  }
  static Poly expand(const Poly& p, int64_t axis) {
    Poly r;
    for (auto& [m, c] : p) {
      Mono n = m;
      for (int64_t d = 3; d > axis; --d) n.pow[d] = m.pow[d - 1];
      n.pow[axis] = 0;
      addTo(r, n, c);
    }
    return r;
  }

 private:
  std::optional<Poly> evalInts(const Value* v, int depth) {
    const Type& t = v->type();
    if (!t.isIntLike() || t.isPointerLike() || t.rank() > 4) return std::nullopt;
    const Op* op = v->definingOp();
    auto atom = [&]() -> std::optional<Poly> {
      if (!t.isScalar()) return std::nullopt;
      Poly p;
      addTo(p, Mono{{v}, {}}, 1);
      return p;
    };
    if (!op) return atom();  // kernel arguments, induction variables
    switch (op->code()) {
      case OpCode::Constant:
        if (auto* c = std::get_if<int64_t>(&op->attrs().at("value"))) return constant(*c);
        return std::nullopt;
      case OpCode::Arange: {
        Poly p = constant(op->intAttr("start"));
        Mono i;
        i.pow[0] = 1;
        addTo(p, i, 1);
        return p;
      }
      case OpCode::Splat: return ints(op->operand(0), depth);
      case OpCode::Broadcast: {
        auto p = ints(op->operand(0), depth);
        if (p) p = broadcast(*p, op->operand(0)->type().shape(), t.shape());
        return p;
      }
      case OpCode::ExpandDims: {
        auto p = ints(op->operand(0), depth);
        if (p) p = expand(*p, op->intAttr("axis"));
        return p;
      }
      case OpCode::Cast:
        if (op->operand(0)->type().isIntLike() && !op->operand(0)->type().isPointerLike())
          return ints(op->operand(0), depth);
        return std::nullopt;
      case OpCode::Add:
      case OpCode::Sub:
      case OpCode::Mul: {
        auto a = ints(op->operand(0), depth), b = ints(op->operand(1), depth);
        if (!a || !b) return t.isScalar() ? atom() : std::nullopt;
        if (op->code() == OpCode::Mul) return mul(*a, *b);
        return add(*a, *b, op->code() == OpCode::Sub ? -1 : 1);
      }
      default: return atom();  // a uniform scalar: an opaque factor
    }
  }

  std::unordered_map<const Value*, unsigned> args_;
  std::unordered_map<const Value*, std::optional<Poly>> memo_;
};

// The index-free part of p as a ScalarPoly; nullopt if p has index terms.
std::optional<ScalarPoly> scalarPart(const Poly& p) {
  ScalarPoly s;
  for (auto& [m, c] : p) {
    if (!m.indexFree()) return std::nullopt;
    s.terms[m.factors] = c;
  }
  return s;
}

// An extent: c, or c * (an integer kernel argument).
std::optional<ArgExtent> extentOf(const ScalarPoly& s, const Evaluator& ev) {
  if (s.terms.size() != 1) return std::nullopt;
  auto& [fs, c] = *s.terms.begin();
  if (fs.empty()) return ArgExtent{-1, c};
  if (fs.size() != 1 || !fs[0]->type().isScalar()) return std::nullopt;
  auto a = ev.argIndex(fs[0]);
  if (!a) return std::nullopt;
  return ArgExtent{static_cast<int>(*a), c};
}

}  // namespace

std::string ScalarPoly::str() const {
  if (terms.empty()) return "0";
  std::string s;
  for (auto& [fs, c] : terms) {
    if (!s.empty()) s += " + ";
    s += std::to_string(c);
    for (const Value* v : fs) s += "*" + (v->nameHint.empty() ? std::string("%v") : v->nameHint);
  }
  return s;
}

std::optional<TiledAccess> matchTiledAccess(const Function& f, const Op& access, const AxisAnalysis& axis) {
  // copy(buffer, pointers[, mask]), load(pointers[, mask]) or
  // store(pointers, value[, mask]).
  unsigned first, maskAt;
  if (access.code() == OpCode::Copy)
    first = 1, maskAt = 2;
  else if (access.code() == OpCode::Load)
    first = 0, maskAt = 1;
  else if (access.code() == OpCode::Store)
    first = 0, maskAt = 2;
  else
    return std::nullopt;
  if (access.numOperands() <= first) return std::nullopt;
  const Value* ptr = access.operand(first);
  const Value* maskV = access.numOperands() > maskAt ? access.operand(maskAt) : nullptr;
  const Shape& shape = ptr->type().shape();
  if (shape.size() != 2) return std::nullopt;
  Evaluator ev(f);
  auto p = ev.ptrs(ptr);
  if (!p) return std::nullopt;
  TiledAccess ta;
  ta.source = *ev.argIndex(p->base);
  ta.dtype = p->base->type().dtype();
  // offset = (index along the strided dim) * stride + (index along the
  // contiguous dim) + start
  auto single = [](const Mono& m) {
    int dim = -1;
    for (size_t d = 0; d < 4; ++d)
      if (m.pow[d]) {
        if (dim >= 0 || m.pow[d] != 1) return -2;
        dim = static_cast<int>(d);
      }
    return dim;
  };
  Poly start;
  int contiguous = -1, strided = -1;
  ScalarPoly stride;
  for (auto& [m, c] : p->off) {
    const int d = single(m);
    if (d == -1) {
      addTo(start, m, c);
    } else if (d >= 0 && m.factors.empty() && c == 1 && contiguous < 0) {
      contiguous = d;
    } else if (d >= 0 && strided < 0) {
      strided = d;
      stride.terms[m.factors] = c;
    } else {
      return std::nullopt;
    }
  }
  // A unit term along one dim and a stride along the other; should both be
  // unit (a stride of 1), the last dim is the contiguous one.
  if (contiguous < 0 || strided < 0 || contiguous == strided) return std::nullopt;
  if (contiguous == 0 && stride.terms.size() == 1 && stride.terms.begin()->first.empty() &&
      stride.terms.begin()->second == 1)
    std::swap(contiguous, strided);
  ta.transposed = contiguous == 0;
  ta.tileRows = shape[static_cast<size_t>(strided)];
  ta.tileCols = shape[static_cast<size_t>(contiguous)];
  auto st = extentOf(stride, ev);
  if (!st || st->scale <= 0) return std::nullopt;
  ta.rowStride = *st;
  // start = r0 * stride + c0: the terms that are multiples of the stride
  // are the row's.
  const Value* strideArg = st->arg >= 0 ? f.arg(static_cast<unsigned>(st->arg)) : nullptr;
  for (auto& [m, c] : start) {
    auto it = strideArg ? std::find(m.factors.begin(), m.factors.end(), strideArg) : m.factors.end();
    bool row = c % st->scale == 0 && (!strideArg || it != m.factors.end());
    if (row) {
      std::vector<const Value*> fs = m.factors;
      if (strideArg) fs.erase(fs.begin() + (it - m.factors.begin()));
      ta.rowStart.terms[fs] += c / st->scale;
    } else {
      ta.colStart.terms[m.factors] += c;
    }
  }
  // The mask: an `and` of `index + start < bound` per dimension.
  std::optional<ScalarPoly> maskRowStart;
  if (maskV) {
    bool ok = true;
    std::function<void(const Value*, std::vector<int>)> leaves = [&](const Value* v, std::vector<int> dims) {
      // dims[d]: the access tile's dimension that v's dimension d is.
      const Op* op = v->definingOp();
      if (!ok || !op) {
        ok = false;
        return;
      }
      switch (op->code()) {
        case OpCode::And:
          leaves(op->operand(0), dims);
          leaves(op->operand(1), dims);
          return;
        case OpCode::Broadcast: return leaves(op->operand(0), dims);
        case OpCode::ExpandDims: {
          std::vector<int> inner = dims;
          inner.erase(inner.begin() + op->intAttr("axis"));
          return leaves(op->operand(0), inner);
        }
        case OpCode::Cmp: {
          if (op->strAttr("pred") != "lt") break;
          auto lhs = ev.ints(op->operand(0)), rhs = ev.ints(op->operand(1));
          if (!lhs || !rhs) break;
          auto bound = scalarPart(*rhs);
          if (!bound) break;
          auto ext = extentOf(*bound, ev);
          if (!ext) break;
          // lhs = index(d) + s, s index-free.
          int dim = -1;
          Poly rest;
          for (auto& [m, c] : *lhs) {
            const int d = single(m);
            if (d == -1) {
              addTo(rest, m, c);
            } else if (d >= 0 && m.factors.empty() && c == 1 && dim == -1 && static_cast<size_t>(d) < dims.size()) {
              dim = dims[static_cast<size_t>(d)];
            } else {
              dim = -2;
            }
          }
          if (dim < 0) break;
          auto s = scalarPart(rest);
          if (!s) break;
          if (dim == strided) {
            if (ta.rows) break;
            ta.rows = ext;
            maskRowStart = *s;
          } else {
            if (ta.cols || !(*s == ta.colStart)) break;
            ta.cols = ext;
          }
          return;
        }
        default: break;
      }
      ok = false;
    };
    leaves(maskV, {0, 1});
    if (!ok) return std::nullopt;
  }
  // Rows bounded from another start than the pointer's: a stack of
  // rows-bound planes, the difference a multiple of the bound.
  if (maskRowStart && !(*maskRowStart == ta.rowStart)) {
    const Value* boundArg = ta.rows->arg >= 0 ? f.arg(static_cast<unsigned>(ta.rows->arg)) : nullptr;
    ScalarPoly diff = ta.rowStart;
    for (auto& [fs, c] : maskRowStart->terms)
      if ((diff.terms[fs] -= c) == 0) diff.terms.erase(fs);
    ScalarPoly z;
    for (auto& [fs, c] : diff.terms) {
      auto it = boundArg ? std::find(fs.begin(), fs.end(), boundArg) : fs.end();
      if (c % ta.rows->scale != 0 || (boundArg && it == fs.end())) return std::nullopt;
      std::vector<const Value*> rest = fs;
      if (boundArg) rest.erase(rest.begin() + (it - fs.begin()));
      z.terms[rest] += c / ta.rows->scale;
    }
    // The plane stride rows * ld must be one extent.
    if (boundArg && strideArg) return std::nullopt;
    ta.rank = 3;
    ta.planeStride = {boundArg ? ta.rows->arg : strideArg ? st->arg : -1, ta.rows->scale * st->scale};
    ta.zStart = z;
    ta.rowStart = *maskRowStart;
  }
  // TMA's rules: a 16-byte aligned base, rows a multiple of 16 bytes apart.
  const int64_t eb = static_cast<int64_t>(byteSize(ta.dtype));
  const int64_t baseDiv = axis.get(p->base).divisibility[0];
  int64_t strideBytes = st->scale * eb;
  if (strideArg) strideBytes *= axis.get(strideArg).divisibility[0];
  int64_t planeBytes = ta.planeStride.scale * eb;
  if (ta.rank == 3 && ta.planeStride.arg >= 0)
    planeBytes *= axis.get(f.arg(static_cast<unsigned>(ta.planeStride.arg))).divisibility[0];
  ta.aligned = baseDiv % 16 == 0 && strideBytes % 16 == 0 && (ta.rank == 2 || planeBytes % 16 == 0);
  return ta;
}

}  // namespace tessera::ir
