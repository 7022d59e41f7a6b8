// Special-register reads (thread and block indices) as inline assembly,
// `mov.u32 $0, %tid.x;`. The llvm.nvvm.read.ptx.sreg.* intrinsics emit the
// same PTX, but LLVM takes them for pure functions of nothing and merges
// every read into the first one; the rematerialisation after loops
// (codegen/gpu/RematerializeAfterLoops.h) needs a second read that stays a
// second read. The emulator (codegen/emu/EmuInlineAsm.cpp) turns exactly
// these texts back into the intrinsics, so both sides come from the one
// table in NVPTXSpecialRegisters.cpp. Private to codegen; free of LLVM
// headers.
#pragma once

#include <string_view>

#include "../llvm/LLVMForward.h"  // relative: tests include these headers by path

namespace tessera::codegen::nvptx {

/// A new read, at `b`, of the special register intrinsic `intrinsicId`
/// (an llvm::Intrinsic::ID) reads; nullptr when the table has no such
/// register.
llvm::Value* emitSpecialRegisterRead(llvm::IRBuilderBase& b, unsigned intrinsicId);

/// The intrinsic whose read the inline assembly with this text and these
/// constraints is; 0 (not_intrinsic) for any other assembly.
unsigned matchSpecialRegisterRead(std::string_view text, std::string_view constraints);

}  // namespace tessera::codegen::nvptx
