// Helpers shared by the DSL tests.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "tessera/dsl/DSL.h"
#include "tessera/dsl/Tiles.h"
#include "tessera/ir/Printer.h"
#include "tessera/tessera.h"

namespace dsltest {

/// The kernel's IR text without locations (stable across edits of the test file).
inline std::string irText(const tessera::Kernel& k) {
  tessera::ir::PrintOptions o;
  o.locations = false;
  return tessera::ir::print(k.ir(), o);
}

/// Traces `body` (a kernel callable), expects a DslError, and returns its
/// message. Fails the test if tracing succeeds or throws something else.
template <class F>
std::string traceError(F&& body) {
  try {
    tessera::kernel("k", body);
  } catch (const tessera::DslError& e) {
    return e.what();
  }
  FAIL("tracing succeeded but a DslError was expected");
  return {};
}

/// C (f32) = A B (f16) over the BM x BN tiles of `schedule(Tiles(M, N, BM,
/// BN))`, the K loop pipelined through shared memory in 3 stages: each
/// program runs it once per tile it takes, so the next tile must find every
/// slot, barrier phase and accumulator as the first did.
/// c, a, b, M, N, K
template <int BM, int BN, int BK, class Schedule>
tessera::Kernel pipelinedTilesGemm(const char* name, Schedule schedule) {
  namespace ts = tessera;
  return ts::kernel(name, [=](ts::Ptr<float> c, ts::Ptr<const ts::half> a, ts::Ptr<const ts::half> b, ts::Int M,
                              ts::Int N, ts::Int K) {
    auto sa = ts::alloc_shared(ts::f16, {BM, BK});
    auto sb = ts::alloc_shared(ts::f16, {BK, BN});
    ts::Tiles tiles(M, N, BM, BN);
    schedule(tiles);
    ts::for_tiles(tiles, [&](const ts::Tile& t) {
      auto rows = ts::expand_dims(t.row0 + ts::arange(BM), 1), cols = ts::expand_dims(t.col0 + ts::arange(BN), 0);
      auto rk = ts::arange(BK);
      auto acc = ts::for_pipelined(0, K, BK, 3, ts::zeros({BM, BN}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
        auto ka = ts::expand_dims(k0 + rk, 0), kb = ts::expand_dims(k0 + rk, 1);
        auto x = ts::stage_copy(sa, a + rows * K + ka, (rows < t.rowEnd) & (ka < K));
        auto y = ts::stage_copy(sb, b + kb * N + cols, (kb < K) & (cols < t.colEnd));
        return ts::dot(x.load(), y.load(), acc);
      });
      ts::store(c + rows * N + cols, acc, (rows < t.rowEnd) & (cols < t.colEnd));
    });
  });
}

/// Inputs and reference of pipelinedTilesGemm: small-integer A (M x K) and
/// B (K x N) as f16, whose f32 sums are exact, so a result must equal
/// `want` bit for bit.
struct ExactHalfGemm {
  int M, N, K;
  std::vector<_Float16> a, b;
  std::vector<float> want;
  ExactHalfGemm(int m, int n, int k, const std::vector<float>& A, const std::vector<float>& B)
      : M(m), N(n), K(k), a(A.begin(), A.end()), b(B.begin(), B.end()), want(size_t(m) * n, 0.0f) {
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        for (int q = 0; q < K; ++q) want[size_t(i) * N + j] += A[size_t(i) * K + q] * B[size_t(q) * N + j];
  }
  /// C of a launch of `k` on `programs` programs (C is NaN before).
  std::vector<float> run(const tessera::CompiledKernel& k, const tessera::Device& dev, uint32_t programs,
                         const tessera::LaunchOptions& o = {}) const {
    tessera::Buffer c = dev.upload(tessera::f32, std::vector<float>(want.size(), NAN));
    k.launchWith(tessera::Dim3(programs), {c, dev.upload(tessera::f16, a), dev.upload(tessera::f16, b), M, N, K}, o);
    return c.read<float>();
  }
};

/// "<this test file>:<line>: error: "
inline std::string at(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": error: ";
}

}  // namespace dsltest
