#include "codegen/llvm/GpuToolchain.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FileUtilities.h>
#include <llvm/Support/Program.h>

#include "tessera/support/Error.h"
#include "tessera/support/Environment.h"

namespace tessera::codegen {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-gpu-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw DeviceError("cannot create a temporary directory under " + tmpl);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);  // best effort: a leftover only costs disk space
}

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream os(path, std::ios::binary);
  os.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!os) throw DeviceError("cannot write " + path);
}

std::string readFile(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  if (!is) throw DeviceError("cannot read " + path);
  std::ostringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

std::string findTool(const std::vector<std::string>& candidates) {
  // TESSERA_<TOOL> (e.g. TESSERA_PTXAS, TESSERA_LD_LLD) names the tool
  // exactly: it wins over the search, and a path that is not executable
  // means "absent" (how tests exercise the missing-toolchain errors).
  if (!candidates.empty()) {
    std::string base = candidates.back().substr(candidates.back().rfind('/') + 1), var = "TESSERA_";
    for (char ch : base)
      var += std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::toupper(ch)) : '_';
    // Registered like every knob (Environment.def), so docs/options.md
    // names it: a tool added without its entry is a compiler bug.
    const std::optional<env::Var> known = env::byName(var);
    TS_ASSERT(known, var + " is not in Environment.def");
    if (const char* forced = env::get(*known)) return access(forced, X_OK) == 0 ? std::string(forced) : std::string();
  }
  for (const std::string& c : candidates) {
    if (c.find('/') != std::string::npos) {
      if (access(c.c_str(), X_OK) == 0) return c;
      continue;
    }
    const char* path = std::getenv("PATH");
    if (!path) continue;
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      if (dir.empty()) continue;
      std::string full = dir + "/" + c;
      if (access(full.c_str(), X_OK) == 0) return full;
    }
  }
  return {};
}

std::string findLibdevice() {
  // TESSERA_LIBDEVICE names the file exactly; one that cannot be read means
  // "absent" (f64 math then takes the polynomials).
  if (const char* forced = tessera::env::get(tessera::env::Var::Libdevice); forced && *forced)
    return access(forced, R_OK) == 0 ? std::string(forced) : std::string();
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v) roots.emplace_back(v);
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& r : roots) {
    std::string f = r + "/nvvm/libdevice/libdevice.10.bc";
    if (access(f.c_str(), R_OK) == 0) return f;
  }
  return {};
}

ToolResult runTool(const std::vector<std::string>& argv) {
  TS_ASSERT(!argv.empty(), "runTool without a program");
  // LLVM's process launcher (posix_spawn where it exists): a fork() in this
  // multi-threaded process that then allocated in the child could deadlock
  // on a lock another thread held. Output goes to a temporary file, stdout
  // and stderr sharing it, read back once the tool exits.
  llvm::SmallString<128> outPath;
  if (llvm::sys::fs::createTemporaryFile("tessera-tool", "txt", outPath))
    throw DeviceError("cannot create a temporary file to run " + argv[0]);
  llvm::FileRemover remover(outPath);
  std::vector<llvm::StringRef> args(argv.begin(), argv.end());
  std::optional<llvm::StringRef> redirects[3] = {llvm::StringRef(""), llvm::StringRef(outPath),
                                                 llvm::StringRef(outPath)};
  std::string err;
  bool failed = false;
  // Bounded: a toolchain that hangs must not hang the compile.
  constexpr unsigned kTimeoutSeconds = 300;
  int rc = llvm::sys::ExecuteAndWait(argv[0], args, std::nullopt, redirects, kTimeoutSeconds, 0, &err, &failed);
  ToolResult r;
  r.output = readFile(std::string(outPath));
  if (failed) throw DeviceError("cannot start " + argv[0] + ": " + err);
  if (rc == -2)  // killed by a signal, or by the timeout
    throw DeviceError(argv[0] + " did not complete (" + err + "; the limit is " + std::to_string(kTimeoutSeconds) +
                      " s)" + (r.output.empty() ? "" : ":\n" + r.output));
  r.exitCode = rc < 0 ? -1 : rc;
  return r;
}

}  // namespace tessera::codegen
