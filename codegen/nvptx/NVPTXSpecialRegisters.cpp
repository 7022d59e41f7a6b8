#include "codegen/nvptx/NVPTXSpecialRegisters.h"

#include <array>
#include <string>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tessera::codegen::nvptx {

namespace {

// The registers (PTX names) and the intrinsics that read them.
// clang-format off
#define TS_NVPTX_SPECIAL_REGISTERS(X) \
  X(tid_x, "tid.x")       \
  X(tid_y, "tid.y")       \
  X(tid_z, "tid.z")       \
  X(ctaid_x, "ctaid.x")   \
  X(ctaid_y, "ctaid.y")   \
  X(ctaid_z, "ctaid.z")   \
  X(ntid_x, "ntid.x")     \
  X(ntid_y, "ntid.y")     \
  X(ntid_z, "ntid.z")     \
  X(nctaid_x, "nctaid.x") \
  X(nctaid_y, "nctaid.y") \
  X(nctaid_z, "nctaid.z")
// clang-format on

struct SpecialRegister {
  llvm::Intrinsic::ID id;
  const char* name;
};

#define TS_ROW(i, n) {llvm::Intrinsic::nvvm_read_ptx_sreg_##i, n},
constexpr SpecialRegister kRegisters[] = {TS_NVPTX_SPECIAL_REGISTERS(TS_ROW)};
#undef TS_ROW

constexpr std::string_view kConstraints = "=r";

std::string textOf(const SpecialRegister& r) { return std::string("mov.u32 $0, %") + r.name + ";"; }

}  // namespace

llvm::Value* emitSpecialRegisterRead(llvm::IRBuilderBase& b, unsigned intrinsicId) {
  for (const SpecialRegister& r : kRegisters)
    if (r.id == intrinsicId) {
      auto* fty = llvm::FunctionType::get(b.getInt32Ty(), false);
      // No side effects: an unused read may go, and LLVM may not merge two
      // reads because no two calls have the same (text, operands) pair here.
      return b.CreateCall(llvm::InlineAsm::get(fty, textOf(r), kConstraints, /*hasSideEffects=*/false), {},
                          std::string(r.name) + ".again");
    }
  return nullptr;
}

unsigned matchSpecialRegisterRead(std::string_view text, std::string_view constraints) {
  if (constraints != kConstraints) return llvm::Intrinsic::not_intrinsic;
  for (const SpecialRegister& r : kRegisters)
    if (text == textOf(r)) return r.id;
  return llvm::Intrinsic::not_intrinsic;
}

}  // namespace tessera::codegen::nvptx
