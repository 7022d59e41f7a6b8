// AMD GPUs through the HIP runtime, loaded with dlopen (libamdhip64.so, .so.6
// or .so.5, or the library named by TESSERA_HIP_LIBRARY).
//
// HIP's current device is per thread, and runtime calls arrive on any thread
// (the caller's, the thread pool's), so every entry point selects the device
// with hipSetDevice first. Streams, events and wrapped memory mirror the CUDA
// device (CudaDevice.cpp) call for call.

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "HipDriver.h"
#include "tessera/runtime/LaunchLimits.h"

namespace tessera::rt {
namespace {

using namespace hipabi;
using namespace hipdrv;

class HipDevice final : public DeviceImpl {
 public:
  HipDevice(std::shared_ptr<const HipDriver> drv, int ordinal) {
    const std::string tag = "hip:" + std::to_string(ordinal);
    auto check = [&](hipError_t r, const char* call) {
      if (r != hipSuccess) throw DeviceError(tag + ": " + call + " failed: " + drv->errorText(r));
    };
    check(drv->SetDevice(ordinal), "hipSetDevice");
    char nameBuf[256] = {};
    check(drv->DeviceGetName(nameBuf, sizeof nameBuf - 1, ordinal), "hipDeviceGetName");
    std::vector<char> props(kDevicePropBytes, '\0');
    check(drv->GetDeviceProperties(props.data(), ordinal), "hipGetDeviceProperties");
    gfx_ = findGfxArch(props);
    check(drv->DeviceGetAttribute(&computeUnits_, hipDeviceAttributeMultiprocessorCount, ordinal),
          "hipDeviceGetAttribute(MultiprocessorCount)");
    ctx_ = std::make_shared<HipContext>(HipContext{drv, ordinal, tag + " " + nameBuf});
    default_ = std::static_pointer_cast<HipStream>(createStream());
  }

  DeviceKind kind() const override { return DeviceKind::HIP; }
  int ordinal() const override { return ctx_->ordinal; }
  void makeCurrent() override { ctx_->enter(); }
  std::string name() const override { return ctx_->label; }
  /// See CudaDevice: GPU parallelism comes from the grid and the block.
  unsigned defaultThreads() const override { return 1; }

  std::string arch() const override {
    if (gfx_.empty())
      throw DeviceError(ctx_->label +
                        ": hipGetDeviceProperties reported no gcnArchName (gfx...) for this "
                        "device, so the code object target cannot be chosen");
    return "amdgpu:" + gfx_;
  }

  DevicePtr alloc(size_t bytes) override {
    ctx_->enter();
    void* p = nullptr;
    if (hipError_t r = drv().Malloc(&p, bytes); r != hipSuccess)
      ctx_->fail(r, "hipMalloc", "cannot allocate " + std::to_string(bytes) + " bytes");
    // The interface promises zeroed memory; hipMalloc does not.
    if (hipError_t r = drv().Memset(p, 0, bytes); r != hipSuccess) {
      drv().Free(p);
      ctx_->fail(r, "hipMemset", "cannot clear a new allocation of " + std::to_string(bytes) + " bytes");
    }
    return reinterpret_cast<DevicePtr>(p);
  }

  void free(DevicePtr p) noexcept override {
    // Failures are ignored: at process exit the runtime may be gone.
    if (drv().SetDevice(ctx_->ordinal) == hipSuccess) drv().Free(reinterpret_cast<void*>(p));
  }

  void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    ctx_->enter();
    ctx_->check(drv().Memcpy(reinterpret_cast<void*>(dst), src, bytes, hipMemcpyHostToDevice),
                "hipMemcpy(HostToDevice)", "copying " + std::to_string(bytes) + " bytes to the device");
  }
  void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes) override {
    if (!bytes) return;
    ctx_->enter();
    ctx_->check(drv().Memcpy(dst, reinterpret_cast<const void*>(src), bytes, hipMemcpyDeviceToHost),
                "hipMemcpy(DeviceToHost)", "copying " + std::to_string(bytes) + " bytes from the device");
  }
  void fill(DevicePtr dst, uint8_t byte, size_t bytes) override {
    if (!bytes) return;
    ctx_->enter();
    ctx_->check(drv().Memset(reinterpret_cast<void*>(dst), byte, bytes), "hipMemset");
  }
  void copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes) override {
    if (!bytes) return;
    ctx_->enter();
    ctx_->check(
        drv().Memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, hipMemcpyDeviceToDevice),
        "hipMemcpy(DeviceToDevice)", "copying " + std::to_string(bytes) + " bytes within the device");
  }

  // HIP knows each allocation's extent; which device it is on is not
  // checked (hipPointerGetAttributes' structure changed between versions).
  void adoptExternal(DevicePtr p, size_t bytes) override {
    ctx_->enter();
    void* base = nullptr;
    size_t size = 0;
    if (hipError_t r = drv().MemGetAddressRange(&base, &size, reinterpret_cast<void*>(p)); r != hipSuccess)
      throw DeviceError(ctx_->label + ": Device::wrap of " + std::to_string(bytes) +
                        " bytes: not memory the HIP runtime knows (hipMemGetAddressRange: " + drv().errorText(r) +
                        "); pass a hipDeviceptr_t of this device");
    const DevicePtr b = reinterpret_cast<DevicePtr>(base);
    if (p + bytes > b + size)
      throw UsageError(ctx_->label + ": Device::wrap of " + std::to_string(bytes) +
                       " bytes: its allocation holds only " + std::to_string(b + size - p) +
                       " bytes from that address");
  }
  void releaseExternal(DevicePtr, size_t) noexcept override {}

  std::shared_ptr<KernelState> load(const Binary& bin) override {
    const std::string what = "cannot load kernel '" + bin.signature.kernelName + "'";
    if (bin.format != Binary::Format::HSACO)
      throw DeviceError(ctx_->label + ": " + what + ": its binary is " + describe(bin.format) +
                        ", not an AMDGPU code object (HSACO); compile the kernel for " +
                        (gfx_.empty() ? std::string("this device's amdgpu target") : "amdgpu:" + gfx_) +
                        " to run it here");
    if (bin.codeObject.empty()) throw DeviceError(ctx_->label + ": " + what + ": the code object is empty");
    if (bin.symbol.empty()) throw DeviceError(ctx_->label + ": " + what + ": the binary names no kernel symbol");
    if (bin.threadsPerBlock == 0) throw DeviceError(ctx_->label + ": " + what + ": the binary has 0 threads per block");

    ctx_->enter();
    auto k = std::make_shared<HipKernel>();
    k->ctx = ctx_;
    k->threadsPerBlock = bin.threadsPerBlock;
    k->sharedBytes = bin.sharedBytes;
    if (hipError_t r = drv().ModuleLoadData(&k->module, bin.codeObject.data()); r != hipSuccess) {
      k->module = nullptr;
      // HIP gives no loader log; the usual cause is a code object built for
      // another gfx target, so say which one this device is.
      ctx_->fail(r, "hipModuleLoadData",
                 what + " (this device is " + (gfx_.empty() ? std::string("of unknown gfx target") : gfx_) +
                     "; a code object built for another target is rejected)");
    }
    if (hipError_t r = drv().ModuleGetFunction(&k->fn, k->module, bin.symbol.c_str()); r != hipSuccess) {
      if (r == hipErrorNotFound)
        throw DeviceError(ctx_->label + ": " + what + ": the code object has no kernel named '" + bin.symbol +
                          "' (hipModuleGetFunction: " + drv().errorText(r) + ")");
      ctx_->fail(r, "hipModuleGetFunction", what);
    }
    return k;
  }

  /// CUs x the workgroups of this kernel one CU holds (the runtime's
  /// occupancy calculator), at least 1.
  unsigned residentPrograms(KernelState& ks, const KernelSignature& sig, const LaunchOptions&) override {
    auto& k = static_cast<HipKernel&>(ks);
    ctx_->enter();
    int blocks = 0;
    ctx_->check(drv().ModuleOccupancyMaxActiveBlocksPerMultiprocessor(
                    &blocks, k.fn, static_cast<int>(k.threadsPerBlock), k.sharedBytes),
                "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor", "kernel '" + sig.kernelName + "'");
    return static_cast<unsigned>(std::max<int64_t>(1, int64_t{computeUnits_} * std::max(blocks, 0)));
  }

  void launch(KernelState& ks, const KernelSignature& sig, Dim3 grid, void** args, const LaunchOptions&) override {
    launchOn(*default_, ks, sig, grid, args, nullptr);  // synchronous, as on every device
    default_->synchronize();
  }

  void launchAsync(StreamImpl& s, KernelState& ks, const KernelSignature& sig, Dim3 grid,
                   std::shared_ptr<LaunchPacket> packet, const LaunchOptions&) override {
    void** params = packet->params.data();  // before the move: argument order is unspecified
    launchOn(static_cast<HipStream&>(s), ks, sig, grid, params, std::move(packet));
  }

  void copyHostToDeviceAsync(StreamImpl& s, DevicePtr dst, const void* src, size_t bytes,
                             std::shared_ptr<void> keep) override {
    copyAsync(static_cast<HipStream&>(s), reinterpret_cast<void*>(dst), src, bytes, hipMemcpyHostToDevice,
              std::move(keep));
  }
  void copyDeviceToHostAsync(StreamImpl& s, void* dst, DevicePtr src, size_t bytes,
                             std::shared_ptr<void> keep) override {
    copyAsync(static_cast<HipStream&>(s), dst, reinterpret_cast<const void*>(src), bytes, hipMemcpyDeviceToHost,
              std::move(keep));
  }
  void copyDeviceToDeviceAsync(StreamImpl& s, DevicePtr dst, DevicePtr src, size_t bytes,
                               std::shared_ptr<void> keep) override {
    copyAsync(static_cast<HipStream&>(s), reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes,
              hipMemcpyDeviceToDevice, std::move(keep));
  }

  std::shared_ptr<StreamImpl> createStream() override {
    ctx_->enter();
    hipStream_t s = nullptr;
    ctx_->check(drv().StreamCreate(&s), "hipStreamCreate");
    auto st = std::make_shared<HipStream>(ctx_, s, true);
    streams_.add(st);
    return st;
  }
  std::shared_ptr<StreamImpl> defaultStream() override { return default_; }
  std::shared_ptr<StreamImpl> wrapStream(void* native) override {
    auto st = std::make_shared<HipStream>(ctx_, native, false);
    streams_.add(st);
    return st;
  }

  std::shared_ptr<EventImpl> createEvent() override {
    ctx_->enter();
    auto e = std::make_shared<HipEvent>();
    e->ctx = ctx_;
    ctx_->check(drv().EventCreate(&e->event), "hipEventCreate");
    return e;
  }
  void recordEvent(const std::shared_ptr<EventImpl>& e, StreamImpl& s) override {
    ctx_->enter();
    ctx_->check(drv().EventRecord(static_cast<HipEvent&>(*e).event, static_cast<HipStream&>(s).stream),
                "hipEventRecord");
  }
  void waitEvent(StreamImpl& s, const std::shared_ptr<EventImpl>& e) override {
    ctx_->enter();
    ctx_->check(drv().StreamWaitEvent(static_cast<HipStream&>(s).stream, static_cast<HipEvent&>(*e).event, 0),
                "hipStreamWaitEvent");
  }
  void synchronizeEvent(EventImpl& e) override {
    ctx_->enter();
    ctx_->check(drv().EventSynchronize(static_cast<HipEvent&>(e).event), "hipEventSynchronize");
  }
  double elapsedMs(EventImpl& start, EventImpl& end) override {
    ctx_->enter();
    float ms = 0;
    ctx_->check(drv().EventElapsedTime(&ms, static_cast<HipEvent&>(start).event, static_cast<HipEvent&>(end).event),
                "hipEventElapsedTime", "Event::elapsedMs");
    return ms;
  }

  void synchronize() override {
    ctx_->enter();
    const hipError_t r = drv().DeviceSynchronize();
    const std::string launch = streams_.releaseAll();
    if (r != hipSuccess) ctx_->fail(r, "hipDeviceSynchronize", launch.empty() ? "" : "after " + launch);
  }

 private:
  const HipDriver& drv() const { return *ctx_->drv; }

  void launchOn(HipStream& s, KernelState& ks, const KernelSignature& sig, Dim3 grid, void** args,
                std::shared_ptr<void> keep) {
    auto& k = static_cast<HipKernel&>(ks);
    // HIP's limits (LaunchLimits.h, which the emulator checks too): HIP
    // counts the grid in work-items, 32-bit per dimension.
    const uint32_t dims[3] = {grid.x, grid.y, grid.z}, block[3] = {k.threadsPerBlock, 1, 1};
    if (std::string why = launchLimitViolation(kAmdLaunchLimits, dims, block, ctx_->label); !why.empty())
      throw LaunchError(sig.kernelName + ": " + why);
    ctx_->enter();
    std::string what = describeLaunch(sig, grid, k.threadsPerBlock, k.sharedBytes);
    ctx_->check(drv().ModuleLaunchKernel(k.fn, grid.x, grid.y, grid.z, k.threadsPerBlock, 1, 1, k.sharedBytes, s.stream,
                                         args, nullptr),
                "hipModuleLaunchKernel", "launching " + what);
    s.keep(std::move(keep), what);
  }

  void copyAsync(HipStream& s, void* dst, const void* src, size_t bytes, int kind, std::shared_ptr<void> keep) {
    if (!bytes) return;
    ctx_->enter();
    ctx_->check(drv().MemcpyAsync(dst, src, bytes, kind, s.stream), "hipMemcpyAsync",
                "copying " + std::to_string(bytes) + " bytes");
    s.keep(std::move(keep));
  }

  std::shared_ptr<HipContext> ctx_;
  std::shared_ptr<HipStream> default_;
  StreamList<HipStream> streams_;
  std::string gfx_;
  int computeUnits_ = 0;
};

}  // namespace

int hipDeviceCount() noexcept {
  try {
    return hipDriver()->count;
  } catch (...) {
    return 0;
  }
}

std::shared_ptr<DeviceImpl> createHipDevice(int ordinal) {
  const std::string call = "Device::hip(" + std::to_string(ordinal) + ")";
  auto drv = hipDriver();
  if (!drv->unavailable.empty()) throw DeviceError(call + ": " + drv->unavailable);
  if (ordinal < 0 || ordinal >= drv->count)
    throw DeviceError(call + ": device ordinal " + std::to_string(ordinal) + " out of range (" +
                      std::to_string(drv->count) + (drv->count == 1 ? " device)" : " devices)"));
  return std::make_shared<HipDevice>(std::move(drv), ordinal);
}

}  // namespace tessera::rt
