// The pipelined f16 / bf16 GEMMs of the examples on sm_90a or Blackwell (an
// emulated GPU or a real one), checked as tests/codegen/nvptx/gpu_tma_test.cpp and the
// hardware tests of tests/runtime need: small-integer inputs, so the f32
// accumulation is exact and the result must equal the reference and the
// cp.async path bit for bit; the PTX says whether the slots went by TMA.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "registry.h"
#include "tessera/tessera.h"

namespace tessera_test {
namespace ts = tessera;
namespace ex = tessera::examples;

struct Shape {
  int M, N, K;
};

struct Run {
  std::vector<float> c;
  std::string ptx, signature;
};

/// C = A B (bias 0, no activation) for small-integer inputs, exact in f32.
/// Small integers as f16 or bf16 (bf16: the f32 bits' top half, exact).
inline ts::Buffer upload(const ts::Device& dev, ts::DType in, const std::vector<float>& v) {
  if (in == ts::DType::F16) {
    std::vector<_Float16> h(v.begin(), v.end());
    return dev.upload(in, h);
  }
  std::vector<uint16_t> h;
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    h.push_back(uint16_t(bits >> 16));
  }
  return dev.upload(in, h);
}

inline Run runGemm(const ts::Device& dev, const ts::Kernel& kernel, ex::GemmBlocks blocks, int warps, Shape s,
                   const std::vector<float>& a, const std::vector<float>& b, ts::DType in, ts::DType out,
                   bool tensorCopies) {
  ts::CompileOptions o;
  o.numWarps = warps;
  o.tensorCopies = tensorCopies;
  ts::CompiledKernel k = ts::compile(kernel, dev, o);
  std::vector<float> bias(size_t(s.N), 0.0f);
  ts::Buffer ba = upload(dev, in, a), bb = upload(dev, in, b);
  ts::Buffer bbias = dev.upload(ts::DType::F32, bias), c = dev.alloc(out, size_t(s.M) * s.N);
  c.fillBytes(0xff);
  const std::vector<ts::rt::Arg> args{c, ba, bb, bbias, int32_t(s.M), int32_t(s.N), int32_t(s.K)};
  // The variant the launch specialises to (16-byte facts) is the code that runs.
  ts::CompiledKernel ran = ts::compile(ts::specializedFor(kernel, args), ts::Target::parse(dev.arch()), o);
  Run r;
  r.ptx = ran.dump(ts::Stage::PTX);
  r.signature = ran.signature().str();
  k.launchWith(ex::gemmGrid(blocks, s.M, s.N), args, {});
  if (out == ts::DType::F16)
    for (_Float16 h : c.read<_Float16>()) r.c.push_back(float(h));
  else
    r.c = c.read<float>();
  return r;
}

inline void checkGemm(const char* what, ts::DType in, ts::DType out, const ts::Kernel& kernel, ex::GemmBlocks blocks,
                      int warps, Shape s, bool expectTma,
                      const ts::Device& h100 = ts::Device::emulator("nvptx:sm_90a")) {
  INFO(what << " " << blocks.m << "x" << blocks.n << "x" << blocks.k << " s" << blocks.stages << " w" << warps
            << ", M N K = " << s.M << " " << s.N << " " << s.K);
  std::mt19937 rng(uint32_t(s.M * 7 + s.K));
  std::uniform_int_distribution<int> d(-3, 3);
  std::vector<float> a(size_t(s.M) * s.K), b(size_t(s.K) * s.N);
  for (auto& v : a) v = float(d(rng));
  for (auto& v : b) v = float(d(rng));
  Run tma = runGemm(h100, kernel, blocks, warps, s, a, b, in, out, true);
  Run cp = runGemm(h100, kernel, blocks, warps, s, a, b, in, out, false);
  CHECK((tma.ptx.find("cp.async.bulk.tensor.2d") != std::string::npos) == expectTma);
  CHECK((tma.signature.find(" tma(a: ") != std::string::npos) == expectTma);
  CHECK(cp.ptx.find("cp.async.bulk.tensor") == std::string::npos);
  if (expectTma) CHECK(cp.ptx.find("cp.async.cg.shared.global") != std::string::npos);
  if (expectTma) CHECK(tma.ptx.find("cp.async.commit_group") == std::string::npos);  // no cp.async left
  size_t bad = 0;
  for (int i = 0; i < s.M; ++i)
    for (int j = 0; j < s.N; ++j) {
      double want = 0;
      for (int k = 0; k < s.K; ++k) want += double(a[size_t(i) * s.K + k]) * double(b[size_t(k) * s.N + j]);
      const size_t at = size_t(i) * s.N + j;
      if (tma.c[at] != float(want) || cp.c[at] != tma.c[at]) {
        if (bad++ < 5)
          FAIL_CHECK("C[" << i << "][" << j << "] = " << tma.c[at] << " (cp.async " << cp.c[at] << "), want " << want);
      }
    }
  CHECK(bad == 0);
}

}  // namespace tessera_test
