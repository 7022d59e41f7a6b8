// The compile cache proper (tessera/codegen/DiskCache.h): a compile's key,
// and an Artifact as an entry's payload and back.
//
// The payload is what the runtime loads, as AOT export writes it
// (codegen/Export.cpp): the KernelBinary's signature, format and code — for
// CPU targets the object the JIT linked (Artifact::hostObject, the object
// `export` writes) relinked here under the entry symbol export's header
// declares (cpu::entrySymbol), for nvptx the PTX, for amdgpu the code
// object — plus the block size, shared memory, op names of checked
// launches and the compile's warnings. No stage dump and no LLVM module:
// stages are recompiled on request (dsl/lib/CompileInternal.h, Compiled).
//
//   str target  u8 format  str kernelName  u32 args, each: u8 kind, u8 dtype, str name
//   str symbol  u8 boundsChecked  str ptx  str codeObject  u32 threadsPerBlock
//   u32 sharedBytes  u32 cluster[3]  u64 hostStackBytes  u32 opNames, each str  str hostObject
//   u32 warnings, each str
#include <llvm/Support/MemoryBuffer.h>

#include <filesystem>
#include <iterator>

#include "codegen/cache/Bytes.h"
#include "codegen/cache/Internal.h"
#include "codegen/cpu/EntrySymbol.h"
#include "codegen/llvm/HostIsa.h"
#include "codegen/llvm/Jit.h"
#include "tessera/codegen/Compiler.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/support/Error.h"

namespace tessera::codegen {
namespace {

constexpr const char* kKind = "kernels";

void putStrings(cache::Writer& w, const std::vector<std::string>& v) {
  w.u32(static_cast<uint32_t>(v.size()));
  for (const std::string& s : v) w.str(s);
}
std::vector<std::string> getStrings(cache::Reader& r) {
  std::vector<std::string> v;
  uint32_t n = r.u32();
  for (uint32_t i = 0; i < n && r.ok(); ++i) v.push_back(r.str());
  return v;
}

std::string encode(const Artifact& a) {
  const KernelBinary& b = a.binary;
  cache::Writer w;
  w.str(a.target.str());
  w.u8(static_cast<uint8_t>(b.format));
  w.str(b.signature.kernelName);
  w.u32(static_cast<uint32_t>(b.signature.args.size()));
  for (const ArgSpec& s : b.signature.args) {
    w.u8(static_cast<uint8_t>(s.kind));
    w.u8(static_cast<uint8_t>(s.dtype));
    w.str(s.name);
  }
  w.u32(static_cast<uint32_t>(b.signature.tensorMaps.size()));
  for (const TensorMapSpec& t : b.signature.tensorMaps) {
    w.u32(static_cast<uint32_t>(t.source));
    w.u8(static_cast<uint8_t>(t.dtype));
    w.u32(t.rank);
    for (unsigned d = 0; d < 3; ++d)
      for (const TensorMapSpec::Extent& e : {t.dims[d], t.strides[d]}) {
        w.u32(static_cast<uint32_t>(e.arg));
        w.u64(static_cast<uint64_t>(e.scale));
        w.u64(static_cast<uint64_t>(e.value));
      }
    for (unsigned d = 0; d < 3; ++d) w.u32(t.box[d]);
    w.u32(t.swizzleBytes);
  }
  w.str(b.symbol);
  w.u8(b.boundsChecked);
  w.str(b.ptx);
  w.str(std::string_view(b.codeObject.data(), b.codeObject.size()));
  w.u32(b.threadsPerBlock);
  w.u32(b.sharedBytes);
  for (uint32_t c : b.cluster) w.u32(c);
  w.u64(b.hostStackBytes);
  putStrings(w, b.opNames);
  w.str(a.hostObject);
  putStrings(w, a.warnings);
  return std::move(w.data());
}

// Null when the payload does not decode (reported by the caller).
std::shared_ptr<Artifact> decode(const std::string& payload, std::string& problem) {
  cache::Reader r(payload);
  auto a = std::make_shared<Artifact>();
  std::string target = r.str();
  KernelBinary& b = a->binary;
  uint8_t format = r.u8();
  b.signature.kernelName = r.str();
  uint32_t n = r.u32();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    ArgSpec s;
    uint8_t kind = r.u8(), dtype = r.u8();
    if (kind > uint8_t(ArgSpec::Kind::Scalar) || dtype >= std::size(kAllDTypes)) {
      problem = "an argument of unknown kind or dtype";
      return nullptr;
    }
    s.kind = static_cast<ArgSpec::Kind>(kind);
    s.dtype = static_cast<DType>(dtype);
    s.name = r.str();
    b.signature.args.push_back(std::move(s));
  }
  uint32_t maps = r.u32();
  for (uint32_t i = 0; i < maps && r.ok(); ++i) {
    TensorMapSpec t;
    t.source = static_cast<int>(r.u32());
    uint8_t dtype = r.u8();
    t.rank = r.u32();
    for (unsigned d = 0; d < 3; ++d)
      for (TensorMapSpec::Extent* e : {&t.dims[d], &t.strides[d]}) {
        e->arg = static_cast<int>(r.u32());
        e->scale = static_cast<int64_t>(r.u64());
        e->value = static_cast<int64_t>(r.u64());
      }
    for (unsigned d = 0; d < 3; ++d) t.box[d] = r.u32();
    t.swizzleBytes = r.u32();
    if (dtype >= std::size(kAllDTypes) || t.source < 0 || static_cast<uint32_t>(t.source) >= n || t.rank < 2 ||
        t.rank > 3) {
      problem = "a tensor map of unknown dtype, argument or rank";
      return nullptr;
    }
    t.dtype = static_cast<DType>(dtype);
    b.signature.tensorMaps.push_back(t);
  }
  b.symbol = r.str();
  b.boundsChecked = r.u8() != 0;
  b.ptx = r.str();
  std::string code = r.str();
  b.codeObject.assign(code.begin(), code.end());
  b.threadsPerBlock = r.u32();
  b.sharedBytes = r.u32();
  for (uint32_t& c : b.cluster) c = r.u32();
  b.hostStackBytes = r.u64();
  b.opNames = getStrings(r);
  a->hostObject = r.str();
  a->warnings = getStrings(r);
  if (!r.ok() || r.left() != 0) {
    problem = "a payload that does not decode";
    return nullptr;
  }
  try {
    a->target = Target::parse(target);
  } catch (const Error&) {
    problem = "an unknown target '" + target + "'";
    return nullptr;
  }
  if (format > uint8_t(KernelBinary::Format::HSACO)) {
    problem = "a binary format this Tessera does not load";
    return nullptr;
  }
  b.format = static_cast<KernelBinary::Format>(format);
  const bool fits =
      (a->target.kind == Target::Kind::CPU && b.format == KernelBinary::Format::HostFunction &&
       !a->hostObject.empty()) ||
      (a->target.kind == Target::Kind::NVPTX && b.format == KernelBinary::Format::PTX && !b.ptx.empty()) ||
      (a->target.kind == Target::Kind::AMDGPU && b.format == KernelBinary::Format::HSACO && !b.codeObject.empty());
  if (!fits) {
    problem = "no code for its target";
    return nullptr;
  }
  a->fromDiskCache = true;
  return a;
}

}  // namespace

std::string optionsKey(const CompileOptions& o) {
  return "opt-level=" + std::to_string(o.optLevel) + ";check-bounds=" + std::to_string(o.checkBounds) +
         ";num-warps=" + std::to_string(o.numWarps) + ";code-object-version=" + std::to_string(o.codeObjectVersion) +
         ";precision=" + name(o.precision) + (o.tensorCopies ? "" : ";tensor-copies=0") +
         (o.predicatedAccesses ? "" : ";predicated-accesses=0") + (o.cpuTiles ? "" : ";cpu-tiles=0") +
         (o.nativeScaledDotsOnly ? ";native-scaled-dots-only=1" : "") + (o.deterministic ? ";deterministic=1" : "") +
         (o.profile ? ";profile=1" : "") +
         (o.cluster == std::array<int, 3>{1, 1, 1}
              ? ""
              : ";cluster=" + std::to_string(o.cluster[0]) + "x" + std::to_string(o.cluster[1]) + "x" +
                    std::to_string(o.cluster[2]));
}

bool diskCacheable(const Target& t) {
  return t.kind == Target::Kind::CPU || t.kind == Target::Kind::NVPTX || t.kind == Target::Kind::AMDGPU;
}

CacheKey compileKey(const std::string& kernelName, const std::string& irText, const Target& target,
                    const CompileOptions& opts) {
  std::vector<KeyPart> parts;
  parts.push_back({"kernel", kernelName});
  parts.push_back({"target", target.str()});
  if (target.kind == Target::Kind::CPU) {
    // "cpu" is whatever this host is (or TESSERA_HOST_CPU narrows it to),
    // and a pinned cpu's code depends on the features LLVM gives it: the
    // resolved triple, cpu and features are what the code is for.
    CpuTargetInfo t = selectCpuTarget(target.arch);
    parts.push_back({"host-cpu", t.triple + " " + t.cpu});
    parts.push_back({"cpu-features", t.features});
  }
  parts.push_back({"options", optionsKey(opts)});
  // A device library (libdevice on NVPTX) is linked into the code: another
  // file, or the same file rewritten, is another compile.
  if (std::string lib = deviceMathLibrary(target); !lib.empty()) {
    std::error_code ec;
    auto size = std::filesystem::file_size(lib, ec);
    auto mtime = std::filesystem::last_write_time(lib, ec).time_since_epoch().count();
    parts.push_back({"device-library",
                     lib + " size=" + std::to_string(ec ? 0 : size) + " mtime=" + std::to_string(ec ? 0 : mtime)});
  }
  // NVIDIA: the ptxas that checks the PTX, reports its resources and
  // exports its cubin (and refuses architectures newer than itself).
  if (std::string ptxas = deviceAssemblerVersion(target); !ptxas.empty()) parts.push_back({"ptxas", ptxas});
  parts.push_back({"tessera", tesseraBuildId()});
  parts.push_back({"llvm", llvmVersion()});
  parts.push_back({"ir", irText});
  return CacheKey::make(kKind, std::move(parts));
}

std::shared_ptr<Artifact> loadCachedArtifact(const CacheKey& key) {
  KeyedStore store(kKind);
  std::optional<std::string> payload = store.load(key);
  if (!payload) return nullptr;
  std::string problem;
  std::shared_ptr<Artifact> a = decode(*payload, problem);
  auto reject = [&](const std::string& why) -> std::shared_ptr<Artifact> {
    const std::string path = store.dir() + "/" + kKind + "/" + key.hash + ".tce";
    cache::hitRejected();
    cache::warnOnce("entry:" + path, "'" + path + "': " + why + "; ignored, the kernel is recompiled");
    return nullptr;
  };
  if (!a) return reject("holds " + problem);
  if (a->target.kind != Target::Kind::CPU) return a;
  // CPU code: linked into this process's JIT, as the compile that made it
  // did (the same object, the same entry symbol).
  a->notRunnable = cannotRunOnHost(a->target);
  if (!a->notRunnable.empty()) return a;  // inspection only, as a compile here would be
  try {
    auto obj = llvm::MemoryBuffer::getMemBufferCopy(a->hostObject, key.hash + ".o");
    cpu::JitResult jit = cpu::jitObject(std::move(obj), cpu::entrySymbol(a->kernelName()));
    a->binary.hostEntry = jit.entry.toPtr<KernelBinary::HostEntry>();
    a->binary.owner = jit.owner;
  } catch (const Error& e) {
    return reject(std::string("does not link: ") + e.what());
  }
  return a;
}

bool storeCachedArtifact(const CacheKey& key, const Artifact& a) {
  if (!diskCacheable(a.target)) return false;
  if (a.target.kind == Target::Kind::CPU && (a.hostObject.empty() || !a.binary.hostEntry)) return false;
  try {
    KeyedStore store(kKind);
    return store.save(key, encode(a));
  } catch (const std::exception&) {
    return false;  // never fails the compile it would have kept
  }
}

}  // namespace tessera::codegen
