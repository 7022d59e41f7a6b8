// Lowering of the tile IR to LLVM IR for the host CPU.
//
// The module holds one internal per-program body (the kernel's arguments as
// real parameters plus program ids and grid size) and an external entry
// with the KernelBinary::HostEntry ABI that loops over a range of linear program ids.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <llvm/IR/DataLayout.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "codegen/llvm/HostIsa.h"
#include "tessera/ir/IR.h"

namespace tessera::codegen::cpu {

/// The most tile storage one program may keep on the stack of the thread
/// that runs it: half of the usual 8 MiB thread stack (glibc's default and
/// Linux's usual main-thread limit), so the caller's own frames keep the
/// rest. Above it a kernel is a ResourceError at compile time naming its
/// largest tiles, rather than a SIGSEGV at launch; the CPU device checks
/// the room of the thread actually running it as well (docs/targets/cpu.md).
constexpr uint64_t kStackBudget = uint64_t{4} << 20;

/// With `checkedOps` non-null the kernel is bounds-checked (see
/// tessera/support/BoundsCheck.h): the entry takes a BoundsCheckRecord after
/// the arguments, and `checkedOps` receives, per checked access, its op's
/// text and the user's file:line (the record's opId indexes it).
/// With `profileScopes` non-null the kernel is profiled (tessera/support/
/// Profile.h): the entry takes the profile buffer after the arguments (and
/// the record), and `profileScopes` receives the probes' scope names.
/// `stackBytes` (if non-null) receives the bytes of tiles one program keeps
/// on the stack (at most kStackBudget, else a ResourceError).
std::unique_ptr<llvm::Module> lowerToLLVM(const ir::Function& f, llvm::LLVMContext& ctx, const CpuTargetInfo& target,
                                          const llvm::DataLayout& layout, const std::string& entryName,
                                          std::vector<std::string>* checkedOps = nullptr,
                                          uint64_t* stackBytes = nullptr,
                                          std::vector<std::string>* profileScopes = nullptr);

}  // namespace tessera::codegen::cpu
