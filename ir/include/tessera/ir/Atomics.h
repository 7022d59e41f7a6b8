// The attributes of the atomic ops: what an `atomic_rmw` does (its kind),
// how it orders the program's other memory accesses (its order) and which
// programs that ordering is guaranteed to (its scope). The table is
// Atomics.def; the semantics are in IR.h ("Atomics").
#pragma once

#include <optional>
#include <string>

#include "tessera/ir/IR.h"

namespace tessera::ir {

enum class AtomicKind : uint8_t {
#define TS_ATOMIC_KIND(Enum, name, floats) Enum,
#include "tessera/ir/Atomics.def"
};
enum class MemOrder : uint8_t {
#define TS_MEM_ORDER(Enum, name, acquires, releases) Enum,
#include "tessera/ir/Atomics.def"
};
enum class MemScope : uint8_t {
#define TS_MEM_SCOPE(Enum, name) Enum,
#include "tessera/ir/Atomics.def"
};

const char* name(AtomicKind k);
const char* name(MemOrder o);
const char* name(MemScope s);
std::optional<AtomicKind> parseAtomicKind(const std::string& s);
std::optional<MemOrder> parseMemOrder(const std::string& s);
std::optional<MemScope> parseMemScope(const std::string& s);
/// add, min, max and xchg also take floats; and, or, xor integers only.
bool takesFloats(AtomicKind k);
bool acquires(MemOrder o);
bool releases(MemOrder o);

/// The attributes of a verified atomic_rmw / atomic_cas / fence (an absent
/// or unknown one is an internal error: the verifier rejects it first).
AtomicKind atomicKind(const Op& op);
MemOrder memOrder(const Op& op);
MemScope memScope(const Op& op);

/// The name a user wrote the op by, for messages: atomic_<kind> for an
/// atomic_rmw (atomic_add, ...), `assert "message"` for an assert, else
/// the op's IR name.
std::string userName(const Op& op);

/// atomic_rmw or atomic_cas: reads and writes through operand 0 and returns
/// the old values.
bool isAtomic(OpCode op);
/// The operand index of an atomic's (or a store's) value and of its
/// optional mask: atomic_cas has the compare operand in between.
unsigned valueOperand(OpCode op);
unsigned maskOperand(OpCode op);

}  // namespace tessera::ir
