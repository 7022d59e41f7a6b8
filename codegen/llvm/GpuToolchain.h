// External tools and temporary files used by the GPU backends (ptxas,
// ld.lld when LLD is not linked in). Private to codegen.
#pragma once

#include <string>
#include <vector>

namespace tessera::codegen {

/// A private temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void writeFile(const std::string& path, const std::string& bytes);
std::string readFile(const std::string& path);

/// The first executable found: each candidate as an absolute path, or by
/// name on PATH. Empty if none. The environment variable TESSERA_<NAME> (NAME
/// = the last candidate upper-cased, '.' and '-' as '_': TESSERA_PTXAS,
/// TESSERA_LD_LLD) overrides the search; if it is not executable the tool
/// counts as absent.
std::string findTool(const std::vector<std::string>& candidates);

/// CUDA's libdevice (libdevice.10.bc), the f64 math NVPTX code links: the
/// file TESSERA_LIBDEVICE names (one that cannot be read counts as absent),
/// else the first of $CUDA_HOME, $CUDA_PATH and /usr/local/cuda that has
/// nvvm/libdevice/libdevice.10.bc. Empty if none.
std::string findLibdevice();

struct ToolResult {
  int exitCode = -1;
  std::string output;  // stdout and stderr, interleaved
};
/// Runs argv[0] with the arguments (no shell), capturing its output.
ToolResult runTool(const std::vector<std::string>& argv);

}  // namespace tessera::codegen
