// tp_mlp: a tensor-parallel MLP block, Y = GELU(X @ W1) @ W2, over a group
// of devices (Megatron-style).
//
// X (tokens x hidden) is on every rank. W1 (hidden x ffn) is split by
// columns and W2 (ffn x hidden) by rows, so rank r holds W1[:, r-th slice]
// and W2[r-th slice, :]: its column-parallel GEMM (with the GELU fused in
// the epilogue) gives its slice of the hidden activation, its row-parallel
// GEMM a partial Y, and an all-reduce (sum) of the partials gives every
// rank the whole Y. The tokens are processed in chunks: chunk c's GEMMs run
// on a compute stream, and its all-reduce on a communication stream that
// waits for an event recorded after them -- so chunk c's all-reduce
// overlaps chunk c + 1's GEMMs.
//
// Run alone, it forms a group of `ranks` copies of the device in this
// process; under `mpirun -np N` each process is one rank (CPU devices,
// MPI). Every rank checks the whole Y against a plain C++ reference of the
// unsplit block, in double.
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

class TpMlp final : public parallel::Plan {
 public:
  explicit TpMlp(const RunContext& ctx) : ctx_(ctx) {
    sh_ = parallel::parseShape(ctx, "tp_mlp", {256, 256, 1024, 2, 4}, false);
    members_ = parallel::group(ctx, sh_, "tp_mlp");
    parallel::checkRanks(sh_, "tp_mlp", false);
    const int64_t T = sh_.tokens, H = sh_.hidden, F = sh_.ffn, Fp = F / sh_.ranks, R = sh_.rowsPerChunk();
    b1_ = parallel::blocksFor(ctx.device, R, Fp);
    b2_ = parallel::blocksFor(ctx.device, R, H);
    gemm1_ = compile(gemmF32(b1_, Activation::GELU, false, "tp_mlp"), ctx.device, ctx.options);
    gemm2_ = compile(gemmF32(b2_, Activation::None, false, "tp_mlp_down"), ctx.device, ctx.options);

    // The same inputs on every rank (the seed); each keeps its slices.
    std::mt19937_64 rng(ctx.seed);
    x_ = randomVector(size_t(T * H), rng);
    w1_ = randomVector(size_t(H * F), rng);
    w2_ = randomVector(size_t(F * H), rng);
    for (const rt::Communicator& c : members_) {
      const int r = c.rank();
      std::vector<float> w1r(size_t(H * Fp)), w2r(size_t(Fp * H));
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < Fp; ++j) w1r[size_t(i * Fp + j)] = w1_[size_t(i * F + r * Fp + j)];
      std::copy(w2_.begin() + r * Fp * H, w2_.begin() + (r + 1) * Fp * H, w2r.begin());
      Device d = c.device();
      Rank m{c,
             d.createStream(),
             d.createStream(),
             d.upload(DType::F32, x_),
             d.upload(DType::F32, w1r),
             d.upload(DType::F32, w2r),
             d.alloc(DType::F32, size_t(T * Fp)),
             d.alloc(DType::F32, size_t(T * H)),
             {}};
      for (int k = 0; k < sh_.chunks; ++k) m.ready.push_back(d.createEvent());
      ranks_.push_back(std::move(m));
    }
  }

  const rt::Communicator& member() const override { return members_[0]; }

  void step(Mode mode) override {
    const int64_t H = sh_.hidden, Fp = sh_.ffn / sh_.ranks, R = sh_.rowsPerChunk();
    for (int k = 0; k < sh_.chunks; ++k) {
      const int64_t row = k * R;
      for (Rank& m : ranks_) {
        const rt::Stream& compute = mode == Mode::Serial ? m.comms : m.compute;
        if (mode != Mode::CommOnly) {
          // h[chunk] = GELU(x[chunk] @ w1_r); y[chunk] = h[chunk] @ w2_r (a partial sum).
          gemm1_.launchWith(gemmGrid(b1_, R, Fp),
                            {at(m.h, row * Fp), at(m.x, row * H), m.w1, int32_t(R), int32_t(Fp), int32_t(H)},
                            parallel::on(ctx_, compute));
          gemm2_.launchWith(gemmGrid(b2_, R, H),
                            {at(m.y, row * H), at(m.h, row * Fp), m.w2, int32_t(R), int32_t(H), int32_t(Fp)},
                            parallel::on(ctx_, compute));
        }
        if (mode == Mode::Overlapped) {
          m.ready[size_t(k)].record(m.compute);
          m.comms.wait(m.ready[size_t(k)]);
        }
        if (mode != Mode::ComputeOnly) {
          // The chunk's partial sums, summed over the ranks, in place.
          rt::BufferView chunk(m.y, size_t(row * H), size_t(R * H));
          m.comm.allReduce(chunk, chunk, rt::ReduceOp::Sum, m.comms);
        }
      }
    }
    for (Rank& m : ranks_) {
      m.compute.synchronize();
      m.comms.synchronize();
    }
  }

  CheckResult check() override {
    const int64_t T = sh_.tokens, H = sh_.hidden, F = sh_.ffn;
    // Y = GELU(X W1) W2 in double, with the f32 error bound of each
    // element: the first GEMM's bound carried through the second (GELU's
    // slope is at most 1.13), plus the second GEMM's own (its F terms and
    // the all-reduce's ranks).
    std::vector<double> h(size_t(T * F)), eh(size_t(T * F));
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < F; ++j) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < H; ++k) {
          const double p = double(x_[size_t(i * H + k)]) * w1_[size_t(k * F + j)];
          s += p;
          mag += std::fabs(p);
        }
        h[size_t(i * F + j)] = activationRef(s, 2);
        eh[size_t(i * F + j)] = 1.2 * parallel::sumBound(H, mag) + 1e-6 * std::fabs(s) + 1e-7;
      }
    std::vector<double> want(size_t(T * H)), bound(size_t(T * H));
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < H; ++j) {
        double s = 0, mag = 0, carried = 0;
        for (int64_t k = 0; k < F; ++k) {
          const double w = w2_[size_t(k * H + j)];
          s += h[size_t(i * F + k)] * w;
          mag += std::fabs(h[size_t(i * F + k)] * w);
          carried += eh[size_t(i * F + k)] * std::fabs(w);
        }
        want[size_t(i * H + j)] = s;
        bound[size_t(i * H + j)] = parallel::sumBound(F + sh_.ranks, mag) + carried + 1e-6;
      }
    CheckResult r;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const std::string what = "y on rank " + std::to_string(ranks_[i].comm.rank());
      CheckResult one = compareWith(ranks_[i].y.read<float>(), want, parallel::sumBound(F, 1.0), what.c_str(),
                                    "|got - want| <= the f32 sums' error bound + the carried rounding of h + 1e-6",
                                    [&](size_t e) { return bound[e]; });
      r = i == 0 ? one : merge(r, one);
    }
    return parallel::agree(members_, r);
  }

 private:
  struct Rank {
    rt::Communicator comm;
    rt::Stream compute, comms;
    Buffer x, w1, w2, h, y;
    std::vector<rt::Event> ready;  // chunk k's GEMMs are done
  };
  RunContext ctx_;
  parallel::Shape sh_{};
  std::vector<rt::Communicator> members_;
  GemmBlocks b1_, b2_;
  CompiledKernel gemm1_, gemm2_;
  std::vector<float> x_, w1_, w2_;
  std::vector<Rank> ranks_;
};

CheckResult run(const RunContext& ctx) {
  TpMlp plan(ctx);
  plan.step(Mode::Overlapped);
  return plan.check();
}

}  // namespace

std::unique_ptr<parallel::Plan> parallel::makeTpMlp(const RunContext& ctx) { return std::make_unique<TpMlp>(ctx); }

Example tpMlpExample() {
  Example e;
  e.name = "tp_mlp";
  e.summary =
      "tensor-parallel MLP: column-parallel GEMM + GELU, row-parallel GEMM, all-reduce; chunked so each chunk's "
      "all-reduce overlaps the next chunk's GEMMs (in-process group, or one rank per process under mpirun)";
  // The column-parallel GEMM with its fused GELU.
  e.kernel = [] { return gemmF32(gemmDefaultBlocks(Device::cpu()), Activation::GELU, false, "tp_mlp"); };
  e.gpuKernel = [](const Target& t) { return gemmF32(gemmDefaultBlocks(t), Activation::GELU, false, "tp_mlp"); };
  e.runWhole = run;
  // Two, three and four ranks; ragged tiles; one chunk and several.
  e.testShapes = {{32, 32, 64, 2, 2}, {48, 40, 96, 3, 3}, {16, 8, 16, 4, 1}};
  return e;
}

}  // namespace tessera::examples

// Usage: tp_mlp [--dump] [tokens hidden ffn ranks [chunks]]
//        mpirun -np N tp_mlp [tokens hidden ffn 0 [chunks]]
TESSERA_EXAMPLE_PROGRAM(tpMlpExample)
