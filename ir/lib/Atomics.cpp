#include "tessera/ir/Atomics.h"

#include <array>

#include "tessera/support/Error.h"

namespace tessera::ir {
namespace {

struct KindInfo {
  const char* name;
  bool floats;
};
constexpr std::array kKinds = {
#define TS_ATOMIC_KIND(Enum, name, floats) KindInfo{name, floats != 0},
#include "tessera/ir/Atomics.def"
};
struct OrderInfo {
  const char* name;
  bool acquires, releases;
};
constexpr std::array kOrders = {
#define TS_MEM_ORDER(Enum, name, acq, rel) OrderInfo{name, acq != 0, rel != 0},
#include "tessera/ir/Atomics.def"
};
constexpr std::array kScopes = {
#define TS_MEM_SCOPE(Enum, name) name,
#include "tessera/ir/Atomics.def"
};

template <class E, class Table, class NameOf>
std::optional<E> parseIn(const Table& t, const std::string& s, NameOf nameOf) {
  for (size_t i = 0; i < t.size(); ++i)
    if (s == nameOf(t[i])) return static_cast<E>(i);
  return std::nullopt;
}

template <class E>
E attrOf(const Op& op, const char* key, std::optional<E> (*parse)(const std::string&)) {
  std::optional<E> e = parse(op.strAttr(key));
  TS_ASSERT(e.has_value(), std::string("unverified attribute ") + key + " on " + op.name());
  return *e;
}

}  // namespace

const char* name(AtomicKind k) { return kKinds.at(static_cast<size_t>(k)).name; }
const char* name(MemOrder o) { return kOrders.at(static_cast<size_t>(o)).name; }
const char* name(MemScope s) { return kScopes.at(static_cast<size_t>(s)); }
std::optional<AtomicKind> parseAtomicKind(const std::string& s) {
  return parseIn<AtomicKind>(kKinds, s, [](const KindInfo& k) { return k.name; });
}
std::optional<MemOrder> parseMemOrder(const std::string& s) {
  return parseIn<MemOrder>(kOrders, s, [](const OrderInfo& o) { return o.name; });
}
std::optional<MemScope> parseMemScope(const std::string& s) {
  return parseIn<MemScope>(kScopes, s, [](const char* n) { return n; });
}
bool takesFloats(AtomicKind k) { return kKinds.at(static_cast<size_t>(k)).floats; }
bool acquires(MemOrder o) { return kOrders.at(static_cast<size_t>(o)).acquires; }
bool releases(MemOrder o) { return kOrders.at(static_cast<size_t>(o)).releases; }

AtomicKind atomicKind(const Op& op) { return attrOf<AtomicKind>(op, "kind", parseAtomicKind); }
MemOrder memOrder(const Op& op) { return attrOf<MemOrder>(op, "order", parseMemOrder); }
MemScope memScope(const Op& op) { return attrOf<MemScope>(op, "scope", parseMemScope); }

std::string userName(const Op& op) {
  if (op.code() == OpCode::AtomicRmw && op.hasAttr("kind")) return "atomic_" + op.strAttr("kind");
  if (op.code() == OpCode::Assert && op.hasAttr("message")) return "assert \"" + op.strAttr("message") + "\"";
  return op.name();
}

bool isAtomic(OpCode op) { return op == OpCode::AtomicRmw || op == OpCode::AtomicCas; }
unsigned valueOperand(OpCode op) { return op == OpCode::AtomicCas ? 2 : 1; }
unsigned maskOperand(OpCode op) { return valueOperand(op) + 1; }

}  // namespace tessera::ir
