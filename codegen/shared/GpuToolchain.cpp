#include "shared/GpuToolchain.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tessera/support/Error.h"

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
    for (char ch : base) var += std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::toupper(ch)) : '_';
    if (const char* forced = std::getenv(var.c_str()); forced && *forced)
      return access(forced, X_OK) == 0 ? std::string(forced) : std::string();
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

ToolResult runTool(const std::vector<std::string>& argv) {
  TS_ASSERT(!argv.empty(), "runTool without a program");
  int fds[2];
  if (pipe(fds) != 0) throw DeviceError("cannot create a pipe to run " + argv[0]);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw DeviceError("cannot start " + argv[0]);
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(argv[0].c_str(), args.data());
    _exit(127);
  }
  close(fds[1]);
  ToolResult r;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace tessera::codegen
