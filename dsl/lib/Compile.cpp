// tessera::compile: the in-memory compile cache in front of the persistent
// one (tessera/codegen/DiskCache.h), and the bridge from a compiled artifact
// to a runtime kernel (CompiledKernel). The stages and their dumps are
// Stages.cpp's, launches Launch.cpp's, the persistent cache's API
// Cache.cpp's; what they share is in CompileInternal.h.
#include "tessera/Compile.h"

#include "CompileInternal.h"

#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "tessera/codegen/DiskCache.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/support/Error.h"
#include "tessera/support/Environment.h"

namespace tessera {

namespace {

using detail::binaryFor;
using detail::compileCached;
using detail::Compiled;
using detail::makeState;
using detail::targetOf;

// TESSERA_PRECISION=approx|accurate sets every compile's precision (the
// command line's --precision for `tessera run` works through it);
// TESSERA_TENSOR_COPIES=0 turns sm_90a's TMA copies off (cp.async instead),
// TESSERA_PREDICATED_ACCESSES=0 the branch-free masked accesses,
// TESSERA_CPU_TILES=0 the CPU's AMX tiles.
bool switchFromEnvironment(const char* name, bool current) {
  const char* t = std::getenv(name);
  if (!t || !*t) return current;
  if (std::string(t) != "0" && std::string(t) != "1")
    throw UsageError(std::string(name) + "='" + t + "' (expected 0 or 1)");
  return std::string(t) == "1";
}

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<Compiled>>> entries;
  CacheStats stats;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: JIT code may outlive static destructors
  return *c;
}

// TESSERA_CACHE_LOG=1: a line on stderr for every lookup in the persistent
// cache, and for a miss why (the key parts that differ from the nearest entry).
bool cacheLogging() {
  const char* v = tessera::env::get(tessera::env::Var::CacheLog);
  return v && *v && std::string(v) != "0";
}

void logLookup(const codegen::CacheKey& key, const std::string& kernel, const Target& target, bool hit) {
  std::string line = "tessera: cache: " + std::string(hit ? "hit " : "miss ") + kernel + " for " + target.str() + " (" +
                     key.hash.substr(0, 16) + ")";
  if (!hit) {
    codegen::Explanation x = codegen::KeyedStore(key.kind).explain(key);
    if (x.nearest) {
      std::string diff;
      for (const auto& d : x.differences) diff += (diff.empty() ? "" : "; ") + d.part + ": " + d.summary;
      line += ": the nearest entry differs in " + diff;
    } else if (!x.note.empty()) {
      line += ": " + x.note;
    }
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

// The key of a compile in the persistent cache, or nullopt when it is not
// kept there (turned off, an emu: target, a profiled compile, a stage dump
// folder that wants every stage). A key that cannot be made (an unknown cpu) leaves the
// error to the compile.
std::optional<codegen::CacheKey> diskKey(const Kernel& k, const std::string& text, const Target& target,
                                         const CompileOptions& opts) {
  if (!opts.useDiskCache || opts.profile || !codegen::diskCacheable(target)) return std::nullopt;
  if (!codegen::KeyedStore("kernels").usable()) return std::nullopt;
  try {
    return codegen::compileKey(k.name(), text, target, opts);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

namespace detail {

CompileOptions withEnvironment(CompileOptions o) {
  if (const char* p = tessera::env::get(tessera::env::Var::Precision); p && *p)
    o.precision = codegen::parsePrecision(p);
  o.tensorCopies = switchFromEnvironment(tessera::env::name(tessera::env::Var::TensorCopies), o.tensorCopies);
  o.predicatedAccesses =
      switchFromEnvironment(tessera::env::name(tessera::env::Var::PredicatedAccesses), o.predicatedAccesses);
  o.cpuTiles = switchFromEnvironment(tessera::env::name(tessera::env::Var::CpuTiles), o.cpuTiles);
  o.deterministic = switchFromEnvironment(tessera::env::name(tessera::env::Var::Deterministic), o.deterministic);
  return o;
}

TextMemo& textMemo() {
  static TextMemo* m = new TextMemo();
  return *m;
}

CompileOptions withKernelShape(const Kernel& k, const CompileOptions& o) {
  constexpr std::array<int, 3> none{1, 1, 1};
  if (k.cluster() == none) return o;
  auto str = [](const std::array<int, 3>& c) {
    return "{" + std::to_string(c[0]) + ", " + std::to_string(c[1]) + ", " + std::to_string(c[2]) + "}";
  };
  if (o.cluster != none && o.cluster != k.cluster())
    throw UsageError("compile: @" + k.name() + " is written for clusters of " + str(k.cluster()) +
                     " (Kernel::withCluster), the options ask for " + str(o.cluster));
  CompileOptions r = o;
  r.cluster = k.cluster();
  return r;
}

std::shared_ptr<Compiled> compileCached(const Kernel& k, const Target& target, const CompileOptions& userOpts) {
  if (!k.valid()) throw UsageError("compile: the kernel is empty (default-constructed tessera::Kernel)");
  const CompileOptions opts = withEnvironment(withKernelShape(k, userOpts));
  const char* dumpDir = tessera::env::get(tessera::env::Var::DumpDir);
  const std::string& text = textMemo().text(k);
  // The device library changes the code (TESSERA_LIBDEVICE may change
  // within a process).
  std::string key =
      target.str() + "|" + codegen::optionsKey(opts) + ";devlib=" + codegen::deviceMathLibrary(target) + "|" + text;

  Cache& c = cache();
  std::promise<std::shared_ptr<Compiled>> promise;
  std::shared_future<std::shared_ptr<Compiled>> future;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    // The map is keyed by the full key string: a hash collision can never
    // hand back another kernel's code.
    auto it = c.entries.find(key);
    if (it != c.entries.end()) {
      ++c.stats.hits;
      future = it->second;
    } else {
      ++c.stats.misses;
      future = promise.get_future().share();
      c.entries.emplace(key, future);
      owner = true;
    }
  }
  if (owner) {
    // Compile outside the lock; concurrent callers of the same key wait on
    // the shared future, so the kernel compiles once.
    try {
      auto entry = std::make_shared<Compiled>();
      entry->source = k;
      entry->target = target;
      entry->options = opts;
      entry->options.emuHooks.clear();
      // The persistent cache: looked up unless every stage is to be dumped
      // (a hit has none), written after every compile it keeps.
      std::optional<codegen::CacheKey> dkey = diskKey(k, text, target, opts);
      const bool dumping = dumpDir && *dumpDir;
      if (dkey && !dumping) {
        entry->artifact = codegen::loadCachedArtifact(*dkey);
        if (cacheLogging()) logLookup(*dkey, k.name(), target, entry->artifact != nullptr);
      }
      if (!entry->artifact) {
        CompileOptions o = opts;
        if (dumping) o.dumpAssembly = true;
        // emu: targets bind the SIMT machine's hooks in their JIT. The hooks
        // are not part of the code, so they stay out of the key (optionsKey).
        if ((target.kind == Target::Kind::EmuNVPTX || target.kind == Target::Kind::EmuAMDGPU) && o.emuHooks.empty())
          for (auto [name, addr] : emu::hookSymbols()) o.emuHooks.emplace_back(name, addr);
        entry->artifact = codegen::compile(k.ir(), target, o);
        if (dumping) writeDumps(*entry->artifact, dumpDir);
        if (dkey) codegen::storeCachedArtifact(*dkey, *entry->artifact);
      }
      promise.set_value(entry);
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(c.mu);
      c.entries.erase(key);  // let a later call retry (e.g. after a toolchain is installed)
    }
  }
  return future.get();
}

std::shared_ptr<CompiledKernel::State> makeState(std::shared_ptr<Compiled> c) {
  auto st = std::make_shared<CompiledKernel::State>();
  st->artifact = c->artifact;
  st->compiled = std::move(c);
  return st;
}

Target targetOf(const Device& dev) {
  switch (dev.kind()) {
    case rt::DeviceKind::CPU: return dev.arch().empty() ? Target::cpu() : Target::parse("cpu:" + dev.arch());
    case rt::DeviceKind::Emulator: return Target::parse("emu:" + dev.arch());
    case rt::DeviceKind::CUDA:
    case rt::DeviceKind::HIP: return Target::parse(dev.arch());
  }
  throw DeviceError(std::string("compile: devices of kind '") + rt::name(dev.kind()) + "' are not supported");
}

const rt::Binary& binaryFor(const Kernel& k, const Device& dev, const CompiledKernel::State& st) {
  const codegen::Artifact& a = *st.artifact;
  if (dev.kind() == rt::DeviceKind::CPU && !a.binary.hostEntry)
    throw DeviceError("compile: kernel '" + k.name() + "' compiled for " + a.target.str() + " cannot run on this CPU" +
                      (a.notRunnable.empty() ? "" : ": " + a.notRunnable));
  TS_ASSERT(dev.kind() != rt::DeviceKind::Emulator || a.binary.emuThread,
            "emulator artifact of '" + k.name() + "' has no thread function");
  return a.binary;
}

}  // namespace detail

std::shared_ptr<codegen::Artifact> detail::compiledArtifact(const Kernel& k, const Target& target,
                                                            const CompileOptions& opts) {
  return compileCached(k, target, opts)->artifact;
}

CompiledKernel compile(const Kernel& k, const Target& target, const CompileOptions& opts) {
  auto st = makeState(compileCached(k, target, opts));
  st->source = k;
  return CompiledKernel(std::move(st));
}

CompiledKernel compile(const Kernel& k, const Device& dev, const CompileOptions& opts) {
  auto st = makeState(compileCached(k, targetOf(dev), opts));
  st->kernel = dev.load(binaryFor(k, dev, *st));
  st->loaded = true;
  // On the CPU unaligned vector accesses cost nothing extra, so one variant
  // serves every launch; GPUs vectorise only what alignment facts allow.
  st->specialize = dev.kind() != rt::DeviceKind::CPU;
  st->source = k;
  st->device = dev;
  // The variants a launch compiles (specializedVariant) keep the kernel's
  // cluster shape.
  st->options = detail::withKernelShape(k, opts);
  return CompiledKernel(std::move(st));
}

const rt::KernelSignature& CompiledKernel::signature() const {
  if (!state_) throw UsageError("signature: this CompiledKernel is empty");
  return state_->artifact->binary.signature;
}
const codegen::Artifact& CompiledKernel::artifact() const {
  if (!state_) throw UsageError("artifact: this CompiledKernel is empty");
  return state_->compiled->complete();
}
const std::vector<std::string>& CompiledKernel::warnings() const {
  if (!state_) throw UsageError("warnings: this CompiledKernel is empty");
  return state_->artifact->warnings;
}
bool CompiledKernel::fromDiskCache() const { return state_ && state_->artifact->fromDiskCache; }
bool CompiledKernel::launchable() const { return state_ && state_->loaded; }
const Kernel& CompiledKernel::source() const {
  if (!state_) throw UsageError("source: this CompiledKernel is empty");
  return state_->source;
}
const Device& CompiledKernel::device() const {
  if (!launchable())
    throw UsageError("device: this CompiledKernel was compiled for inspection, not loaded on a device");
  return state_->device;
}

CacheStats cacheStats() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().stats;
}
void clearCache() {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().entries.clear();
  cache().stats = {};
}

}  // namespace tessera
