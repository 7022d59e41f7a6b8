// What the parallel examples (tp_mlp, sp_rmsnorm) share: the group they run
// on -- the processes of an mpirun job, one member each, or, run alone, a
// group of that many copies of the device in this process -- the shape
// they take, and the verdict every rank agrees on.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support.h"

namespace tessera::examples::parallel {

/// How a parallel example's step runs (its timings in the benchmark):
///   Overlapped   the chunks' GEMMs on a compute stream, their collectives
///                on a communication stream that waits for each chunk's
///                event: chunk c's communication overlaps chunk c + 1's GEMMs
///   Serial       everything on one stream, one after the other
///   ComputeOnly  the GEMMs (and norms) alone
///   CommOnly     the collectives alone
enum class Mode { Overlapped, Serial, ComputeOnly, CommOnly };

/// One example set up on its group, ready to run steps.
class Plan {
 public:
  virtual ~Plan() = default;
  /// Runs one step in `mode` on every member this process drives and waits for it.
  virtual void step(Mode mode) = 0;
  /// Compares the last Overlapped step's output with the plain C++ reference.
  virtual CheckResult check() = 0;
  /// The group's first member here (for barriers between timed steps).
  virtual const rt::Communicator& member() const = 0;
};

std::unique_ptr<Plan> makeTpMlp(const RunContext& ctx);
std::unique_ptr<Plan> makeSpRmsnorm(const RunContext& ctx);

/// {tokens, hidden, ffn, ranks, chunks}: X is tokens x hidden, the MLP's
/// inner width ffn is split over the ranks, and the tokens are processed in
/// `chunks` so that one chunk's communication overlaps the next one's GEMMs.
/// Under mpirun, ranks is the job's size (0, or the same number).
struct Shape {
  int64_t tokens, hidden, ffn;
  int ranks, chunks;
  int64_t rowsPerChunk() const { return tokens / chunks; }
};

inline Shape parseShape(const RunContext& ctx, const char* name, std::vector<int64_t> def, bool rowsSplitOverRanks) {
  std::vector<int64_t> s = ctx.shape.empty() ? def : ctx.shape;
  if (s.size() == 4) s.push_back(def[4]);
  const std::string usage =
      std::string(name) +
      ": the shape is {tokens, hidden, ffn, ranks[, chunks]}: chunks divides tokens, ranks divides ffn" +
      (rowsSplitOverRanks ? " and each chunk's tokens" : "") +
      ", 1 <= ranks <= 64 (under mpirun: 0 or the job's size), every matrix at most 2^26 elements";
  if (s.size() != 5) throw UsageError(usage);
  Shape sh{s[0], s[1], s[2], int(s[3]), int(s[4])};
  const bool ok = sh.tokens >= 1 && sh.hidden >= 1 && sh.ffn >= 1 && sh.ranks >= (rt::launchedByMpi() ? 0 : 1) &&
                  sh.ranks <= 64 && sh.chunks >= 1 && sh.tokens % sh.chunks == 0 &&
                  sh.tokens * sh.hidden <= (1 << 26) && sh.tokens * sh.ffn <= (1 << 26) &&
                  sh.hidden * sh.ffn <= (1 << 26);
  if (!ok) throw UsageError(usage);
  return sh;
}

/// The checks that need the group's size (known after `group` under mpirun).
inline void checkRanks(const Shape& sh, const char* name, bool rowsSplitOverRanks) {
  if (sh.ffn % sh.ranks != 0 || (rowsSplitOverRanks && sh.rowsPerChunk() % sh.ranks != 0))
    throw UsageError(
        std::string(name) + ": " + std::to_string(sh.ranks) + " ranks must divide ffn (" + std::to_string(sh.ffn) +
        ")" +
        (rowsSplitOverRanks ? " and each chunk's tokens (" + std::to_string(sh.rowsPerChunk()) + ")" : std::string()));
}

/// GEMM blocks for a chunk: the device's defaults, narrowed to the
/// problem (a 256-row tile over a 32-row chunk would compute 8x the work).
inline GemmBlocks blocksFor(const Device& d, int64_t M, int64_t N) {
  GemmBlocks b = gemmDefaultBlocks(d);
  b.m = std::min<int>(b.m, std::max(16, nextPow2(M)));
  b.n = std::min<int>(b.n, std::max(16, nextPow2(N)));
  // One tile a program (grid: gemmGrid): these launches overlap with the
  // ranks' communication, where a grid of every resident slot would leave
  // the collectives' kernels no room.
  b.persistent = false;
  return b;
}

/// The error bound of an f32 sum of `terms` terms whose magnitudes add up to
/// `mag`, in any order (first order, doubled for margin).
inline double sumBound(int64_t terms, double mag) { return 2.0 * double(terms + 1) * std::ldexp(1.0, -24) * mag; }

/// The members this process drives: every member of an in-process group,
/// or its own member of the mpirun job (whose size then sets shape.ranks).
inline std::vector<rt::Communicator> group(const RunContext& ctx, Shape& shape, const char* name) {
  if (rt::launchedByMpi()) {
    rt::Communicator c = rt::Communicator::create(ctx.device);
    if (!ctx.shape.empty() && ctx.shape.size() >= 4 && ctx.shape[3] != 0 && ctx.shape[3] != c.size())
      throw UsageError(std::string(name) + ": the shape asks for " + std::to_string(ctx.shape[3]) +
                       " ranks but mpirun started " + std::to_string(c.size()) + "; give 0 or " +
                       std::to_string(c.size()));
    shape.ranks = c.size();
    return {c};
  }
  return rt::Communicator::createLocal(std::vector<Device>(size_t(shape.ranks), ctx.device));
}

/// A launch argument at an element offset of a buffer.
inline rt::Arg at(const Buffer& b, int64_t offset) {
  rt::Arg a(b);
  a.offset = size_t(offset);
  return a;
}

inline LaunchOptions on(const RunContext& ctx, const rt::Stream& s) {
  LaunchOptions o = ctx.launch;
  o.stream = s;
  return o;
}

/// The verdict of every rank of an mpirun job, on every rank (one member
/// per process: the worst error and whether all passed). In-process groups
/// already checked every member.
inline CheckResult agree(const std::vector<rt::Communicator>& members, CheckResult r) {
  if (members.size() != 1 || members[0].size() == 1 || members[0].engine() != rt::CommEngine::MPI) return r;
  const rt::Communicator& c = members[0];
  Buffer ok = c.device().upload(DType::I32, std::vector<int32_t>{r.ok ? 1 : 0});
  Buffer err = c.device().upload(DType::F64, std::vector<double>{r.maxAbsError, r.maxRelError});
  c.allReduce(ok, ok, rt::ReduceOp::Min);
  c.allReduce(err, err, rt::ReduceOp::Max);
  const bool all = ok.read<int32_t>()[0] == 1;
  if (r.ok && !all) r.detail = "another rank's result does not match its reference";
  r.ok = all;
  auto e = err.read<double>();
  r.maxAbsError = e[0];
  r.maxRelError = e[1];
  return r;
}

/// Host milliseconds, for the timings of the benchmark.
inline double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace tessera::examples::parallel
