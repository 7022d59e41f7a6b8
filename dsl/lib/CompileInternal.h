// The compile/launch API's internals, shared by its files: Compile.cpp (the
// in-memory compile cache in front of the persistent one, compile() and the
// CompiledKernel), Stages.cpp (stage names and dumps), Launch.cpp (launches
// and their specialisation) and Cache.cpp (tessera/Cache.h); and what
// Export.cpp takes from them. Private.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "tessera/Compile.h"
#include "tessera/ir/Printer.h"

namespace tessera {

namespace detail {

// One compile as the in-memory cache keeps it: the launchable artifact and,
// when that came from the persistent cache (no stages, no kept module),
// what recompiles it when a stage is asked for.
struct Compiled {
  std::shared_ptr<codegen::Artifact> artifact;
  Kernel source;
  Target target;
  CompileOptions options;
  std::mutex mu;
  std::shared_ptr<codegen::Artifact> full;  // the recompile, made at the first request for a stage

  // The artifact with every stage: `artifact` itself unless it came from
  // the persistent cache, else a compile of the same kernel, target and
  // options (the compiler is deterministic: the same stages the cached
  // code was compiled through).
  const codegen::Artifact& complete() {
    if (!artifact->fromDiskCache) return *artifact;
    std::lock_guard<std::mutex> lock(mu);
    if (!full) full = codegen::compile(source.ir(), target, options);
    return *full;
  }
};

// The IR text of a kernel is needed for the cache key; printing it costs
// more than a cache hit may, so it is computed once per traced kernel.
class TextMemo {
 public:
  const std::string& text(const Kernel& k) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memo_.find(k.shared().get());
    if (it != memo_.end() && !it->second.first.expired()) return it->second.second;
    if (memo_.size() > 4096) memo_.clear();  // bound memory; entries are recomputable
    auto& slot = memo_[k.shared().get()];
    slot = {k.shared(), ir::print(k.ir())};
    return slot.second;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const ir::Function*, std::pair<std::weak_ptr<const ir::Function>, std::string>> memo_;
};

}  // namespace detail

struct CompiledKernel::State {
  std::shared_ptr<codegen::Artifact> artifact;  // launchable; from the persistent cache it has no stages
  std::shared_ptr<detail::Compiled> compiled;
  rt::Kernel kernel;  // empty when compiled for inspection only
  bool loaded = false;
  // Launch-time specialisation (GPU devices): the facts "this pointer is
  // 16-byte aligned" / "this integer is a multiple of 16" let the GPU lowering
  // use 128-bit accesses, so they are part of the specialisation key, as the
  // IR text with {divisibility = 16} argument attributes.
  bool specialize = false;
  Kernel source;
  Device device = Device::cpu();
  CompileOptions options;
  std::mutex mu;
  std::map<uint64_t, rt::Kernel> variants;  // fact mask -> loaded kernel
  // Fact mask -> the same kernel compiled without tensor copies, for the
  // launches whose tensor maps would describe an empty tensor.
  std::map<uint64_t, rt::Kernel> withoutTensorMaps;
  /// The bounds-checked and / or profiled compiles (bit 0 checked, bit 1
  /// profiled), per launch-time specialisation (the variants' mask), made
  /// at the first launch that asks for them.
  std::map<std::pair<unsigned, uint64_t>, rt::Kernel> instrumented;
};

namespace detail {

/// The artifact compile(k, target, opts) makes or loads (from the
/// persistent cache: its code, no stages), without recompiling for stages.
std::shared_ptr<codegen::Artifact> compiledArtifact(const Kernel& k, const Target& target, const CompileOptions& opts);

// ---- Compile.cpp -------------------------------------------------------------

/// `o` with the environment's settings applied (TESSERA_PRECISION,
/// TESSERA_TENSOR_COPIES, TESSERA_PREDICATED_ACCESSES).
CompileOptions withEnvironment(CompileOptions o);
/// The IR texts of the traced kernels.
TextMemo& textMemo();
/// The compile of `k` for `target`, from the in-memory cache, else the
/// persistent one, else compiled (once, however many threads ask).
std::shared_ptr<Compiled> compileCached(const Kernel& k, const Target& target, const CompileOptions& userOpts);
/// `o` with the cluster shape kernel `k` is written for (Kernel::withCluster);
/// a UsageError where `o` asks for another.
CompileOptions withKernelShape(const Kernel& k, const CompileOptions& o);
/// A CompiledKernel's state for `c`, not loaded on a device.
std::shared_ptr<CompiledKernel::State> makeState(std::shared_ptr<Compiled> c);
/// The target whose code `dev` runs.
Target targetOf(const Device& dev);
/// What `dev` loads: the artifact's binary as codegen made it, which the
/// target `dev` runs (targetOf) determined.
const rt::Binary& binaryFor(const Kernel& k, const Device& dev, const CompiledKernel::State& st);

// ---- Stages.cpp --------------------------------------------------------------

/// TESSERA_DUMP_DIR: every stage of `a` written into `dir` as
/// <kernel>.<target>.<stage>; a folder that cannot be written is a warning.
void writeDumps(const codegen::Artifact& a, const std::string& dir);

}  // namespace detail

}  // namespace tessera
