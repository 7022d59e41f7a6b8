// pad-tiles: every tile dimension that is not a power of two is padded to
// the next power of two, with masks so that the padding is never observed.
//
// Why: a GPU layout spreads a dim over threads in power-of-two steps
// (Layout.h); a 100-wide dim cannot be split that way and would be held
// whole by every thread (100 registers per thread instead of 1 to 4, and
// 128x the loads). Padded to 128 it is spread like any other.
//
// Semantics kept: the padded positions hold unspecified values that no
// effect and no result may depend on. So, after retyping every tile (and
// the buffers tiles are stored in) to the padded shape:
//  * load / store / atomics / copy: the mask gains `index < extent` along
//    every padded dim (a padded lane never touches memory; a masked copy
//    writes 0 to its slot, IR.h);
//  * reduce along a padded axis: padded elements are replaced by the
//    reduction's identity first (-0.0 / 0 for sum, -inf / the type's minimum
//    for max and argmax, whose ties go to the lower, valid index; +inf / the
//    maximum for min and argmin, likewise);
//  * dot with a padded K: the padded columns of A and rows of B are zeroed,
//    so each padded product is 0 * 0 (a block-scaled dot's padded scale
//    blocks become 127, 2^0: never NaN);
//  * gather: src and index are padded alike in every dim but the axis; an
//    in-range index never points at padding, an out-of-range one gives an
//    unspecified value anyway (IR.h), and padded index lanes give padding;
//    join / split: the trailing dim of 2 is never padded, the others alike;
//  * arange(s, e) becomes arange(s, s + padded), its extra values being
//    padding; everything else (elementwise math, broadcasts, expand_dims,
//    transpose, local loads/stores on padded buffers, loop-carried values)
//    just takes the padded type. Integer division by a padded lane's value
//    is harmless: the backends already define division by 0 (Elementwise).
// A reshape that moves a non-power-of-two dim (anything but adding or
// dropping size-1 dims) has no padded equivalent: the function is left as
// it is and a warning names the reshape's line and the cost.
//
// The leading dim of a multi-buffered buffer (used through buffer_slot)
// counts stages, not elements, and is never padded.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "PassUtils.h"
#include "tessera/ir/Builder.h"
#include "tessera/ir/Pass.h"
#include "tessera/support/Error.h"

namespace tessera::ir {
namespace {

int64_t ceilPow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}
Shape padded(const Shape& s) {
  Shape r = s;
  for (auto& d : r) d = ceilPow2(d);
  return r;
}
bool needsPad(const Shape& s) { return padded(s) != s; }
Shape withoutOnes(const Shape& s) {
  Shape r;
  for (int64_t d : s)
    if (d != 1) r.push_back(d);
  return r;
}

class PadTiles : public Pass {
 public:
  explicit PadTiles(std::vector<std::string>* warnings) : warnings_(warnings) {}
  const char* name() const override { return "pad-tiles"; }

  void run(Function& f) override {
    orig_.clear();
    slotted_.clear();
    bool any = false;
    for (auto& a : f.body().args())
      if (a->type().isTile() && needsPad(a->type().shape())) any = true;
    walk(f.body(), [&](Op& op) {
      if (op.code() == OpCode::BufferSlot) slotted_.insert(op.operand(0));
      for (auto& r : op.results())
        if (r->type().isTile() && needsPad(r->type().shape())) any = true;
    });
    if (!any) return;
    if (const Op* r = blockingReshape(f.body())) {
      warn(*r);
      return;
    }
    retype(f.body());
    mask(f.body());
  }

 private:
  std::vector<std::string>* warnings_;
  std::map<const Value*, Shape> orig_;  // values whose shape changed
  std::set<const Value*> slotted_;      // buffers whose leading dim is a stage index

  const Op* blockingReshape(Block& b) {
    const Op* found = nullptr;
    walk(b, [&](Op& op) {
      if (found || op.code() != OpCode::Reshape) return;
      const Shape& in = op.operand(0)->type().shape();
      const Shape& out = op.result()->type().shape();
      if ((needsPad(in) || needsPad(out)) && withoutOnes(in) != withoutOnes(out)) found = &op;
    });
    return found;
  }

  void warn(const Op& r) {
    if (!warnings_) return;
    const Type& t = r.operand(0)->type();
    const Type& o = r.result()->type();
    int64_t worst = 1;
    for (const Shape* s : {&t.shape(), &o.shape()})
      for (int64_t d : *s)
        if (padded({d})[0] != d) worst = std::max(worst, d);
    warnings_->push_back(r.loc().str() + ": warning: reshape of " + t.str() + " to " + o.str() +
                         " has no power-of-two padding, so tiles with non-power-of-two dims stay unpadded in this "
                         "kernel: on GPUs every thread holds such a dim whole (up to " +
                         std::to_string(worst) +
                         " elements per thread where a padded dim would be spread over the "
                         "threads); make the reshaped dims powers of two");
  }

  void retypeValue(Value* v) {
    const Type& t = v->type();
    if (t.isTile() && needsPad(t.shape())) {
      orig_[v] = t.shape();
      v->setType(t.withShape(padded(t.shape())));
    } else if (t.isBuffer()) {
      Shape s = t.shape();
      size_t from = slotted_.count(v) ? 1 : 0;
      for (size_t i = from; i < s.size(); ++i) s[i] = ceilPow2(s[i]);
      if (s != t.shape()) {
        orig_[v] = t.shape();
        v->setType(Type::buffer(t.dtype(), t.space(), s));
      }
    }
  }

  void retype(Block& b) {
    for (auto& a : b.args()) retypeValue(a.get());
    for (auto& op : b.ops()) {
      for (auto& r : op->results()) retypeValue(r.get());
      if (op->code() == OpCode::Arange && orig_.count(op->result())) {
        int64_t s = op->intAttr("start");
        op->attrs()["end"] = s + op->result()->type().shape()[0];
      }
      for (auto& reg : op->regions()) retype(reg->block());
    }
  }

  /// `index < extent` along the padded dims of `v` listed in `dims` (all
  /// padded dims when empty), broadcast to v's padded shape; nullptr when
  /// none of them is padded.
  Value* validMask(Builder& bld, const Value* v, std::vector<int> dims = {}) {
    auto it = orig_.find(v);
    if (it == orig_.end()) return nullptr;
    const Shape& o = it->second;
    const Shape& p = v->type().shape();
    if (dims.empty())
      for (int d = 0; d < static_cast<int>(p.size()); ++d) dims.push_back(d);
    Value* m = nullptr;
    for (int d : dims) {
      if (o[d] == p[d]) continue;
      Value* r = bld.arange(0, p[d]);
      Value* bound = bld.constant(Type::tile(Type::scalar(DType::I32), {p[d]}), o[d]);
      Value* c = bld.cmp("lt", r, bound);
      for (int i = 0; i < static_cast<int>(p.size()); ++i)
        if (i != d) c = bld.expandDims(c, i);
      if (c->type().shape() != p) c = bld.broadcast(c, p);
      m = m ? bld.binary(OpCode::And, m, c) : c;
    }
    return m;
  }

  /// The reduction identity as a constant tile of `t`.
  static Value* identity(Builder& bld, const std::string& kind, const Type& t) {
    DType d = t.dtype();
    if (isFloat(d)) {
      double inf = std::numeric_limits<double>::infinity();
      const bool low = kind == "min" || kind == "argmin";
      double v = kind == "sum" ? -0.0 : low ? inf : -inf;
      return bld.constant(t, v);
    }
    int64_t lo, hi;
    switch (d) {
      case DType::I1: lo = 0, hi = 1; break;
      case DType::I8: lo = INT8_MIN, hi = INT8_MAX; break;
      case DType::I16: lo = INT16_MIN, hi = INT16_MAX; break;
      case DType::I32: lo = INT32_MIN, hi = INT32_MAX; break;
      // Unsigned: 0 and all ones (u64's all ones is the int64 -1).
      case DType::U8: lo = 0, hi = UINT8_MAX; break;
      case DType::U16: lo = 0, hi = UINT16_MAX; break;
      case DType::U32: lo = 0, hi = UINT32_MAX; break;
      case DType::U64: lo = 0, hi = -1; break;
      default: lo = INT64_MIN, hi = INT64_MAX; break;
    }
    return bld.constant(t, kind == "sum" ? int64_t{0} : kind == "min" || kind == "argmin" ? hi : lo);
  }

  /// Operand `i` of `op` (a mask, possibly absent) and-ed with `valid`.
  static void andMask(Builder& bld, Op& op, unsigned i, Value* valid) {
    if (op.numOperands() > i)
      op.setOperand(i, bld.binary(OpCode::And, op.operand(i), valid));
    else
      op.appendOperand(valid);
  }

  void mask(Block& b) {
    for (size_t i = 0; i < b.ops().size(); ++i) {
      Op& op = *b.ops()[i];
      for (auto& reg : op.regions()) mask(reg->block());
      Builder bld;
      bld.setInsertionPoint(&b, i);
      bld.setLoc(op.loc());
      switch (op.code()) {
        case OpCode::Load:
          if (Value* v = validMask(bld, op.operand(0))) {
            if (op.numOperands() == 3)
              op.setOperand(1, bld.binary(OpCode::And, op.operand(1), v));
            else
              andMask(bld, op, 1, v);
          }
          break;
        case OpCode::Store:
        case OpCode::AtomicRmw:
        case OpCode::AtomicCas:
          if (Value* v = validMask(bld, op.operand(0))) andMask(bld, op, maskOperand(op.code()), v);
          break;
        case OpCode::Copy:
          if (Value* v = validMask(bld, op.operand(1))) andMask(bld, op, 2, v);
          break;
        case OpCode::Reduce: {
          Value* x = op.operand(0);
          int axis = static_cast<int>(op.intAttr("axis"));
          if (Value* v = validMask(bld, x, {axis}))
            op.setOperand(0, bld.select(v, x, identity(bld, op.strAttr("kind"), x->type())));
          break;
        }
        case OpCode::Dot: {
          Value* a = op.operand(0);
          Value* bm = op.operand(1);
          if (Value* v = validMask(bld, a, {1})) op.setOperand(0, bld.select(v, a, zero(bld, a->type())));
          if (Value* v = validMask(bld, bm, {0})) op.setOperand(1, bld.select(v, bm, zero(bld, bm->type())));
          // A block-scaled dot's padded K blocks: a scale that is NaN (the
          // e8m0 code 255) would make 0 x scale NaN; 127 (2^0) keeps the
          // zeroed products zero.
          for (unsigned s : {3u, 4u})
            if (s < op.numOperands())
              if (Value* v = validMask(bld, op.operand(s), {1}))
                op.setOperand(s, bld.select(v, op.operand(s), bld.constant(op.operand(s)->type(), int64_t{127})));
          break;
        }
        default: break;
      }
      // Skip the ops just inserted before `op`.
      while (b.ops()[i].get() != &op) ++i;
    }
  }

  static Value* zero(Builder& bld, const Type& t) {
    return isFloat(t.dtype()) ? bld.constant(t, 0.0) : bld.constant(t, int64_t{0});
  }
};

}  // namespace

std::unique_ptr<Pass> createPadTilesPass(std::vector<std::string>* warnings) {
  return std::make_unique<PadTiles>(warnings);
}

}  // namespace tessera::ir
