#include "codegen/amdgpu/AMDGPULink.h"

#include <mutex>

#include <llvm/Support/raw_ostream.h>

#include "codegen/llvm/GpuToolchain.h"
#include "tessera/support/Error.h"

#ifdef TESSERA_HAVE_LLD
#include <lld/Common/Driver.h>
LLD_HAS_DRIVER(elf)
#endif

namespace tessera::codegen {

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
      const char* args[] = {"ld.lld", "-shared", "--no-undefined", in.c_str(), "-o", out.c_str()};
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
