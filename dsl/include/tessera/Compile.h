// Compiling and launching kernels: the one API that ties the DSL, the
// compiler and the runtime together.
//
//   auto k = tessera::compile(softmax(1024), tessera::Device::cpu());
//   k.launch({rows}, out, in, cols);
//   std::cout << k.dump(tessera::Stage::LLVMOptimized);
//
// Compiles are cached in memory, keyed by the IR text, the target and the
// options; concurrent compiles of one kernel compile it once. Behind that,
// the persistent compile cache (tessera/Cache.h, docs/cache.md) keeps
// compiled code on disk between processes.
// With TESSERA_DUMP_DIR=<dir> every compile writes each stage to
// <dir>/<kernel>.<target>.<stage>.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tessera/Kernel.h"
#include "tessera/codegen/Compiler.h"
#include "tessera/runtime/DLPack.h"
#include "tessera/runtime/Runtime.h"

namespace tessera {

// The runtime types a program names (docs/runtime.md), so that it needs no
// `rt::`: devices, buffers, launches, streams and events, external memory
// and DLPack interchange.
using Device = rt::Device;
using Buffer = rt::Buffer;
using Dim3 = rt::Dim3;
using LaunchOptions = rt::LaunchOptions;
using Stream = rt::Stream;
using Event = rt::Event;
using WrapOptions = rt::WrapOptions;
namespace dlpack = rt::dlpack;
using rt::fromDLPack;
using rt::toDLPack;
using rt::toDLPackVersioned;
using CompileOptions = codegen::CompileOptions;
using Target = codegen::Target;

/// The stages a kernel is printed at (tessera/Stages.def lists them, with
/// their spellings and the targets that have each).
enum class Stage {
#define TESSERA_STAGE(Enum, spelling, targets, description) Enum,
#include "tessera/Stages.def"
};
/// The stage's spelling ("llvm-opt"), as `tessera compile --emit` takes it.
const char* name(Stage s);
/// Parses a spelling of Stages.def; a UsageError listing them otherwise.
Stage parseStage(const std::string& s);

class CompiledKernel {
 public:
  CompiledKernel() = default;
  /// Launches on a grid of programs, e.g. k.launch({rows}, out, in, cols).
  template <typename... A>
  void launch(Dim3 grid, const A&... args) const {
    launchWith(grid, {rt::Arg(args)...}, {});
  }
  void launchWith(Dim3 grid, const std::vector<rt::Arg>& args, const LaunchOptions& opts) const;
  /// How many programs of this kernel its device runs at once
  /// (rt::Kernel::residentPrograms: the CPU's or the emulator's worker
  /// threads, SMs / CUs x blocks per SM / CU on a GPU): the grid of a
  /// persistent schedule (ts::Tiles::persistent). With `args`, of the
  /// variant a launch with them runs (specialised to what they prove, whose
  /// registers may differ). UsageError unless launchable().
  unsigned residentPrograms(const std::vector<rt::Arg>& args = {}, const LaunchOptions& opts = {}) const;
  /// The text of one stage; never launches anything. For a kernel loaded
  /// from the persistent cache, the first stage other than its code (PTX,
  /// HSACO) asked for recompiles the kernel once to produce the stages.
  std::string dump(Stage s) const;
  const rt::KernelSignature& signature() const;
  /// Everything the compile produced, every stage included (recompiled once
  /// if the kernel came from the persistent cache).
  const codegen::Artifact& artifact() const;
  /// The compile's warnings ("file:line:col: warning: ..."), also for a
  /// kernel from the persistent cache.
  const std::vector<std::string>& warnings() const;
  /// True when the code was loaded from the persistent cache, not compiled.
  bool fromDiskCache() const;
  bool launchable() const;
  /// The kernel this was compiled from (its tile IR as traced or parsed).
  const Kernel& source() const;
  /// The device it was loaded on; UsageError unless launchable().
  const Device& device() const;

  struct State;
  explicit CompiledKernel(std::shared_ptr<State> s) : state_(std::move(s)) {}

 private:
  void requireTarget(Stage s) const;  // Stages.def: the targets that have it
  std::shared_ptr<State> state_;
};

/// Compiles for a device and loads the result so it can be launched.
CompiledKernel compile(const Kernel& k, const Device& dev, const CompileOptions& opts = {});
/// Compiles for a target without loading it (inspection: dumps only).
CompiledKernel compile(const Kernel& k, const Target& target, const CompileOptions& opts = {});

/// `k` with {divisibility = 16} on every pointer and integer argument: the
/// kernel a launch with 16-byte aligned buffers and integer arguments that
/// are multiples of 16 specialises to on a GPU device (`tessera compile
/// --assume-aligned`, and static benchmarks that measure that code).
Kernel assumeAligned(const Kernel& k);
/// The kernel a launch of `k` on a GPU device with `args` runs: `k` with
/// {divisibility = 16} on the arguments that are 16-byte aligned buffers or
/// integer multiples of 16 in `args` (what CompiledKernel::launchWith
/// specialises to; the performance model predicts that code).
Kernel specializedFor(const Kernel& k, const std::vector<rt::Arg>& args);

/// Statistics of the in-memory compile cache (for tests and benchmarks).
struct CacheStats {
  uint64_t hits = 0, misses = 0;
};
CacheStats cacheStats();
void clearCache();

}  // namespace tessera
