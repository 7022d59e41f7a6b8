// Predicated global loads and stores on NVPTX: PTX `@p ld.global` /
// `@p st.global` as inline assembly (LLVM has no IR form the NVPTX backend
// turns into a predicated access; a branch around the access is what it
// emits for `if (p) load`, and ptxas keeps the branch). The same forms as
// Triton's: the load's registers are first set to the `other` value by a
// `mov`, then overwritten by the predicated load, so a masked-off lane keeps
// `other` and touches no memory.
//
// The lowering emits them through GpuTargetInfo::predicatedLoad / Store; the
// emulator (codegen/emu/EmuInlineAsm.cpp) recognises exactly these texts and
// constraints (matchPredicatedAccess) and runs each as a branch around a
// checked access. Anything else in inline assembly is refused there, so the
// two sides are defined by this one table. Private to codegen; free of LLVM
// headers (tests include it).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "../llvm/LLVMForward.h"  // relative: tests include these headers by path

namespace tessera::codegen::nvptx {

/// One predicated access: `words` registers of `wordBits` bits moved as one
/// `ld.global` / `st.global` (.v2 / .v4 for 2 and 4 words of 32 bits).
/// wordBits 8 is a byte moved through a 16-bit register (ld.global.u8
/// zero-extends it). The address must be aligned to words * wordBits / 8.
struct PredicatedAccess {
  bool store = false;
  unsigned words = 1;      // 1, 2, 4 (32-bit words); 1 for 8 and 16 bits
  unsigned wordBits = 32;  // 8, 16, 32
  unsigned bytes() const { return words * wordBits / 8; }
  bool operator==(const PredicatedAccess&) const = default;
};

/// The inline assembly of `a`: its text and constraint string.
///   load:  outputs $0..$n-1, address $n ("l"), predicate $n+1 ("b"),
///          other $n+2..$2n+1:
///            mov.b32 $0, $6; ... @$5 ld.global.v4.b32 {$0, $1, $2, $3}, [$4];
///   store: values $0..$n-1, address $n, predicate $n+1:
///            @$5 st.global.v4.b32 [$4], {$0, $1, $2, $3};
struct PredicatedAsm {
  std::string text, constraints;
};
PredicatedAsm predicatedAsm(const PredicatedAccess& a);

/// The access whose inline assembly has exactly this text and these
/// constraints; nullopt for any other assembly.
std::optional<PredicatedAccess> matchPredicatedAccess(std::string_view text, std::string_view constraints);

/// A load of `ty` (a scalar or fixed vector of at most 16 bytes, a power of
/// two; pointers allowed) from global `ptr`, aligned to its size, performed
/// only where `pred` holds; yields `other` (of type `ty`) elsewhere.
llvm::Value* emitPredicatedLoad(llvm::IRBuilderBase& b, llvm::Type* ty, llvm::Value* ptr, llvm::Value* pred,
                                llvm::Value* other);
/// A store of `val` to global `ptr` (aligned to its size) only where `pred` holds.
void emitPredicatedStore(llvm::IRBuilderBase& b, llvm::Value* val, llvm::Value* ptr, llvm::Value* pred);
/// Whether a value of `ty` has a predicated form (1, 2, 4, 8 or 16 bytes).
bool hasPredicatedForm(llvm::Type* ty, const llvm::DataLayout& dl);

/// cp.async with its `ignore-src` predicate (PTX ISA 7.5): where the
/// predicate is true no global memory is read and the chunk is zero-filled.
/// A mask is then a predicate ptxas combines with its others (one PLOP3),
/// where the src-size form needs it turned into 16 / 0 and back (two
/// selects and a compare per chunk). `bytes` 4, 8 (.ca) or 16 (.cg):
///   cp.async.cg.shared.global [$0], [$1], 16, $2;   "l,l,b,~{memory}"
PredicatedAsm cpAsyncIgnoreSrcAsm(unsigned bytes);
/// The byte count of that assembly, 0 for any other.
unsigned matchCpAsyncIgnoreSrc(std::string_view text, std::string_view constraints);
/// Emits it: `dst` a shared and `src` a global pointer, `ignore` an i1.
void emitCpAsyncIgnoreSrc(llvm::IRBuilderBase& b, llvm::Value* dst, llvm::Value* src, unsigned bytes,
                          llvm::Value* ignore);

}  // namespace tessera::codegen::nvptx
