// NVIDIA GPUs through the CUDA Driver API, loaded with dlopen (libcuda.so.1,
// or the library named by TESSERA_CUDA_LIBRARY).
//
// Each device uses its primary context (the one the CUDA runtime and other
// libraries share) and a default stream of its own; Tessera streams are
// CUstreams, and a caller's CUstream can be wrapped. Runtime calls can arrive
// on any thread -- the caller's, the thread pool's, a stream's worker -- and
// the current context is per thread, so every entry point makes the device's
// context current first. The driver wrapper and the handles are in
// CudaDriver.h.

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "CudaDriver.h"
#include "tessera/runtime/LaunchLimits.h"
#include "tessera/support/Targets.h"

namespace tessera::rt {
namespace {

using namespace cuabi;
using namespace cudadrv;

/// Dynamic shared memory a kernel gets without opting in
/// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) on every architecture.
constexpr unsigned kDefaultSharedLimit = 48 * 1024;
/// JIT log buffers: ptxas reports are short, but a kernel with many errors
/// can fill several KiB; the log is truncated beyond this.
constexpr size_t kJitLogBytes = 16 * 1024;

/// The blocks a cluster may have on an NVIDIA GPU of compute capability
/// major.minor: Targets.def's row for it, or for a capability without a row
/// (sm_87, sm_110) that of the newest older architecture there.
unsigned clusterBlocksOf(int major, int minor) {
  const int cc = major * 10 + minor;
  int best = -1;
  unsigned blocks = 0;
  for (const GpuArch& g : gpuArchs()) {
    if (g.vendor != GpuArch::Vendor::NVIDIA) continue;
    const int v = std::atoi(g.arch + 3);  // "sm_90a" -> 90
    if (v <= cc && v > best) best = v, blocks = static_cast<unsigned>(g.maxClusterBlocks);
  }
  return blocks;
}

/// cuLaunchKernelEx's configuration of a launch of `k` in clusters of
/// `cluster` (its one attribute). Not copyable: config points at attr.
struct ClusterLaunch {
  CUlaunchAttribute attr{};
  CUlaunchConfig config{};
  ClusterLaunch(const CudaKernel& k, Dim3 grid, Dim3 cluster, CUstream stream) {
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim = {cluster.x, cluster.y, cluster.z};
    config.gridDimX = grid.x, config.gridDimY = grid.y, config.gridDimZ = grid.z;
    config.blockDimX = k.threadsPerBlock, config.blockDimY = 1, config.blockDimZ = 1;
    config.sharedMemBytes = k.sharedBytes;
    config.hStream = stream;
    config.attrs = &attr;
    config.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

class CudaDevice final : public DeviceImpl {
 public:
  CudaDevice(std::shared_ptr<const CudaDriver> drv, int ordinal) : ordinal_(ordinal) {
    const std::string tag = "cuda:" + std::to_string(ordinal);
    auto check = [&](CUresult r, const char* call) {
      if (r != CUDA_SUCCESS) throw DeviceError(tag + ": " + call + " failed: " + drv->errorText(r));
    };
    CUdevice dev = 0;
    check(drv->DeviceGet(&dev, ordinal), "cuDeviceGet");
    char nameBuf[256] = {};
    check(drv->DeviceGetName(nameBuf, sizeof nameBuf - 1, dev), "cuDeviceGetName");
    auto attr = [&](int a) {
      int v = 0;
      check(drv->DeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
      return v;
    };
    major_ = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    minor_ = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    maxGrid_[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
    maxGrid_[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
    maxGrid_[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
    maxSharedOptin_ = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    multiprocessors_ = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    clusterBlocks_ = clusterBlocksOf(major_, minor_);

    ctx_ = std::make_shared<CudaContext>(drv, dev, tag + " " + nameBuf);
    ctx_->check(drv->DevicePrimaryCtxRetain(&ctx_->ctx, dev), "cuDevicePrimaryCtxRetain");
    ctx_->enter();
    // A blocking stream (flags 0) orders launches after the synchronous
    // cuMemcpy / cuMemsetD8 calls, which run on the legacy default stream.
    default_ = std::static_pointer_cast<CudaStream>(createStream());
  }

  DeviceKind kind() const override { return DeviceKind::CUDA; }
  int ordinal() const override { return ordinal_; }
  void makeCurrent() override { ctx_->enter(); }
  std::string name() const override { return ctx_->label; }
  /// GPU parallelism comes from the grid and the block; LaunchOptions::threads
  /// is a host-thread count that does not apply here.
  unsigned defaultThreads() const override { return 1; }

  std::string arch() const override {
    // The architecture-specific row where Targets.def has one rather than
    // the plain architecture (compute capability 9.0: sm_90a, whose code
    // uses wgmma and setmaxnreg; 10.0: sm_100a; 12.0: sm_120a): "a" code
    // runs on exactly its compute capability.
    const std::string sm = "sm_" + std::to_string(major_) + std::to_string(minor_);
    if (!findGpuArch(GpuArch::Vendor::NVIDIA, sm) && findGpuArch(GpuArch::Vendor::NVIDIA, sm + "a"))
      return "nvptx:" + sm + "a";
    return "nvptx:" + sm;
  }

  DevicePtr alloc(size_t bytes) override {
    ctx_->enter();
    CUdeviceptr p = 0;
    if (CUresult r = drv().MemAlloc(&p, bytes); r != CUDA_SUCCESS)
      ctx_->fail(r, "cuMemAlloc", "cannot allocate " + std::to_string(bytes) + " bytes");
    // The interface promises zeroed memory; cuMemAlloc does not.
    if (CUresult r = drv().MemsetD8(p, 0, bytes); r != CUDA_SUCCESS) {
      drv().MemFree(p);
      ctx_->fail(r, "cuMemsetD8", "cannot clear a new allocation of " + std::to_string(bytes) + " bytes");
    }
    return static_cast<DevicePtr>(p);
  }

  void free(DevicePtr p) noexcept override {
    // Ignored failures: see ~CudaContext.
    if (drv().CtxSetCurrent(ctx_->ctx) == CUDA_SUCCESS) drv().MemFree(static_cast<CUdeviceptr>(p));
  }

  void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    ctx_->enter();
    ctx_->check(drv().MemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD",
                "copying " + std::to_string(bytes) + " bytes to the device");
  }
  void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes) override {
    if (!bytes) return;
    ctx_->enter();
    ctx_->check(drv().MemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH",
                "copying " + std::to_string(bytes) + " bytes from the device");
  }
  void fill(DevicePtr dst, uint8_t byte, size_t bytes) override {
    if (!bytes) return;
    ctx_->enter();
    ctx_->check(drv().MemsetD8(dst, byte, bytes), "cuMemsetD8");
  }
  void copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes) override {
    if (!bytes) return;
    ctx_->enter();
    ctx_->check(drv().MemcpyDtoD(dst, src, bytes), "cuMemcpyDtoD",
                "copying " + std::to_string(bytes) + " bytes within the device");
  }

  // The driver knows every allocation: the device it lives on, and its size.
  void adoptExternal(DevicePtr p, size_t bytes) override {
    ctx_->enter();
    const std::string what = "Device::wrap of " + std::to_string(bytes) + " bytes at " + hexAddress(p);
    int owner = -1;
    if (CUresult r = drv().PointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p); r != CUDA_SUCCESS)
      throw DeviceError(ctx_->label + ": " + what + ": not memory the CUDA driver knows (cuPointerGetAttribute: " +
                        drv().errorText(r) + "); pass a CUdeviceptr of this device");
    if (owner != ordinal_)
      throw DeviceError(ctx_->label + ": " + what + ": the memory is on cuda:" + std::to_string(owner) +
                        ", not on this device");
    CUdeviceptr base = 0;
    size_t size = 0;
    if (drv().MemGetAddressRange(&base, &size, p) == CUDA_SUCCESS && p + bytes > base + size)
      throw UsageError(ctx_->label + ": " + what + ": its allocation holds only " + std::to_string(base + size - p) +
                       " bytes from that address");
  }
  void releaseExternal(DevicePtr, size_t) noexcept override {}

  std::shared_ptr<KernelState> load(const Binary& bin) override {
    const std::string what = "cannot load kernel '" + bin.signature.kernelName + "'";
    if (bin.format != Binary::Format::PTX)
      throw DeviceError(ctx_->label + ": " + what + ": its binary is " + describe(bin.format) +
                        ", not PTX; compile the kernel for " + arch() + " to run it here");
    if (bin.ptx.empty()) throw DeviceError(ctx_->label + ": " + what + ": the PTX text is empty");
    if (bin.symbol.empty()) throw DeviceError(ctx_->label + ": " + what + ": the binary names no kernel symbol");
    if (bin.threadsPerBlock == 0) throw DeviceError(ctx_->label + ": " + what + ": the binary has 0 threads per block");

    ctx_->enter();
    auto k = std::make_shared<CudaKernel>();
    k->ctx = ctx_;
    k->threadsPerBlock = bin.threadsPerBlock;
    k->sharedBytes = bin.sharedBytes;
    k->symbol = bin.symbol;

    // The JIT writes NUL-terminated logs and sets the *_SIZE_BYTES values
    // to what it wrote.
    std::string errLog(kJitLogBytes, '\0'), infoLog(kJitLogBytes, '\0');
    int opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void* vals[] = {errLog.data(), reinterpret_cast<void*>(uintptr_t{kJitLogBytes - 1}), infoLog.data(),
                    reinterpret_cast<void*>(uintptr_t{kJitLogBytes - 1})};
    if (CUresult r = drv().ModuleLoadDataEx(&k->module, bin.ptx.c_str(), 4, opts, vals); r != CUDA_SUCCESS) {
      k->module = nullptr;
      errLog.resize(std::strlen(errLog.c_str()));
      infoLog.resize(std::strlen(infoLog.c_str()));
      std::string msg =
          ctx_->label + ": " + what + " (PTX for " + arch() + "): cuModuleLoadDataEx failed: " + drv().errorText(r);
      msg += errLog.empty() ? std::string("; the JIT wrote no error log") : "; JIT error log:\n" + errLog;
      if (!infoLog.empty()) msg += "\nJIT info log:\n" + infoLog;
      throw DeviceError(msg);
    }

    if (CUresult r = drv().ModuleGetFunction(&k->fn, k->module, bin.symbol.c_str()); r != CUDA_SUCCESS) {
      if (r == CUDA_ERROR_NOT_FOUND)
        throw DeviceError(ctx_->label + ": " + what + ": the PTX has no kernel named '" + bin.symbol +
                          "' (cuModuleGetFunction: " + drv().errorText(r) + ")");
      ctx_->fail(r, "cuModuleGetFunction", what);
    }

    int maxThreads = 0;
    ctx_->check(drv().FuncGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn),
                "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)", what);
    if (maxThreads > 0 && bin.threadsPerBlock > static_cast<unsigned>(maxThreads))
      throw DeviceError(ctx_->label + ": " + what + ": it was compiled for " + std::to_string(bin.threadsPerBlock) +
                        " threads per block but this device runs it with at most " + std::to_string(maxThreads) +
                        " (register use limits the block size)");

    if (bin.sharedBytes > kDefaultSharedLimit) {
      if (bin.sharedBytes > static_cast<unsigned>(maxSharedOptin_))
        throw DeviceError(ctx_->label + ": " + what + ": it needs " + std::to_string(bin.sharedBytes) +
                          " bytes of dynamic shared memory per block but this device allows at most " +
                          std::to_string(maxSharedOptin_));
      // Above 48 KiB a kernel must opt in, per function.
      ctx_->check(drv().FuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(bin.sharedBytes)),
                  "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", what);
    }
    return k;
  }

  void encodeTensorMap(const Kernel::State& kernel, const TensorMapRequest& m, void* out128) override {
    const std::string k = kernel.signature.kernelName.empty() ? "kernel" : kernel.signature.kernelName;
    if (major_ < 9)
      throw LaunchError(k + ": tensor maps need an NVIDIA device of compute capability 9.0 or newer (sm_90a); " +
                        ctx_->label + " is " + arch() +
                        "; run the kernel on a Hopper GPU or on "
                        "Device::emulator(\"nvptx:sm_90a\")");
    if (!drv().TensorMapEncodeTiled)
      throw LaunchError(k + ": the kernel uses TMA tensor maps, but the CUDA driver (" + drv().lib.path +
                        ") lacks cuTensorMapEncodeTiled; tensor maps need a CUDA 12 driver or newer");
    int dataType = 0;
    switch (m.dtype) {
      case DType::F16: dataType = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; break;
      case DType::BF16: dataType = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; break;
      case DType::F32: dataType = CU_TENSOR_MAP_DATA_TYPE_FLOAT32; break;
      case DType::F64: dataType = CU_TENSOR_MAP_DATA_TYPE_FLOAT64; break;
      // Bytes are bytes to a copy: fp8, i8 and bool move as UINT8.
      case DType::I1:
      case DType::I8:
      case DType::U8:
      case DType::F8E4M3:
      case DType::F8E5M2:
      case DType::F8E4M3FNUZ:
      case DType::F8E5M2FNUZ:
      case DType::F4E2M1:
      case DType::F6E2M3:
      case DType::F6E3M2:
      case DType::E8M0: dataType = CU_TENSOR_MAP_DATA_TYPE_UINT8; break;
      case DType::I16:
      case DType::U16: dataType = CU_TENSOR_MAP_DATA_TYPE_UINT16; break;
      case DType::I32: dataType = CU_TENSOR_MAP_DATA_TYPE_INT32; break;
      case DType::U32: dataType = CU_TENSOR_MAP_DATA_TYPE_UINT32; break;
      case DType::I64: dataType = CU_TENSOR_MAP_DATA_TYPE_INT64; break;
      case DType::U64: dataType = CU_TENSOR_MAP_DATA_TYPE_UINT64; break;
    }
    int swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
    switch (m.swizzleBytes) {
      case 32: swizzle = CU_TENSOR_MAP_SWIZZLE_32B; break;
      case 64: swizzle = CU_TENSOR_MAP_SWIZZLE_64B; break;
      case 128: swizzle = CU_TENSOR_MAP_SWIZZLE_128B; break;
    }
    // The driver takes the strides of dimensions 1.. only (dimension 0 is
    // contiguous), in bytes; every element stride is 1 (a dense box).
    cuuint64_t dims[3], strides[2];
    cuuint32_t box[3], elementStrides[3] = {1, 1, 1};
    for (unsigned d = 0; d < m.rank; ++d) {
      dims[d] = m.dims[d];
      box[d] = m.box[d];
      if (d) strides[d - 1] = m.strides[d];
    }
    ctx_->enter();
    ctx_->check(
        drv().TensorMapEncodeTiled(out128, dataType, m.rank, reinterpret_cast<void*>(static_cast<uintptr_t>(m.address)),
                                   dims, strides, box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled", "encoding a tensor map of kernel '" + k + "'");
  }

  unsigned maxClusterBlocks() const override { return clusterBlocks_; }

  /// SMs x the blocks of this kernel one SM holds (registers, shared
  /// memory, threads: the driver's occupancy calculator), at least 1. In
  /// clusters: the clusters the device holds at once (which must each fit
  /// in one GPC, so fewer blocks than SMs x blocks per SM may be resident)
  /// x the blocks of one, at least one cluster.
  unsigned residentPrograms(KernelState& ks, const KernelSignature& sig, const LaunchOptions& opts) override {
    auto& k = static_cast<CudaKernel&>(ks);
    ctx_->enter();
    const uint64_t clusterBlocks = opts.cluster.count();
    if (clusterBlocks > 1) {
      if (!drv().OccupancyMaxActiveClusters)
        throw LaunchError(sig.kernelName +
                          ": the resident programs of a kernel in clusters need "
                          "cuOccupancyMaxActiveClusters, which the CUDA driver (" +
                          drv().lib.path + ") lacks; thread-block clusters need a CUDA 12 driver or newer");
      // A grid of one cluster: the driver wants a grid the cluster divides.
      ClusterLaunch cl(k, opts.cluster, opts.cluster, default_->stream);
      int clusters = 0;
      ctx_->check(drv().OccupancyMaxActiveClusters(&clusters, k.fn, &cl.config), "cuOccupancyMaxActiveClusters",
                  "kernel '" + k.symbol + "' in clusters of " + opts.cluster.str());
      return static_cast<unsigned>(std::max(clusters, 1) * clusterBlocks);
    }
    int blocks = 0;
    ctx_->check(drv().OccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.fn, static_cast<int>(k.threadsPerBlock),
                                                                k.sharedBytes),
                "cuOccupancyMaxActiveBlocksPerMultiprocessor", "kernel '" + k.symbol + "'");
    return static_cast<unsigned>(std::max<int64_t>(1, int64_t{multiprocessors_} * std::max(blocks, 0)));
  }

  void launch(KernelState& ks, const KernelSignature& sig, Dim3 grid, void** args, const LaunchOptions& opts) override {
    // Synchronous: the default stream, then wait, so that the caller may
    // read results right away and a fault is reported by its launch.
    launchOn(*default_, ks, sig, grid, opts.cluster, args, nullptr);
    default_->synchronize();
  }

  void launchAsync(StreamImpl& s, KernelState& ks, const KernelSignature& sig, Dim3 grid,
                   std::shared_ptr<LaunchPacket> packet, const LaunchOptions& opts) override {
    // cuLaunchKernel copies the parameters; the packet still holds the
    // buffers until the stream is synchronised.
    void** params = packet->params.data();  // before the move: argument order is unspecified
    launchOn(static_cast<CudaStream&>(s), ks, sig, grid, opts.cluster, params, std::move(packet));
  }

  void copyHostToDeviceAsync(StreamImpl& s, DevicePtr dst, const void* src, size_t bytes,
                             std::shared_ptr<void> keep) override {
    copyAsync(s, bytes, std::move(keep), "cuMemcpyHtoDAsync", "to the device",
              [&](CUstream st) { return drv().MemcpyHtoDAsync(dst, src, bytes, st); });
  }
  void copyDeviceToHostAsync(StreamImpl& s, void* dst, DevicePtr src, size_t bytes,
                             std::shared_ptr<void> keep) override {
    copyAsync(s, bytes, std::move(keep), "cuMemcpyDtoHAsync", "from the device",
              [&](CUstream st) { return drv().MemcpyDtoHAsync(dst, src, bytes, st); });
  }
  void copyDeviceToDeviceAsync(StreamImpl& s, DevicePtr dst, DevicePtr src, size_t bytes,
                               std::shared_ptr<void> keep) override {
    copyAsync(s, bytes, std::move(keep), "cuMemcpyDtoDAsync", "within the device",
              [&](CUstream st) { return drv().MemcpyDtoDAsync(dst, src, bytes, st); });
  }
  /// One asynchronous copy on `s`: the driver call `issue(stream)`, its
  /// error named, and `keep` held until the stream has run it.
  template <class Issue>
  void copyAsync(StreamImpl& s, size_t bytes, std::shared_ptr<void> keep, const char* call, const char* where,
                 Issue&& issue) {
    if (!bytes) return;
    auto& cs = static_cast<CudaStream&>(s);
    ctx_->enter();
    ctx_->check(issue(cs.stream), call, "copying " + std::to_string(bytes) + " bytes " + where);
    cs.keep(std::move(keep));
  }

  std::shared_ptr<StreamImpl> createStream() override {
    ctx_->enter();
    CUstream s = nullptr;
    // A blocking stream (flags 0) orders its work with the synchronous
    // cuMemcpy / cuMemsetD8 calls, which run on the legacy default stream.
    ctx_->check(drv().StreamCreate(&s, 0), "cuStreamCreate");
    auto st = std::make_shared<CudaStream>(ctx_, s, true);
    streams_.add(st);
    return st;
  }
  std::shared_ptr<StreamImpl> defaultStream() override { return default_; }
  std::shared_ptr<StreamImpl> wrapStream(void* native) override {
    ctx_->enter();
    CUcontext owner = nullptr;
    ctx_->check(drv().StreamGetCtx(native, &owner), "cuStreamGetCtx", "Device::wrapStream");
    if (owner != ctx_->ctx)
      throw DeviceError(ctx_->label +
                        ": Device::wrapStream: the CUstream belongs to another context (another "
                        "device, or a context other than the device's primary one)");
    auto st = std::make_shared<CudaStream>(ctx_, native, false);
    streams_.add(st);
    return st;
  }

  std::shared_ptr<EventImpl> createEvent() override {
    ctx_->enter();
    auto e = std::make_shared<CudaEvent>();
    e->ctx = ctx_;
    ctx_->check(drv().EventCreate(&e->event, 0), "cuEventCreate");  // flags 0: timing enabled
    return e;
  }
  void recordEvent(const std::shared_ptr<EventImpl>& e, StreamImpl& s) override {
    ctx_->enter();
    ctx_->check(drv().EventRecord(static_cast<CudaEvent&>(*e).event, static_cast<CudaStream&>(s).stream),
                "cuEventRecord");
  }
  void waitEvent(StreamImpl& s, const std::shared_ptr<EventImpl>& e) override {
    ctx_->enter();
    ctx_->check(drv().StreamWaitEvent(static_cast<CudaStream&>(s).stream, static_cast<CudaEvent&>(*e).event, 0),
                "cuStreamWaitEvent");
  }
  void synchronizeEvent(EventImpl& e) override {
    ctx_->enter();
    ctx_->check(drv().EventSynchronize(static_cast<CudaEvent&>(e).event), "cuEventSynchronize");
  }
  double elapsedMs(EventImpl& start, EventImpl& end) override {
    ctx_->enter();
    float ms = 0;
    ctx_->check(drv().EventElapsedTime(&ms, static_cast<CudaEvent&>(start).event, static_cast<CudaEvent&>(end).event),
                "cuEventElapsedTime", "Event::elapsedMs");
    return ms;
  }

  void synchronize() override {
    ctx_->enter();
    const CUresult r = drv().CtxSynchronize();
    const std::string launch = streams_.releaseAll();
    if (r != CUDA_SUCCESS) ctx_->fail(r, "cuCtxSynchronize", launch.empty() ? "" : "after " + launch);
  }

 private:
  const CudaDriver& drv() const { return *ctx_->drv; }

  /// A launch in clusters of `cluster` (checked by Kernel::launch) goes
  /// through cuLaunchKernelEx with the cluster shape as its attribute;
  /// every other launch through cuLaunchKernel.
  void launchOn(CudaStream& s, KernelState& ks, const KernelSignature& sig, Dim3 grid, Dim3 cluster, void** args,
                std::shared_ptr<void> keep) {
    auto& k = static_cast<CudaKernel&>(ks);
    // NVIDIA's limits (LaunchLimits.h, which the emulator checks too), with
    // the grid limits this device's driver reports.
    LaunchLimits limits = kNvidiaLaunchLimits;
    for (int d = 0; d < 3; ++d) limits.maxGrid[d] = static_cast<uint32_t>(maxGrid_[d]);
    const uint32_t dims[3] = {grid.x, grid.y, grid.z}, block[3] = {k.threadsPerBlock, 1, 1};
    if (std::string why = launchLimitViolation(limits, dims, block, ctx_->label); !why.empty())
      throw LaunchError(sig.kernelName + ": " + why);
    ctx_->enter();
    std::string what = describeLaunch(sig, grid, k.threadsPerBlock, k.sharedBytes, cluster);
    if (cluster.count() > 1) {
      if (!drv().LaunchKernelEx)
        throw LaunchError(sig.kernelName + ": a launch in clusters needs cuLaunchKernelEx, which the CUDA driver (" +
                          drv().lib.path + ") lacks; thread-block clusters need a CUDA 12 driver or newer");
      ClusterLaunch cl(k, grid, cluster, s.stream);
      ctx_->check(drv().LaunchKernelEx(&cl.config, k.fn, args, nullptr), "cuLaunchKernelEx", "launching " + what);
    } else {
      ctx_->check(drv().LaunchKernel(k.fn, grid.x, grid.y, grid.z, k.threadsPerBlock, 1, 1, k.sharedBytes, s.stream,
                                     args, nullptr),
                  "cuLaunchKernel", "launching " + what);
    }
    s.keep(std::move(keep), what);
  }

  std::shared_ptr<CudaContext> ctx_;
  int ordinal_ = 0;
  std::shared_ptr<CudaStream> default_;
  StreamList<CudaStream> streams_;
  int major_ = 0, minor_ = 0;
  int maxGrid_[3] = {0, 0, 0};
  int maxSharedOptin_ = 0;
  int multiprocessors_ = 0;
  unsigned clusterBlocks_ = 0;  // maxClusterBlocks(): 0 below compute capability 9.0
};

}  // namespace

int cudaDeviceCount() noexcept {
  try {
    return cudaDriver()->count;
  } catch (...) {  // bad_alloc while recording why: still "no device"
    return 0;
  }
}

std::shared_ptr<DeviceImpl> createCudaDevice(int ordinal) {
  const std::string call = "Device::cuda(" + std::to_string(ordinal) + ")";
  auto drv = cudaDriver();
  if (!drv->unavailable.empty()) throw DeviceError(call + ": " + drv->unavailable);
  if (ordinal < 0 || ordinal >= drv->count)
    throw DeviceError(call + ": device ordinal " + std::to_string(ordinal) + " out of range (" +
                      std::to_string(drv->count) + (drv->count == 1 ? " device)" : " devices)"));
  return std::make_shared<CudaDevice>(std::move(drv), ordinal);
}

}  // namespace tessera::rt
