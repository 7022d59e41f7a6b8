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

/// With `checkedOps` non-null the kernel is bounds-checked (see
/// tessera/support/BoundsCheck.h): the entry takes a BoundsCheckRecord after
/// the arguments, and `checkedOps` receives, per checked access, its op's
/// text and the user's file:line (the record's opId indexes it).
std::unique_ptr<llvm::Module> lowerToLLVM(const ir::Function& f, llvm::LLVMContext& ctx, const CpuTargetInfo& target,
                                          const llvm::DataLayout& layout, const std::string& entryName,
                                          std::vector<std::string>* checkedOps = nullptr);

}  // namespace tessera::codegen::cpu
