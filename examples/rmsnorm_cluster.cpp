// rmsnorm_cluster: y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight,
// for rows longer than one program holds.
//
// A thread-block cluster of C programs shares each row: program `rank`
// loads columns [rank * BLOCK, (rank + 1) * BLOCK) once, keeps them in
// registers, and puts its partial sum of squares in a shared buffer; after
// a cluster barrier every program adds the C partials from the others'
// shared memory (distributed shared memory), in rank order, so all C agree
// bit for bit, and scales its own columns. x is read once and y written
// once, whatever the row's length (up to C * BLOCK), where one program per
// row would spill or loop over the row twice. A second cluster barrier
// keeps every program's partial alive until the others have read it.
//
// Targets without clusters (the CPU, AMD, sm_80/86/89) run the same kernel
// in clusters of one: C = 1, BLOCK >= the row.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel rmsnormCluster(int BLOCK, int C) {
  return ts::kernel(
             "rmsnorm_cluster", {"y", "x", "weight", "cols", "eps"},
             [=](ts::Ptr<float> y, ts::Ptr<const float> x, ts::Ptr<const float> weight, ts::Int cols, ts::Float eps) {
               auto rank = ts::cluster_rank();
               auto row = ts::program_id(0) / ts::cluster_size();
               auto c = rank * BLOCK + ts::arange(BLOCK);
               auto mask = c < cols;
               auto v = ts::load(x + row * cols + c, mask, 0.0f);
               auto partial = ts::alloc_shared(ts::f32, {1});
               partial.store(ts::splat(ts::sum(v * v, 0), {1}));
               ts::cluster_barrier();
               ts::Tensor ss = partial.remote(0).load();
               for (int r = 1; r < C; ++r) ss = ss + partial.remote(r).load();
               ts::cluster_barrier();
               auto rs = ts::rsqrt(ts::sum(ss, 0) / cols.to(ts::f32) + eps);
               auto w = ts::load(weight + c, mask);
               ts::store(y + row * cols + c, v * rs * w, mask);
             })
      .withCluster({C, 1, 1});
}

ClusterSplit rmsnormClusterSplit(const Target& t, int64_t cols) {
  const int most = clusterBlocksOf(t);
  // 1024 columns a program on a GPU (8 f32 per thread of 4 warps), the
  // row on the CPU; a cluster of up to the target's maximum shares it.
  const int64_t per = most > 1 ? 1024 : cols;
  ClusterSplit s;
  s.programs = static_cast<int>(std::clamp<int64_t>((cols + per - 1) / per, 1, std::max(most, 1)));
  s.block = static_cast<int>(nextPow2((cols + s.programs - 1) / s.programs));
  return s;
}

namespace {
Launch prepare(const RunContext& ctx) {
  const Target t = deviceTarget(ctx.device);
  return rmsnormLaunch(ctx, "rmsnorm_cluster", [t](int64_t rows, int64_t cols) {
    const ClusterSplit s = rmsnormClusterSplit(t, cols);
    return std::pair{rmsnormCluster(s.block, s.programs), Dim3(uint32_t(rows * s.programs))};
  });
}
}  // namespace

Example rmsnormClusterExample() {
  Example e;
  e.name = "rmsnorm_cluster";
  e.summary = "RMSNorm of long rows, each shared by a thread-block cluster (distributed shared memory)";
  e.kernel = [] { return rmsnormCluster(8192, 1); };
  e.gpuKernel = [](const Target& t) {
    const ClusterSplit s = rmsnormClusterSplit(t, 8192);
    return rmsnormCluster(s.block, s.programs);
  };
  e.prepare = prepare;
  // Rows of one program, of a cluster's worth with the last program's
  // columns partly or wholly masked (3000 = 3 x 1024 - 72; 7000 on 7), and
  // of a full cluster of 8 on the targets that have one.
  e.testShapes = {{1, 1}, {7, 1000}, {5, 3000}, {2, 7000}, {3, 8192}, {2, 3}};
  return e;
}

}  // namespace tessera::examples

// Usage: rmsnorm_cluster [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(rmsnormClusterExample)
