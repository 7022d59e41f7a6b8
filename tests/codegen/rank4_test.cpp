// Tiles of rank 4, the [batch, head, seq, dim] blocks of attention kernels,
// on every backend (the pinned CPU paths and emulated sm_80, gfx942,
// gfx1100) against plain C++ loops: 4-D index math and masked loads with a
// ragged sequence dim, elementwise math, a softmax along the last axis
// (max, exp, sum, broadcast back), a sum over heads (rank 4 -> 3), a
// transpose of the middle dims, a reshape to 2-D, cumsum and argmax along
// inner axes, join of rank-3 tiles into rank 4 and split back, and gather
// along the last axis; and the kernel assembles with ptxas (sm_80, sm_90a)
// and links with LLD (gfx942, gfx1100).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

#include "../amd_code_object.h"
#include "../ptxas_report.h"
#include "../cpu_paths.h"
#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr int B = 2, H = 4, S = 8, D = 16;

/// x is B x H x Sv x D (Sv <= S valid rows per head, the tile's S rows
/// masked beyond it); the outputs are dense B x H x S x D (or their
/// reductions) with masked rows holding what the masked loads give (0).
/// arange(n) laid along dim `pos` of a rank-`rank` tile (size 1 elsewhere).
ts::Tensor along(int n, int rank, int pos) {
  ts::Tensor t = ts::arange(n);
  for (int k = 0; k < rank; ++k)
    if (k != pos) t = ts::expand_dims(t, k);
  return t;
}

ts::Kernel rank4Kernel() {
  return ts::kernel(
      "rank4", [](ts::Ptr<float> soft, ts::Ptr<float> headSum, ts::Ptr<float> trans, ts::Ptr<float> flat,
                  ts::Ptr<float> csum, ts::Ptr<int32_t> amax, ts::Ptr<float> joined, ts::Ptr<float> halves,
                  ts::Ptr<float> gathered, ts::Ptr<const float> x, ts::Ptr<const int32_t> idx, ts::Int Sv) {
        auto b = along(B, 4, 0), h = along(H, 4, 1), s = along(S, 4, 2), d = along(D, 4, 3);
        auto in = ((b * H + h) * Sv + s) * D + d;  // the ragged input
        auto out = ((b * H + h) * S + s) * D + d;  // dense outputs
        auto v = ts::load(x + in, s < Sv, 0.0f);   // B x H x S x D, rows >= Sv read 0
        // Softmax along the last axis.
        auto m = ts::max(v, 3);
        auto e = ts::exp(v - ts::expand_dims(m, 3));
        ts::store(soft + out, e / ts::expand_dims(ts::sum(e, 3), 3));
        // Sum over heads: rank 3, B x S x D.
        ts::store(headSum + (along(B, 3, 0) * S + along(S, 3, 1)) * D + along(D, 3, 2), ts::sum(v * 2.0f + 1.0f, 1));
        // B x S x H x D.
        ts::store(trans + ((b * S + along(S, 4, 1)) * H + along(H, 4, 2)) * D + d, ts::transpose(v, {0, 2, 1, 3}));
        // Flattened to (B H S) x D.
        ts::store(flat + along(B * H * S, 2, 0) * D + along(D, 2, 1), ts::reshape(v, {B * H * S, D}) - 0.5f);
        // Cumulative sum along seq; argmax along dim (B x H x S).
        ts::store(csum + out, ts::cumsum(v, 2));
        auto bhs = (along(B, 3, 0) * H + along(H, 3, 1)) * S + along(S, 3, 2);
        ts::store(amax + bhs, ts::argmax(v, 3));
        // join two rank-3 tiles into rank 4, and split a rank-4 tile.
        ts::store(joined + ts::expand_dims(bhs, 3) * 2 + along(2, 4, 3), ts::join(ts::sum(v, 3), ts::max(v, 3)));
        auto [lo, hi] = ts::split(ts::reshape(v, {B, H, S * D / 2, 2}));
        ts::store(halves + (along(B, 3, 0) * H + along(H, 3, 1)) * (S * D / 2) + along(S * D / 2, 3, 2), lo - hi);
        // Gather along the last axis with per-element indices.
        ts::store(gathered + out, ts::gather(v, ts::load(idx + out), 3));
      });
}

}  // namespace

namespace {

struct Outputs {
  std::vector<float> soft, headSum, trans, flat, csum, joined, halves, gathered;
  std::vector<int32_t> amax;
};

Outputs reference(const std::vector<float>& x, const std::vector<int32_t>& idx, int Sv) {
  auto v = [&](int b, int h, int s, int d) { return s < Sv ? x[size_t(((b * H + h) * Sv + s) * D + d)] : 0.0f; };
  auto at = [](int b, int h, int s, int d) { return size_t(((b * H + h) * S + s) * D + d); };
  Outputs o;
  o.soft.resize(B * H * S * D), o.headSum.resize(B * S * D), o.trans.resize(B * S * H * D),
      o.flat.resize(B * H * S * D);
  o.csum.resize(B * H * S * D), o.amax.resize(B * H * S), o.joined.resize(B * H * S * 2),
      o.halves.resize(B * H * S * D / 2);
  o.gathered.resize(B * H * S * D);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int s = 0; s < S; ++s) {
        double mx = -INFINITY, sum = 0, esum = 0;
        int arg = 0;
        for (int d = 0; d < D; ++d) {
          if (v(b, h, s, d) > mx) mx = v(b, h, s, d), arg = d;
          sum += v(b, h, s, d);
        }
        for (int d = 0; d < D; ++d) esum += std::exp(double(v(b, h, s, d)) - mx);
        const size_t bhs = size_t((b * H + h) * S + s);
        o.amax[bhs] = arg;
        o.joined[bhs * 2] = float(sum), o.joined[bhs * 2 + 1] = float(mx);
        for (int d = 0; d < D; ++d) {
          o.soft[at(b, h, s, d)] = float(std::exp(double(v(b, h, s, d)) - mx) / esum);
          o.trans[size_t(((b * S + s) * H + h) * D + d)] = v(b, h, s, d);
          o.flat[at(b, h, s, d)] = v(b, h, s, d) - 0.5f;
          double c = 0;
          for (int s2 = 0; s2 <= s; ++s2) c += v(b, h, s2, d);
          o.csum[at(b, h, s, d)] = float(c);
          o.gathered[at(b, h, s, d)] = v(b, h, s, idx[at(b, h, s, d)]);
        }
      }
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < S; ++s)
      for (int d = 0; d < D; ++d) {
        double t = 0;
        for (int h = 0; h < H; ++h) t += 2.0 * v(b, h, s, d) + 1.0;
        o.headSum[size_t((b * S + s) * D + d)] = float(t);
      }
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < S * D / 2; ++q) {
        int e0 = 2 * q, e1 = 2 * q + 1;
        o.halves[size_t((b * H + h) * (S * D / 2) + q)] = v(b, h, e0 / D, e0 % D) - v(b, h, e1 / D, e1 % D);
      }
  return o;
}

template <class T>
void near(const std::vector<T>& got, const std::vector<T>& want, double tol, const char* what) {
  REQUIRE(got.size() == want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tol * (1 + std::fabs(double(want[i])))) && ++bad <= 5)
      FAIL_CHECK(what << "[" << i << "] = " << got[i] << ", expected " << want[i]);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("rank-4 tiles: loads, softmax, reductions, transpose, reshape, scan, argmax, join, split, gather",
          "[rank4][emu]") {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::uniform_int_distribution<int32_t> ui(0, D - 1);
  std::vector<int32_t> idx(B * H * S * D);
  for (auto& i : idx) i = ui(rng);
  for (const ts::Device& dev : testpaths::cpuPathsAndEmulators()) {
    ts::CompiledKernel k = ts::compile(rank4Kernel(), dev);
    for (int Sv : {S, 5, 1}) {
      INFO(dev.name() << ", " << Sv << " valid rows of " << S);
      std::vector<float> x(size_t(B * H * Sv * D));
      for (auto& e : x) e = u(rng);
      Outputs want = reference(x, idx, Sv);
      auto f = [&](size_t n) { return dev.alloc(ts::f32, n); };
      ts::Buffer soft = f(want.soft.size()), headSum = f(want.headSum.size()), trans = f(want.trans.size()),
                 flat = f(want.flat.size()), csum = f(want.csum.size()), joined = f(want.joined.size()),
                 halves = f(want.halves.size()), gathered = f(want.gathered.size());
      ts::Buffer amax = dev.alloc(ts::i32, want.amax.size());
      k.launch(ts::Dim3(1), soft, headSum, trans, flat, csum, amax, joined, halves, gathered, dev.upload(ts::f32, x),
               dev.upload(ts::i32, idx), int32_t(Sv));
      near(soft.read<float>(), want.soft, 1e-5, "soft");
      near(headSum.read<float>(), want.headSum, 1e-6, "headSum");
      near(trans.read<float>(), want.trans, 0, "trans");
      near(flat.read<float>(), want.flat, 0, "flat");
      near(csum.read<float>(), want.csum, 1e-6, "csum");
      near(amax.read<int32_t>(), want.amax, 0, "amax");
      near(joined.read<float>(), want.joined, 1e-6, "joined");
      near(halves.read<float>(), want.halves, 0, "halves");
      near(gathered.read<float>(), want.gathered, 0, "gathered");
    }
  }
}

TEST_CASE("rank-4 tiles: the PTX assembles with ptxas for sm_80 and sm_90a without spills", "[rank4][gpu][ptxas]") {
  if (::access("/usr/local/cuda/bin/ptxas", X_OK) != 0) {
    WARN("SKIP: ptxas not found (install the CUDA toolkit at /usr/local/cuda); PTX not assembled");
    return;
  }
  for (const char* sm : {"sm_80", "sm_90a"}) {
    INFO(sm);
    auto k = ts::compile(rank4Kernel(), ts::Target::parse(std::string("nvptx:") + sm));
    testptx::PtxasFigures f = testptx::ptxasFigures(k);
    INFO(f.report);
    CHECK(f.spillBytes == 0);
  }
}

TEST_CASE("rank-4 tiles: the AMDGPU code links with LLD for gfx942 and gfx1100", "[rank4][gpu][amdgpu]") {
  for (auto [gfx, wave] : {std::pair{"gfx942", 64}, std::pair{"gfx1100", 32}}) {
    INFO(gfx);
    testamd::checkCodeObject(ts::compile(rank4Kernel(), ts::Target::parse(std::string("amdgpu:") + gfx)), wave);
  }
}
