// Devices for targets, launches of FILE.tir kernels and machine selection
// (Launches.h).
#include "tessera/perf/Launches.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <sstream>

#include "tessera/perf/Bench.h"
#include "tessera/ir/analysis/Work.h"

namespace tessera::perf {

Device deviceForTarget(const Target& target) {
  Device d = Device::cpu();
  switch (target.kind) {
    case Target::Kind::CPU: d = Device::cpu(target.arch); break;
    case Target::Kind::EmuNVPTX: d = Device::emulator("nvptx:" + target.arch); break;
    case Target::Kind::EmuAMDGPU: d = Device::emulator("amdgpu:" + target.arch); break;
    case Target::Kind::NVPTX: d = Device::cuda(); break;
    case Target::Kind::AMDGPU: d = Device::hip(); break;
  }
  if ((target.kind == Target::Kind::NVPTX || target.kind == Target::Kind::AMDGPU) && d.arch() != target.str())
    throw DeviceError("target '" + target.str() + "' but the GPU present is " + d.name() + " (" + d.arch() +
                      "); pass --target " + d.arch());
  return d;
}

Device inputDeviceForTarget(const Target& target) {
  if (target.kind == Target::Kind::CPU) return Device::cpu(target.arch);
  if (target.kind == Target::Kind::NVPTX || target.kind == Target::Kind::EmuNVPTX)
    return Device::emulator("nvptx:" + target.arch);
  return Device::emulator("amdgpu:" + target.arch);
}

Kernel parseKernelFile(const std::string& path, const std::string& kernelName) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  if (text.size() > (size_t{64} << 20)) throw UsageError("'" + path + "' is larger than 64 MiB; not a tile IR file");
  return parseKernel(text, path, kernelName);
}

namespace {

std::string argName(const ir::Function& f, unsigned i) {
  return f.arg(i)->nameHint.empty() ? std::to_string(i) : f.arg(i)->nameHint;
}

/// The value given for argument `i` of `f`, by name or by index.
const std::string* argValue(const FileLaunchSpec& s, const ir::Function& f, unsigned i) {
  for (const auto& [name, value] : s.args)
    if (name == f.arg(i)->nameHint || name == std::to_string(i)) return &value;
  return nullptr;
}

void checkArgNames(const FileLaunchSpec& s, const ir::Function& f) {
  for (const auto& [name, value] : s.args) {
    bool known = false;
    std::string names;
    for (unsigned i = 0; i < f.numArgs(); ++i) {
      names += (names.empty() ? "" : ", ") + argName(f, i);
      known = known || name == f.arg(i)->nameHint || name == std::to_string(i);
    }
    if (!known)
      throw UsageError("--arg " + name + ": kernel '" + f.name() +
                       "' has no argument of that name (its arguments: " + names + ")");
  }
}

int64_t argInt(const std::string& name, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno) throw UsageError("--arg " + name + " expects an integer, got '" + v + "'");
  return x;
}

// The file's kernel, its argument names and the grid checked: what both a
// launch and its facts start from.
Kernel checkedKernel(const FileLaunchSpec& spec, Dim3& grid) {
  Kernel k = parseKernelFile(spec.path, spec.kernelName);
  checkArgNames(spec, k.ir());
  if (!spec.grid) throw UsageError("a FILE.tir needs --grid X[,Y[,Z]]: the number of programs to launch");
  grid = Dim3((*spec.grid)[0], (*spec.grid)[1], (*spec.grid)[2]);
  return k;
}

}  // namespace

FileLaunch fileLaunch(const FileLaunchSpec& spec, const Device& dev) {
  FileLaunch l;
  l.kernel = checkedKernel(spec, l.grid);
  const ir::Function& f = l.kernel.ir();
  std::string missing;
  for (unsigned i = 0; i < f.numArgs(); ++i) {
    const ir::Type& t = f.arg(i)->type();
    const std::string name = argName(f, i);
    const std::string* v = argValue(spec, f, i);
    if (!v) {
      missing += (missing.empty() ? "" : ", ") + name + (t.isPointer() ? " (elements)" : " (" + t.str() + ")");
      continue;
    }
    if (t.isPointer()) {
      int64_t n = argInt(name, *v);
      if (n < 1) throw UsageError("--arg " + name + ": a buffer needs at least one element, got " + *v);
      Buffer b = dev.alloc(t.dtype(), static_cast<size_t>(n));
      b.fillBytes(0);
      l.args.emplace_back(b);
    } else if (isFloat(t.dtype())) {
      char* end = nullptr;
      double x = std::strtod(v->c_str(), &end);
      if (v->empty() || *end) throw UsageError("--arg " + name + " expects a number, got '" + *v + "'");
      if (t.dtype() == DType::F64)
        l.args.emplace_back(x);
      else
        l.args.emplace_back(static_cast<float>(x));
    } else {
      int64_t x = argInt(name, *v);
      switch (t.dtype()) {
        case DType::I1: l.args.emplace_back(x != 0); break;
        case DType::I8: l.args.emplace_back(static_cast<int8_t>(x)); break;
        case DType::I16: l.args.emplace_back(static_cast<int16_t>(x)); break;
        case DType::I64: l.args.emplace_back(static_cast<int64_t>(x)); break;
        default: l.args.emplace_back(static_cast<int32_t>(x)); break;
      }
    }
  }
  if (!missing.empty()) throw UsageError("kernel '" + f.name() + "' needs --arg NAME=VALUE for: " + missing);
  return l;
}

FileLaunchFacts fileLaunchFacts(const FileLaunchSpec& spec) {
  FileLaunchFacts r;
  r.kernel = checkedKernel(spec, r.grid);
  const ir::Function& f = r.kernel.ir();
  r.facts.grid = {(*spec.grid)[0], (*spec.grid)[1], (*spec.grid)[2]};
  r.facts.scalars.resize(f.numArgs());
  r.facts.bufferBytes.resize(f.numArgs());
  for (unsigned i = 0; i < f.numArgs(); ++i) {
    const std::string* v = argValue(spec, f, i);
    if (!v) continue;
    const ir::Type& t = f.arg(i)->type();
    if (t.isPointer())
      r.facts.bufferBytes[i] =
          static_cast<uint64_t>(std::max<int64_t>(0, argInt(argName(f, i), *v))) * byteSize(t.dtype());
    else if (t.isIntLike())
      r.facts.scalars[i] = argInt(argName(f, i), *v);
  }
  return r;
}

std::vector<Machine> selectMachines(const std::vector<std::string>& ids, bool needHost, bool remeasure,
                                    std::ostream& log) {
  const bool wantHost = ids.empty() || std::find(ids.begin(), ids.end(), "host") != ids.end();
  std::vector<Machine> out;
  if (wantHost || needHost) {
    HostPeaks hp = hostPeaks(remeasure);
    if (!hp.fromCache)
      log << "tessera: measured this host's peaks in " << formatSeconds(hp.measureSeconds) << ": FMA "
          << formatSI(hp.fmaFlops, "FLOP/s") << ", triad " << formatSI(hp.triadBytes, "B/s")
          << (hp.cacheFile.empty() ? std::string() : "; remembered in " + hp.cacheFile) << "\n";
    if (!hp.warning.empty()) log << "tessera: warning: " << hp.warning << "\n";
    out.push_back(hostMachine(hp));
  }
  for (const Machine& m : gpuMachines())
    if (ids.empty() || std::find(ids.begin(), ids.end(), m.id) != ids.end()) out.push_back(m);
  return out;
}

std::vector<Machine> onlyMachines(const std::vector<std::string>& ids, const std::vector<Machine>& all) {
  if (ids.empty()) return all;
  std::vector<Machine> out;
  for (const Machine& m : all)
    if (std::find(ids.begin(), ids.end(), m.id) != ids.end()) out.push_back(m);
  return out;
}

}  // namespace tessera::perf
