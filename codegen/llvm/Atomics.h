// Target-independent LLVM emission of one element of the IR's atomics
// (IR.h, "Atomics"): the CPU and GPU lowerings call it per element, passing
// the synchronisation scope their target names the op's scope with.
// Private to codegen: includes LLVM headers.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "tessera/ir/Atomics.h"
#include "tessera/support/DType.h"

namespace tessera::codegen {

llvm::AtomicOrdering llvmOrder(ir::MemOrder o);

/// One atomic read-modify-write of `kind` on dtype `dt`: LLVM's atomicrmw.
llvm::Value* emitAtomicRmw(llvm::IRBuilderBase& b, ir::AtomicKind kind, DType dt, llvm::Value* p, llvm::Value* v,
                           ir::MemOrder order, llvm::SyncScope::ID scope);
/// The same as a compare-and-swap loop (for a backend whose atomicrmw
/// drops the scope or order it is given while its cmpxchg keeps them).
llvm::Value* emitAtomicRmwByCas(llvm::IRBuilderBase& b, ir::AtomicKind kind, DType dt, llvm::Value* p, llvm::Value* v,
                                ir::MemOrder order, llvm::SyncScope::ID scope);

/// One element of the atomic_rmw or atomic_cas `op` on dtype `dt` at `p`:
/// `v` is the value and `cmp` the compare value (atomic_cas only). Returns
/// the old value, of v's type.
llvm::Value* emitAtomicElement(llvm::IRBuilderBase& b, const ir::Op& op, DType dt, llvm::Value* p, llvm::Value* v,
                               llvm::Value* cmp, llvm::SyncScope::ID scope);

}  // namespace tessera::codegen
