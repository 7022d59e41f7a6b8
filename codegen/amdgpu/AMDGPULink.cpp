#include "codegen/amdgpu/AMDGPULink.h"

#include <signal.h>

#include <mutex>

#include <llvm/Support/raw_ostream.h>

#include "codegen/llvm/GpuToolchain.h"
#include "tessera/support/Error.h"

#ifdef TESSERA_HAVE_LLD
#include <lld/Common/Driver.h>
LLD_HAS_DRIVER(elf)
#endif

namespace tessera::codegen {

namespace {
/// Keeps the calling thread's alternate signal stack across an in-process
/// link. LLD's output file asks LLVM to remove it on a crash, and the first
/// such request in the process installs LLVM's signal handlers together with
/// an alternate signal stack of its own (malloc'd) on the calling thread.
/// When that thread is a worker that later exits (the tuner's compile
/// threads), the thread runtime (ASan's, notably) unmaps the stack it
/// installed itself and finds LLVM's instead: ASan aborts. The handlers stay
/// installed; only this thread's stack is put back.
class AltStackGuard {
 public:
  AltStackGuard() { saved_ = sigaltstack(nullptr, &old_) == 0; }
  ~AltStackGuard() {
    stack_t now;
    if (saved_ && sigaltstack(nullptr, &now) == 0 && now.ss_sp != old_.ss_sp && !(now.ss_flags & SS_ONSTACK))
      sigaltstack(&old_, nullptr);
  }
  AltStackGuard(const AltStackGuard&) = delete;
  AltStackGuard& operator=(const AltStackGuard&) = delete;

 private:
  stack_t old_{};
  bool saved_ = false;
};
}  // namespace

std::string linkHsaco(const std::string& object) {
  TempDir dir;
  std::string in = dir.file("kernel.o"), out = dir.file("kernel.hsaco");
  writeFile(in, object);
#ifdef TESSERA_HAVE_LLD
  {
    // LLD keeps global state per link: one link at a time in this process.
    static std::mutex mu;
    static bool usable = true;
    std::lock_guard<std::mutex> lock(mu);
    if (usable) {
      std::string log;
      llvm::raw_string_ostream os(log);
      // One thread: a kernel's object is a few sections, and LLD's task
      // pool cost more than it saved (vector_add on gfx1100: 0.63 -> 0.50
      // ms per link).
      const char* args[] = {"ld.lld", "--threads=1", "-shared", "--no-undefined", in.c_str(), "-o", out.c_str()};
      AltStackGuard keepAltStack;
      lld::Result r = lld::lldMain(args, os, os, {{lld::Gnu, &lld::elf::link}});
      usable = r.canRunAgain;
      if (r.retCode != 0) throw DeviceError("linking the AMDGPU code object with LLD failed:\n" + log);
      return readFile(out);
    }
  }
#endif
  std::string lld = findTool({"/usr/lib/llvm-22/bin/ld.lld", "ld.lld-22", "ld.lld"});
  if (lld.empty())
    throw DeviceError("ld.lld not found (install lld 22 or put ld.lld on PATH) to link the AMDGPU code object");
  ToolResult r = runTool({lld, "-shared", "--no-undefined", in, "-o", out});
  if (r.exitCode != 0) throw DeviceError("linking the AMDGPU code object with " + lld + " failed:\n" + r.output);
  return readFile(out);
}

}  // namespace tessera::codegen
