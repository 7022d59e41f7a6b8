// argmin, gather along an axis, join and split on every backend (the pinned
// CPU paths and the emulated sm_80, gfx942 and gfx1100) against plain C++
// loops: power-of-two and other tile shapes, ragged rows (masked loads that
// do not fill the tile), float and integer dtypes, ties and NaN for argmin,
// gathers along axis 0 and 1 of 2-D tiles and of 1-D tiles, indices out of
// range (no fault, the in-range lanes still right); and the kernels
// assemble with ptxas (sm_80, sm_90a) and link with LLD (gfx942, gfx1100).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include "../amd_code_object.h"
#include "../cpu_paths.h"
#include "../ptxas_report.h"
#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

std::vector<ts::Device> devices() { return testpaths::cpuPathsAndEmulators(); }

template <class T>
constexpr ts::DType dtypeOf() {
  return ts::dsl::DTypeOf<T>::value;
}

template <class T>
const char* typeName() {
  return ts::name(dtypeOf<T>());
}

/// The largest value of T: what argmin's masked-off lanes hold.
template <class T>
T highest() {
  if constexpr (std::is_floating_point_v<T>)
    return std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::max();
}

/// Elements compared bit for bit (a gathered NaN or -0 must stay itself).
template <class T>
bool sameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// ---------------------------------------------------------------- argmin

/// v comes before b as argmin orders them: smaller, or NaN over a number.
template <class T>
bool before(T v, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return v < b || (std::isnan(v) && !std::isnan(b));
  else
    return v < b;
}

/// The index of the first minimum of x[first + k * stride], k < n.
template <class T>
int32_t argminRef(const std::vector<T>& x, size_t first, size_t stride, int n) {
  int32_t best = 0;
  for (int k = 1; k < n; ++k)
    if (before(x[first + size_t(k) * stride], x[first + size_t(best) * stride])) best = k;
  return best;
}

/// Few distinct values, so most minima are tied; floats get -0 beside +0,
/// and NaN in some rows (`nanEvery` > 0: one row in nanEvery has one or
/// two NaNs somewhere).
template <class T>
std::vector<T> tiedValues(int rows, int n, unsigned seed, int nanEvery) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, 4);
  std::vector<T> v(size_t(rows) * size_t(n));
  for (auto& x : v) {
    int k = d(rng);
    if constexpr (std::is_floating_point_v<T>) {
      const T vals[] = {T(-2), T(-0.0), T(0), T(1.5), T(3)};
      x = vals[k];
    } else if constexpr (std::is_unsigned_v<T>) {
      const T vals[] = {T(0), T(1), T(7), T(T(1) << (sizeof(T) * 8 - 1)), std::numeric_limits<T>::max()};
      x = vals[k];  // values above the signed maximum: an unsigned order is needed
    } else {
      x = T(k - 2);
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (nanEvery > 0) {
      std::uniform_int_distribution<int> at(0, n - 1);
      for (int r = 0; r < rows; r += nanEvery) {
        v[size_t(r) * size_t(n) + size_t(at(rng))] = std::numeric_limits<T>::quiet_NaN();
        if (r % 2 == 0) v[size_t(r) * size_t(n) + size_t(at(rng))] = std::numeric_limits<T>::quiet_NaN();
      }
    }
  }
  return v;
}

// One program per row of M x n; the row is one tile of B (n <= B).
template <class T>
ts::Kernel rowArgmin(int B) {
  return ts::kernel("row_argmin", [=](ts::Ptr<int32_t> out, ts::Ptr<const T> in, ts::Int n) {
    auto c = ts::arange(B);
    auto row = ts::program_id(0);
    auto x = ts::load(in + row * n + c, c < n, highest<T>());
    ts::store(out + row, ts::argmin(x, 0));
  });
}

// argmin of a rows x cols matrix (one R x C tile) along both axes.
template <class T>
ts::Kernel tileArgmin(int R, int C) {
  return ts::kernel("tile_argmin", [=](ts::Ptr<int32_t> byCol, ts::Ptr<int32_t> byRow, ts::Ptr<const T> in,
                                       ts::Int rows, ts::Int cols) {
    auto r = ts::expand_dims(ts::arange(R), 1);
    auto c = ts::expand_dims(ts::arange(C), 0);
    auto x = ts::load(in + r * cols + c, (r < rows) & (c < cols), highest<T>());
    auto cr = ts::arange(C);
    auto rr = ts::arange(R);
    ts::store(byCol + cr, ts::argmin(x, 0), cr < cols);
    ts::store(byRow + rr, ts::argmin(x, -1), rr < rows);
  });
}

template <class T>
void checkRowArgmin() {
  const int M = 9;
  for (const ts::Device& dev : devices())
    for (int B : {8, 32, 100, 256, 1024}) {
      ts::CompiledKernel k = ts::compile(rowArgmin<T>(B), dev);
      for (int n : {B, B - 3}) {
        INFO(dev.name() << ", " << typeName<T>() << ", tile " << B << ", n = " << n);
        auto x = tiedValues<T>(M, n, unsigned(B + n), 3);
        std::vector<int32_t> want(M);
        for (int r = 0; r < M; ++r) want[size_t(r)] = argminRef(x, size_t(r) * size_t(n), 1, n);
        ts::Buffer bx = dev.upload(dtypeOf<T>(), x);
        ts::Buffer bo = dev.alloc(ts::DType::I32, M);
        k.launch(ts::Dim3(M), bo, bx, int32_t(n));
        REQUIRE(bo.read<int32_t>() == want);
      }
    }
}

template <class T>
void checkTileArgmin() {
  for (const ts::Device& dev : devices())
    for (auto [R, C] : {std::pair{4, 8}, std::pair{6, 10}, std::pair{32, 64}, std::pair{16, 256}}) {
      ts::CompiledKernel k = ts::compile(tileArgmin<T>(R, C), dev);
      for (auto [rows, cols] : {std::pair{R, C}, std::pair{R - 1, C - 3}}) {
        INFO(dev.name() << ", " << typeName<T>() << ", tile " << R << "x" << C << ", " << rows << "x" << cols);
        auto x = tiedValues<T>(rows, cols, unsigned(R * C + rows), 4);
        std::vector<int32_t> byCol(static_cast<size_t>(cols)), byRow(static_cast<size_t>(rows));
        for (int c = 0; c < cols; ++c) byCol[size_t(c)] = argminRef(x, size_t(c), size_t(cols), rows);
        for (int r = 0; r < rows; ++r) byRow[size_t(r)] = argminRef(x, size_t(r) * size_t(cols), 1, cols);
        ts::Buffer bx = dev.upload(dtypeOf<T>(), x);
        ts::Buffer bc = dev.alloc(ts::DType::I32, size_t(cols));
        ts::Buffer br = dev.alloc(ts::DType::I32, size_t(rows));
        k.launch(ts::Dim3(1), bc, br, bx, int32_t(rows), int32_t(cols));
        CHECK(bc.read<int32_t>() == byCol);
        CHECK(br.read<int32_t>() == byRow);
      }
    }
}

// ---------------------------------------------------------------- gather

/// gather(src, idx, axis) of a 2-D src tile R x C holding a rows x cols
/// matrix (the rest 0, the load's `other`), idx an IR x IC tile holding an
/// irows x icols matrix; out is irows x icols.
template <class T, class I>
ts::Kernel gather2d(int R, int C, int IR, int IC, int axis) {
  return ts::kernel("gather_2d", [=](ts::Ptr<T> out, ts::Ptr<const T> src, ts::Ptr<const I> idx, ts::Int rows,
                                     ts::Int cols, ts::Int irows, ts::Int icols) {
    auto r = ts::expand_dims(ts::arange(R), 1);
    auto c = ts::expand_dims(ts::arange(C), 0);
    auto x = ts::load(src + r * cols + c, (r < rows) & (c < cols), 0);
    auto ir = ts::expand_dims(ts::arange(IR), 1);
    auto ic = ts::expand_dims(ts::arange(IC), 0);
    auto im = (ir < irows) & (ic < icols);
    auto i = ts::load(idx + ir * icols + ic, im, 0);
    ts::store(out + ir * icols + ic, ts::gather(x, i, axis), im);
  });
}

/// The same over 1-D tiles: src B (n valid), idx K (k valid).
template <class T, class I>
ts::Kernel gather1d(int B, int K) {
  return ts::kernel("gather_1d", [=](ts::Ptr<T> out, ts::Ptr<const T> src, ts::Ptr<const I> idx, ts::Int n, ts::Int k) {
    auto c = ts::arange(B);
    auto x = ts::load(src + c, c < n, 0);
    auto j = ts::arange(K);
    auto i = ts::load(idx + j, j < k, 0);
    ts::store(out + j, ts::gather(x, i, -1), j < k);
  });
}

template <class T>
std::vector<T> distinctValues(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> d(-100, 100);
    for (auto& x : v) x = T(d(rng));
    if (n > 2) v[1] = T(-0.0);
  } else {
    std::uniform_int_distribution<int64_t> d(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
    for (auto& x : v) x = T(d(rng));
  }
  return v;
}

/// Indices in [lo, hi], as I (clamped to I's range).
template <class I>
std::vector<I> indices(size_t n, int64_t lo, int64_t hi, unsigned seed) {
  std::mt19937 rng(seed);
  lo = std::max<int64_t>(lo, int64_t(std::numeric_limits<I>::min()));
  hi = std::min<int64_t>(hi, int64_t(std::numeric_limits<I>::max()));
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<I> v(n);
  for (auto& x : v) x = I(d(rng));
  return v;
}

struct GatherCase {
  int R, C, rows, cols, axis, K, kValid;  // K x C (axis 0) or R x K (axis 1) index tile, kValid of K used
};

/// Runs gather2d and compares the lanes whose index is inside the tile
/// (`outOfRange`: indices spill 40 past both ends; those lanes are only
/// required not to fault).
template <class T, class I>
void checkGather2d(const ts::Device& dev, const GatherCase& g, bool outOfRange) {
  const int IR = g.axis == 0 ? g.K : g.R, IC = g.axis == 0 ? g.C : g.K;
  const int irows = g.axis == 0 ? g.kValid : g.rows, icols = g.axis == 0 ? g.cols : g.kValid;
  const int extent = g.axis == 0 ? g.R : g.C;  // the tile's extent along the axis
  INFO(dev.name() << ", " << typeName<T>() << " by " << typeName<I>() << ", axis " << g.axis << ", src tile " << g.R
                  << "x" << g.C << " (" << g.rows << "x" << g.cols << "), index tile " << IR << "x" << IC << " ("
                  << irows << "x" << icols << ")" << (outOfRange ? ", indices out of range" : ""));
  auto src = distinctValues<T>(size_t(g.rows) * size_t(g.cols), unsigned(g.R * 7 + g.C));
  auto idx = indices<I>(size_t(irows) * size_t(icols), outOfRange ? -40 : 0, extent - 1 + (outOfRange ? 40 : 0),
                        unsigned(g.K * 13 + g.axis));
  // The tile as loaded: the matrix, 0 beyond it.
  auto tileAt = [&](int64_t r, int64_t c) {
    return r < g.rows && c < g.cols ? src[size_t(r) * size_t(g.cols) + size_t(c)] : T(0);
  };
  ts::CompiledKernel k = ts::compile(gather2d<T, I>(g.R, g.C, IR, IC, g.axis), dev);
  ts::Buffer bs = dev.upload(dtypeOf<T>(), src);
  ts::Buffer bi = dev.upload(dtypeOf<I>(), idx);
  ts::Buffer bo = dev.alloc(dtypeOf<T>(), idx.size());
  k.launch(ts::Dim3(1), bo, bs, bi, int32_t(g.rows), int32_t(g.cols), int32_t(irows), int32_t(icols));
  auto got = bo.read<T>();
  int checked = 0;
  for (int r = 0; r < irows; ++r)
    for (int c = 0; c < icols; ++c) {
      const size_t at = size_t(r) * size_t(icols) + size_t(c);
      const int64_t i = int64_t(idx[at]);
      if (i < 0 || i >= extent) continue;
      T want = g.axis == 0 ? tileAt(i, c) : tileAt(r, i);
      INFO("out[" << r << ", " << c << "] with index " << i);
      REQUIRE(std::memcmp(&got[at], &want, sizeof(T)) == 0);
      ++checked;
    }
  CHECK(checked > 0);
}

template <class T, class I>
void checkGather() {
  const GatherCase cases[] = {
      {8, 16, 8, 16, 1, 16, 16},    // powers of two, index as wide as the source
      {8, 16, 8, 16, 1, 4, 4},      // fewer indices than the row
      {8, 16, 8, 16, 0, 32, 32},    // more indices than the column
      {6, 10, 5, 7, 1, 3, 3},       // no power of two, ragged
      {6, 10, 5, 7, 0, 12, 9},      // axis 0, ragged
      {64, 64, 61, 50, 1, 64, 64},  // more elements than threads
      {32, 128, 32, 128, 0, 16, 16},
  };
  for (const ts::Device& dev : devices())
    for (const GatherCase& g : cases) checkGather2d<T, I>(dev, g, false);
}

template <class T, class I>
void checkGather1d(const ts::Device& dev, int B, int n, int K, int k, bool outOfRange) {
  INFO(dev.name() << ", " << typeName<T>() << " by " << typeName<I>() << ", 1-D: src " << B << " (" << n << "), index "
                  << K << " (" << k << ")" << (outOfRange ? ", indices out of range" : ""));
  auto src = distinctValues<T>(size_t(n), unsigned(B + n));
  auto idx = indices<I>(size_t(k), outOfRange ? -1000 : 0, B - 1 + (outOfRange ? 1000 : 0), unsigned(K + k));
  ts::CompiledKernel kern = ts::compile(gather1d<T, I>(B, K), dev);
  ts::Buffer bs = dev.upload(dtypeOf<T>(), src);
  ts::Buffer bi = dev.upload(dtypeOf<I>(), idx);
  ts::Buffer bo = dev.alloc(dtypeOf<T>(), idx.size());
  kern.launch(ts::Dim3(1), bo, bs, bi, int32_t(n), int32_t(k));
  auto got = bo.read<T>();
  for (size_t j = 0; j < idx.size(); ++j) {
    const int64_t i = int64_t(idx[j]);
    if (i < 0 || i >= B) continue;
    T want = i < n ? src[size_t(i)] : T(0);
    INFO("out[" << j << "] with index " << i);
    REQUIRE(std::memcmp(&got[j], &want, sizeof(T)) == 0);
  }
}

// ---------------------------------------------------------- join and split

/// Elementwise pointer offsets of an R x C x 2 tile of an interleaved
/// rows x cols x 2 array, and its mask.
struct Pairs {
  ts::Tensor offsets, mask;
};
Pairs pairsOf(int R, int C, const ts::Tensor& rows, const ts::Tensor& cols) {
  auto r = ts::expand_dims(ts::expand_dims(ts::arange(R), 1), 2);
  auto c = ts::expand_dims(ts::expand_dims(ts::arange(C), 0), 2);
  auto k = ts::expand_dims(ts::expand_dims(ts::arange(2), 0), 0);
  return {(r * cols + c) * 2 + k, (r < rows) & (c < cols) & (k < 2)};
}

/// out (rows x cols x 2) = join(a, b); sums (rows x cols) = sum over the
/// pair of join(a * 2, b) - the pair split again: (a * 2 + b) - (a * 2 + b)
/// computed through different layouts, i.e. 0 where all is well.
template <class T>
ts::Kernel joinKernel(int R, int C) {
  return ts::kernel("join_2d", [=](ts::Ptr<T> out, ts::Ptr<T> sums, ts::Ptr<const T> pa, ts::Ptr<const T> pb,
                                   ts::Int rows, ts::Int cols) {
    auto r = ts::expand_dims(ts::arange(R), 1);
    auto c = ts::expand_dims(ts::arange(C), 0);
    auto m = (r < rows) & (c < cols);
    auto a = ts::load(pa + r * cols + c, m, 0);
    auto b = ts::load(pb + r * cols + c, m, 0);
    Pairs p = pairsOf(R, C, rows, cols);
    ts::store(out + p.offsets, ts::join(a, b), p.mask);
    auto j = ts::join(a * 2, b);
    auto [lo, hi] = ts::split(j);
    ts::store(sums + r * cols + c, ts::sum(j, -1) - (lo + hi), m);
  });
}

/// lo, hi (rows x cols) = split of the interleaved rows x cols x 2 array.
template <class T>
ts::Kernel splitKernel(int R, int C) {
  return ts::kernel("split_2d", [=](ts::Ptr<T> lo, ts::Ptr<T> hi, ts::Ptr<const T> in, ts::Int rows, ts::Int cols) {
    Pairs p = pairsOf(R, C, rows, cols);
    auto x = ts::load(in + p.offsets, p.mask, 0);
    auto [a, b] = ts::split(x);
    auto r = ts::expand_dims(ts::arange(R), 1);
    auto c = ts::expand_dims(ts::arange(C), 0);
    auto m = (r < rows) & (c < cols);
    ts::store(lo + r * cols + c, a, m);
    ts::store(hi + r * cols + c, b, m);
  });
}

/// join(a, b) stored planar (all of a, then all of b: the pair's dim is
/// not the contiguous one, so the store's layout spreads each pair over two
/// threads), and split of a planar array loaded the same way.
template <class T>
ts::Kernel planarKernel(int R, int C) {
  return ts::kernel("planar_join_split", [=](ts::Ptr<T> out, ts::Ptr<T> lo, ts::Ptr<T> hi, ts::Ptr<const T> pa,
                                             ts::Ptr<const T> pb, ts::Ptr<const T> planar, ts::Int rows, ts::Int cols) {
    auto r = ts::expand_dims(ts::arange(R), 1);
    auto c = ts::expand_dims(ts::arange(C), 0);
    auto m = (r < rows) & (c < cols);
    auto a = ts::load(pa + r * cols + c, m, 0);
    auto b = ts::load(pb + r * cols + c, m, 0);
    auto r3 = ts::expand_dims(r, 2), c3 = ts::expand_dims(c, 2);
    auto k = ts::expand_dims(ts::expand_dims(ts::arange(2), 0), 0);
    auto off = k * (rows * cols) + r3 * cols + c3;
    auto m3 = (r3 < rows) & (c3 < cols) & (k < 2);
    ts::store(out + off, ts::join(a, b), m3);
    auto [p, q] = ts::split(ts::load(planar + off, m3, 0));
    ts::store(lo + r * cols + c, p, m);
    ts::store(hi + r * cols + c, q, m);
  });
}

/// The 1-D forms: out (n x 2) = join(a, b) and, from that same tile,
/// back = split's halves stored one after the other.
template <class T>
ts::Kernel joinSplit1d(int B) {
  return ts::kernel("join_split_1d",
                    [=](ts::Ptr<T> out, ts::Ptr<T> back, ts::Ptr<const T> pa, ts::Ptr<const T> pb, ts::Int n) {
                      auto i = ts::arange(B);
                      auto a = ts::load(pa + i, i < n, 0);
                      auto b = ts::load(pb + i, i < n, 0);
                      auto j = ts::join(a, b);
                      auto e = ts::expand_dims(i, 1);
                      auto k = ts::expand_dims(ts::arange(2), 0);
                      ts::store(out + e * 2 + k, j, (e < n) & (k < 2));
                      auto [x, y] = ts::split(j);
                      ts::store(back + i, x, i < n);
                      ts::store(back + n + i, y, i < n);
                    });
}

template <class T>
void checkJoinSplit() {
  for (const ts::Device& dev : devices()) {
    for (auto [R, C] : {std::pair{4, 8}, std::pair{3, 5}, std::pair{16, 64}, std::pair{32, 128}}) {
      ts::CompiledKernel kj = ts::compile(joinKernel<T>(R, C), dev);
      ts::CompiledKernel ks = ts::compile(splitKernel<T>(R, C), dev);
      ts::CompiledKernel kp = ts::compile(planarKernel<T>(R, C), dev);
      for (auto [rows, cols] : {std::pair{R, C}, std::pair{R - 1, C - 2}}) {
        INFO(dev.name() << ", " << typeName<T>() << ", tile " << R << "x" << C << ", " << rows << "x" << cols);
        const size_t n = size_t(rows) * size_t(cols);
        auto a = distinctValues<T>(n, 3u + unsigned(n));
        auto b = distinctValues<T>(n, 5u + unsigned(n));
        if constexpr (!std::is_floating_point_v<T>)
          for (size_t i = 0; i < n; ++i) a[i] = T(a[i] / 4), b[i] = T(b[i] / 4);  // a * 2 + b fits
        std::vector<T> pairs(2 * n);
        for (size_t i = 0; i < n; ++i) pairs[2 * i] = a[i], pairs[2 * i + 1] = b[i];
        ts::Buffer ba = dev.upload(dtypeOf<T>(), a), bb = dev.upload(dtypeOf<T>(), b);
        ts::Buffer bo = dev.alloc(dtypeOf<T>(), 2 * n), bz = dev.alloc(dtypeOf<T>(), n);
        kj.launch(ts::Dim3(1), bo, bz, ba, bb, int32_t(rows), int32_t(cols));
        CHECK(sameBits(bo.read<T>(), pairs));
        for (T z : bz.read<T>()) REQUIRE(z == T(0));
        ts::Buffer bp = dev.upload(dtypeOf<T>(), pairs);
        ts::Buffer blo = dev.alloc(dtypeOf<T>(), n), bhi = dev.alloc(dtypeOf<T>(), n);
        ks.launch(ts::Dim3(1), blo, bhi, bp, int32_t(rows), int32_t(cols));
        CHECK(sameBits(blo.read<T>(), a));
        CHECK(sameBits(bhi.read<T>(), b));
        std::vector<T> planar(a);
        planar.insert(planar.end(), b.begin(), b.end());
        ts::Buffer bpl = dev.upload(dtypeOf<T>(), planar);
        ts::Buffer bpo = dev.alloc(dtypeOf<T>(), 2 * n), bplo = dev.alloc(dtypeOf<T>(), n),
                   bphi = dev.alloc(dtypeOf<T>(), n);
        kp.launch(ts::Dim3(1), bpo, bplo, bphi, ba, bb, bpl, int32_t(rows), int32_t(cols));
        CHECK(sameBits(bpo.read<T>(), planar));
        CHECK(sameBits(bplo.read<T>(), a));
        CHECK(sameBits(bphi.read<T>(), b));
      }
    }
    for (int B : {8, 100, 512}) {
      ts::CompiledKernel k = ts::compile(joinSplit1d<T>(B), dev);
      for (int n : {B, B - 3}) {
        INFO(dev.name() << ", " << typeName<T>() << ", 1-D tile " << B << ", n = " << n);
        auto a = distinctValues<T>(size_t(n), 11u), b = distinctValues<T>(size_t(n), 12u);
        std::vector<T> pairs(2 * size_t(n)), back(a);
        for (size_t i = 0; i < size_t(n); ++i) pairs[2 * i] = a[i], pairs[2 * i + 1] = b[i];
        back.insert(back.end(), b.begin(), b.end());
        ts::Buffer ba = dev.upload(dtypeOf<T>(), a), bb = dev.upload(dtypeOf<T>(), b);
        ts::Buffer bo = dev.alloc(dtypeOf<T>(), 2 * size_t(n)), bk = dev.alloc(dtypeOf<T>(), 2 * size_t(n));
        k.launch(ts::Dim3(1), bo, bk, ba, bb, int32_t(n));
        CHECK(sameBits(bo.read<T>(), pairs));
        CHECK(sameBits(bk.read<T>(), back));
      }
    }
  }
}

/// Every kernel of this file at one of its shapes, for the GPU checks.
std::vector<std::pair<std::string, ts::Kernel>> gpuKernels() {
  return {
      {"row_argmin f32", rowArgmin<float>(1024)},
      {"tile_argmin u32", tileArgmin<uint32_t>(16, 256)},
      {"gather_2d axis 1", gather2d<float, int32_t>(64, 64, 64, 64, 1)},
      {"gather_2d axis 0", gather2d<int16_t, int64_t>(6, 10, 12, 10, 0)},
      {"gather_1d", gather1d<int32_t, uint8_t>(100, 64)},
      {"join_2d", joinKernel<float>(32, 128)},
      {"split_2d", splitKernel<int32_t>(16, 64)},
      {"join_split_1d", joinSplit1d<float>(512)},
      {"planar_join_split", planarKernel<int8_t>(32, 64)},
  };
}

}  // namespace

TEST_CASE("argmin: rows of every length with ties and NaN match a first-minimum loop", "[tileops][argmin][emu]") {
  checkRowArgmin<float>();
  checkRowArgmin<int32_t>();
  checkRowArgmin<uint32_t>();
}

TEST_CASE("argmin: along both axes of 2-D tiles, ragged and not", "[tileops][argmin][emu]") {
  checkTileArgmin<float>();
  checkTileArgmin<int16_t>();
  checkTileArgmin<uint32_t>();
}

TEST_CASE("argmin: the first NaN wins, ties go to the lowest index, -0 equals +0", "[tileops][argmin][emu]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Hand-written rows of 8 and their answers.
  const std::vector<std::pair<std::vector<float>, int32_t>> rows = {
      {{3, 1, 2, 1, 5, 1, 9, 1}, 1},
      {{0.f, -0.f, 0.f, -0.f, 1, 1, 1, 1}, 0},
      {{5, 4, nan, 3, nan, -inf, 2, 1}, 2},
      {{nan, nan, nan, nan, nan, nan, nan, nan}, 0},
      {{inf, inf, inf, inf, inf, inf, inf, inf}, 0},
      {{1, 2, 3, 4, 5, 6, 7, -inf}, 7},
  };
  std::vector<float> x;
  std::vector<int32_t> want;
  for (auto& [r, w] : rows) {
    x.insert(x.end(), r.begin(), r.end());
    want.push_back(w);
  }
  for (const ts::Device& dev : devices()) {
    INFO(dev.name());
    ts::CompiledKernel k = ts::compile(rowArgmin<float>(8), dev);
    ts::Buffer bx = dev.upload(ts::DType::F32, x);
    ts::Buffer bo = dev.alloc(ts::DType::I32, want.size());
    k.launch(ts::Dim3(int(want.size())), bo, bx, int32_t(8));
    CHECK(bo.read<int32_t>() == want);
  }
}

TEST_CASE("gather: along axis 0 and 1 of 2-D tiles matches indexing the source", "[tileops][gather][emu]") {
  checkGather<float, int32_t>();
  checkGather<int32_t, int64_t>();
  checkGather<int16_t, uint8_t>();
}

TEST_CASE("gather: 1-D tiles, and indices out of range never fault", "[tileops][gather][emu]") {
  for (const ts::Device& dev : devices()) {
    for (auto [B, n, K, k] :
         {std::array{16, 16, 16, 16}, std::array{100, 97, 300, 290}, std::array{512, 512, 64, 64}}) {
      checkGather1d<float, int32_t>(dev, B, n, K, k, false);
      checkGather1d<double, uint16_t>(dev, B, n, K, k, false);
      checkGather1d<float, int32_t>(dev, B, n, K, k, true);
      checkGather1d<int8_t, int64_t>(dev, B, n, K, k, true);
    }
    for (int axis : {0, 1}) {
      checkGather2d<float, int32_t>(dev, {8, 16, 8, 16, axis, 16, 16}, true);
      checkGather2d<uint32_t, int8_t>(dev, {6, 10, 5, 7, axis, 12, 9}, true);
    }
  }
}

TEST_CASE("join and split: pairs interleave and come apart on every backend", "[tileops][join][split][emu]") {
  checkJoinSplit<float>();
  checkJoinSplit<int32_t>();
  checkJoinSplit<int8_t>();
}

TEST_CASE("tile ops: the PTX assembles with ptxas for sm_80 and sm_90a without spills", "[tileops][gpu][ptxas]") {
  if (::access("/usr/local/cuda/bin/ptxas", X_OK) != 0) {
    WARN("SKIP: ptxas not found (install the CUDA toolkit at /usr/local/cuda); PTX not assembled");
    return;
  }
  for (auto& [name, kernel] : gpuKernels())
    for (const char* sm : {"sm_80", "sm_90a"}) {
      INFO(name << " on " << sm);
      ts::Target target = ts::Target::parse(std::string("nvptx:") + sm);
      testptx::PtxasFigures f = testptx::ptxasFigures(ts::compile(kernel, target));
      INFO(f.report);
      CHECK(f.spillBytes == 0);
    }
}

TEST_CASE("tile ops: the AMDGPU code links with LLD for gfx942 and gfx1100", "[tileops][gpu][amdgpu]") {
  for (auto& [name, kernel] : gpuKernels())
    for (auto [gfx, wave] : {std::pair{"gfx942", 64}, std::pair{"gfx1100", 32}}) {
      INFO(name << " on " << gfx);
      ts::Target target = ts::Target::parse(std::string("amdgpu:") + gfx);
      testamd::checkCodeObject(ts::compile(kernel, target), wave);
    }
}

TEST_CASE("gather: its shared-memory scratch is planned and counted against the target's limit",
          "[tileops][gather][gpu]") {
  // The source goes through shared memory: 64x64 f32 = 16 KiB fits; 128x128
  // f64 = 128 KiB is over gfx942's 64 KiB, and the error names the gather.
  ts::Target gfx = ts::Target::parse("amdgpu:gfx942");
  std::string report = ts::compile(gather2d<float, int32_t>(64, 64, 64, 64, 0), gfx).dump(ts::Stage::Resources);
  INFO(report);
  std::smatch m;
  REQUIRE(std::regex_search(report, m, std::regex(R"(group segment (\d+) bytes)")));
  CHECK(std::stoll(m[1]) >= 64 * 64 * 4);
  try {
    (void)ts::compile(gather2d<double, int32_t>(128, 128, 128, 128, 1), gfx);
    FAIL("a 128 KiB gather scratch was accepted on gfx942");
  } catch (const ts::ResourceError& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("131072 bytes at offset 0: scratch of gather") != std::string::npos);
  }
}
