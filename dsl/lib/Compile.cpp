// tessera::compile: the in-memory compile cache, stage dumps, and the bridge
// from a compiled artifact to a runtime kernel.
#include "tessera/Compile.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "tessera/ir/Printer.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/support/Error.h"

namespace tessera {

const char* name(Stage s) {
  switch (s) {
    case Stage::TileIR: return "tile-ir";
    case Stage::TileIRPasses: return "tile-ir-passes";
    case Stage::LLVM: return "llvm";
    case Stage::LLVMOptimized: return "llvm-opt";
    case Stage::Assembly: return "asm";
    case Stage::PTX: return "ptx";
    case Stage::SASS: return "sass";
    case Stage::AMDGCN: return "amdgcn";
    case Stage::HSACO: return "hsaco";
    case Stage::LLVMGpu: return "llvm-gpu";
    case Stage::Resources: return "resources";
    case Stage::LayoutStats: return "layout-stats";
  }
  return "?";
}

Stage parseStage(const std::string& s) {
  for (Stage st : {Stage::TileIR, Stage::TileIRPasses, Stage::LLVM, Stage::LLVMOptimized, Stage::Assembly, Stage::PTX,
                   Stage::SASS, Stage::AMDGCN, Stage::HSACO, Stage::LLVMGpu, Stage::Resources, Stage::LayoutStats})
    if (s == name(st)) return st;
  throw UsageError(
      "unknown stage '" + s +
      "' (expected tile-ir, tile-ir-passes, llvm, llvm-opt, asm, ptx, sass, amdgcn, hsaco, llvm-gpu, resources "
      "or layout-stats)");
}

struct CompiledKernel::State {
  std::shared_ptr<codegen::Artifact> artifact;
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
  rt::Kernel checked;                       // CPU: the bounds-checked compile, made at the first checked launch
  bool checkedLoaded = false;
};

namespace {

// Everything that changes the code; emuHooks only bind symbols of the JIT.
std::string optionsKey(const CompileOptions& o) {
  return "O" + std::to_string(o.optLevel) + ";checked=" + std::to_string(o.checkBounds) +
         ";warps=" + std::to_string(o.numWarps) + ";cov=" + std::to_string(o.codeObjectVersion) +
         ";precision=" + codegen::name(o.precision);
}

// TESSERA_PRECISION=approx|accurate sets every compile's precision (the
// command line's --precision for `tessera run` works through it).
CompileOptions withEnvironment(CompileOptions o) {
  if (const char* p = std::getenv("TESSERA_PRECISION"); p && *p) o.precision = codegen::parsePrecision(p);
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
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<codegen::Artifact>>> entries;
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

std::shared_ptr<codegen::Artifact> compileCached(const Kernel& k, const Target& target,
                                                 const CompileOptions& userOpts) {
  if (!k.valid()) throw UsageError("compile: the kernel is empty (default-constructed tessera::Kernel)");
  const CompileOptions opts = withEnvironment(userOpts);
  const char* dumpDir = std::getenv("TESSERA_DUMP_DIR");
  std::string key = target.str() + "|" + optionsKey(opts) + "|" + textMemo().text(k);

  Cache& c = cache();
  std::promise<std::shared_ptr<codegen::Artifact>> promise;
  std::shared_future<std::shared_ptr<codegen::Artifact>> future;
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
      CompileOptions o = opts;
      if (dumpDir && *dumpDir) o.dumpAssembly = true;
      // emu: targets bind the SIMT machine's hooks in their JIT. The hooks
      // are not part of the code, so they stay out of the key (optionsKey).
      if ((target.kind == Target::Kind::EmuNVPTX || target.kind == Target::Kind::EmuAMDGPU) && o.emuHooks.empty())
        for (auto [name, addr] : emu::hookSymbols()) o.emuHooks.emplace_back(name, addr);
      auto art = codegen::compile(k.ir(), target, o);
      if (dumpDir && *dumpDir) writeDumps(*art, dumpDir);
      promise.set_value(art);
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(c.mu);
      c.entries.erase(key);  // let a later call retry (e.g. after a toolchain is installed)
    }
  }
  return future.get();
}

std::shared_ptr<CompiledKernel::State> makeState(const Kernel& k, std::shared_ptr<codegen::Artifact> art) {
  auto st = std::make_shared<CompiledKernel::State>();
  st->artifact = std::move(art);
  return st;
}

}  // namespace

CompiledKernel compile(const Kernel& k, const Target& target, const CompileOptions& opts) {
  return CompiledKernel(makeState(k, compileCached(k, target, opts)));
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
  auto st = makeState(k, compileCached(k, targetOf(dev), opts));
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
  const char* v = std::getenv("TESSERA_CHECK_BOUNDS");
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

void CompiledKernel::launchWith(Dim3 grid, const std::vector<rt::Arg>& args, const LaunchOptions& opts) const {
  if (!state_) throw LaunchError("launch: this CompiledKernel is empty (default-constructed)");
  if (!state_->loaded)
    throw LaunchError("launch: kernel '" + state_->artifact->binary.signature.kernelName +
                      "' was compiled for target '" + state_->artifact->target.str() +
                      "' for inspection only; compile it for a Device to launch it");
  if (state_->device.kind() == rt::DeviceKind::CPU && !state_->options.checkBounds &&
      (opts.checkBounds || checkBoundsFromEnvironment())) {
    // A checked launch runs the bounds-checked compile of the same kernel.
    rt::Kernel checked;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (!state_->checkedLoaded) {
        CompileOptions o = state_->options;
        o.checkBounds = true;
        auto st = makeState(state_->source, compileCached(state_->source, targetOf(state_->device), o));
        state_->checked = state_->device.load(binaryFor(state_->source, state_->device, *st));
        state_->checkedLoaded = true;
      }
      checked = state_->checked;
    }
    LaunchOptions o = opts;
    o.checkBounds = true;
    return checked.launch(grid, args, o);
  }
  if (!state_->specialize) return state_->kernel.launch(grid, args, opts);
  uint64_t mask = factMask(state_->artifact->binary.signature, args);
  if (mask == 0) return state_->kernel.launch(grid, args, opts);
  rt::Kernel variant;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->variants.find(mask);
    if (it == state_->variants.end()) {
      Kernel k = withFacts(state_->source, mask);
      auto st = makeState(k, compileCached(k, targetOf(state_->device), state_->options));
      it = state_->variants.emplace(mask, state_->device.load(binaryFor(k, state_->device, *st))).first;
    }
    variant = it->second;
  }
  variant.launch(grid, args, opts);
}

std::string CompiledKernel::dump(Stage s) const {
  if (!state_) throw UsageError("dump: this CompiledKernel is empty (default-constructed)");
  const auto& d = state_->artifact->dumps;
  switch (s) {
    case Stage::TileIR: return d.tileIR.empty() ? std::string() : d.tileIR.back().second;
    case Stage::TileIRPasses: {
      std::string out;
      for (const auto& [pass, text] : d.tileIR) out += "// ----- tile IR after " + pass + " ----- //\n" + text + "\n";
      return out;
    }
    case Stage::LLVM: return d.llvm;
    case Stage::LLVMOptimized: return d.llvmOpt;
    case Stage::Assembly: return state_->artifact->assembly();
    case Stage::PTX:
      requireTarget(s, {Target::Kind::NVPTX, Target::Kind::EmuNVPTX});
      return state_->artifact->binary.ptx;
    case Stage::SASS:
      requireTarget(s, {Target::Kind::NVPTX, Target::Kind::EmuNVPTX});
      return codegen::sass(*state_->artifact);
    case Stage::AMDGCN:
      requireTarget(s, {Target::Kind::AMDGPU, Target::Kind::EmuAMDGPU});
      return state_->artifact->assembly();
    case Stage::HSACO:
      requireTarget(s, {Target::Kind::AMDGPU, Target::Kind::EmuAMDGPU});
      return std::string(state_->artifact->binary.codeObject.begin(), state_->artifact->binary.codeObject.end());
    case Stage::LLVMGpu: {
      auto it = d.extra.find("llvm-gpu");
      if (it == d.extra.end())
        throw UsageError(std::string("stage llvm-gpu exists only for GPU targets, not ") +
                         state_->artifact->target.str());
      return it->second;
    }
    case Stage::LayoutStats: {
      auto it = d.extra.find("layout-stats");
      if (it == d.extra.end())
        throw UsageError(std::string("stage layout-stats exists only for GPU targets, not ") +
                         state_->artifact->target.str());
      return it->second;
    }
    case Stage::Resources: return codegen::resourceReport(*state_->artifact);
  }
  return {};
}

void CompiledKernel::requireTarget(Stage s, std::initializer_list<Target::Kind> kinds) const {
  for (auto k : kinds)
    if (state_->artifact->target.kind == k) return;
  throw UsageError(std::string("stage ") + name(s) + " does not exist for target " + state_->artifact->target.str());
}

const rt::KernelSignature& CompiledKernel::signature() const {
  if (!state_) throw UsageError("signature: this CompiledKernel is empty");
  return state_->artifact->binary.signature;
}
const codegen::Artifact& CompiledKernel::artifact() const {
  if (!state_) throw UsageError("artifact: this CompiledKernel is empty");
  return *state_->artifact;
}
bool CompiledKernel::launchable() const { return state_ && state_->loaded; }

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
