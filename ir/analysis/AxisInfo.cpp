#include "tessera/ir/analysis/AxisInfo.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <variant>

#include "tessera/support/Error.h"

namespace tessera::ir {

namespace {
// Cap divisibility so products never overflow; 2^30 is plenty for alignment.
constexpr int64_t kMaxDiv = int64_t{1} << 30;

// The integer every element of `v` holds: a constant, or a splat of one.
std::optional<int64_t> uniformConstant(const ir::Value* v) {
  const ir::Op* d = v->definingOp();
  if (d && d->code() == ir::OpCode::Splat) d = d->operand(0)->definingOp();
  if (!d || d->code() != ir::OpCode::Constant) return std::nullopt;
  auto it = d->attrs().find("value");
  if (it == d->attrs().end() || !std::holds_alternative<int64_t>(it->second)) return std::nullopt;
  return std::get<int64_t>(it->second);
}

int64_t pow2Divisor(int64_t v) {
  if (v == 0) return kMaxDiv;
  int64_t d = 1;
  while ((v % (d * 2)) == 0 && d < kMaxDiv) d *= 2;
  return d;
}

int rankOf(const ir::Value* v) { return std::max(1, v->type().rank()); }

bool tracked(const ir::Value* v) {
  const ir::Type& t = v->type();
  return (t.isScalar() || t.isPointer() || t.isTile()) && (t.isIntLike() || t.isPointerLike());
}
}  // namespace

AxisInfo AxisInfo::unknown(int rank) {
  AxisInfo a;
  a.contiguity.assign(static_cast<size_t>(rank), 1);
  a.divisibility.assign(static_cast<size_t>(rank), 1);
  a.constancy.assign(static_cast<size_t>(rank), 1);
  return a;
}

AxisAnalysis::AxisAnalysis(const ir::Function& f) {
  for (unsigned i = 0; i < f.numArgs(); ++i) {
    const ir::Value* a = f.arg(i);
    if (!tracked(a)) continue;
    AxisInfo info = AxisInfo::unknown(1);
    if (i < f.argAttrs().size()) {
      auto it = f.argAttrs()[i].find("divisibility");
      if (it != f.argAttrs()[i].end())
        if (auto* d = std::get_if<int64_t>(&it->second)) info.divisibility[0] = std::clamp<int64_t>(*d, 1, kMaxDiv);
    }
    info_[a] = info;
  }
  // Pre-order walk: ops are visited in program order, so operands defined
  // in the same or an enclosing block are known before their users.
  auto& body = const_cast<ir::Function&>(f).body();
  ir::walk(body, [&](ir::Op& op) { visit(op); });
}

AxisInfo AxisAnalysis::get(const ir::Value* v) const {
  auto it = info_.find(v);
  if (it != info_.end()) return it->second;
  return AxisInfo::unknown(rankOf(v));
}

bool AxisAnalysis::contiguousChunks(const ir::Value* v, int64_t chunk) const {
  if (!v->type().isTile()) return false;
  if (chunk <= 1) return true;
  const auto& shape = v->type().shape();
  AxisInfo a = get(v);
  int64_t last = shape.back();
  return last % chunk == 0 && a.contiguity.back() % chunk == 0;
}

void AxisAnalysis::visit(const ir::Op& op) {
  using ir::OpCode;
  if (op.code() == OpCode::For && op.numRegions() == 1) {
    // The induction variable lo + i * step is a multiple of every power of
    // two dividing both lo and step (k0 = 0, 128, 256, ...: the column
    // offsets k0 + arange(BK) of a K loop stay provably aligned).
    const ir::Value* iv = op.region(0).block().arg(0);
    if (tracked(iv)) {
      AxisInfo info = AxisInfo::unknown(1);
      info.divisibility[0] = std::gcd(get(op.operand(0)).divisibility[0], get(op.operand(2)).divisibility[0]);
      info_[iv] = info;
    }
  }
  if (op.numResults() != 1 || !tracked(op.result())) return;
  const ir::Value* r = op.result();
  const ir::Shape& shape = r->type().shape();
  int rank = rankOf(r);
  AxisInfo out = AxisInfo::unknown(rank);
  auto dim = [&](int d) { return shape.empty() ? int64_t{1} : shape[static_cast<size_t>(d)]; };

  switch (op.code()) {
    case OpCode::Constant: {
      int64_t value = 0;
      if (auto* i = std::get_if<int64_t>(&op.attrs().at("value"))) value = *i;
      for (int d = 0; d < rank; ++d) {
        out.divisibility[d] = pow2Divisor(value);
        out.constancy[d] = dim(d);
      }
      break;
    }
    case OpCode::Arange: {
      out.contiguity[0] = dim(0);
      out.divisibility[0] = pow2Divisor(op.intAttr("start"));
      break;
    }
    case OpCode::Splat: {
      AxisInfo s = get(op.operand(0));
      for (int d = 0; d < rank; ++d) {
        out.divisibility[d] = s.divisibility[0];
        out.constancy[d] = dim(d);
      }
      break;
    }
    case OpCode::Broadcast: {
      const ir::Value* src = op.operand(0);
      AxisInfo s = get(src);
      const ir::Shape& ss = src->type().shape();
      for (int d = 0; d < rank; ++d) {
        if (ss[d] == 1 && shape[d] != 1) {
          out.contiguity[d] = 1;
          out.constancy[d] = shape[d];
          out.divisibility[d] = s.divisibility[d];
        } else {
          out.contiguity[d] = s.contiguity[d];
          out.constancy[d] = s.constancy[d];
          out.divisibility[d] = s.divisibility[d];
        }
      }
      break;
    }
    case OpCode::ExpandDims: {
      AxisInfo s = get(op.operand(0));
      auto axis = static_cast<size_t>(op.intAttr("axis"));
      out = s;
      out.contiguity.insert(out.contiguity.begin() + static_cast<std::ptrdiff_t>(axis), 1);
      out.constancy.insert(out.constancy.begin() + static_cast<std::ptrdiff_t>(axis), 1);
      out.divisibility.insert(out.divisibility.begin() + static_cast<std::ptrdiff_t>(axis), 1);
      break;
    }
    case OpCode::Reshape: {
      const ir::Value* src = op.operand(0);
      AxisInfo s = get(src);
      int64_t srcLast = src->type().shape().back();
      int64_t L = shape.back();
      // A result row of length L lies inside one source row when L divides
      // the source row length; runs are then cut at L.
      if (srcLast % L == 0) {
        out.contiguity.back() = std::gcd(s.contiguity.back(), L);
        out.constancy.back() = std::gcd(s.constancy.back(), L);
        out.divisibility.back() = s.divisibility.back();
      }
      break;
    }
    case OpCode::Add:
    case OpCode::PtrAdd: {
      AxisInfo a = get(op.operand(0)), b = get(op.operand(1));
      // Offsets of ptr_add count elements; pointer divisibility is in bytes.
      int64_t scale = op.code() == OpCode::PtrAdd ? byteSize(r->type().dtype()) : 1;
      for (int d = 0; d < rank; ++d) {
        out.contiguity[d] =
            std::max(std::gcd(a.contiguity[d], b.constancy[d]), std::gcd(b.contiguity[d], a.constancy[d]));
        out.divisibility[d] = std::gcd(a.divisibility[d], std::min(kMaxDiv, b.divisibility[d] * scale));
        out.constancy[d] = std::gcd(a.constancy[d], b.constancy[d]);
      }
      break;
    }
    case OpCode::Sub: {
      AxisInfo a = get(op.operand(0)), b = get(op.operand(1));
      for (int d = 0; d < rank; ++d) {
        out.contiguity[d] = std::gcd(a.contiguity[d], b.constancy[d]);
        out.divisibility[d] = std::gcd(a.divisibility[d], b.divisibility[d]);
        out.constancy[d] = std::gcd(a.constancy[d], b.constancy[d]);
      }
      break;
    }
    case OpCode::Mul: {
      AxisInfo a = get(op.operand(0)), b = get(op.operand(1));
      for (int d = 0; d < rank; ++d) {
        out.divisibility[d] = std::min(kMaxDiv, a.divisibility[d] * b.divisibility[d]);
        out.constancy[d] = std::gcd(a.constancy[d], b.constancy[d]);
      }
      break;
    }
    case OpCode::Div:
    case OpCode::Rem: {
      // By a power of two c dividing x's divisibility: x is a multiple of
      // c, so x / c is exact (truncating, for negative x too), a multiple
      // of div(x) / c, and x % c is 0 (`(K + 1) / 2`, a row of packed fp4
      // codes, written K / 2 + K % 2 keeps K's alignment).
      const AxisInfo a = get(op.operand(0));
      const std::optional<int64_t> c = uniformConstant(op.operand(1));
      if (!c || *c <= 0 || (*c & (*c - 1)) != 0 || !r->type().isIntLike()) break;
      for (int d = 0; d < rank; ++d) {
        if (a.divisibility[d] % *c != 0) continue;
        if (op.code() == OpCode::Div) {
          out.divisibility[d] = a.divisibility[d] / *c;
          out.constancy[d] = a.constancy[d];
        } else {
          out.divisibility[d] = kMaxDiv;
          out.constancy[d] = dim(d);
        }
      }
      break;
    }
    case OpCode::Cast: {
      // Widening integer casts keep every property; narrowing ones may wrap.
      const ir::Value* src = op.operand(0);
      if (src->type().isIntLike() && src->type().dtype() != DType::I1 &&
          bitWidth(r->type().dtype()) >= bitWidth(src->type().dtype()))
        out = get(src);
      break;
    }
    default: {
      // Elementwise ops of constant operands stay constant.
      if (ir::isElementwise(op.code()) && op.numOperands() > 0) {
        for (int d = 0; d < rank; ++d) {
          int64_t k = dim(d);
          for (const ir::Value* v : op.operands())
            k = std::gcd(k, get(v).constancy[std::min<size_t>(d, get(v).constancy.size() - 1)]);
          out.constancy[d] = k;
        }
      }
      break;
    }
  }
  info_[r] = out;
}

}  // namespace tessera::ir
