// Speed of light: how fast a launch could possibly run on a machine. From
// the work of the launch (flops by class, compulsory bytes:
// tessera/ir/analysis/Work.h) and a machine's peaks (the GPUs of
// Machines.def, and the host CPU, whose FMA peak and memory bandwidth are
// measured once and remembered on disk), the roofline time is
//
//   max(bytes / bandwidth, max over units of (flops on the unit / its peak))
//
// with the units the vector units (every elementwise flop and f32 dots, at
// the FP32 vector peak; f64 at FP64) and the tensor / matrix units (f16,
// bf16, i8 dots at their dense peaks; on machines without them, the vector
// peak). A measured run's fraction of the speed of light is roofline time /
// measured time. `tessera sol` prints the table; docs/sol.md is the guide.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/ir/analysis/Work.h"
#include "tessera/support/DType.h"

namespace tessera::perf {

/// One machine: a row of Machines.def, or the measured host.
struct Machine {
  std::string id;      // "h100_sxm", "host"
  std::string name;    // "H100 SXM", "host: AMD EPYC (avx2, 2 threads)"
  std::string target;  // "nvptx:sm_90a", "cpu"; "" when Tessera has no target for it
  unsigned units = 0;  // SMs / CUs / host threads
  double clockMHz = 0;
  double bandwidth = 0;  // bytes per second
  uint64_t l2Bytes = 0, llcBytes = 0;
  int chiplets = 1;  // dies with private L2s, dealt workgroups round-robin (Machines.def)
  // Peaks, in FLOP/s (int8: op/s); 0 where the machine has no such unit.
  double vecF64 = 0, vecF32 = 0, vecF16 = 0, vecBF16 = 0;
  double tf32 = 0, dotF16 = 0, dotBF16 = 0, dotFP8 = 0, dotI8 = 0;
  bool measured = false;  // the host: peaks measured on this machine
  std::string source;     // where the figures come from

  /// The peak a flop class runs at here, and the unit's name ("vector",
  /// "tensor"): f64 at vecF64, other vector flops and f32 dots at vecF32,
  /// f16 / bf16 / i8 dots at their tensor peaks (vecF32 when there is none).
  double peakFor(ir::FlopUnit unit, DType dtype, std::string* unitName = nullptr) const;
};

/// The GPU rows of Machines.def, in table order.
const std::vector<Machine>& gpuMachines();
/// A GPU row by id; nullptr if none.
const Machine* findGpuMachine(const std::string& id);
/// The ids of the table, comma-separated (for messages).
std::string machineIds();

/// The host's measured peaks.
struct HostPeaks {
  std::string cpu;             // /proc/cpuinfo's model name
  std::string isa;             // "avx512", "avx2", "sse2" (codegen::hostIsa)
  unsigned threads = 0;        // the CPU device's default threads, which the kernels used
  double fmaFlops = 0;         // FLOP/s of independent f32 vector FMA chains on all threads: the FMA peak
  std::string fmaMethod;       // how: "AVX-512 FMA chains", "AVX2 FMA chains" (intrinsics of the ISA
                               // Tessera uses here), or "Tessera FMA-chain kernel" on other hosts
  double tesseraFmaFlops = 0;  // what a Tessera kernel of FMA chains reaches (for the record)
  double triadBytes = 0;       // bytes/s of a Tessera triad a = b + s c over arrays far larger than the LLC
                               // (three arrays' bytes per pass, as STREAM counts)
  uint64_t triadArrayBytes = 0;
  uint64_t l2Bytes = 0, llcBytes = 0;
  double measureSeconds = 0;  // how long measuring took
  double loadAverage = -1;    // the 1-minute load average when measured (-1: unknown); above the
                              // thread count, other work was competing and the peaks may be low
  std::string cacheFile;      // where they are remembered ("" if they could not be)
  bool fromCache = false;     // read back rather than measured now
  std::string warning;        // why they could not be remembered, if so
};

/// Measures the host's FMA peak and triad bandwidth now (about a second;
/// compiles two small kernels). `triadBytes` is the size of each of the
/// triad's three arrays (0: the larger of 64 MiB and 4x the LLC);
/// `targetSeconds` the time of each FMA run.
struct HostMeasureOptions {
  uint64_t triadBytes = 0;
  double targetSeconds = 0.05;
  int repeats = 5;  // the best run counts: a short burst of other load spoils only some
};
HostPeaks measureHostPeaks(const HostMeasureOptions& opts = {});

/// The host's peaks, measured once per host (CPU model, ISA, threads,
/// Tessera version) and remembered in machineCacheDir()/host-<key>.json; a
/// missing, corrupt or foreign file is measured again and rewritten
/// (atomically: a temporary file renamed). A cache folder that cannot be
/// written is not an error: the peaks are measured and `warning` says why
/// they were not remembered. `remeasure` ignores a remembered file.
HostPeaks hostPeaks(bool remeasure = false, const HostMeasureOptions& opts = {});

/// Where machine measurements are remembered: $TESSERA_CACHE_DIR/machine,
/// else $XDG_CACHE_HOME/tessera/machine, else ~/.cache/tessera/machine (the
/// folder the persistent compile cache shares; this is its `machine/`).
std::string machineCacheDir();

/// The host as a machine row.
Machine hostMachine(const HostPeaks& peaks);
/// Every machine: the host (from hostPeaks()) first, then the GPU rows.
std::vector<Machine> allMachines(const HostPeaks& host);

/// The roofline of a launch's work on one machine.
struct Roofline {
  std::string machine;         // Machine::id
  double memorySeconds = 0;    // compulsory bytes / bandwidth
  double computeSeconds = 0;   // the busiest unit's flops / its peak
  double seconds = 0;          // the larger: the speed of light
  std::string bound;           // "memory" or "compute (f32 vector)", "compute (f16 tensor)", ...
  double attainableFlops = 0;  // total flops / seconds
};
Roofline roofline(const ir::WorkEstimate& work, const Machine& m);

/// The machine a device's runs are compared with: the host for CPU
/// devices; for CUDA / HIP devices the row of their arch whose name the
/// device name contains ("H100", "MI300X"), else the first row of the arch;
/// nullptr for the emulator or an unknown GPU.
const Machine* machineForDevice(const std::string& deviceKind, const std::string& arch, const std::string& deviceName,
                                const std::vector<Machine>& machines);

/// The table `tessera sol` prints for one launch's work.
std::string formatSolTable(const std::string& title, const ir::WorkEstimate& work,
                           const std::vector<Machine>& machines);
/// The machine table itself (peaks, bandwidth, caches, source).
std::string formatMachineTable(const std::vector<Machine>& machines);
/// "1.23 GB", "4.56 TFLOP/s": a quantity with an SI prefix and 3 significant digits.
std::string formatSI(double v, const std::string& unit);

}  // namespace tessera::perf
