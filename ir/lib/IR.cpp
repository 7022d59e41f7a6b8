#include "tessera/ir/IR.h"

#include <cstdio>
#include <unordered_map>

#include "tessera/support/Error.h"

namespace tessera::ir {

namespace {
struct OpInfo {
  OpCode code;
  const char* name;
  unsigned traits;
};
// Ops.def in OpCode order.
constexpr OpInfo kOps[] = {
#define TS_OP(Enum, name, traits) {OpCode::Enum, name, traits},
#include "tessera/ir/Ops.def"
};
const OpInfo& info(OpCode op) {
  auto i = static_cast<size_t>(op);
  TS_ASSERT(i < std::size(kOps) && kOps[i].code == op, "op table out of order");
  return kOps[i];
}
}  // namespace

const char* opName(OpCode op) { return info(op).name; }

std::optional<OpCode> parseOpName(const std::string& s) {
  static const auto* table = [] {
    auto* m = new std::unordered_map<std::string, OpCode>();
    for (const auto& o : kOps) (*m)[o.name] = o.code;
    return m;
  }();
  auto it = table->find(s);
  if (it == table->end()) return std::nullopt;
  return it->second;
}

bool isElementwise(OpCode op) { return info(op).traits & kElementwise; }
bool isTerminator(OpCode op) { return info(op).traits & kTerminator; }
bool hasSideEffects(OpCode op) { return info(op).traits & kEffects; }
bool writesMemory(OpCode op) { return info(op).traits & kWrites; }
bool isBinary(OpCode op) { return info(op).traits & kBinary; }
bool isUnary(OpCode op) { return info(op).traits & kUnary; }
bool needsFloat(OpCode op) { return info(op).traits & kFloatOnly; }
bool isTranscendental(OpCode op) { return info(op).traits & kTranscendental; }
bool isFreeToRecompute(OpCode op) { return info(op).traits & kFree; }
bool isCheapToRecompute(OpCode op) { return info(op).traits & kCheap; }

std::optional<bool> foldIntCmp(const std::string& p, int64_t a, int64_t b, DType d) {
  if (isUnsigned(d)) {  // compare the (zero-extended) bits unsigned
    const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    if (p == "lt") return ua < ub;
    if (p == "le") return ua <= ub;
    if (p == "gt") return ua > ub;
    if (p == "ge") return ua >= ub;
  }
  if (p == "eq") return a == b;
  if (p == "ne") return a != b;
  if (p == "lt") return a < b;
  if (p == "le") return a <= b;
  if (p == "gt") return a > b;
  if (p == "ge") return a >= b;
  return std::nullopt;
}

bool hasRegions(OpCode op) { return info(op).traits & kRegions; }

std::string attrStr(const Attr& a) {
  if (auto* i = std::get_if<int64_t>(&a)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&a)) {
    // Round-trippable: hex float keeps every bit, and marks the value float.
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", *d);
    return buf;
  }
  if (auto* s = std::get_if<std::string>(&a)) return *s;
  const auto& v = std::get<std::vector<int64_t>>(a);
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}

std::string Location::str() const {
  if (!known()) return "<unknown>";
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

Block* Value::ownerBlock() const { return def_ ? def_->parent() : owner_; }

Block::~Block() {
  std::vector<std::unique_ptr<Op>> work;
  for (auto& op : ops_) work.push_back(std::move(op));
  ops_.clear();
  while (!work.empty()) {
    std::unique_ptr<Op> op = std::move(work.back());
    work.pop_back();
    for (const auto& r : op->regions()) {
      auto& inner = r->block().ops();
      for (auto& o : inner) work.push_back(std::move(o));
      inner.clear();
    }
    // `op` goes here, its regions already empty: no recursion.
  }
}

Value* Block::addArgument(Type t) {
  args_.push_back(std::make_unique<Value>(std::move(t), nullptr, this, numArgs()));
  return args_.back().get();
}

Op* Block::push(std::unique_ptr<Op> op) {
  op->setParent(this);
  ops_.push_back(std::move(op));
  return ops_.back().get();
}

Op* Block::insert(size_t pos, std::unique_ptr<Op> op) {
  op->setParent(this);
  auto it = ops_.insert(ops_.begin() + static_cast<std::ptrdiff_t>(pos), std::move(op));
  return it->get();
}

Op* Block::parentOp() const { return parent_ ? parent_->parentOp() : nullptr; }

Op::Op(OpCode code, std::vector<Value*> operands, const std::vector<Type>& resultTypes,
       std::map<std::string, Attr> attrs, Location loc)
    : code_(code), operands_(std::move(operands)), attrs_(std::move(attrs)), loc_(std::move(loc)) {
  for (size_t i = 0; i < resultTypes.size(); ++i)
    results_.push_back(std::make_unique<Value>(resultTypes[i], this, nullptr, static_cast<unsigned>(i)));
}

int64_t Op::intAttr(const std::string& k) const {
  auto it = attrs_.find(k);
  TS_ASSERT(it != attrs_.end() && std::holds_alternative<int64_t>(it->second),
            std::string(name()) + ": missing integer attribute '" + k + "'");
  return std::get<int64_t>(it->second);
}
double Op::floatAttr(const std::string& k) const {
  auto it = attrs_.find(k);
  TS_ASSERT(it != attrs_.end(), std::string(name()) + ": missing attribute '" + k + "'");
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  TS_ASSERT(std::holds_alternative<double>(it->second),
            std::string(name()) + ": attribute '" + k + "' is not a number");
  return std::get<double>(it->second);
}
const std::string& Op::strAttr(const std::string& k) const {
  auto it = attrs_.find(k);
  TS_ASSERT(it != attrs_.end() && std::holds_alternative<std::string>(it->second),
            std::string(name()) + ": missing string attribute '" + k + "'");
  return std::get<std::string>(it->second);
}
const std::vector<int64_t>& Op::intsAttr(const std::string& k) const {
  auto it = attrs_.find(k);
  TS_ASSERT(it != attrs_.end() && std::holds_alternative<std::vector<int64_t>>(it->second),
            std::string(name()) + ": missing integer-list attribute '" + k + "'");
  return std::get<std::vector<int64_t>>(it->second);
}

Region* Op::addRegion() {
  regions_.push_back(std::make_unique<Region>(this));
  return regions_.back().get();
}

Value* Function::addArgument(Type t, std::string name) {
  Value* v = body().addArgument(std::move(t));
  v->nameHint = std::move(name);
  argAttrs_.emplace_back();
  return v;
}

Function* Module::lookup(const std::string& name) const {
  for (auto& f : functions)
    if (f->name() == name) return f.get();
  return nullptr;
}

namespace {
void cloneBlock(const Block& src, Block& dst, std::unordered_map<const Value*, Value*>& map) {
  for (auto& a : src.args()) {
    Value* n = dst.addArgument(a->type());
    n->nameHint = a->nameHint;
    map[a.get()] = n;
  }
  for (auto& op : src.ops()) {
    std::vector<Value*> operands;
    for (Value* v : op->operands()) {
      auto it = map.find(v);
      TS_ASSERT(it != map.end(), "clone: operand defined after use");
      operands.push_back(it->second);
    }
    std::vector<Type> types;
    for (auto& r : op->results()) types.push_back(r->type());
    auto copy = std::make_unique<Op>(op->code(), std::move(operands), types, op->attrs(), op->loc());
    for (unsigned i = 0; i < op->numResults(); ++i) map[op->result(i)] = copy->result(i);
    for (auto& r : op->regions()) cloneBlock(r->block(), copy->addRegion()->block(), map);
    dst.push(std::move(copy));
  }
}
}  // namespace

std::unique_ptr<Function> clone(const Function& f) {
  auto n = std::make_unique<Function>(f.name(), f.loc());
  std::unordered_map<const Value*, Value*> map;
  cloneBlock(f.body(), n->body(), map);
  n->argAttrs() = f.argAttrs();
  return n;
}

bool isReduceKind(const std::string& kind) {
  return kind == "sum" || kind == "max" || kind == "min" || kind == "argmax" || kind == "argmin";
}

const Op* dotOperandLoad(const Op& dot, unsigned i, bool* throughTranspose) {
  if (throughTranspose) *throughTranspose = false;
  if (dot.code() != OpCode::Dot || i > 1) return nullptr;
  const Op* d = dot.operand(i)->definingOp();
  if (d && d->code() == OpCode::Transpose && i == 1 && d->parent() == dot.parent() &&
      d->operand(0)->type().rank() == 2) {
    auto p = d->attrs().find("perm");
    const auto* perm = p == d->attrs().end() ? nullptr : std::get_if<std::vector<int64_t>>(&p->second);
    if (!perm || *perm != std::vector<int64_t>{1, 0}) return nullptr;
    d = d->operand(0)->definingOp();
    if (!d || d->code() != OpCode::LocalLoad) return nullptr;
    if (throughTranspose) *throughTranspose = true;
    return d;
  }
  return d && d->code() == OpCode::LocalLoad ? d : nullptr;
}

}  // namespace tessera::ir
