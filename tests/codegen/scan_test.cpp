// Scans (ts::cumsum, ts::cumprod, ts::associative_scan) on every backend
// against plain C++ prefix loops: along the contiguous axis and an outer
// one, over tiles that span one lane, a warp, several warps and several
// repetitions of the block tile (so every stage of the GPU lowering runs),
// over ragged rows, a non-power-of-two tile, and a combine function that
// does not commute (forward fill), so a lowering that combines in the wrong
// order fails.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../cpu_paths.h"
#include "support.h"
#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

std::vector<ts::Device> devices() { return testpaths::cpuPathsAndEmulators(); }

std::vector<int32_t> ints(size_t n, int lo, int hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

enum class Kind { Sum, Prod, Fill, SumPlusK };

// One program per row of an M x n matrix; the row is one tile of B.
ts::Kernel rowScan(int B, Kind kind) {
  return ts::kernel("row_scan", [=](ts::Ptr<int32_t> out, ts::Ptr<const int32_t> in, ts::Int n, ts::Int k) {
    auto c = ts::arange(B);
    auto m = c < n;
    auto base = ts::program_id(0) * n;
    auto x = ts::load(in + base + c, m, 0);
    ts::Tensor y;
    switch (kind) {
      case Kind::Sum: y = ts::cumsum(x, 0); break;
      case Kind::Prod: y = ts::cumprod(x, -1); break;
      case Kind::Fill:  // the last non-zero value so far: associative, not commutative
        y = ts::associative_scan(x, 0, [](ts::Tensor a, ts::Tensor b) { return ts::where(b != 0, b, a); });
        break;
      case Kind::SumPlusK:  // a + b + k: associative, with a scalar argument inside
        y = ts::associative_scan(x, 0, [&](ts::Tensor a, ts::Tensor b) { return a + b + k; });
        break;
    }
    ts::store(out + base + c, y, m);
  });
}

std::vector<int32_t> rowRef(const std::vector<int32_t>& x, int M, int n, Kind kind, int32_t k) {
  std::vector<int32_t> r(x.size());
  for (int i = 0; i < M; ++i) {
    uint32_t acc = 0;
    for (int j = 0; j < n; ++j) {
      uint32_t v = static_cast<uint32_t>(x[size_t(i * n + j)]);
      if (j == 0) {
        acc = v;
      } else {
        switch (kind) {
          case Kind::Sum: acc += v; break;
          case Kind::Prod: acc *= v; break;  // wraps modulo 2^32, as i32 mul does
          case Kind::Fill: acc = v != 0 ? v : acc; break;
          case Kind::SumPlusK: acc += v + static_cast<uint32_t>(k); break;
        }
      }
      r[size_t(i * n + j)] = static_cast<int32_t>(acc);
    }
  }
  return r;
}

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Sum: return "cumsum";
    case Kind::Prod: return "cumprod";
    case Kind::Fill: return "forward fill";
    case Kind::SumPlusK: return "a + b + k";
  }
  return "?";
}

}  // namespace

TEST_CASE("scan: integer scans along a row match a sequential loop on every backend", "[scan][emu]") {
  const int M = 3;
  for (const ts::Device& dev : devices())
    for (int warps : {4, 8})
      for (int B : {1, 8, 32, 100, 256, 2048})
        for (Kind kind : {Kind::Sum, Kind::Prod, Kind::Fill, Kind::SumPlusK}) {
          if (dev.kind() == ts::rt::DeviceKind::CPU && warps != 4) continue;
          ts::CompileOptions o;
          o.numWarps = warps;
          ts::CompiledKernel kern = ts::compile(rowScan(B, kind), dev, o);
          for (int n : {B, B > 3 ? B - 3 : B}) {
            INFO(dev.name() << ", " << warps << " warps, tile " << B << ", n = " << n << ", " << kindName(kind));
            auto x = kind == Kind::Prod   ? ints(size_t(M * n), -3, 3, 7)
                     : kind == Kind::Fill ? ints(size_t(M * n), -1, 1, 8)
                                          : ints(size_t(M * n), -1000, 1000, 9);
            const int32_t k = 5;
            ts::Buffer bx = dev.upload(ts::DType::I32, x);
            ts::Buffer by = dev.alloc(ts::DType::I32, x.size());
            kern.launch(ts::Dim3(M), by, bx, int32_t(n), k);
            REQUIRE(by.read<int32_t>() == rowRef(x, M, n, kind, k));
          }
        }
}

namespace {

// out[r, :] for an R x C tile scanned along `axis`, in f32 or f64.
template <class T>
ts::Kernel tileScan(int R, int C, int axis) {
  return ts::kernel("tile_scan", [=](ts::Ptr<T> out, ts::Ptr<const T> in, ts::Int rows, ts::Int cols) {
    auto r = ts::expand_dims(ts::arange(R), 1);
    auto c = ts::expand_dims(ts::arange(C), 0);
    auto m = (r < rows) & (c < cols);
    auto off = ts::program_id(0) * rows * cols + r * cols + c;
    auto x = ts::load(in + off, m, T(0));
    ts::store(out + off, ts::cumsum(x, axis), m);
  });
}

}  // namespace

TEST_CASE("scan: float cumsum along either axis of a 2-D tile matches the reference", "[scan][emu]") {
  struct Shape {
    int R, C;
  };
  for (const ts::Device& dev : devices())
    for (Shape s : {Shape{4, 64}, Shape{64, 4}, Shape{128, 8}, Shape{16, 128}, Shape{24, 40}})
      for (int axis : {0, 1}) {
        ts::CompiledKernel kf = ts::compile(tileScan<float>(s.R, s.C, axis), dev);
        ts::CompiledKernel kd = ts::compile(tileScan<double>(s.R, s.C, axis), dev);
        for (auto [rows, cols] : {std::pair{s.R, s.C}, std::pair{s.R - 1, s.C - 3}}) {
          INFO(dev.name() << ", tile " << s.R << "x" << s.C << ", axis " << axis << ", " << rows << "x" << cols);
          const int P = 2;  // programs, one matrix each
          // Small integers: exact in any association order.
          auto xi = ints(size_t(P * rows * cols), -50, 50, 11);
          std::vector<float> xf(xi.begin(), xi.end());
          std::vector<double> xd(xi.begin(), xi.end());
          std::vector<double> want(xi.size());
          for (int p = 0; p < P; ++p)
            for (int i = 0; i < rows; ++i)
              for (int j = 0; j < cols; ++j) {
                size_t at = size_t(p * rows * cols + i * cols + j);
                double prev = axis == 0 ? (i ? want[at - size_t(cols)] : 0) : (j ? want[at - 1] : 0);
                want[at] = prev + xi[at];
              }
          ts::Buffer bf = dev.upload(ts::DType::F32, xf), of = dev.alloc(ts::DType::F32, xf.size());
          ts::Buffer bd = dev.upload(ts::DType::F64, xd), od = dev.alloc(ts::DType::F64, xd.size());
          kf.launch(ts::Dim3(P), of, bf, int32_t(rows), int32_t(cols));
          kd.launch(ts::Dim3(P), od, bd, int32_t(rows), int32_t(cols));
          auto gf = of.read<float>();
          auto gd = od.read<double>();
          for (size_t i = 0; i < want.size(); ++i) {
            INFO("element " << i);
            REQUIRE(gf[i] == float(want[i]));
            REQUIRE(gd[i] == want[i]);
          }
        }
      }
}

TEST_CASE("scan: f16 cumsum accumulates in f32 and rounds each element once", "[scan][emu]") {
  const int B = 512;
  auto kern = ts::kernel("half_cumsum", [](ts::Ptr<ts::half> out, ts::Ptr<const ts::half> in) {
    auto c = ts::arange(B);
    ts::store(out + c, ts::cumsum(ts::load(in + c), 0));
  });
  // 0.1 is inexact in f16: an f16 running sum would drift far beyond one
  // rounding of the final value (by 512 its step is 0.25 or 0.5 per add).
  std::vector<uint16_t> hx(B, ts::examples::toHalf(0.1f));
  for (const ts::Device& dev : devices()) {
    INFO(dev.name());
    ts::CompiledKernel k = ts::compile(kern, dev);
    ts::Buffer bx = dev.upload(ts::DType::F16, hx), by = dev.alloc(ts::DType::F16, hx.size());
    k.launch(ts::Dim3(1), by, bx);
    auto got = by.read<uint16_t>();
    double run = 0;
    for (int i = 0; i < B; ++i) {
      run += double(ts::examples::fromHalf(hx[size_t(i)]));
      INFO("element " << i);
      // One rounding to f16 (relative 2^-11) of an f32 sum (within 512 * 2^-24).
      REQUIRE(double(ts::examples::fromHalf(got[size_t(i)])) == Approx(run).epsilon(1.0 / 1024));
    }
  }
}
