// sp_rmsnorm: a sequence-parallel RMSNorm after a row-parallel GEMM, over a
// group of devices (Megatron-style sequence parallelism).
//
// Rank r holds a slice of the inner dimension: H_r (tokens x ffn/P) and
// W_r (ffn/P x hidden), so its GEMM Z_r = H_r @ W_r is a partial sum of
// Z = H @ W. Instead of all-reducing Z, a reduce-scatter (sum) leaves each
// rank the whole sum for 1/P of the tokens, the RMSNorm runs on those
// tokens only (no rank normalises a token twice), and an all-gather gives
// every rank the normalised tokens. The tokens are processed in chunks:
// chunk c's GEMM runs on a compute stream; its reduce-scatter, norm and
// all-gather on a communication stream that waits for an event recorded
// after the GEMM -- so they overlap chunk c + 1's GEMM.
//
// Run alone, it forms a group of `ranks` copies of the device in this
// process; under `mpirun -np N` each process is one rank (CPU devices,
// MPI). Every rank checks the whole output against a plain C++ reference of
// the unsplit computation, in double.
//
// Shape: {tokens, hidden, ffn, ranks[, chunks]}; default {256, 256, 1024, 2, 4}.
#include <cmath>
#include <random>

#include "parallel.h"

namespace ts = tessera;

namespace tessera::examples {
namespace {

using parallel::at;
using parallel::Mode;

constexpr float kEps = 1e-5f;

class SpRmsnorm final : public parallel::Plan {
 public:
  explicit SpRmsnorm(const RunContext& ctx) : ctx_(ctx) {
    sh_ = parallel::parseShape(ctx, "sp_rmsnorm", {256, 256, 1024, 2, 4}, true);
    members_ = parallel::group(ctx, sh_, "sp_rmsnorm");
    parallel::checkRanks(sh_, "sp_rmsnorm", true);
    const int64_t T = sh_.tokens, H = sh_.hidden, F = sh_.ffn, Fp = F / sh_.ranks, R = sh_.rowsPerChunk();
    bg_ = parallel::blocksFor(ctx.device, R, H);
    gemm_ = compile(gemmF32(bg_, Activation::None, false, "sp_rmsnorm_proj"), ctx.device, ctx.options);
    norm_ = compile(rmsnorm(nextPow2(H), "sp_rmsnorm"), ctx.device, ctx.options);

    std::mt19937_64 rng(ctx.seed);
    h_ = randomVector(size_t(T * F), rng);
    w_ = randomVector(size_t(F * H), rng);
    weight_ = randomVector(size_t(H), rng, 0.5f, 1.5f);
    for (const rt::Communicator& c : members_) {
      const int r = c.rank();
      std::vector<float> hr(size_t(T * Fp)), wr(size_t(Fp * H));
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < Fp; ++j) hr[size_t(i * Fp + j)] = h_[size_t(i * F + r * Fp + j)];
      std::copy(w_.begin() + r * Fp * H, w_.begin() + (r + 1) * Fp * H, wr.begin());
      Device d = c.device();
      const size_t mine = size_t(T / sh_.ranks * H);  // this rank's tokens of every chunk
      Rank m{c,
             d.createStream(),
             d.createStream(),
             d.upload(DType::F32, hr),
             d.upload(DType::F32, wr),
             d.upload(DType::F32, weight_),
             d.alloc(DType::F32, size_t(T * H)),
             d.alloc(DType::F32, mine),
             d.alloc(DType::F32, mine),
             d.alloc(DType::F32, size_t(T * H)),
             {}};
      for (int k = 0; k < sh_.chunks; ++k) m.ready.push_back(d.createEvent());
      ranks_.push_back(std::move(m));
    }
  }

  const rt::Communicator& member() const override { return members_[0]; }

  void step(Mode mode) override {
    const int64_t H = sh_.hidden, Fp = sh_.ffn / sh_.ranks, R = sh_.rowsPerChunk(), Rp = R / sh_.ranks;
    for (int k = 0; k < sh_.chunks; ++k) {
      const int64_t row = k * R;
      for (Rank& m : ranks_) {
        const rt::Stream& compute = mode == Mode::Serial ? m.comms : m.compute;
        // The norm depends on the reduce-scatter: it runs on the
        // communication stream, except when timing the compute alone.
        const rt::Stream& normStream = mode == Mode::ComputeOnly ? m.compute : m.comms;
        if (mode != Mode::CommOnly)  // partial[chunk] = h_r[chunk] @ w_r
          gemm_.launchWith(gemmGrid(bg_, R, H),
                           {at(m.partial, row * H), at(m.h, row * Fp), m.w, int32_t(R), int32_t(H), int32_t(Fp)},
                           parallel::on(ctx_, compute));
        if (mode == Mode::Overlapped) {
          m.ready[size_t(k)].record(m.compute);
          m.comms.wait(m.ready[size_t(k)]);
        }
        const rt::BufferView part(m.partial, size_t(row * H), size_t(R * H));
        const rt::BufferView mine(m.mine, size_t(k * Rp * H), size_t(Rp * H));
        const rt::BufferView normed(m.normed, size_t(k * Rp * H), size_t(Rp * H));
        if (mode != Mode::ComputeOnly) m.comm.reduceScatter(part, mine, rt::ReduceOp::Sum, m.comms);
        if (mode != Mode::CommOnly)
          norm_.launchWith(Dim3(uint32_t(Rp)),
                           {at(m.normed, k * Rp * H), at(m.mine, k * Rp * H), m.weight, int32_t(H), kEps},
                           parallel::on(ctx_, normStream));
        if (mode != Mode::ComputeOnly)
          m.comm.allGather(normed, rt::BufferView(m.out, size_t(row * H), size_t(R * H)), m.comms);
      }
    }
    for (Rank& m : ranks_) {
      m.compute.synchronize();
      m.comms.synchronize();
    }
  }

  CheckResult check() override {
    const int64_t T = sh_.tokens, H = sh_.hidden, F = sh_.ffn;
    // Z = H W, then each row normalised, in double. Bound: the GEMM's f32
    // error e (F terms and the reduce-scatter's ranks) carried through the
    // norm: |dy_j| <= |w_j| / rms * (e_j + |z_j| / rms * max e), doubled,
    // plus a few ulp for rsqrt.
    std::vector<double> want(size_t(T * H)), bound(size_t(T * H));
    std::vector<double> z(static_cast<size_t>(H)), e(static_cast<size_t>(H));
    for (int64_t i = 0; i < T; ++i) {
      double ss = 0, emax = 0;
      for (int64_t j = 0; j < H; ++j) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < F; ++k) {
          const double p = double(h_[size_t(i * F + k)]) * w_[size_t(k * H + j)];
          s += p;
          mag += std::fabs(p);
        }
        z[size_t(j)] = s;
        e[size_t(j)] = parallel::sumBound(F + sh_.ranks, mag);
        ss += s * s;
        emax = std::max(emax, e[size_t(j)]);
      }
      const double rms = std::sqrt(ss / double(H) + kEps);
      for (int64_t j = 0; j < H; ++j) {
        const double w = weight_[size_t(j)], y = z[size_t(j)] / rms * w;
        want[size_t(i * H + j)] = y;
        bound[size_t(i * H + j)] =
            2 * std::fabs(w) / rms * (e[size_t(j)] + std::fabs(z[size_t(j)]) / rms * emax) + 4e-6 * std::fabs(y) + 1e-6;
      }
    }
    CheckResult r;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const std::string what = "out on rank " + std::to_string(ranks_[i].comm.rank());
      CheckResult one = compareWith(ranks_[i].out.read<float>(), want, parallel::sumBound(F, 1.0), what.c_str(),
                                    "|got - want| <= the f32 sums' propagated error + 4e-6 |want| + 1e-6",
                                    [&](size_t k) { return bound[k]; });
      r = i == 0 ? one : merge(r, one);
    }
    return parallel::agree(members_, r);
  }

 private:
  struct Rank {
    rt::Communicator comm;
    rt::Stream compute, comms;
    Buffer h, w, weight;
    Buffer partial;       // tokens x hidden: this rank's partial sums
    Buffer mine, normed;  // its tokens of each chunk, summed, then normalised
    Buffer out;           // tokens x hidden: everyone's normalised tokens
    std::vector<rt::Event> ready;
  };
  RunContext ctx_;
  parallel::Shape sh_{};
  std::vector<rt::Communicator> members_;
  GemmBlocks bg_;
  CompiledKernel gemm_, norm_;
  std::vector<float> h_, w_, weight_;
  std::vector<Rank> ranks_;
};

CheckResult run(const RunContext& ctx) {
  SpRmsnorm plan(ctx);
  plan.step(Mode::Overlapped);
  return plan.check();
}

}  // namespace

std::unique_ptr<parallel::Plan> parallel::makeSpRmsnorm(const RunContext& ctx) {
  return std::make_unique<SpRmsnorm>(ctx);
}

Example spRmsnormExample() {
  Example e;
  e.name = "sp_rmsnorm";
  e.summary =
      "sequence-parallel RMSNorm: row-parallel GEMM, reduce-scatter, norm of this rank's tokens, all-gather; "
      "chunked so each chunk's communication overlaps the next chunk's GEMM";
  e.kernel = [] { return rmsnorm(1024, "sp_rmsnorm"); };
  e.runWhole = run;
  // Two, three and four ranks; ragged tiles; one chunk and several.
  e.testShapes = {{32, 32, 64, 2, 2}, {36, 40, 96, 3, 3}, {16, 8, 16, 4, 1}};
  return e;
}

}  // namespace tessera::examples

// Usage: sp_rmsnorm [--dump] [tokens hidden ffn ranks [chunks]]
//        mpirun -np N sp_rmsnorm [tokens hidden ffn 0 [chunks]]
TESSERA_EXAMPLE_PROGRAM(spRmsnormExample)
