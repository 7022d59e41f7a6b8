// Launches of a CompiledKernel: launch-time specialisation on GPU devices
// (the arguments' alignment and divisibility facts select a variant, each
// compiled once), the variant without tensor copies for a launch whose
// tensor maps would be empty, checked launches (TESSERA_CHECK_BOUNDS on the
// CPU) and profiled ones (TESSERA_PROFILE).
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "CompileInternal.h"
#include "tessera/support/Error.h"
#include "tessera/support/Environment.h"

namespace tessera {

namespace {

using detail::binaryFor;
using detail::compileCached;
using detail::makeState;
using detail::targetOf;

constexpr int64_t kSpecDivisor = 16;

// TESSERA_CHECK_BOUNDS=1 makes every CPU launch a checked one.
bool checkBoundsFromEnvironment() {
  const char* v = tessera::env::get(tessera::env::Var::CheckBounds);
  return v && *v && std::string(v) != "0";
}

// TESSERA_PROFILE=FILE makes every launch a profiled one, its trace
// written to FILE (each launch overwrites it) and its summary to stderr.
std::string profileFromEnvironment() {
  const char* v = tessera::env::get(tessera::env::Var::Profile);
  return v ? std::string(v) : std::string();
}

void writeTraceFromEnvironment(const rt::Profile& p, const std::string& path) {
  p.writeChromeTrace(path);
  std::fprintf(stderr, "%s(trace written to %s)\n", p.summary().c_str(), path.c_str());
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
  return Kernel(std::move(f)).withCluster(k.cluster());
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

namespace {

/// The loaded kernel a launch with `args` runs on a specialising device:
/// the compile with the facts the arguments prove (alignment, divisibility),
/// and without tensor maps where one of them would describe an empty tensor.
rt::Kernel specializedVariant(CompiledKernel::State& s, const std::vector<rt::Arg>& args) {
  const uint64_t mask = factMask(s.artifact->binary.signature, args);
  rt::Kernel variant = s.kernel;
  if (mask != 0) {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.variants.find(mask);
    if (it == s.variants.end()) {
      Kernel k = withFacts(s.source, mask);
      auto st = makeState(compileCached(k, targetOf(s.device), s.options));
      it = s.variants.emplace(mask, s.device.load(binaryFor(k, s.device, *st))).first;
    }
    variant = it->second;
  }
  if (emptyTensorMap(variant.signature(), args)) {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.withoutTensorMaps.find(mask);
    if (it == s.withoutTensorMaps.end()) {
      Kernel k = mask ? withFacts(s.source, mask) : s.source;
      CompileOptions o = s.options;
      o.tensorCopies = false;
      auto st = makeState(compileCached(k, targetOf(s.device), o));
      it = s.withoutTensorMaps.emplace(mask, s.device.load(binaryFor(k, s.device, *st))).first;
    }
    variant = it->second;
  }
  return variant;
}

}  // namespace

void CompiledKernel::launchWith(Dim3 grid, const std::vector<rt::Arg>& args, const LaunchOptions& opts) const {
  if (!state_) throw LaunchError("launch: this CompiledKernel is empty (default-constructed)");
  if (!state_->loaded)
    throw LaunchError("launch: kernel '" + state_->artifact->binary.signature.kernelName +
                      "' was compiled for target '" + state_->artifact->target.str() +
                      "' for inspection only; compile it for a Device to launch it");
  // A checked or profiled launch runs the bounds-checked or profiled
  // compile of the same kernel (both where both are asked).
  LaunchOptions o = opts;
  o.checkBounds = opts.checkBounds || (state_->device.kind() == rt::DeviceKind::CPU && checkBoundsFromEnvironment());
  rt::Profile fromEnvironment;
  const std::string tracePath = profileFromEnvironment();
  if (!o.profile && !tracePath.empty()) o.profile = &fromEnvironment;
  const unsigned want =
      (o.checkBounds && !state_->options.checkBounds ? 1u : 0u) | (o.profile && !state_->options.profile ? 2u : 0u);
  if (want) {
    // Specialised as the plain launch would be, so the code measured or
    // checked is the code that runs otherwise.
    const uint64_t mask =
        state_->specialize && grid.count() != 0 ? factMask(state_->artifact->binary.signature, args) : 0;
    rt::Kernel instrumented;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      auto it = state_->instrumented.find({want, mask});
      if (it == state_->instrumented.end()) {
        CompileOptions co = state_->options;
        co.checkBounds = co.checkBounds || (want & 1);
        co.profile = co.profile || (want & 2);
        Kernel k = mask ? withFacts(state_->source, mask) : state_->source;
        auto st = makeState(compileCached(k, targetOf(state_->device), co));
        it = state_->instrumented.emplace(std::pair{want, mask}, state_->device.load(binaryFor(k, state_->device, *st)))
                 .first;
      }
      instrumented = it->second;
    }
    instrumented.launch(grid, args, o);
    if (o.profile == &fromEnvironment) writeTraceFromEnvironment(fromEnvironment, tracePath);
    return;
  }
  // An empty grid runs nothing: the launch only checks the arguments.
  if (!state_->specialize || grid.count() == 0) {
    state_->kernel.launch(grid, args, o);
    if (o.profile == &fromEnvironment) writeTraceFromEnvironment(fromEnvironment, tracePath);
    return;
  }
  specializedVariant(*state_, args).launch(grid, args, o);
  if (o.profile == &fromEnvironment) writeTraceFromEnvironment(fromEnvironment, tracePath);
}

unsigned CompiledKernel::residentPrograms(const std::vector<rt::Arg>& args, const LaunchOptions& opts) const {
  if (!state_) throw UsageError("residentPrograms: this CompiledKernel is empty (default-constructed)");
  if (!state_->loaded)
    throw UsageError("residentPrograms: kernel '" + state_->artifact->binary.signature.kernelName +
                     "' was compiled for target '" + state_->artifact->target.str() +
                     "' for inspection only; compile it for a Device");
  const bool variant = state_->specialize && !args.empty();
  return (variant ? specializedVariant(*state_, args) : state_->kernel).residentPrograms(opts);
}

}  // namespace tessera
