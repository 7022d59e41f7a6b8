// The benchmarks' peers (tessera/perf/Peers.h): device-to-device copies on
// every device kind, and the vendor BLAS on fake cuBLAS / rocBLAS libraries
// over the fake drivers' memory -- which compute the column-major product
// the libraries define, so a wrong row-major mapping (operands swapped,
// leading dimensions, m and n) gives a wrong result here -- and the errors
// of a missing or failing library. The declarations of BlasAbi.h are
// checked against cublas_api.h where it is installed.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#if __has_include(<cublas_api.h>)
#include <cublas_api.h>
#define TS_HAVE_CUBLAS_H 1
#endif

#include "../../runtime/lib/DeviceImpl.h"
#include "BlasAbi.h"
#include "gpu_test_support.h"
#include "tessera/perf/Peers.h"
#include "tessera/tessera.h"

using namespace tessera;
using Catch::Matchers::Contains;
using rt::testing::deviceError;
using rt::testing::EnvGuard;
using rt::testing::errorOf;
using rt::testing::fakeFn;

#ifdef TS_HAVE_CUBLAS_H
namespace abi = tessera::perf::blasabi::cublas;
using rt::testing::SameAbi;
static_assert(abi::kOpN == CUBLAS_OP_N && abi::kComputeF32 == CUBLAS_COMPUTE_32F &&
              abi::kAlgoDefault == CUBLAS_GEMM_DEFAULT);
static_assert(abi::kF32 == CUDA_R_32F && abi::kF16 == CUDA_R_16F && abi::kBF16 == CUDA_R_16BF);
static_assert(SameAbi<decltype(&::cublasCreate_v2), abi::Create>::value);
static_assert(SameAbi<decltype(&::cublasDestroy_v2), abi::Destroy>::value);
static_assert(SameAbi<decltype(&::cublasSetStream_v2), abi::SetStream>::value);
static_assert(SameAbi<decltype(&::cublasGetVersion_v2), abi::GetVersion>::value);
static_assert(SameAbi<decltype(&::cublasGetStatusName), abi::StatusName>::value);
#endif

TEST_CASE("the BLAS declarations were checked against cublas_api.h", "[perf][peers]") {
#ifndef TS_HAVE_CUBLAS_H
  WARN("cublas_api.h not found: the cuBLAS declarations were not checked against it");
#endif
  SUCCEED();
}

namespace {

/// Row-major A (m x k), B (k x n) of `t` with values exact in it; the
/// reference C in double.
struct Operands {
  std::vector<uint16_t> a16, b16;
  std::vector<float> a32, b32;
  std::vector<double> want;
};

// f16 through the compiler's _Float16; bf16 as the top half of an f32
// (the values here are exact in both, so no rounding is involved).
uint16_t encode16(DType t, float x) {
  uint32_t u;
  if (t == DType::BF16) {
    std::memcpy(&u, &x, 4);
    return uint16_t(u >> 16);
  }
  _Float16 h = static_cast<_Float16>(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
double decode16(DType t, uint16_t bits) {
  if (t == DType::BF16) {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return double(h);
}

Operands operands(DType t, int m, int n, int k) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(-8, 8);
  Operands o;
  auto fill = [&](std::vector<uint16_t>& h, std::vector<float>& f, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      float x = float(d(rng)) / 4;  // exact in f16, bf16 and f32
      f.push_back(x);
      h.push_back(encode16(t, x));
    }
  };
  fill(o.a16, o.a32, size_t(m * k));
  fill(o.b16, o.b32, size_t(k * n));
  o.want.assign(size_t(m * n), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int l = 0; l < k; ++l)
        o.want[size_t(i * n + j)] += double(o.a32[size_t(i * k + l)]) * double(o.b32[size_t(l * n + j)]);
  return o;
}

/// One GEMM through the device's vendor BLAS, on its own stream, checked
/// against the reference: sums of multiples of 1/16 below 2^11 are exact in
/// f32 and in the f16 / bf16 results' range here.
void checkGemm(const Device& dev, DType t, DType ct) {
  INFO(dev.name() << " " << name(t) << " -> " << name(ct));
  const int m = 37, n = 29, k = 19;  // all different, none a multiple of another
  Operands o = operands(t, m, n, k);
  perf::GemmProblem p;
  p.a = t == DType::F32 ? dev.upload(t, o.a32) : dev.upload(t, o.a16);
  p.b = t == DType::F32 ? dev.upload(t, o.b32) : dev.upload(t, o.b16);
  p.c = dev.alloc(ct, size_t(m * n));
  p.m = m, p.n = n, p.k = k;
  perf::VendorBlas blas(dev);
  rt::Stream s = dev.createStream();
  blas.gemm(p, s);
  s.synchronize();
  std::vector<double> got(size_t(m * n));
  if (ct == DType::F32) {
    std::vector<float> c = p.c.read<float>();
    for (size_t i = 0; i < got.size(); ++i) got[i] = c[i];
  } else {
    std::vector<uint16_t> c = p.c.read<uint16_t>();
    for (size_t i = 0; i < got.size(); ++i) got[i] = decode16(ct, c[i]);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    // bf16 keeps 8 bits: the sum rounds once.
    const double tol = ct == DType::BF16 ? std::fabs(o.want[i]) * std::ldexp(1.0, -8) : 0.0;
    REQUIRE(std::fabs(got[i] - o.want[i]) <= tol);
  }
}

}  // namespace

TEST_CASE("device-to-device copy peer on host devices", "[perf][peers]") {
  for (const Device& dev : {Device::cpu(), Device::emulator("nvptx:sm_90a")}) {
    std::vector<float> v(4096);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f;
    rt::Buffer src = dev.upload(DType::F32, v), dst = dev.alloc(DType::F32, v.size());
    perf::BenchOptions opts;
    opts.budgetSeconds = 0.01;
    opts.warmupSeconds = 0;
    perf::BenchResult r = perf::benchmarkPeer(dev, perf::deviceCopy(dst, src, src.bytes()), opts, "copy", "4096",
                                              perf::Work{0, 2.0 * double(src.bytes()), "declared", {}});
    CHECK(r.name == "copy");
    CHECK(r.stats.count >= 5);
    CHECK(r.bytesPerSecond() > 0);
    CHECK(dst.read<float>() == v);
  }
}

TEST_CASE("the CPU's copy peer: 16-byte aligned chunks, one per thread", "[perf][peers]") {
  // 277 bytes are 17 units of 16 and 5 bytes: 3 threads take 5, 6 and 6
  // units, the last also the 5 bytes.
  CHECK(perf::hostCopyBound(277, 3, 0) == 0);
  CHECK(perf::hostCopyBound(277, 3, 1) == 80);
  CHECK(perf::hostCopyBound(277, 3, 2) == 176);
  CHECK(perf::hostCopyBound(277, 3, 3) == 277);
  // More threads than units: some chunks are empty, none overlap.
  CHECK(perf::hostCopyBound(40, 4, 1) == 0);
  CHECK(perf::hostCopyBound(40, 4, 2) == 16);
  CHECK(perf::hostCopyBound(40, 4, 3) == 16);
  // No overflow near the top of size_t.
  const size_t huge = ~size_t{0} - 100;
  CHECK(perf::hostCopyBound(huge, 1024, 512) == huge / 16 / 2 * 16);

  Device cpu = Device::cpu();
  // Not a multiple of threads x 16: the tail chunk ends mid-unit, and the
  // bytes past the copy stay as they were.
  for (auto [bytes, threads] : {std::pair<size_t, unsigned>{1000003, 3}, {277, 3}, {40, 4}, {100, 7}, {33, 1}}) {
    CAPTURE(bytes, threads);
    std::vector<uint8_t> in(bytes + 16), before(bytes + 16, 0xEE);
    for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 131 + i / 256);
    rt::Buffer src = cpu.upload(DType::U8, in), dst = cpu.upload(DType::U8, before);
    perf::hostCopy(dst, src, bytes, threads)(LaunchOptions{});
    std::vector<uint8_t> out = dst.read<uint8_t>(), want = in;
    std::fill(want.begin() + std::ptrdiff_t(bytes), want.end(), uint8_t(0xEE));
    CHECK(out == want);
  }
  rt::Buffer small = cpu.alloc(DType::U8, 8), big = cpu.alloc(DType::U8, 64);
  CHECK_THROWS_WITH(perf::hostCopy(big, small, 64, 2), Contains("a buffer of 8 bytes, 64 to copy"));
  CHECK_THROWS_WITH(perf::hostCopy(big, big, 64, 0), Contains("0 threads"));
  rt::Buffer emu = Device::emulator("nvptx:sm_80").alloc(DType::U8, 64);
  CHECK_THROWS_WITH(perf::hostCopy(big, emu, 64, 2), Contains("the copy is the CPU's"));
}

TEST_CASE("the CPU's copy peer runs on the launch's threads and says how many", "[perf][peers]") {
  perf::BenchOptions opts;
  opts.budgetSeconds = 0.002;
  opts.warmupSeconds = 0;
  opts.minReps = 1;
  opts.minWarmup = 0;
  perf::BenchResult k;
  k.name = "softmax";
  k.shape = "16x256";
  k.stats.median = 1e-3;
  k.work = perf::Work{0, 2.0 * 100000, "declared", {}};
  Device cpu = Device::cpu();
  for (unsigned threads : {3u, 1u, 0u}) {
    CAPTURE(threads);
    opts.launch.threads = threads;
    perf::PeerRuns peers(cpu);
    std::optional<perf::BenchResult> p = peers.run(std::nullopt, k, opts);
    REQUIRE(p);
    CHECK(p->id() == "softmax/copy[16x256]");
    const unsigned used = threads ? threads : cpu.defaultThreads();
    CHECK_THAT(peers.report(), Contains("softmax[16x256]: 1.00 ms against copy of 100 kB on " + std::to_string(used) +
                                        (used == 1 ? " thread: " : " threads: ")));
  }
  opts.launch.threads = 2000;
  perf::PeerRuns tooMany(cpu);
  CHECK_THROWS_WITH(tooMany.run(std::nullopt, k, opts),
                    Contains("softmax[16x256] copy peer") && Contains("exceeds the limit of 1024 threads"));
  // The emulator keeps its device copy.
  opts.launch.threads = 3;
  perf::PeerRuns emu(Device::emulator("nvptx:sm_80"));
  REQUIRE(emu.run(std::nullopt, k, opts));
  CHECK_THAT(emu.report(), Contains("against device-to-device copy of 100 kB: "));
}

TEST_CASE("no vendor BLAS on host devices", "[perf][peers]") {
  CHECK_THAT(deviceError([] { perf::VendorBlas b(Device::cpu()); }), Contains("has no vendor BLAS"));
  CHECK_THAT(deviceError([] { perf::VendorBlas b(Device::emulator("amdgpu:gfx942")); }),
             Contains("emu:amdgpu:gfx942") && Contains("rocBLAS on HIP devices"));
}

TEST_CASE("cuBLAS peer on the fake driver: row-major GEMMs, its stream, its errors", "[perf][peers][fake]") {
  EnvGuard cuda("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  Device dev(rt::createCudaDevice(0));
  {
    EnvGuard lib("TESSERA_CUBLAS_LIBRARY", "/nonexistent/libcublas.so.13");
    CHECK_THAT(deviceError([&] { perf::VendorBlas b(dev); }),
               Contains("cuBLAS not available: dlopen(/nonexistent/libcublas.so.13) failed") &&
                   Contains("(from TESSERA_CUBLAS_LIBRARY)"));
  }
  EnvGuard lib("TESSERA_CUBLAS_LIBRARY", TESSERA_FAKE_CUBLAS);
  auto failNext = fakeFn<void (*)(int)>(TESSERA_FAKE_CUBLAS, "fake_blas_fail_next");
  auto lastCall = fakeFn<void (*)(int*, void**)>(TESSERA_FAKE_CUBLAS, "fake_blas_last_call");

  checkGemm(dev, DType::F16, DType::F16);
  checkGemm(dev, DType::BF16, DType::BF16);
  checkGemm(dev, DType::F32, DType::F32);
  checkGemm(dev, DType::F16, DType::F32);

  perf::VendorBlas blas(dev);
  CHECK_THAT(blas.name(), Contains("cuBLAS 130999 (") && Contains("fake_cublas"));
  // The arguments: the column-major Cᵀ = Bᵀ·Aᵀ, on the stream given.
  perf::GemmProblem p{
      dev.alloc(DType::F16, 6 * 4), dev.alloc(DType::F16, 4 * 5), dev.alloc(DType::F16, 6 * 5), 6, 5, 4};
  rt::Stream s = dev.createStream();
  blas.gemm(p, s);
  int call[8];
  void* stream = nullptr;
  lastCall(call, &stream);
  CHECK(std::vector<int>(call, call + 6) == std::vector<int>{5, 6, 4, 5, 4, 5});  // m n k lda ldb ldc
  CHECK(stream == s.native());

  // The harness repeats it on the default stream, timed by events.
  perf::BenchOptions opts;
  opts.budgetSeconds = 0.005;
  perf::BenchResult r = perf::benchmarkPeer(dev, blas.launchFn(p), opts, "cuBLAS", "6x5x4", {});
  CHECK(r.timing == "device events");
  CHECK(r.stats.count >= 5);

  // Problems the library cannot take, and its failures, name the cause.
  perf::GemmProblem bad = p;
  bad.k = 8;
  CHECK_THAT(errorOf<UsageError>([&] { blas.gemm(bad, s); }), Contains("A holds 24 elements but 6 x 8 are needed"));
  bad = p;
  bad.b = dev.alloc(DType::BF16, 20);
  CHECK_THAT(errorOf<UsageError>([&] { blas.gemm(bad, s); }), Contains("A is f16 but B is bf16"));
  bad = p;
  bad.a = Device::cpu().alloc(DType::F16, 24);
  CHECK_THAT(errorOf<UsageError>([&] { blas.gemm(bad, s); }), Contains("every buffer must be allocated on cuda:0"));
  failNext(7);
  CHECK_THAT(deviceError([&] { blas.gemm(p, s); }),
             Contains("cuBLAS: cublasSetStream failed: CUBLAS_STATUS_INVALID_VALUE (7)"));
  failNext(1);
  CHECK_THAT(deviceError([&] { perf::VendorBlas b(dev); }),
             Contains("cuda:0 Fake A100: cuBLAS: cublasCreate failed: CUBLAS_STATUS_NOT_INITIALIZED (1)"));
}

TEST_CASE("the real cuBLAS loads and refuses a handle without a CUDA driver", "[perf][peers]") {
  // The toolkit's library is a real peer where a GPU is; here its handle
  // must fail with cuBLAS's own status, not crash or hang.
  const char* real = "/usr/local/cuda/lib64/libcublas.so.13";
  if (!std::ifstream(real)) {
    WARN("SKIP: " << real << " not found (the CUDA 13 toolkit)");
    return;
  }
  EnvGuard cuda("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  EnvGuard lib("TESSERA_CUBLAS_LIBRARY", real);
  CHECK_THAT(deviceError([] { perf::VendorBlas b(Device(rt::createCudaDevice(0))); }),
             Contains("cuBLAS: cublasCreate failed: CUBLAS_STATUS_"));
}

TEST_CASE("rocBLAS peer on the fake HIP runtime", "[perf][peers][fake]") {
  EnvGuard hip("TESSERA_HIP_LIBRARY", TESSERA_FAKE_HIP);
  {
    EnvGuard lib("TESSERA_ROCBLAS_LIBRARY", nullptr);
    // librocblas is not installed here (and never in CI).
    if (!dlopen("librocblas.so.4", RTLD_NOW | RTLD_NOLOAD))
      CHECK_THAT(deviceError([] { perf::VendorBlas b(Device::hip(0)); }),
                 Contains("rocBLAS not available: dlopen(librocblas.so.4) failed"));
  }
  EnvGuard lib("TESSERA_ROCBLAS_LIBRARY", TESSERA_FAKE_ROCBLAS);
  Device dev = Device::hip(0);
  checkGemm(dev, DType::F16, DType::F16);
  checkGemm(dev, DType::BF16, DType::F32);
  CHECK_THAT(perf::VendorBlas(dev).name(), Contains("rocBLAS 4.9.9-fake ("));
}
