// bf16 and int8 GEMM benchmark on the CPU: Tessera's gemm_bf16 (C f32 =
// A bf16 @ B bf16, no activation, zero bias) and gemm_int8 (C bf16 = A i8
// @ B i8, unit scales) compiled twice, with the cpu's AMX matrix tiles and
// without them (CompileOptions::cpuTiles off: the vector kernel), against oneDNN's
// matmul primitive on the same row-major operands (bf16 x bf16 -> f32 and
// s8 x s8 -> s32), M = N = K.
//
// Every result is checked on sampled entries against a double reference
// before timing (bf16: relative 2^-7 of the absolute sum; int8: exact sums
// rounded once to bf16); then one warm-up run and `reps` timed runs,
// reported as median [min, max] in GFLOP/s (2 M N K). Where the host has no
// AMX (or the OS grants no tile state) the two Tessera columns are the same
// code, which the header line says.
//
// Usage: tessera_lowp_gemm_bench [--sizes 1024,2048] [--threads 1,2] [--reps 5]
//                                [--blocks 64,64,256] [--dtypes bf16,int8]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cli/CommandLine.h"
#include "gflops.h"
#include "registry.h"
#include "tessera/tessera.h"

#ifdef TESSERA_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif

namespace ts = tessera;
namespace ex = tessera::examples;

namespace {

using tessera::bench::Stats;
using tessera::bench::timeRuns;

uint16_t toBf16(float f) {  // round to nearest even (no NaNs here)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Sampled entries of C (as doubles via `got`) against sum_k A B; `tol`
/// relative to the sum of |products| (plus the output's own rounding).
template <class TA, class Got>
bool verify(const char* who, const std::vector<TA>& A, const std::vector<TA>& B, int n, double tol, Got got) {
  auto val = [](TA x) {
    if constexpr (std::is_same_v<TA, uint16_t>)
      return double(fromBf16(x));
    else
      return double(x);
  };
  std::mt19937 rng(123);
  std::uniform_int_distribution<int> d(0, n - 1);
  for (int s = 0; s < 256; ++s) {
    int i = s < 4 ? (s & 1) * (n - 1) : d(rng), j = s < 4 ? (s >> 1) * (n - 1) : d(rng);
    double want = 0, mag = 0;
    for (int k = 0; k < n; ++k) {
      double p = val(A[size_t(i) * n + k]) * val(B[size_t(k) * n + j]);
      want += p;
      mag += std::fabs(p);
    }
    double g = got(size_t(i) * n + j);
    if (!(std::fabs(g - want) <= tol * mag + std::ldexp(std::fabs(want), -8) + 1e-6)) {
      std::printf("  %s: WRONG RESULT at (%d, %d): got %.7g, want %.7g\n", who, i, j, g, want);
      return false;
    }
  }
  return true;
}

#ifdef TESSERA_HAVE_DNNL
/// oneDNN's matmul primitive on row-major operands of `in`, result `out`.
struct DnnlMatmul {
  dnnl_engine_t eng = nullptr;
  dnnl_stream_t stream = nullptr;
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_t mem[3] = {nullptr, nullptr, nullptr};
  std::string impl;
  DnnlMatmul(int n, dnnl_data_type_t in, dnnl_data_type_t out, void* a, void* b, void* c) {
    auto ok = [](dnnl_status_t s, const char* what) {
      if (s != dnnl_success) throw ts::Error(std::string("oneDNN: ") + what + " failed");
    };
    ok(dnnl_engine_create(&eng, dnnl_cpu, 0), "engine");
    ok(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags), "stream");
    dnnl_memory_desc_t md[3];
    dnnl_dims_t dims = {n, n};
    ok(dnnl_memory_desc_init_by_tag(&md[0], 2, dims, in, dnnl_ab), "A desc");
    ok(dnnl_memory_desc_init_by_tag(&md[1], 2, dims, in, dnnl_ab), "B desc");
    ok(dnnl_memory_desc_init_by_tag(&md[2], 2, dims, out, dnnl_ab), "C desc");
    dnnl_matmul_desc_t desc;
    ok(dnnl_matmul_desc_init(&desc, &md[0], &md[1], nullptr, &md[2]), "matmul desc");
    dnnl_primitive_desc_t pd;
    ok(dnnl_primitive_desc_create(&pd, &desc, nullptr, eng, nullptr), "primitive desc");
    const char* name = nullptr;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
    impl = name ? name : "?";
    ok(dnnl_primitive_create(&prim, pd), "primitive");
    dnnl_primitive_desc_destroy(pd);
    void* ptrs[3] = {a, b, c};
    for (int i = 0; i < 3; ++i) ok(dnnl_memory_create(&mem[i], &md[i], eng, ptrs[i]), "memory");
  }
  void run() {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}};
    if (dnnl_primitive_execute(prim, stream, 3, args) != dnnl_success) throw ts::Error("oneDNN: execute failed");
    dnnl_stream_wait(stream);
  }
  ~DnnlMatmul() {
    for (dnnl_memory_t m : mem)
      if (m) dnnl_memory_destroy(m);
    if (prim) dnnl_primitive_destroy(prim);
    if (stream) dnnl_stream_destroy(stream);
    if (eng) dnnl_engine_destroy(eng);
  }
};
#endif

/// The kernel compiled with the tiles on or off (CompileOptions::cpuTiles).
ts::CompiledKernel compileWith(const ts::Kernel& k, bool tiles) {
  ts::CompileOptions o;
  o.cpuTiles = tiles;
  return ts::compile(k, ts::Device::cpu(), o);
}

}  // namespace

const tessera::tools::cli::Command kProgram{
    "tessera_lowp_gemm_bench",
    "  tessera_lowp_gemm_bench [--sizes 1024,2048] [--threads 1,2] [--reps 5] [--blocks 64,64,256]\n"
    "                          [--dtypes bf16,int8]\n",
    {{"--sizes", "square sizes M = N = K, A,B,..."},
     {"--threads", "thread counts A,B,..."},
     {"--reps", "a count of timed runs"},
     {"--blocks", "BLOCK_M,BLOCK_N,BLOCK_K"},
     {"--dtypes", "bf16, int8 or both"}},
    0,
    0,
    "",
    nullptr,
    [] {
      return std::string(
          "bf16 and int8 GEMMs (M = N = K, row-major): Tessera with the cpu's AMX tiles and without\n"
          "them (CompileOptions::cpuTiles) against oneDNN's matmul where it was found at build time;\n"
          "GFLOP/s as median [min, max]\n"
          "  --sizes A,B,...     the sizes (default 1024,2048)\n"
          "  --threads A,B,...   the thread counts (default 1,2)\n"
          "  --reps N            timed runs per row (default 5)\n"
          "  --blocks M,N,K      the kernels' blocks (default: the examples' CPU default)\n"
          "  --dtypes bf16,int8  which GEMMs (default both)\n");
    }};

int main(int argc, char** argv) {
  const tessera::tools::cli::Args args = tessera::tools::cli::parseProgram(kProgram, argc, argv);
  const std::vector<int> sizes = tessera::bench::positiveInts(args, "--sizes", {1024, 2048}),
                         threadCounts = tessera::bench::positiveInts(args, "--threads", {1, 2});
  const int reps = static_cast<int>(args.integer("--reps", "a count >= 1", 1, INT32_MAX).value_or(5));
  const ex::GemmBlocks blocks = tessera::bench::blocksFlag(args, ex::gemmDefaultBlocks(ts::Device::cpu()));
  bool doBf16 = true, doInt8 = true;
  if (std::optional<std::string> d = args.value("--dtypes")) {
    doBf16 = d->find("bf16") != std::string::npos;
    doInt8 = d->find("int8") != std::string::npos;
    if (!doBf16 && !doInt8) args.fail("--dtypes expects bf16, int8 or bf16,int8");
  }

  try {
    std::printf("blocks %dx%dx%d, host ISA %s, AMX tiles %s\n", blocks.m, blocks.n, blocks.k,
                ts::codegen::hostIsa().c_str(),
                ts::codegen::hostMatrixTiles() ? "used" : "absent (both Tessera columns are the vector kernel)");
    std::printf("\n%-5s %-6s %-3s %-28s %-28s %-28s %-8s %-8s\n", "dtype", "size", "thr", "tessera tiles GF/s",
                "tessera vector GF/s", "onednn GF/s", "tiles/vec", "tiles/dnnl");
    ts::Device dev = ts::Device::cpu();
    for (int pass = 0; pass < 2; ++pass) {
      const bool bf16 = pass == 0;
      if ((bf16 && !doBf16) || (!bf16 && !doInt8)) continue;
      ts::Kernel kern = bf16 ? ex::gemmBF16(blocks, ex::Activation::None) : ex::gemmInt8(blocks);
      ts::CompiledKernel kt = compileWith(kern, true), kv = compileWith(kern, false);
      for (int th : threadCounts) {
        for (int n : sizes) {
          const size_t nn = size_t(n) * n;
          std::mt19937_64 rng(n);
          std::vector<uint16_t> A16, B16;
          std::vector<int8_t> A8, B8;
          ts::Buffer dA, dB, dC, dBias, dSa, dSb;
          // Random operands, uploaded: A and B of `dt`, drawn by `draw`.
          auto operands = [&](auto& A, auto& B, ts::DType dt, auto draw) {
            A.resize(nn);
            B.resize(nn);
            for (auto& x : A) x = draw();
            for (auto& x : B) x = draw();
            dA = dev.upload(dt, A);
            dB = dev.upload(dt, B);
          };
          if (bf16) {
            std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
            operands(A16, B16, ts::DType::BF16, [&] { return toBf16(dist(rng)); });
            dC = dev.alloc(ts::DType::F32, nn);
            dBias = dev.upload(ts::DType::F32, std::vector<float>(size_t(n), 0.0f));
          } else {
            std::uniform_int_distribution<int> dist(-128, 127);
            operands(A8, B8, ts::DType::I8, [&] { return int8_t(dist(rng)); });
            dC = dev.alloc(ts::DType::BF16, nn);
            dSa = dev.upload(ts::DType::F32, std::vector<float>(size_t(n), 1.0f));
            dSb = dev.upload(ts::DType::F32, std::vector<float>(size_t(n), 1.0f));
          }
          const double flops = 2.0 * n * n * double(n);
          ts::LaunchOptions lo;
          lo.threads = unsigned(th);
          ts::Dim3 grid = ex::gemmGrid(blocks, n, n);
          auto tsStats = [&](ts::CompiledKernel& k, const char* who) {
            auto run = [&] {
              if (bf16)
                k.launchWith(grid, {dC, dA, dB, dBias, int32_t(n), int32_t(n), int32_t(n)}, lo);
              else
                k.launchWith(grid, {dC, dA, dB, dSa, dSb, int32_t(n), int32_t(n), int32_t(n)}, lo);
            };
            run();
            bool ok;
            if (bf16) {
              std::vector<float> c = dC.read<float>();
              ok = verify(who, A16, B16, n, std::ldexp(1.0, -7), [&](size_t i) { return double(c[i]); });
            } else {
              std::vector<uint16_t> c = dC.read<uint16_t>();
              ok = verify(who, A8, B8, n, 0.0, [&](size_t i) { return double(fromBf16(c[i])); });
            }
            return ok ? timeRuns(run, reps, flops) : Stats{};
          };
          Stats sTiles = tsStats(kt, "tessera tiles"), sVec = tsStats(kv, "tessera vector"), sDnnl;
#ifdef TESSERA_HAVE_DNNL
          omp_set_num_threads(th);
          std::vector<float> Cf(bf16 ? nn : 0);
          std::vector<int32_t> Ci(bf16 ? 0 : nn);
          DnnlMatmul mm(n, bf16 ? dnnl_bf16 : dnnl_s8, bf16 ? dnnl_f32 : dnnl_s32,
                        bf16 ? static_cast<void*>(A16.data()) : A8.data(),
                        bf16 ? static_cast<void*>(B16.data()) : B8.data(),
                        bf16 ? static_cast<void*>(Cf.data()) : Ci.data());
          mm.run();
          bool ok = bf16 ? verify("onednn", A16, B16, n, std::ldexp(1.0, -7), [&](size_t i) { return double(Cf[i]); })
                         : verify("onednn", A8, B8, n, 0.0, [&](size_t i) { return double(Ci[i]); });
          if (ok) sDnnl = timeRuns([&] { mm.run(); }, reps, flops);
          if (th == threadCounts.front() && n == sizes.front())
            std::printf("  (oneDNN %s: %s)\n", bf16 ? "bf16" : "s8", mm.impl.c_str());
#endif
          char r1[16] = "-", r2[16] = "-";
          if (sTiles.median > 0 && sVec.median > 0) std::snprintf(r1, sizeof r1, "%.2f", sTiles.median / sVec.median);
          if (sTiles.median > 0 && sDnnl.median > 0) std::snprintf(r2, sizeof r2, "%.2f", sTiles.median / sDnnl.median);
          std::printf("%-5s %-6d %-3d %-28s %-28s %-28s %-8s %-8s\n", bf16 ? "bf16" : "int8", n, th,
                      tessera::bench::str(sTiles).c_str(), tessera::bench::str(sVec).c_str(),
                      tessera::bench::str(sDnnl).c_str(), r1, r2);
          std::fflush(stdout);
        }
      }
    }
#ifndef TESSERA_HAVE_DNNL
    std::printf("(built without oneDNN: libdnnl-dev / OpenMP not found)\n");
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
