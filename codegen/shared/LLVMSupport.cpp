#include "shared/LLVMSupport.h"

#include <mutex>

#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/TargetSelect.h>

namespace tessera::codegen {

namespace {
// LLVM reports unrecoverable conditions (e.g. an instruction selection
// failure) through this hook and would otherwise abort the host process.
// Throwing keeps the process alive and reports a compiler bug; LLVM's
// frames are built with unwind tables on Linux, so the exception reaches
// compile(). Not every LLVM state is consistent afterwards, which is why
// this is reported as InternalError.
void fatalHandler(void*, const char* reason, bool) {
  throw InternalError(std::string("LLVM fatal error: ") + reason);
}
}  // namespace

void initLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    llvm::install_fatal_error_handler(fatalHandler, nullptr);
  });
}

}  // namespace tessera::codegen
