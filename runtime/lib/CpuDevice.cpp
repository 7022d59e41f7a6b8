// The host CPU as a device: memory is plain aligned host memory, a kernel is
// a host function from the JIT, a launch runs its program range on the pool.

#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

#include "HostStream.h"
#include "tessera/runtime/HostThreads.h"
#include "tessera/support/Sanitizers.h"
#include "tessera/support/Environment.h"

namespace tessera::rt {
namespace {

// Alignment of every CPU allocation: a cache line, and enough for the
// widest vector loads the host code generator emits (AVX-512).
constexpr size_t kAlign = 64;
constexpr size_t kHugePage = size_t{2} << 20;  // x86-64 and AArch64 (4 KiB granule)

unsigned hardwareThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

const char* hostIsaName() {
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_cpu_supports("avx512f")) return "avx512";
  if (__builtin_cpu_supports("avx2")) return "avx2";
  return "sse2";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "generic";
#endif
}

struct CpuKernel final : KernelState {
  Binary::HostEntry entry = nullptr;
  std::shared_ptr<void> owner;  // keeps the JIT'd code alive while loaded
  std::string name;
  uint64_t stackBytes = 0;  // Binary::hostStackBytes
};

struct LaunchCtx {
  const CpuKernel* kernel;
  void* const* args;
  const int32_t* grid;
};

// Room the kernel's frame needs beyond its tiles: its spills and scalars,
// and what it calls (math routines, the bounds-check recorder).
constexpr uint64_t kFrameMargin = uint64_t{256} << 10;

/// Bytes left on the calling thread's stack below this frame. The bounds
/// are read once per thread (glibc reports the main thread's as its
/// RLIMIT_STACK extent); 0 bytes below means unknown: no check.
uint64_t stackRoom() {
  thread_local const uintptr_t low = [] {
    uintptr_t lo = 0;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0, guard = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) lo = reinterpret_cast<uintptr_t>(addr);
      if (lo && pthread_attr_getguardsize(&attr, &guard) == 0) lo += guard;
      pthread_attr_destroy(&attr);
    }
    return lo;
  }();
  // The frame's address, not a local's: with AddressSanitizer's fake
  // stacks a local may live on the heap.
  const auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return low && sp > low ? sp - low : UINT64_MAX;
}

/// A program keeps its tiles on the stack of the thread that runs it (the
/// compiler caps them): a thread without room for them is a ResourceError
/// before any program runs there, not a SIGSEGV inside one.
void checkStackRoom(const CpuKernel& k) {
  if (k.stackBytes == 0) return;
  const uint64_t room = stackRoom();
  if (room >= k.stackBytes + kFrameMargin) return;
  throw ResourceError("cpu: kernel '" + k.name + "' keeps " + std::to_string(k.stackBytes) +
                      " bytes of tiles on the stack of the thread running a program (plus " +
                      std::to_string(kFrameMargin) + " for its frame), but this thread has " + std::to_string(room) +
                      " bytes of stack left; launch from a thread with a larger stack (8 MiB is usual) or use "
                      "smaller tiles");
}

class CpuDevice final : public HostMemoryDevice {
 public:
  explicit CpuDevice(std::string cpu) : cpu_(std::move(cpu)) {}
  DeviceKind kind() const override { return DeviceKind::CPU; }
  std::string arch() const override { return cpu_; }

  std::string name() const override {
    unsigned threads;
    try {
      threads = defaultThreads();
    } catch (const Error&) {
      // A bad TESSERA_NUM_THREADS is reported at launch; a name stays usable.
      threads = hardwareThreads();
    }
    return (cpu_.empty() ? std::string("cpu (") : "cpu:" + cpu_ + " (host ") + hostIsaName() + ", " +
           std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
  }

  unsigned defaultThreads() const override {
    unsigned env = threadsFromEnvironment();
    return env ? env : hardwareThreads();
  }

  DevicePtr alloc(size_t bytes) override {
    // aligned_alloc wants a multiple of the alignment.
    if (bytes > std::numeric_limits<size_t>::max() - kHugePage)
      throw DeviceError("cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    // Buffers of a huge page or more are huge-page aligned and asked to be
    // backed by transparent huge pages: a tile kernel reads rows far apart
    // (a GEMM's B tile: 64 rows, each in its own 4 KiB page), and with 4 KiB
    // pages every tile costs dozens of TLB misses. Where THP is off the
    // advice is ignored and nothing changes.
    size_t align = bytes >= kHugePage ? kHugePage : kAlign;
    size_t rounded = (bytes + align - 1) / align * align;
    if (rounded == 0) rounded = align;
    void* p = std::aligned_alloc(align, rounded);
    if (!p) throw DeviceError("cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
#ifdef MADV_HUGEPAGE
    if (align == kHugePage) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    std::memset(p, 0, rounded);
    return reinterpret_cast<DevicePtr>(p);
  }

  void free(DevicePtr p) noexcept override { std::free(reinterpret_cast<void*>(p)); }

  std::shared_ptr<KernelState> load(const Binary& bin) override {
    const std::string& k = bin.signature.kernelName;
    if (bin.format != Binary::Format::HostFunction) {
      const char* fmt = bin.format == Binary::Format::PTX ? "PTX" : "HSACO (AMDGPU code object)";
      throw DeviceError("cpu device cannot load kernel '" + k + "': its binary is " + fmt +
                        ", a GPU format; compile the kernel for the cpu target to run it here");
    }
    if (!bin.hostEntry)
      throw DeviceError("cpu device cannot load kernel '" + k + "': the HostFunction binary has no host entry point");
    auto ks = std::make_shared<CpuKernel>();
    ks->entry = bin.hostEntry;
    ks->owner = bin.owner;
    ks->name = k;
    ks->stackBytes = bin.hostStackBytes;
    return ks;
  }

  // Nothing to check: any host address is host memory, and the CPU device
  // keeps no registry of allocations (capacity comes from WrapOptions).
  void adoptExternal(DevicePtr, size_t) override {}
  void releaseExternal(DevicePtr, size_t) noexcept override {}

  void launch(KernelState& ks, const KernelSignature& sig, Dim3 grid, void** args, const LaunchOptions& opts) override {
    const unsigned threads = launchThreads(opts, sig, *this);
    defaultStream()->synchronize();
    runGrid(static_cast<CpuKernel&>(ks), grid, args, threads);
  }

  void launchAsync(StreamImpl& s, KernelState& ks, const KernelSignature& sig, Dim3 grid,
                   std::shared_ptr<LaunchPacket> packet, const LaunchOptions& opts) override {
    const unsigned threads = launchThreads(opts, sig, *this);
    auto* k = static_cast<CpuKernel*>(&ks);  // kept alive by packet->kernel
    // A one-program grid costs less to run than to hand to the worker; a
    // larger one goes to the stream's worker so that streams overlap.
    run(s, grid.count() == 1, [this, k, grid, threads, packet = std::move(packet)] {
      runGrid(*k, grid, packet->params.data(), threads);
      packet->finish();
    });
  }

 private:
  TESSERA_CALLS_JIT_CODE void runGrid(CpuKernel& k, Dim3 grid, void** args, unsigned threads) {
    // The grid fits int32 per dimension (checked by the caller).
    const int32_t g[3] = {static_cast<int32_t>(grid.x), static_cast<int32_t>(grid.y), static_cast<int32_t>(grid.z)};
    const int64_t n = static_cast<int64_t>(grid.count());
    checkStackRoom(k);  // the caller's thread runs the first chunk
    if (n == 1 || threads == 1) {
      // The common tiny launch: no pool, no synchronisation.
      k.entry(args, 0, n, g);
      return;
    }
    LaunchCtx ctx{&k, args, g};
    parallelForRaw(
        n, threads,
        [](void* c, int64_t b, int64_t e) TESSERA_CALLS_JIT_CODE {
          auto* lc = static_cast<LaunchCtx*>(c);
          checkStackRoom(*lc->kernel);
          lc->kernel->entry(lc->args, b, e, lc->grid);
        },
        &ctx);
  }

  std::string cpu_;  // LLVM cpu the kernels are compiled for; "" = the host's
};

}  // namespace

namespace {

unsigned threadsOfLaunch(const LaunchOptions& opts, const std::string& what, const DeviceImpl& dev) {
  if (opts.threads > kMaxHostThreads)
    throw LaunchError(what + ": LaunchOptions::threads = " + std::to_string(opts.threads) + " exceeds the limit of " +
                      std::to_string(kMaxHostThreads) + " threads");
  // An explicit count never reads TESSERA_NUM_THREADS (a bad value there
  // must not break a launch that does not use it).
  return opts.threads == 0 ? dev.defaultThreads() : opts.threads;
}

}  // namespace

unsigned launchThreads(const LaunchOptions& opts, const KernelSignature& sig, const DeviceImpl& dev) {
  return threadsOfLaunch(opts, sig.kernelName, dev);
}

unsigned launchThreads(const Device& device, const LaunchOptions& opts, const std::string& what) {
  if (!device.impl()) throw UsageError(what + ": no device");
  return threadsOfLaunch(opts, what, *device.impl());
}

unsigned threadsFromEnvironment() {
  const char* v = tessera::env::get(tessera::env::Var::NumThreads);
  if (!v || !*v) return 0;
  // Strict: digits only, so "4x", "-1", " 2" and "two" are reported, not
  // half-parsed.
  unsigned long long n = 0;
  bool ok = true;
  for (const char* p = v; *p; ++p) {
    if (*p < '0' || *p > '9') {
      ok = false;
      break;
    }
    n = n * 10 + static_cast<unsigned>(*p - '0');
    if (n > kMaxHostThreads) break;
  }
  if (!ok || n == 0 || n > kMaxHostThreads)
    throw LaunchError(std::string("TESSERA_NUM_THREADS='") + v +
                      "' is not a valid thread count: set it to an integer from 1 to " +
                      std::to_string(kMaxHostThreads) + ", or unset it to use every hardware thread");
  return static_cast<unsigned>(n);
}

std::shared_ptr<DeviceImpl> createCpuDevice(const std::string& cpu) { return std::make_shared<CpuDevice>(cpu); }

}  // namespace tessera::rt
