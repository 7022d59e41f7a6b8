// The CUDA toolkit's tools: ptxas (found once, its version read once per
// file, checked against the architecture before it runs), SASS and the
// toolchain's versions for what the driver reports.
#include <sys/stat.h>

#include <map>
#include <mutex>
#include <regex>
#include <sstream>

#include "codegen/llvm/GpuToolchain.h"
#include "codegen/nvptx/NVPTXTargetInfo.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::nvptx {

namespace {

// "12.8" for 12080.
std::string cudaVersionText(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// `ptxas --version` of the file at `path`: it prints "Cuda compilation
// tools, release 13.0, V13.0.88" among its lines.
Ptxas readPtxas(const std::string& path) {
  Ptxas p;
  p.path = path;
  ToolResult v = runTool({path, "--version"});
  if (v.exitCode != 0) {
    p.release = "version unknown: ptxas --version failed";
    return p;
  }
  std::istringstream lines(v.output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && (p.line.find("release") == std::string::npos)) p.line = line;
  std::smatch m;
  if (!std::regex_search(p.line, m, std::regex(R"(release (\d+)\.(\d+)(?:, (V[0-9.]+))?)"))) {
    p.release = "version unknown: no release in ptxas --version";
    return p;
  }
  p.version = std::stoi(m[1]) * 1000 + std::stoi(m[2]) * 10;
  p.release = cudaVersionText(p.version) + (m[3].matched ? " (" + m[3].str() + ")" : std::string());
  return p;
}

}  // namespace

std::string Ptxas::str() const { return "ptxas " + release; }

Ptxas findPtxas() {
  std::string path = findTool({"/usr/local/cuda/bin/ptxas", "ptxas"});
  if (path.empty()) return {};
  // Once per file: its path, size and modification time (a toolkit
  // installed over the old one, or TESSERA_PTXAS naming another, is read
  // again).
  struct stat st{};
  std::string key = path;
  if (::stat(path.c_str(), &st) == 0)
    key += "|" + std::to_string(st.st_size) + "|" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec);
  static std::mutex mu;
  static std::map<std::string, Ptxas> known;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  Ptxas p = readPtxas(path);
  std::lock_guard<std::mutex> lock(mu);
  return known.emplace(key, std::move(p)).first->second;
}

Ptxas ptxasFor(const GpuArch& row, const std::string& purpose) {
  Ptxas p = findPtxas();
  if (p.path.empty()) throw DeviceError(purpose + ": ptxas not found (install the CUDA toolkit or set TESSERA_PTXAS)");
  // A ptxas whose version is unknown runs, and speaks for itself.
  if (p.version > 0 && p.version < row.minCuda)
    throw CompileError(purpose + ": " + p.str() + " (" + p.path + ") cannot assemble nvptx:" + row.arch +
                       ", whose PTX (ISA " + std::to_string(row.ptxIsa / 10) + "." + std::to_string(row.ptxIsa % 10) +
                       ") needs ptxas " + cudaVersionText(row.minCuda) + " or newer; install CUDA " +
                       cudaVersionText(row.minCuda) + "+ or point TESSERA_PTXAS at its ptxas");
  return p;
}

ToolResult runPtxas(const Ptxas& p, const GpuArch& row, const std::string& ptx, const std::string& kernel,
                    const std::vector<std::string>& flags, TempDir& dir) {
  writeFile(dir.file("k.ptx"), ptx);
  std::vector<std::string> argv = {p.path, std::string("-arch=") + row.arch};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {dir.file("k.ptx"), "-o", dir.file("k.cubin")});
  ToolResult r = runTool(argv);
  if (r.exitCode != 0)
    throw DeviceError(p.str() + " (" + p.path + ") rejected the PTX of @" + kernel + " for " + row.arch + ":\n" +
                      r.output);
  return r;
}

std::string sass(const std::string& ptx, const GpuArch& row, const std::string& kernel) {
  std::string disasm = findTool({"/usr/local/cuda/bin/nvdisasm", "nvdisasm"});
  std::string cuobjdump = findTool({"/usr/local/cuda/bin/cuobjdump", "cuobjdump"});
  if (disasm.empty() && cuobjdump.empty())
    throw DeviceError(
        "SASS needs the CUDA toolkit's nvdisasm or cuobjdump; neither is in /usr/local/cuda/bin or on PATH");
  Ptxas p = ptxasFor(row, "SASS of @" + kernel);
  TempDir dir;
  runPtxas(p, row, ptx, kernel, {}, dir);
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
  Ptxas p = findPtxas();
  if (p.path.empty()) return "CUDA toolkit: not found (no ptxas in /usr/local/cuda/bin or on PATH)\n" + libLine;
  // The release line of ptxas --version (else its last line).
  return "CUDA toolkit: " + (p.line.empty() ? std::string("ptxas --version failed") : p.line) + " (" + p.path + ")\n" +
         libLine;
}

}  // namespace tessera::codegen::nvptx
