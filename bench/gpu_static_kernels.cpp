#include "gpu_static_kernels.h"

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include "block_scaled.h"
#include "support.h"

namespace ts = tessera;

namespace tessera::bench {

using examples::CheckResult;
using examples::ElementCheck;
using examples::GemmBlocks;

// ---------------------------------------------------------------- kernels

Kernel scalarStore() {
  return ts::kernel("scalar_store", {"out"}, [](ts::Ptr<float> out) {
    auto p = ts::program_id(0);
    ts::store(out + p, p.to(ts::f32));
  });
}

Kernel gemv(int BM, int BK) {
  return ts::kernel("gemv", {"y", "a", "x", "M", "K"},
                    [=](ts::Ptr<float> y, ts::Ptr<const float> a, ts::Ptr<const float> x, ts::Int M, ts::Int K) {
                      auto rows = ts::program_id(0) * BM + ts::arange(BM);
                      auto r2 = ts::expand_dims(rows, 1);  // BM x 1
                      auto rk = ts::arange(BK);
                      auto acc = ts::for_range(0, K, BK, ts::zeros({BM}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
                        auto cols = k0 + rk;
                        auto c2 = ts::expand_dims(cols, 0);  // 1 x BK
                        auto av = ts::load(a + r2 * K + c2, (r2 < M) & (c2 < K));
                        auto xv = ts::load(x + cols, cols < K);
                        return acc + ts::sum(av * ts::expand_dims(xv, 0), 1);
                      });
                      ts::store(y + rows, acc, rows < M);
                    });
}

Kernel rope(int BR, int HD) {
  const int H2 = HD / 2;
  return ts::kernel(
      "rope", {"out", "x", "cos", "sin", "rows"},
      [=](ts::Ptr<float> out, ts::Ptr<const float> x, ts::Ptr<const float> cs, ts::Ptr<const float> sn, ts::Int rows) {
        auto r = ts::expand_dims(ts::program_id(0) * BR + ts::arange(BR), 1);  // BR x 1
        auto i = ts::expand_dims(ts::arange(H2), 0);                           // 1 x HD/2
        auto m = r < rows;
        auto xo = r * HD + i, to = r * H2 + i;
        auto x1 = ts::load(x + xo, m), x2 = ts::load(x + xo + H2, m);
        auto c = ts::load(cs + to, m), s = ts::load(sn + to, m);
        ts::store(out + xo, x1 * c - x2 * s, m);
        ts::store(out + xo + H2, x2 * c + x1 * s, m);
      });
}

Kernel transpose(int B) {
  return ts::kernel("transpose", {"out", "in", "M", "N"},
                    [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int M, ts::Int N) {
                      auto r = ts::expand_dims(ts::program_id(0) * B + ts::arange(B), 1);  // rows of in
                      auto c = ts::expand_dims(ts::program_id(1) * B + ts::arange(B), 0);  // columns of in
                      auto x = ts::load(in + r * N + c, (r < M) & (c < N));
                      // The same tile of out, row-major there: its rows are in's columns.
                      auto orow = ts::expand_dims(ts::program_id(1) * B + ts::arange(B), 1);
                      auto ocol = ts::expand_dims(ts::program_id(0) * B + ts::arange(B), 0);
                      ts::store(out + orow * M + ocol, x.T(), (orow < N) & (ocol < M));
                    });
}

Kernel attention(int BM, int BN, int D, bool causal) {
  return examples::flashAttention(examples::AttentionBlocks{BM, BN}, D, causal);
}

Kernel gemmF16Plain(GemmBlocks B) {
  return ts::kernel(
      "gemm_f16_plain", {"c", "a", "b", "M", "N", "K"},
      [=](ts::Ptr<ts::half> c, ts::Ptr<const ts::half> a, ts::Ptr<const ts::half> b, ts::Int M, ts::Int N, ts::Int K) {
        examples::gemmTiles(B, M, N, [&](const ts::Tensor& row, const ts::Tensor& col) {
          ts::Tensor acc = examples::gemmMainLoop(B, ts::f16, a, b, row, col, M, N, K);
          ts::store(c + row * N + col, acc.to(ts::f16), (row < M) & (col < N));
        });
      });
}

// ---------------------------------------------------------------- checks

namespace {

using examples::fromHalf;
using examples::toHalf;

std::vector<uint16_t> randomHalves(size_t n, std::mt19937_64& rng) {
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = toHalf(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng));
  return v;
}
uint32_t cdiv(int64_t a, int64_t b) { return uint32_t((a + b - 1) / b); }
// Unit roundoff of f32 and f16.
const double kU32 = std::ldexp(1.0, -24), kU16 = std::ldexp(1.0, -11);

CheckResult checkScalarStore(const Kernel& k, const Device& dev, const CompileOptions& o,
                             const std::vector<int64_t>& s) {
  const int64_t n = s[0];
  Buffer dout = dev.alloc(DType::F32, size_t(n));
  dout.fillBytes(0xff);  // NaN: an element never written cannot pass
  compile(k, dev, o).launchWith({uint32_t(n)}, {dout}, {});
  auto got = dout.read<float>();
  ElementCheck check(0, "out", "got == want (exact)");
  for (int64_t i = 0; i < n; ++i) check(got[size_t(i)], double(i), 0, [&] { return "at " + std::to_string(i); });
  return check.result();
}

CheckResult checkGemv(int BM, const Kernel& k, const Device& dev, const CompileOptions& o,
                      const std::vector<int64_t>& s) {
  const int64_t M = s[0], K = s[1];
  std::mt19937_64 rng(7);
  auto a = examples::randomVector(size_t(M * K), rng), x = examples::randomVector(size_t(K), rng);
  Buffer da = dev.upload(DType::F32, a), dx = dev.upload(DType::F32, x), dy = dev.alloc(DType::F32, size_t(M));
  dy.fillBytes(0xff);  // NaN: an element never written cannot pass
  compile(k, dev, o).launchWith({cdiv(M, BM)}, {dy, da, dx, int32_t(M), int32_t(K)}, {});
  auto got = dy.read<float>();
  // Any summation order of K products is within K u sum|terms| (doubled).
  ElementCheck check(2 * double(K) * kU32, "y", "|got - want| <= 2 K 2^-24 sum_k |a x|");
  for (int64_t i = 0; i < M; ++i) {
    double want = 0, mag = 0;
    for (int64_t j = 0; j < K; ++j) {
      want += double(a[size_t(i * K + j)]) * x[size_t(j)];
      mag += std::fabs(double(a[size_t(i * K + j)]) * x[size_t(j)]);
    }
    check(got[size_t(i)], want, 2 * double(K) * kU32 * mag, [&] { return "at " + std::to_string(i); });
  }
  return check.result();
}

CheckResult checkRope(int BR, int HD, const Kernel& k, const Device& dev, const CompileOptions& o,
                      const std::vector<int64_t>& s) {
  const int64_t rows = s[0], H2 = HD / 2;
  std::mt19937_64 rng(8);
  auto x = examples::randomVector(size_t(rows * HD), rng);
  std::vector<float> cs(size_t(rows * H2)), sn(cs.size());
  for (size_t i = 0; i < cs.size(); ++i) {
    cs[i] = float(std::cos(0.01 * double(i)));
    sn[i] = float(std::sin(0.01 * double(i)));
  }
  Buffer dx = dev.upload(DType::F32, x), dc = dev.upload(DType::F32, cs), ds = dev.upload(DType::F32, sn);
  Buffer dout = dev.alloc(DType::F32, x.size());
  dout.fillBytes(0xff);
  compile(k, dev, o).launchWith({cdiv(rows, BR)}, {dout, dx, dc, ds, int32_t(rows)}, {});
  auto got = dout.read<float>();
  // Two products and a sum, each rounded once: 3 u of the magnitudes.
  ElementCheck check(3 * kU32, "out", "|got - want| <= 3 2^-24 (|x1 c| + |x2 s|)");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < H2; ++i) {
      double x1 = x[size_t(r * HD + i)], x2 = x[size_t(r * HD + i + H2)];
      double c = cs[size_t(r * H2 + i)], sv = sn[size_t(r * H2 + i)];
      auto where = [&](int64_t col) {
        return [=] { return "at (" + std::to_string(r) + ", " + std::to_string(col) + ")"; };
      };
      check(got[size_t(r * HD + i)], x1 * c - x2 * sv, 3 * kU32 * (std::fabs(x1 * c) + std::fabs(x2 * sv)), where(i));
      check(got[size_t(r * HD + i + H2)], x2 * c + x1 * sv, 3 * kU32 * (std::fabs(x2 * c) + std::fabs(x1 * sv)),
            where(i + H2));
    }
  return check.result();
}

CheckResult checkTranspose(int B, const Kernel& k, const Device& dev, const CompileOptions& o,
                           const std::vector<int64_t>& s) {
  const int64_t M = s[0], N = s[1];
  std::mt19937_64 rng(9);
  auto in = examples::randomVector(size_t(M * N), rng);
  Buffer din = dev.upload(DType::F32, in), dout = dev.alloc(DType::F32, in.size());
  dout.fillBytes(0xff);
  compile(k, dev, o).launchWith({cdiv(M, B), cdiv(N, B)}, {dout, din, int32_t(M), int32_t(N)}, {});
  auto got = dout.read<float>();
  ElementCheck check(0, "out", "got == want (exact)");  // a copy
  for (int64_t j = 0; j < N; ++j)
    for (int64_t i = 0; i < M; ++i)
      check(got[size_t(j * M + i)], in[size_t(i * N + j)], 0,
            [&] { return "at (" + std::to_string(j) + ", " + std::to_string(i) + ")"; });
  return check.result();
}

// The example's own launch and check (examples/flash_attention.cpp) with
// this configuration's blocks.
CheckResult checkAttention(int BM, int BN, int D, bool causal, const Device& dev, const CompileOptions& o,
                           const std::vector<int64_t>& s) {
  examples::RunContext ctx;
  ctx.device = dev;
  ctx.shape = {s[0], s[1], D};
  ctx.seed = 10;
  examples::Launch l = examples::prepareAttention(ctx, causal, examples::AttentionBlocks{BM, BN});
  compile(l.kernel, dev, o).launchWith(l.grid, l.args, {});
  return l.check();
}

// act < 0: the plain kernel (no bias argument, no epilogue).
CheckResult checkGemm(GemmBlocks B, int act, const Kernel& k, const Device& dev, const CompileOptions& o,
                      const std::vector<int64_t>& s) {
  const int64_t M = s[0], N = s[1], K = s[2];
  std::mt19937_64 rng(11);
  auto a = randomHalves(size_t(M * K), rng), b = randomHalves(size_t(K * N), rng);
  std::vector<float> bias = act < 0 ? std::vector<float>{} : examples::randomVector(size_t(N), rng);
  Buffer da = dev.upload(DType::F16, a), db = dev.upload(DType::F16, b), dc = dev.alloc(DType::F16, size_t(M * N));
  dc.fillBytes(0xff);
  std::vector<rt::Arg> args{dc, da, db};
  if (act >= 0) args.push_back(dev.upload(DType::F32, bias));
  for (int64_t x : {M, N, K}) args.push_back(int32_t(x));
  compile(k, dev, o).launchWith(examples::gemmGrid(B, M, N), args, {});
  auto got = dc.read<uint16_t>();
  // As examples/gemm_f16.cpp: f32 accumulation of K + 1 terms, the
  // activation's slope (<= 1.13) and erf, the rounding to f16.
  const double factor = 2.0 * double(K + 1) * kU32;
  ElementCheck check(factor, "c", "as gemm_f16's, f = " + ElementCheck::fmt(factor));
  examples::GemmReference ref = examples::gemmReference(
      M, N, K, [&](int64_t i, int64_t kk) { return fromHalf(a[size_t(i * K + kk)]); },
      [&](int64_t kk, int64_t j) { return fromHalf(b[size_t(kk * N + j)]); }, bias, std::max(act, 0));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double want = ref.want[size_t(i * N + j)], mag = ref.mag[size_t(i * N + j)];
      double bound =
          1.2 * factor * mag + 1e-6 * std::fabs(want) + 1e-6 + 1.01 * kU16 * std::fabs(want) + std::ldexp(1.0, -25);
      check(fromHalf(got[size_t(i * N + j)]), want, bound,
            [&] { return "at (" + std::to_string(i) + ", " + std::to_string(j) + ")"; });
    }
  return check.result();
}

// The gemm_fp8 example's inputs and check (per-tensor scales, bf16 out),
// launched with kernel `k` of blocks B.
CheckResult checkGemmFp8(GemmBlocks B, const Kernel& k, const Device& dev, const CompileOptions& o,
                         const std::vector<int64_t>& s) {
  examples::RunContext ctx;
  ctx.device = dev;
  ctx.shape = s;
  examples::Launch l = examples::find("gemm_fp8")->prepare(ctx);
  compile(k, dev, o).launchWith(examples::gemmGrid(B, s[0], s[1]), l.args, {});
  return l.check();
}

// A block-scaled GEMM example's inputs and check (examples/block_scaled.h),
// launched with kernel `k` of blocks B.
CheckResult checkGemmScaled(const char* name, GemmBlocks B, const Kernel& k, const Device& dev, const CompileOptions& o,
                            const std::vector<int64_t>& s) {
  examples::RunContext ctx;
  ctx.device = dev;
  ctx.shape = s;
  examples::Launch l = examples::find(name)->prepare(ctx);
  compile(k, dev, o).launchWith(examples::gemmGrid(B, s[0], s[1]), l.args, {});
  return l.check();
}

std::string warps(int w) { return " w" + std::to_string(w); }

}  // namespace

std::vector<GpuBenchKernel> gpuBenchKernels() {
  std::vector<GpuBenchKernel> r;
  {
    Kernel k = scalarStore();
    r.push_back({"scalar_store",
                 "one store" + warps(4),
                 k,
                 4,
                 "",
                 {{5}, {300}},
                 [=](const Device& d, const CompileOptions& o, const std::vector<int64_t>& s) {
                   return checkScalarStore(k, d, o, s);
                 }});
  }
  for (int BM : {32, 64}) {
    Kernel k = gemv(BM, 128);
    r.push_back({"gemv",
                 std::to_string(BM) + "x128" + warps(4),
                 k,
                 4,
                 "",
                 {{128, 256}, {77, 300}},
                 [=](const Device& d, const CompileOptions& o, const std::vector<int64_t>& s) {
                   return checkGemv(BM, k, d, o, s);
                 }});
  }
  {
    Kernel k = rope(16, 64);
    r.push_back({"rope",
                 "16x64" + warps(4),
                 k,
                 4,
                 "",
                 {{64}, {37}},
                 [=](const Device& d, const CompileOptions& o, const std::vector<int64_t>& s) {
                   return checkRope(16, 64, k, d, o, s);
                 }});
  }
  {
    Kernel k = transpose(64);
    r.push_back({"transpose",
                 "64x64" + warps(4),
                 k,
                 4,
                 "",
                 {{128, 64}, {100, 70}},
                 [=](const Device& d, const CompileOptions& o, const std::vector<int64_t>& s) {
                   return checkTranspose(64, k, d, o, s);
                 }});
  }
  struct Attn {
    int bm, bn, d, w;
    bool causal;
  };
  for (Attn a : {Attn{64, 64, 64, 4, false}, Attn{128, 64, 64, 4, false}, Attn{128, 64, 64, 8, false},
                 Attn{64, 64, 128, 4, false}, Attn{128, 64, 128, 8, false}, Attn{128, 64, 64, 8, true}}) {
    Kernel k = attention(a.bm, a.bn, a.d, a.causal);
    std::string cfg = std::to_string(a.bm) + "x" + std::to_string(a.bn) + " d" + std::to_string(a.d) + warps(a.w) +
                      (a.causal ? " causal" : "");
    r.push_back({"attention",
                 cfg,
                 k,
                 a.w,
                 "",
                 {{2, 128}, {2, 77}},
                 [=](const Device& d, const CompileOptions& o, const std::vector<int64_t>& s) {
                   return checkAttention(a.bm, a.bn, a.d, a.causal, d, o, s);
                 }});
  }
  for (int tile : {32, 128})
    for (int w : {4, 8})
      for (bool epilogue : {false, true}) {
        GemmBlocks B{tile, tile, 32, 3};
        Kernel k = epilogue ? examples::gemmF16(B, examples::Activation::GELU) : gemmF16Plain(B);
        std::string cfg =
            std::to_string(tile) + "x" + std::to_string(tile) + "x32 s3" + warps(w) + (epilogue ? " bias+gelu" : "");
        int act = epilogue ? 2 : -1;
        r.push_back({"gemm_f16",
                     cfg,
                     k,
                     w,
                     "",
                     {{128, 128, 64}, {100, 77, 45}},
                     [=](const Device& d, const CompileOptions& o, const std::vector<int64_t>& s) {
                       return checkGemm(B, act, k, d, o, s);
                     }});
      }
  // Hopper's warpgroup MMA at the tiles it is made for: two
  // warpgroups along M, BK = 64.
  // "ws": warp-specialised (a producer warpgroup issues the TMA copies).
  for (bool ws : {false, true})
    for (auto [bm, bn] : {std::pair{128, 128}, std::pair{128, 256}}) {
      GemmBlocks B{bm, bn, 64, 3, ws};
      Kernel k = gemmF16Plain(B);
      r.push_back({"gemm_f16",
                   std::to_string(bm) + "x" + std::to_string(bn) + "x64 s3" + warps(8) + (ws ? " ws" : ""),
                   k,
                   8,
                   // 96-144 KiB of slots: beyond gfx942's LDS; sm_100a's
                   // tcgen05 has no warp-specialised form yet.
                   ws ? "nvptx:sm_90a" : "nvptx:sm_90a nvptx:sm_100a",
                   {{256, 256, 128}, {100, 77, 45}},
                   [=](const Device& d, const CompileOptions& o, const std::vector<int64_t>& s) {
                     return checkGemm(B, -1, k, d, o, s);
                   }});
    }
  // fp8 (e4m3, per-tensor scales, bf16 out: the gemm_fp8 example's kernel)
  // at the same tiles: wgmma m64nNk32 on sm_90a, tcgen05 kind::f8f6f4 on
  // sm_100a (and its 128 x 256 x 128 tile).
  for (auto [bm, bn, bk] : {std::tuple{128, 128, 64}, std::tuple{128, 256, 64}, std::tuple{128, 256, 128}}) {
    GemmBlocks B{bm, bn, bk, 3};
    Kernel k = examples::gemmFP8(B);
    r.push_back({"gemm_fp8",
                 std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) + " s3" + warps(8),
                 k,
                 8,
                 bk == 64 ? "nvptx:sm_90a nvptx:sm_100a" : "nvptx:sm_100a",
                 {{256, 256, 128}, {100, 77, 45}},
                 [=](const Device& d, const CompileOptions& o, const std::vector<int64_t>& s) {
                   return checkGemmFp8(B, k, d, o, s);
                 }});
  }
  // Block-scaled GEMMs (the zoo's gemm_mxfp8 / gemm_mxfp4 / gemm_nvfp4
  // kernel: masked loads, one dot_scaled per K step of 128, f32 out) on
  // sm_120a and gfx950, whose mma.sync block_scale and v_mfma_scale run
  // them natively (docs/dot_scaled.md; NVFP4 on sm_120a only); a 128 x 256
  // f32 tile's store conversion alone is 128 KiB, beyond sm_120a's 99.
  for (auto [name, f, targets] : {std::tuple{"gemm_mxfp8", ScaledFormat::mxfp8_e4m3, "nvptx:sm_120a amdgpu:gfx950"},
                                  std::tuple{"gemm_mxfp4", ScaledFormat::mxfp4, "nvptx:sm_120a amdgpu:gfx950"},
                                  std::tuple{"gemm_nvfp4", ScaledFormat::nvfp4, "nvptx:sm_120a"}})
    for (auto [bm, bn, w] : {std::tuple{64, 128, 4}, std::tuple{128, 128, 4}, std::tuple{128, 128, 8}}) {
      GemmBlocks B{bm, bn, 128, 0};
      Kernel k = examples::gemmScaled(name, B, f);
      r.push_back({name,
                   std::to_string(bm) + "x" + std::to_string(bn) + "x128" + warps(w),
                   k,
                   w,
                   targets,
                   {{256, 256, 256}, {100, 77, 160}},
                   [=](const Device& d, const CompileOptions& o, const std::vector<int64_t>& s) {
                     return checkGemmScaled(name, B, k, d, o, s);
                   }});
    }
  return r;
}

}  // namespace tessera::bench
