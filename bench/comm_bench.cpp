// Collectives on CPU devices across processes (docs/collectives.md,
// "Figures"), run under mpirun:
//
//   cmake --build build --target tessera_comm_bench
//   TESSERA_NUM_THREADS=1 mpirun -np 2 build/bin/tessera_comm_bench [--reps N] [--max-mib M]
//   TESSERA_NUM_THREADS=1 mpirun -np 2 build/bin/tessera_comm_bench --overlap tp_mlp|sp_rmsnorm [shape...]
//
// Bandwidth: all-reduce (f32, sum) and all-gather of 4 KiB to 256 MiB, each
// size timed through Tessera's Communicator (with the cross-rank check of
// every call, and without it: CommOptions::verify = false) and through Open
// MPI's own blocking MPI_Allreduce / MPI_Allgather on the very same buffers
// (wrapped with Device::wrap), the three interleaved in a rotating order. An iteration's time is
// the slowest rank's, after a barrier. Bus bandwidth as nccl-tests defines
// it: algbw = S / t with S the all-reduce buffer or the all-gather's whole
// output, busbw = algbw * 2 (n - 1) / n (all-reduce), * (n - 1) / n
// (all-gather). Printed: median [min, max] of the iterations.
//
// Overlap: the example's step (examples/parallel.h) with each chunk's
// communication overlapping the next chunk's GEMMs, against the same work
// on one stream, the compute alone and the communication alone; the sum of
// those two is what the overlapped step would take with no overlap at all.
//
// Links Open MPI itself (for the native figures) and initialises it with
// MPI_THREAD_MULTIPLE: Tessera then uses that MPI instead of initialising
// its own. Run by hand; not part of the test suite.
#define OMPI_SKIP_MPICXX 1  // the C API only
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <climits>
#include <optional>
#include <string>
#include <vector>

#include "cli/CommandLine.h"
#include "parallel.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ex = tessera::examples;
using Clock = std::chrono::steady_clock;

namespace {

int rank = 0, nranks = 1;

struct Stats {
  double median, min, max;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

/// The slowest rank's time of `fn`, in seconds, after a barrier.
template <class F>
double timed(F&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  fn();
  double s = std::chrono::duration<double>(Clock::now() - t0).count(), worst = 0;
  MPI_Allreduce(&s, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

std::string sizeText(size_t b) {
  char buf[32];
  if (b >= (size_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  else
    std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  return buf;
}

int bandwidth(int reps, size_t maxMiB) {
  const size_t maxBytes = maxMiB << 20;
  // One pair of buffers for everything: Tessera wraps them, MPI uses them.
  std::vector<float> send(maxBytes / 4, 1.0f), recv(maxBytes / 4, 0.0f);
  ts::Device cpu = ts::Device::cpu();
  ts::rt::Communicator checked = ts::rt::Communicator::create(cpu);
  ts::rt::CommOptions o;
  o.verify = false;
  ts::rt::Communicator unchecked = ts::rt::Communicator::create(cpu, o);
  ts::Buffer sendBuf = cpu.wrap(send.data(), ts::DType::F32, send.size());
  ts::Buffer recvBuf = cpu.wrap(recv.data(), ts::DType::F32, recv.size());
  if (rank == 0) {
    std::printf("%d ranks, %s; %s; %d iterations per size (fewer above 16 MiB), median [min, max]\n", nranks,
                cpu.name().c_str(), checked.engineName().c_str(), reps);
    std::printf("%-10s %-10s %-22s %-30s %s\n", "op", "size", "implementation", "time (us)", "busbw (GB/s)");
  }
  for (const char* op : {"all_reduce", "all_gather"}) {
    const bool ar = op[4] == 'r';
    for (size_t bytes = 4096; bytes <= maxBytes; bytes *= 4) {
      // S: the all-reduce's buffer, or the all-gather's whole output.
      const size_t count = bytes / 4, per = count / size_t(nranks);
      if (!ar && per == 0) continue;
      const int n = bytes > (size_t(16) << 20) ? std::max(3, reps / 4) : reps;
      std::vector<double> t[3];
      auto runOne = [&](int impl) {
        if (impl == 2) {
          if (ar)
            MPI_Allreduce(send.data(), recv.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          else
            MPI_Allgather(send.data(), int(per), MPI_FLOAT, recv.data(), int(per), MPI_FLOAT, MPI_COMM_WORLD);
          return;
        }
        const ts::rt::Communicator& c = impl == 0 ? checked : unchecked;
        if (ar)
          c.allReduce(ts::rt::BufferView(sendBuf, 0, count), ts::rt::BufferView(recvBuf, 0, count),
                      ts::rt::ReduceOp::Sum);
        else
          c.allGather(ts::rt::BufferView(sendBuf, 0, per), ts::rt::BufferView(recvBuf, 0, per * size_t(nranks)));
      };
      for (int impl = 0; impl < 3; ++impl) runOne(impl);  // warm-up
      // The order rotates, so that none is always first after another.
      for (int i = 0; i < n; ++i)
        for (int k = 0; k < 3; ++k) {
          const int impl = (i + k) % 3;
          t[impl].push_back(timed([&] { runOne(impl); }));
        }
      if (rank != 0) continue;
      const double S = ar ? double(count) * 4 : double(per * size_t(nranks)) * 4;
      const double factor = ar ? 2.0 * (nranks - 1) / nranks : double(nranks - 1) / nranks;
      static const char* names[] = {"tessera", "tessera (unchecked)"};
      for (int impl = 0; impl < 3; ++impl) {
        Stats s = stats(t[impl]);
        char tt[64], bw[64];
        std::snprintf(tt, sizeof tt, "%.1f [%.1f, %.1f]", s.median * 1e6, s.min * 1e6, s.max * 1e6);
        std::snprintf(bw, sizeof bw, "%.2f [%.2f, %.2f]", S / s.median * factor / 1e9, S / s.max * factor / 1e9,
                      S / s.min * factor / 1e9);
        std::string name = impl == 2 ? std::string(ar ? "MPI_Allreduce" : "MPI_Allgather") : names[impl];
        std::printf("%-10s %-10s %-22s %-30s %s\n", op, sizeText(size_t(S)).c_str(), name.c_str(), tt, bw);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

int overlap(const std::string& name, const std::vector<int64_t>& shape, int reps) {
  ex::RunContext ctx;
  ctx.shape = shape;
  std::unique_ptr<ex::parallel::Plan> plan =
      name == "tp_mlp" ? ex::parallel::makeTpMlp(ctx) : ex::parallel::makeSpRmsnorm(ctx);
  using ex::parallel::Mode;
  const Mode modes[] = {Mode::Overlapped, Mode::Serial, Mode::ComputeOnly, Mode::CommOnly};
  const char* names[] = {"overlapped (two streams)", "serial (one stream)", "compute alone", "communication alone"};
  for (Mode m : modes) plan->step(m);  // warm-up
  plan->step(Mode::Overlapped);
  ex::CheckResult check = plan->check();
  std::vector<double> t[4];
  for (int i = 0; i < reps; ++i)
    for (int m = 0; m < 4; ++m) t[m].push_back(timed([&] { plan->step(modes[m]); }) * 1e3);
  if (rank == 0) {
    std::printf("%s, shape {", name.c_str());
    for (size_t i = 0; i < shape.size(); ++i) std::printf("%s%lld", i ? ", " : "", (long long)shape[i]);
    std::printf("}, %d ranks (%s), %d iterations, check %s; ms, median [min, max]\n", nranks,
                plan->member().engineName().c_str(), reps, check.ok ? "PASS" : "FAIL");
    for (int m = 0; m < 4; ++m) {
      Stats s = stats(t[m]);
      std::printf("  %-26s %8.2f [%.2f, %.2f]\n", names[m], s.median, s.min, s.max);
    }
    const double parts = stats(t[2]).median + stats(t[3]).median, ov = stats(t[0]).median;
    std::printf(
        "  %-26s %8.2f (compute + communication medians); overlapped = %.0f%% of it, hides %.0f%% of the "
        "communication\n",
        "sum of the parts", parts, 100 * ov / parts, 100 * (parts - ov) / stats(t[3]).median);
  }
  return check.ok ? 0 : 1;
}

}  // namespace

const tessera::tools::cli::Command kProgram{
    "tessera_comm_bench",
    "  mpirun -np N tessera_comm_bench [--reps N] [--max-mib M]\n"
    "  mpirun -np N tessera_comm_bench --overlap tp_mlp|sp_rmsnorm [SHAPE...]\n",
    {{"--reps", "a count of iterations"}, {"--max-mib", "the largest size in MiB"}, {"--overlap", "an example"}},
    0,
    -1,
    "",
    nullptr,
    [] {
      return std::string(
          "collectives across processes (run under mpirun): all-reduce and all-gather bandwidth through\n"
          "Tessera's Communicator, with and without its cross-rank check, and through Open MPI itself;\n"
          "or an example's overlapped step against the same work on one stream\n"
          "  --reps N            iterations per size (default 20)\n"
          "  --max-mib M         the largest buffer, in MiB (default 256)\n"
          "  --overlap EXAMPLE   tp_mlp or sp_rmsnorm, with its shape as the arguments after it\n");
    }};

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  // Read after MPI_Init: Open MPI may take arguments of its own out of argv.
  const tessera::tools::cli::Args args = tessera::tools::cli::parseProgram(kProgram, argc, argv);
  const int reps = static_cast<int>(args.integer("--reps", "a count >= 1", 1, INT32_MAX).value_or(20));
  const size_t maxMiB = static_cast<size_t>(args.integer("--max-mib", "a size in MiB >= 1", 1, 1 << 20).value_or(256));
  const std::string overlapName = args.value("--overlap", "");
  std::vector<int64_t> shape;
  for (const std::string& p : args.positionals()) {
    std::optional<std::vector<int64_t>> d = tessera::tools::cli::parseShape(p);
    if (!d || d->size() != 1) args.fail("a shape component is a non-negative integer, got '" + p + "'");
    shape.push_back((*d)[0]);
  }
  int rc = 0;
  try {
    rc = overlapName.empty() ? bandwidth(reps, maxMiB) : overlap(overlapName, shape, reps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
