// The CUDA toolkit's tools for what the driver reports: SASS and the
// toolchain's versions (ptxas -v for resources is NVPTXTargetInfo's).
#include <sstream>

#include "codegen/llvm/GpuToolchain.h"
#include "codegen/nvptx/NVPTXTargetInfo.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::nvptx {

std::string sass(const std::string& ptx, const std::string& arch, const std::string& kernel) {
  std::string disasm = findTool({"/usr/local/cuda/bin/nvdisasm", "nvdisasm"});
  std::string cuobjdump = findTool({"/usr/local/cuda/bin/cuobjdump", "cuobjdump"});
  if (disasm.empty() && cuobjdump.empty())
    throw DeviceError(
        "SASS needs the CUDA toolkit's nvdisasm or cuobjdump; neither is in /usr/local/cuda/bin or on PATH");
  std::string ptxas = findTool({"/usr/local/cuda/bin/ptxas", "ptxas"});
  if (ptxas.empty()) throw DeviceError("SASS needs ptxas (install the CUDA toolkit or put ptxas on PATH)");
  TempDir dir;
  writeFile(dir.file("k.ptx"), ptx);
  ToolResult r = runTool({ptxas, "-arch=" + arch, dir.file("k.ptx"), "-o", dir.file("k.cubin")});
  if (r.exitCode != 0) throw DeviceError("ptxas rejected the PTX of @" + kernel + ":\n" + r.output);
  ToolResult d = disasm.empty() ? runTool({cuobjdump, "-sass", dir.file("k.cubin")})
                                : runTool({disasm, "-c", dir.file("k.cubin")});
  if (d.exitCode != 0) throw DeviceError("disassembling the cubin of @" + kernel + " failed:\n" + d.output);
  return d.output;
}

std::string toolchainLines() {
  std::string libdevice = findLibdevice();
  const std::string libLine =
      "libdevice: " +
      (libdevice.empty() ? std::string("not found (f64 math on NVPTX uses Tessera's polynomials)") : libdevice) + "\n";
  std::string ptxas = findTool({"/usr/local/cuda/bin/ptxas", "ptxas"});
  if (ptxas.empty()) return "CUDA toolkit: not found (no ptxas in /usr/local/cuda/bin or on PATH)\n" + libLine;
  ToolResult v = runTool({ptxas, "--version"});
  // ptxas prints "Cuda compilation tools, release 13.0, V13.0.88" among
  // its lines; the last line is the fallback.
  std::string last;
  std::istringstream lines(v.output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && (last.find("release") == std::string::npos)) last = line;
  return "CUDA toolkit: " + (v.exitCode == 0 ? last : "ptxas --version failed") + " (" + ptxas + ")\n" + libLine;
}

}  // namespace tessera::codegen::nvptx
