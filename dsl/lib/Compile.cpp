// tessera::compile: the in-memory compile cache in front of the persistent
// one (tessera/codegen/DiskCache.h), stage dumps, and the bridge from a
// compiled artifact to a runtime kernel.
#include "tessera/Compile.h"

#include "CompileInternal.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "tessera/Cache.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/ir/Printer.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/support/Error.h"
#include "tessera/support/Environment.h"

namespace tessera {

const char* name(Stage s) {
  switch (s) {
#define TESSERA_STAGE(Enum, spelling, targets, description) \
  case Stage::Enum: return spelling;
#include "tessera/Stages.def"
  }
  return "?";
}

Stage parseStage(const std::string& s) {
  static const Stage all[] = {
#define TESSERA_STAGE(Enum, spelling, targets, description) Stage::Enum,
#include "tessera/Stages.def"
  };
  std::string list;
  for (size_t i = 0; i < std::size(all); ++i) {
    if (s == name(all[i])) return all[i];
    list += std::string(i == 0 ? "" : i + 1 == std::size(all) ? " or " : ", ") + name(all[i]);
  }
  throw UsageError("unknown stage '" + s + "' (expected " + list + ")");
}

namespace {
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
}  // namespace

struct CompiledKernel::State {
  std::shared_ptr<codegen::Artifact> artifact;  // launchable; from the persistent cache it has no stages
  std::shared_ptr<Compiled> compiled;
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
  rt::Kernel checked;  // CPU: the bounds-checked compile, made at the first checked launch
  bool checkedLoaded = false;
};

namespace {

// TESSERA_PRECISION=approx|accurate sets every compile's precision (the
// command line's --precision for `tessera run` works through it);
// TESSERA_TENSOR_COPIES=0 turns sm_90a's TMA copies off (cp.async instead),
// TESSERA_PREDICATED_ACCESSES=0 the branch-free masked accesses.
bool switchFromEnvironment(const char* name, bool current) {
  const char* t = std::getenv(name);
  if (!t || !*t) return current;
  if (std::string(t) != "0" && std::string(t) != "1")
    throw UsageError(std::string(name) + "='" + t + "' (expected 0 or 1)");
  return std::string(t) == "1";
}

CompileOptions withEnvironment(CompileOptions o) {
  if (const char* p = tessera::env::get(tessera::env::Var::Precision); p && *p)
    o.precision = codegen::parsePrecision(p);
  o.tensorCopies = switchFromEnvironment(tessera::env::name(tessera::env::Var::TensorCopies), o.tensorCopies);
  o.predicatedAccesses =
      switchFromEnvironment(tessera::env::name(tessera::env::Var::PredicatedAccesses), o.predicatedAccesses);
  return o;
}

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

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<Compiled>>> entries;
  CacheStats stats;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: JIT code may outlive static destructors
  return *c;
}
TextMemo& textMemo() {
  static TextMemo* m = new TextMemo();
  return *m;
}

std::string sanitize(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  return s;
}

// A debugging aid must never break the compile it describes: a dump folder
// that cannot be written is reported on stderr, once per folder, and the
// compile goes on.
void dumpWarning(const std::string& dir, const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(dir).second)
    std::fprintf(stderr, "tessera: warning: TESSERA_DUMP_DIR: %s; no stages are written there\n", what.c_str());
}

void writeDumps(const codegen::Artifact& a, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return dumpWarning(dir, "cannot create '" + dir + "': " + ec.message());
  std::string stem = dir + "/" + sanitize(a.kernelName()) + "." + sanitize(a.target.str());
  bool failed = false;
  auto put = [&](const std::string& suffix, const std::string& text) {
    if (failed) return;
    std::ofstream out(stem + "." + suffix);
    if (out) out << text;
    if (!out) {
      failed = true;
      dumpWarning(dir, "cannot write '" + stem + "." + suffix + "'");
    }
  };
  int i = 0;
  for (const auto& [pass, text] : a.dumps.tileIR) {
    char idx[16];
    std::snprintf(idx, sizeof idx, "%02d", i++);
    put(std::string("tile-ir.") + idx + "." + sanitize(pass) + ".tir", text);
  }
  put("llvm.ll", a.dumps.llvm);
  put("llvm-opt.ll", a.dumps.llvmOpt);
  put(a.target.kind == Target::Kind::CPU ? "asm.s" : (a.binary.ptx.empty() ? "amdgcn.s" : "ptx"), a.assembly());
  if (!a.binary.codeObject.empty()) put("hsaco", std::string(a.binary.codeObject.begin(), a.binary.codeObject.end()));
  for (const auto& [k, text] : a.dumps.extra)
    if (k != "hsaco") put(sanitize(k) + ".txt", text);
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
// kept there (turned off, an emu: target, a stage dump folder that wants
// every stage). A key that cannot be made (an unknown cpu) leaves the
// error to the compile.
std::optional<codegen::CacheKey> diskKey(const Kernel& k, const std::string& text, const Target& target,
                                         const CompileOptions& opts) {
  if (!opts.useDiskCache || !codegen::diskCacheable(target)) return std::nullopt;
  if (!codegen::KeyedStore("kernels").usable()) return std::nullopt;
  try {
    return codegen::compileKey(k.name(), text, target, opts);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::shared_ptr<Compiled> compileCached(const Kernel& k, const Target& target, const CompileOptions& userOpts) {
  if (!k.valid()) throw UsageError("compile: the kernel is empty (default-constructed tessera::Kernel)");
  const CompileOptions opts = withEnvironment(userOpts);
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

}  // namespace

std::shared_ptr<codegen::Artifact> detail::compiledArtifact(const Kernel& k, const Target& target,
                                                            const CompileOptions& opts) {
  return compileCached(k, target, opts)->artifact;
}

CompiledKernel compile(const Kernel& k, const Target& target, const CompileOptions& opts) {
  auto st = makeState(compileCached(k, target, opts));
  st->source = k;
  return CompiledKernel(std::move(st));
}

namespace {

/// The target whose code `dev` runs.
Target targetOf(const Device& dev) {
  switch (dev.kind()) {
    case rt::DeviceKind::CPU: return dev.arch().empty() ? Target::cpu() : Target::parse("cpu:" + dev.arch());
    case rt::DeviceKind::Emulator: return Target::parse("emu:" + dev.arch());
    case rt::DeviceKind::CUDA:
    case rt::DeviceKind::HIP: return Target::parse(dev.arch());
  }
  throw DeviceError(std::string("compile: devices of kind '") + rt::name(dev.kind()) + "' are not supported");
}

/// What `dev` loads: the artifact's binary as codegen made it, which the
/// target `dev` runs (targetOf) determined.
const rt::Binary& binaryFor(const Kernel& k, const Device& dev, const CompiledKernel::State& st) {
  const codegen::Artifact& a = *st.artifact;
  if (dev.kind() == rt::DeviceKind::CPU && !a.binary.hostEntry)
    throw DeviceError("compile: kernel '" + k.name() + "' compiled for " + a.target.str() + " cannot run on this CPU" +
                      (a.notRunnable.empty() ? "" : ": " + a.notRunnable));
  TS_ASSERT(dev.kind() != rt::DeviceKind::Emulator || a.binary.emuThread,
            "emulator artifact of '" + k.name() + "' has no thread function");
  return a.binary;
}

}  // namespace

CompiledKernel compile(const Kernel& k, const Device& dev, const CompileOptions& opts) {
  auto st = makeState(compileCached(k, targetOf(dev), opts));
  st->kernel = dev.load(binaryFor(k, dev, *st));
  st->loaded = true;
  // On the CPU unaligned vector accesses cost nothing extra, so one variant
  // serves every launch; GPUs vectorise only what alignment facts allow.
  st->specialize = dev.kind() != rt::DeviceKind::CPU;
  st->source = k;
  st->device = dev;
  st->options = opts;
  return CompiledKernel(std::move(st));
}

namespace {
constexpr int64_t kSpecDivisor = 16;

// TESSERA_CHECK_BOUNDS=1 makes every CPU launch a checked one.
bool checkBoundsFromEnvironment() {
  const char* v = tessera::env::get(tessera::env::Var::CheckBounds);
  return v && *v && std::string(v) != "0";
}

// Which arguments carry a divisibility fact in this launch: bit i set when
// argument i is a 16-byte aligned buffer address or an integer multiple of
// 16. Arguments that do not match the signature contribute nothing (the
// runtime reports them).
uint64_t factMask(const rt::KernelSignature& sig, const std::vector<rt::Arg>& args) {
  uint64_t mask = 0;
  for (size_t i = 0; i < args.size() && i < sig.args.size() && i < 64; ++i) {
    const rt::Arg& a = args[i];
    const rt::ArgSpec& spec = sig.args[i];
    if (spec.kind == rt::ArgSpec::Kind::Pointer && a.kind == rt::Arg::Kind::Buffer && !a.buffer.isNull()) {
      auto addr = reinterpret_cast<uintptr_t>(a.buffer.data()) + a.offset * byteSize(a.buffer.dtype());
      if (addr % kSpecDivisor == 0) mask |= uint64_t{1} << i;
    } else if (spec.kind == rt::ArgSpec::Kind::Scalar && a.kind == rt::Arg::Kind::Scalar && isInteger(spec.dtype) &&
               spec.dtype != DType::I1 && isInteger(a.dtype)) {
      if (a.scalar.i % kSpecDivisor == 0) mask |= uint64_t{1} << i;
    }
  }
  return mask;
}

// Whether a launch gives a tensor map (TMA) of the kernel an empty
// dimension: an M, N or K of 0 (an MoE expert without tokens, an empty
// batch) as an extent or a stride. TMA cannot describe an empty tensor, so
// such a launch runs the kernel compiled without tensor copies, whose plain
// copies mask an empty range like any other. Negative extents are left to
// the launch's own check, which names them.
bool emptyTensorMap(const rt::KernelSignature& sig, const std::vector<rt::Arg>& args) {
  auto zero = [&](const TensorMapSpec::Extent& e) {
    if (e.arg < 0) return e.value == 0;
    const size_t i = static_cast<size_t>(e.arg);
    if (i >= args.size() || args[i].kind != rt::Arg::Kind::Scalar || !isInteger(args[i].dtype)) return false;
    return args[i].scalar.i == 0 || e.scale == 0;
  };
  for (const TensorMapSpec& t : sig.tensorMaps)
    for (unsigned d = 0; d < t.rank && d < 3; ++d)
      if (zero(t.dims[d]) || (d > 0 && zero(t.strides[d]))) return true;
  return false;
}

Kernel withFacts(const Kernel& k, uint64_t mask) {
  std::shared_ptr<ir::Function> f = ir::clone(k.ir());
  if (f->argAttrs().size() < f->numArgs()) f->argAttrs().resize(f->numArgs());
  for (unsigned i = 0; i < f->numArgs() && i < 64; ++i)
    if (mask & (uint64_t{1} << i)) f->argAttrs()[i]["divisibility"] = kSpecDivisor;
  return Kernel(std::move(f));
}
}  // namespace

Kernel assumeAligned(const Kernel& k) {
  // The arguments factMask would mark for aligned buffers and sizes.
  uint64_t mask = 0;
  const ir::Function& f = k.ir();
  for (unsigned i = 0; i < f.numArgs() && i < 64; ++i) {
    const ir::Type& t = f.arg(i)->type();
    if (t.isPointer() || (t.isScalar() && isInteger(t.dtype()) && t.dtype() != DType::I1)) mask |= uint64_t{1} << i;
  }
  return withFacts(k, mask);
}

Kernel specializedFor(const Kernel& k, const std::vector<rt::Arg>& args) {
  return withFacts(k, factMask(codegen::kernelSignature(k.ir()), args));
}

void CompiledKernel::launchWith(Dim3 grid, const std::vector<rt::Arg>& args, const LaunchOptions& opts) const {
  if (!state_) throw LaunchError("launch: this CompiledKernel is empty (default-constructed)");
  if (!state_->loaded)
    throw LaunchError("launch: kernel '" + state_->artifact->binary.signature.kernelName +
                      "' was compiled for target '" + state_->artifact->target.str() +
                      "' for inspection only; compile it for a Device to launch it");
  if (!state_->options.checkBounds &&
      (opts.checkBounds || (state_->device.kind() == rt::DeviceKind::CPU && checkBoundsFromEnvironment()))) {
    // A checked launch runs the bounds-checked compile of the same kernel.
    rt::Kernel checked;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (!state_->checkedLoaded) {
        CompileOptions o = state_->options;
        o.checkBounds = true;
        auto st = makeState(compileCached(state_->source, targetOf(state_->device), o));
        state_->checked = state_->device.load(binaryFor(state_->source, state_->device, *st));
        state_->checkedLoaded = true;
      }
      checked = state_->checked;
    }
    LaunchOptions o = opts;
    o.checkBounds = true;
    return checked.launch(grid, args, o);
  }
  // An empty grid runs nothing: the launch only checks the arguments.
  if (!state_->specialize || grid.count() == 0) return state_->kernel.launch(grid, args, opts);
  uint64_t mask = factMask(state_->artifact->binary.signature, args);
  rt::Kernel variant = state_->kernel;
  if (mask != 0) {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->variants.find(mask);
    if (it == state_->variants.end()) {
      Kernel k = withFacts(state_->source, mask);
      auto st = makeState(compileCached(k, targetOf(state_->device), state_->options));
      it = state_->variants.emplace(mask, state_->device.load(binaryFor(k, state_->device, *st))).first;
    }
    variant = it->second;
  }
  if (emptyTensorMap(variant.signature(), args)) {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->withoutTensorMaps.find(mask);
    if (it == state_->withoutTensorMaps.end()) {
      Kernel k = mask ? withFacts(state_->source, mask) : state_->source;
      CompileOptions o = state_->options;
      o.tensorCopies = false;
      auto st = makeState(compileCached(k, targetOf(state_->device), o));
      it = state_->withoutTensorMaps.emplace(mask, state_->device.load(binaryFor(k, state_->device, *st))).first;
    }
    variant = it->second;
  }
  variant.launch(grid, args, opts);
}

std::string CompiledKernel::dump(Stage s) const {
  if (!state_) throw UsageError("dump: this CompiledKernel is empty (default-constructed)");
  // The code itself is in the artifact a launch runs; every other stage
  // comes from the complete artifact (recompiled if it came from disk).
  const codegen::Artifact& code = *state_->artifact;
  if (s == Stage::PTX && !code.binary.ptx.empty()) return code.binary.ptx;
  if (s == Stage::HSACO && !code.binary.codeObject.empty())
    return std::string(code.binary.codeObject.begin(), code.binary.codeObject.end());
  requireTarget(s);
  const codegen::Artifact& art = state_->compiled->complete();
  const auto& d = art.dumps;
  switch (s) {
    case Stage::TileIR: return d.tileIR.empty() ? std::string() : d.tileIR.back().second;
    case Stage::TileIRPasses: {
      std::string out;
      for (const auto& [pass, text] : d.tileIR) out += "// ----- tile IR after " + pass + " ----- //\n" + text + "\n";
      return out;
    }
    case Stage::LLVM: return d.llvm;
    case Stage::LLVMOptimized: return d.llvmOpt;
    case Stage::Assembly: return art.assembly();
    case Stage::PTX: return art.binary.ptx;
    case Stage::SASS: return codegen::sass(*state_->artifact);
    case Stage::AMDGCN: return art.assembly();
    case Stage::HSACO: return std::string(art.binary.codeObject.begin(), art.binary.codeObject.end());
    case Stage::LLVMGpu:
    case Stage::LayoutStats: {
      auto it = d.extra.find(name(s));
      if (it == d.extra.end()) throw InternalError(std::string("stage ") + name(s) + " missing from a GPU compile");
      return it->second;
    }
    case Stage::Resources: return codegen::resourceReport(art);
  }
  return {};
}

void CompiledKernel::requireTarget(Stage s) const {
  const Target& t = state_->artifact->target;
  const bool nvptx = t.kind == Target::Kind::NVPTX || t.kind == Target::Kind::EmuNVPTX;
  const bool amdgpu = t.kind == Target::Kind::AMDGPU || t.kind == Target::Kind::EmuAMDGPU;
  enum Targets { Any, NVPTX, AMDGPU, GPU };
  Targets has = Any;
  switch (s) {
#define TESSERA_STAGE(Enum, spelling, targets, description) \
  case Stage::Enum: has = targets; break;
#include "tessera/Stages.def"
  }
  if (has == GPU && !t.isGpu())
    throw UsageError(std::string("stage ") + name(s) + " exists only for GPU targets, not " + t.str());
  if ((has == NVPTX && !nvptx) || (has == AMDGPU && !amdgpu))
    throw UsageError(std::string("stage ") + name(s) + " does not exist for target " + t.str());
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

// ---- the persistent compile cache (tessera/Cache.h) ---------------------------

DiskCacheSettings diskCacheSettings() { return codegen::diskCacheSettings(); }
void setDiskCacheSettings(const DiskCacheSettings& s) { codegen::setDiskCacheSettings(s); }
void resetDiskCacheSettings() { codegen::resetDiskCacheSettings(); }

DiskCacheStats diskCacheStats() {
  DiskCacheStats r;
  r.settings = codegen::diskCacheSettings();
  codegen::StoreStats s = codegen::KeyedStore("kernels").stats();
  r.exists = s.exists;
  r.entries = s.entries;
  r.bytes = s.bytes;
  r.tempFiles = s.tempFiles;
  r.process = codegen::diskCacheCounters();
  return r;
}

std::string DiskCacheStats::str() const {
  auto size = [](uint64_t b) {
    char buf[32];
    if (b >= (uint64_t{1} << 30))
      std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(uint64_t{1} << 30));
    else if (b >= (uint64_t{1} << 20))
      std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(uint64_t{1} << 20));
    else if (b >= 1024)
      std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
    else
      std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
    return std::string(buf);
  };
  std::string r = "folder:   " + (settings.dir.empty() ? std::string("(none)") : settings.dir) + " (from " +
                  settings.origin + ")" + (exists || settings.dir.empty() ? "" : ", not created yet") + "\n";
  r += std::string("state:    ") + (settings.enabled ? "on" : "off (" + settings.origin + ")") + "\n";
  r += "entries:  " + std::to_string(entries) + " kernels, " + size(bytes) + " of a " + size(settings.maxBytes) +
       " limit (least recently used evicted first)\n";
  if (tempFiles) r += "temporary files: " + std::to_string(tempFiles) + " (writes in flight or interrupted)\n";
  r += "this process: " + std::to_string(process.hits) + " hits, " + std::to_string(process.misses) + " misses, " +
       std::to_string(process.stores) + " stores, " + std::to_string(process.evictions) + " evictions, " +
       std::to_string(process.rejected) + " bad entries, " + std::to_string(process.storeFailures) + " failed writes\n";
  return r;
}

std::vector<CacheEntry> diskCacheEntries() { return codegen::KeyedStore("kernels").list(); }

uint64_t clearDiskCache() { return codegen::KeyedStore("kernels").clear(); }

CacheExplanation explainCompile(const Kernel& k, const Target& target, const CompileOptions& userOpts) {
  if (!k.valid()) throw UsageError("explainCompile: the kernel is empty (default-constructed tessera::Kernel)");
  codegen::KeyedStore store("kernels");
  CacheExplanation x;
  x.dir = store.dir();
  x.enabled = diskCacheSettings().enabled;
  if (!codegen::diskCacheable(target)) {
    x.note = "target " + target.str() + " is never kept on disk (emu: targets compile in every process)";
    return x;
  }
  if (!userOpts.useDiskCache) {
    x.note = "CompileOptions::useDiskCache is false: this compile is never kept on disk";
    return x;
  }
  if (!x.enabled) {
    x.note = "the cache is off (" + diskCacheSettings().origin + "): every compile compiles";
    return x;
  }
  const CompileOptions opts = withEnvironment(userOpts);
  return store.explain(codegen::compileKey(k.name(), textMemo().text(k), target, opts));
}

CacheExplanation explainCompile(const Kernel& k, const Device& dev, const CompileOptions& opts) {
  return explainCompile(k, targetOf(dev), opts);
}

}  // namespace tessera
