// The SIMT emulator as a device: GPU code (the NVPTX / AMDGPU lowering,
// rewritten onto the emulator's hooks and JIT-compiled for the host) runs on
// tessera::emu's machine, one fiber per GPU thread.
//
// Memory is host memory, so copies are memcpy. Every live allocation is kept
// in a registry and handed to each launch as the set of global buffers the
// kernel may touch: an access outside all of them (past the end of a buffer,
// into freed memory) is reported as an out-of-bounds access naming the tile
// op, instead of silently reading the host heap.

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "HostStream.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/runtime/LaunchLimits.h"
#include "tessera/support/Targets.h"

namespace tessera::rt {
namespace {

// As on the CPU device: a cache line, and a plausible GPU allocation
// alignment (cudaMalloc gives at least 256, but kernels assume only the
// element alignment and the vector width the lowering chose, <= 16 bytes).
constexpr size_t kAlign = 64;

// An emulated architecture: a row of Targets.def with its spelling.
struct ArchInfo {
  std::string spelling;  // "nvptx:sm_80"
  bool amd;
  unsigned warp;
  unsigned clusterBlocks;  // the most blocks a cluster has; 0: no clusters (AMD, NVIDIA before sm_90)
};

const ArchInfo* findArch(const std::string& arch) {
  static const std::vector<ArchInfo> archs = [] {
    std::vector<ArchInfo> r;
    for (const GpuArch& g : gpuArchs())
      r.push_back(
          {g.spelling(), g.vendor == GpuArch::Vendor::AMD, g.warpSize, static_cast<unsigned>(g.maxClusterBlocks)});
    return r;
  }();
  for (const ArchInfo& a : archs)
    if (arch == a.spelling) return &a;
  return nullptr;
}

struct EmuKernel final : KernelState {
  Binary::ThreadEntry thread = nullptr;
  std::shared_ptr<void> owner;  // keeps the JIT-compiled thread body alive
  unsigned threadsPerBlock = 1;
  size_t sharedBytes = 0;
  bool amd = false;
  unsigned warpSize = 32;
  std::vector<std::string> opNames;
};

class EmuDevice final : public HostMemoryDevice {
 public:
  explicit EmuDevice(const ArchInfo& a) : arch_(a) {}

  DeviceKind kind() const override { return DeviceKind::Emulator; }
  std::string name() const override {
    return std::string("emu:") + arch_.spelling + " (SIMT emulator, warp " + std::to_string(arch_.warp) + ")";
  }
  std::string arch() const override { return arch_.spelling; }

  unsigned defaultThreads() const override {
    unsigned env = threadsFromEnvironment();
    if (env) return env;
    unsigned hw = std::thread::hardware_concurrency();
    return hw ? hw : 1;
  }

  DevicePtr alloc(size_t bytes) override {
    if (bytes > std::numeric_limits<size_t>::max() - kAlign)
      throw DeviceError(name() + ": cannot allocate " + std::to_string(bytes) + " bytes");
    size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    if (rounded == 0) rounded = kAlign;
    void* p = std::aligned_alloc(kAlign, rounded);
    if (!p) throw DeviceError(name() + ": out of memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, rounded);
    std::lock_guard<std::mutex> lock(mu_);
    // The requested size, not the rounded one: the padding is not the
    // buffer's, so touching it is out of bounds as on a GPU allocation.
    live_.emplace(reinterpret_cast<DevicePtr>(p), bytes);
    return reinterpret_cast<DevicePtr>(p);
  }

  void free(DevicePtr p) noexcept override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // The allocation itself: the first entry at p (wrapped memory at the
      // same base is added after it).
      if (auto it = live_.lower_bound(p); it != live_.end() && it->first == p) live_.erase(it);
    }
    std::free(reinterpret_cast<void*>(p));
  }

  std::shared_ptr<KernelState> load(const Binary& bin) override {
    const std::string& k = bin.signature.kernelName;
    const std::string prefix = name() + " cannot load kernel '" + k + "': ";
    if (bin.format != Binary::Format::EmulatedGpu)
      throw DeviceError(prefix + "its binary is " + describe(bin.format) +
                        "; the emulator runs EmulatedGpu binaries (compile the kernel for this device, "
                        "target emu:" +
                        arch_.spelling + ")");
    if (!bin.emuThread) throw DeviceError(prefix + "the EmulatedGpu binary has no thread entry point");
    if (bin.emuAmd != arch_.amd || bin.emuWarpSize != arch_.warp)
      throw DeviceError(prefix + "the binary was compiled for " + (bin.emuAmd ? "AMDGPU" : "NVPTX") +
                        " with warps of " + std::to_string(bin.emuWarpSize) + " threads, but this device emulates " +
                        arch_.spelling + " (warp " + std::to_string(arch_.warp) + ")");
    // As cuModuleGetFunction's MAX_THREADS_PER_BLOCK check on a CUDA device:
    // a block the vendor's GPUs cannot run is refused when it is loaded.
    const unsigned maxThreads = limits().maxThreadsPerBlock;
    if (bin.threadsPerBlock == 0 || bin.threadsPerBlock > maxThreads)
      throw DeviceError(prefix + "block of " + std::to_string(bin.threadsPerBlock) + " threads; a block has 1.." +
                        std::to_string(maxThreads));
    auto ks = std::make_shared<EmuKernel>();
    ks->thread = bin.emuThread;
    ks->owner = bin.owner;
    ks->threadsPerBlock = bin.threadsPerBlock;
    // NVPTX kernels take the lowering's shared memory as dynamic shared
    // memory, placed after the static part; AMDGPU kernels declare it as
    // static LDS, already inside dynamicSharedOffset.
    size_t shared = bin.emuDynamicSharedOffset + (bin.emuAmd ? 0 : size_t{bin.sharedBytes});
    ks->sharedBytes = std::max(shared, bin.emuStaticSharedBytes);
    ks->amd = bin.emuAmd;
    ks->warpSize = bin.emuWarpSize;
    ks->opNames = bin.opNames;
    return ks;
  }

  // Wrapped host memory joins the registry, so kernels may touch it and
  // nothing past it. Inside an allocation of this device, the allocation's
  // size is a known capacity.
  void adoptExternal(DevicePtr p, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(p);
    if (it != live_.begin()) {
      --it;
      const DevicePtr base = it->first;
      const size_t size = it->second;
      if (p < base + size && bytes > base + size - p)
        throw UsageError(name() + ": cannot wrap " + std::to_string(bytes) + " bytes at an address " +
                         std::to_string(p - base) + " bytes into an allocation of " + std::to_string(size) +
                         " bytes: only " + std::to_string(base + size - p) + " bytes remain");
    }
    live_.emplace(p, bytes);
  }

  void releaseExternal(DevicePtr p, size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    auto [lo, hi] = live_.equal_range(p);
    for (auto it = lo; it != hi; ++it)
      if (it->second == bytes) {
        live_.erase(it);
        return;
      }
  }

  // TMA exists on NVIDIA sm_90 and newer; the machine's cp.async.bulk.tensor
  // reads the emulator's own encoding.
  void encodeTensorMap(const Kernel::State& kernel, const TensorMapRequest& m, void* out128) override {
    const std::string nv = "nvptx:sm_";
    const bool tma = !arch_.amd && arch_.spelling.compare(0, nv.size(), nv) == 0 &&
                     std::atoi(arch_.spelling.c_str() + nv.size()) >= 90;
    if (!tma) return DeviceImpl::encodeTensorMap(kernel, m, out128);  // throws: no TMA here
    encodeEmuTensorMap(m, out128);
  }

  // Clusters as on the emulated architecture (an AMDGPU binary loads only
  // on an AMDGPU emulator, which has none).
  unsigned maxClusterBlocks() const override { return arch_.clusterBlocks; }

  void launch(KernelState& ks, const KernelSignature& sig, Dim3 grid, void** args, const LaunchOptions& opts) override {
    checkLimits(static_cast<EmuKernel&>(ks), sig, grid);
    const unsigned threads = launchThreads(opts, sig, *this);
    defaultStream()->synchronize();
    runGrid(static_cast<EmuKernel&>(ks), sig, grid, opts.cluster, args, threads);
  }

  // Emulated launches are long (one fiber per GPU thread): always handed to
  // the stream's worker.
  void launchAsync(StreamImpl& s, KernelState& ks, const KernelSignature& sig, Dim3 grid,
                   std::shared_ptr<LaunchPacket> packet, const LaunchOptions& opts) override {
    checkLimits(static_cast<EmuKernel&>(ks), sig, grid);
    const unsigned threads = launchThreads(opts, sig, *this);
    auto* k = static_cast<EmuKernel*>(&ks);  // kept alive by packet->kernel
    run(s, false, [this, k, &sig, grid, cluster = opts.cluster, threads, packet = std::move(packet)] {
      runGrid(*k, sig, grid, cluster, packet->params.data(), threads);
      packet->finish();
    });
  }

 private:
  const LaunchLimits& limits() const {
    return launchLimits(arch_.amd ? GpuArch::Vendor::AMD : GpuArch::Vendor::NVIDIA);
  }

  // The grid the driver of the emulated vendor would refuse is refused by
  // the call, with the LaunchError a CUDA or HIP device gives (an
  // asynchronous launch too: cuLaunchKernel refuses it at once).
  void checkLimits(const EmuKernel& k, const KernelSignature& sig, Dim3 grid) const {
    const uint32_t g[3] = {grid.x, grid.y, grid.z}, b[3] = {k.threadsPerBlock, 1, 1};
    if (std::string why = launchLimitViolation(limits(), g, b, name()); !why.empty())
      throw LaunchError(sig.kernelName + ": " + why);
  }

  void runGrid(EmuKernel& k, const KernelSignature& sig, Dim3 grid, Dim3 cluster, void** args, unsigned threads) {
    emu::LaunchConfig cfg;
    cfg.vendor = k.amd ? emu::Vendor::AMD : emu::Vendor::NVIDIA;
    cfg.warpSize = k.warpSize;
    cfg.grid[0] = grid.x;
    cfg.grid[1] = grid.y;
    cfg.grid[2] = grid.z;
    cfg.block[0] = k.threadsPerBlock;
    cfg.cluster[0] = cluster.x;
    cfg.cluster[1] = cluster.y;
    cfg.cluster[2] = cluster.z;
    cfg.sharedBytes = k.sharedBytes;
    // Clusters are independent (one worker runs all blocks of one); more
    // workers than clusters would only idle.
    cfg.hostThreads = static_cast<unsigned>(std::min<uint64_t>(threads, grid.count() / cluster.count()));
    cfg.kernelName = sig.kernelName;
    cfg.opNames = k.opNames;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cfg.globalBuffers.reserve(live_.size());
      for (const auto& [p, bytes] : live_) cfg.globalBuffers.emplace_back(reinterpret_cast<const void*>(p), bytes);
    }
    // EmulatorError (races, out-of-bounds accesses, deadlocks) propagates.
    emu::launch(k.thread, args, cfg);
  }

  const ArchInfo& arch_;
  std::mutex mu_;
  // base -> requested bytes; a multimap because wrapped memory may start
  // where another buffer does (a DLPack import of an exported buffer).
  std::multimap<DevicePtr, size_t> live_;
};

}  // namespace

void encodeEmuTensorMap(const TensorMapRequest& m, void* out128) {
  emu::TensorMap t;
  std::memset(static_cast<void*>(&t), 0, sizeof t);  // padding included: the 128 bytes are deterministic
  t.magic = emu::TensorMap::kMagic;
  t.global = m.address;
  t.rank = m.rank;
  t.elemBytes = byteSize(m.dtype);
  for (unsigned d = 0; d < 3; ++d) {
    // Dimensions past the rank: one index, no stride.
    t.dims[d] = d < m.rank ? m.dims[d] : 1;
    t.strides[d] = d == 0 ? t.elemBytes : d < m.rank ? m.strides[d] : 0;
    t.box[d] = d < m.rank ? m.box[d] : 1;
  }
  t.swizzleBytes = m.swizzleBytes;
  std::memcpy(out128, &t, sizeof t);
}

std::shared_ptr<DeviceImpl> createEmuDevice(const std::string& arch) {
  const ArchInfo* a = findArch(arch);
  if (!a) {
    std::string valid;
    for (const GpuArch& x : gpuArchs()) valid += std::string(valid.empty() ? "" : ", ") + x.spelling();
    std::string hint;
    if (arch.rfind("emu:", 0) == 0) hint = " (without the \"emu:\" prefix)";
    throw DeviceError("no emulator for '" + arch + "'; valid architectures are " + valid + hint);
  }
  return std::make_shared<EmuDevice>(*a);
}

}  // namespace tessera::rt
