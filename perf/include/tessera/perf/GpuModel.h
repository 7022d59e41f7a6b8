// The GPU performance model: a predicted time for one launch of a kernel
// compiled for a GPU, on a machine of Machines.def, without the GPU. The
// autotuner ranks GPU configs with it where no device is present
// (gpuModelTuneOptions), `tessera sol --model` and `tessera tune --model`
// print it, and bench/model_bench.cpp writes the predicted-vs-measured table
// that validates it (docs/model.md).
//
// What it reads:
//   * the compiled artifact: the instruction mix of the kernel and of its
//     main loop (CodeProfile.h: SASS where the disassembler exists, else
//     PTX; AMDGCN), registers and spills, shared memory, threads per block;
//   * the launch's work (ir/analysis/Work.h): flops by unit and dtype,
//     compulsory global-memory bytes, the iterations of the main loop and
//     its pipeline stages;
//   * the machine (Machines.def: units, clock, peaks, bandwidth) and its
//     architecture's pipes and latencies (ModelArchs.def).
//
// How (cycles on one SM / CU):
//   * per program (block): dynamic instructions = warps x (loop mix x
//     iterations per program + the rest of the kernel once); each pipe's
//     cycles = its instructions / its rate (issue, scalar, load/store,
//     special function), the tensor cycles = dot flops / the unit's share
//     of the dense peak, the vector cycles = other flops / the unit's share
//     of the FP32 (FP64) peak;
//   * per program, the latency chain: one DRAM latency per iteration whose
//     loads the pipeline has not issued ahead (latency x (1 + iterations /
//     (stages - 1))) when the loop touches global memory, and never less than
//     one warp's own instructions at one per cycle;
//   * k programs resident on a unit (occupancy from registers, shared
//     memory and threads: tessera::occupancy) take max(k x the busiest pipe,
//     the chain): pipes overlap perfectly, programs hide each other's
//     latency;
//   * the grid runs in waves of units x k programs, the last one partial;
//   * the launch takes max(waves' time, the bytes the tiles access / the
//     L2's bandwidth, compulsory bytes / DRAM bandwidth) plus the launch
//     latency.
// What it ignores (docs/model.md lists these too): L1 caching of global
// reads (every access goes to L2, every re-read hits it),
// bank conflicts, clock throttling, dependencies inside a warp beyond one
// instruction per cycle, instruction widths (a 128-bit load counts as one
// memory instruction), the work of an `if` both branches of which were
// counted by the work analysis. Its assumptions per architecture are the
// rows of ModelArchs.def.
//
// A K-split launch (Tiles::splitK, Tiles::streamK) whose schedule the
// caller gives (ModelOptions::schedule) is also charged its fix-up apart
// (fixupCost): the workspace traffic of the partial tiles, the turnstile's
// tickets and the serialised sum in the last unit of a tile, beside the
// wave quantisation the split saves. The terms above count both branches
// of the fix-up (store a partial; sum and run the epilogue) in every unit,
// an upper bound; the fix-up estimate is reported, not added to them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/dsl/Tiles.h"
#include "tessera/perf/CodeProfile.h"
#include "tessera/perf/SpeedOfLight.h"
#include "tessera/perf/Tune.h"

namespace tessera::perf {

/// What a prediction was made from (everything the report prints).
struct ModelInputs {
  std::string kernel;   // its name
  std::string machine;  // Machine::id
  std::string target;   // the artifact's target
  uint64_t programs = 0;
  unsigned threadsPerBlock = 0, warpSize = 0, warpsPerBlock = 0;
  int registers = 0;
  int64_t spillBytes = 0, sharedBytes = 0;
  int programsPerUnit = 0;  // resident blocks per SM / workgroups per CU
  std::string occupancy;    // tessera::occupancy's text
  CodeProfile code;
  double loopIterationsPerProgram = 0;  // the work analysis's main loop
  int64_t stages = 1;
  double dotFlops = 0, vectorFlops = 0, f64Flops = 0;
  double bytes = 0, accessedBytes = 0;  // compulsory; every access of the tiles
};

/// One term of the model: seconds for the whole launch were it the only
/// limit.
struct ModelTerm {
  std::string
      name;  // "tensor", "issue", "load/store", "special function", "vector", "scalar", "latency", "L2", "memory"
  double seconds = 0;
};

/// What joining the partial tiles of a K-split schedule costs on a machine
/// (docs/model.md, "The fix-up of split-K and stream-K").
struct FixupCost {
  TileSplit split = TileSplit::None;
  int64_t tiles = 0;            // output tiles
  int64_t iterations = 0;       // K iterations per tile: ceil(K / tileK), at least 1
  int64_t programs = 0;         // the grid
  int64_t units = 0;            // work units: split-K tiles x S; stream-K the pieces its shares cut the tiles into
  int64_t joinedTiles = 0;      // tiles of more than one unit, joined through the workspace
  int64_t partials = 0;         // the units of joined tiles: each stores its partial and draws a ticket
  int64_t maxUnitsPerTile = 0;  // the most units one tile joins
  double bytes = 0;             // workspace traffic: partials x tileM x tileN x 4 bytes written, as many read back
  int64_t atomics = 0;          // the turnstile's tickets (one atomic add per partial)
  double sumFlops = 0;          // the last units' adds: (partials - joinedTiles) x tileM x tileN
  double trafficSeconds = 0;    // bytes at the L2's rate over the whole machine
  double chainSeconds = 0;      // the longest join in one program: its partial stored and released, the
                                // ticket's round trip, every slot read back at one unit's share of the
                                // L2 rate and added at its share of the f32 vector peak
  double seconds = 0;           // max(trafficSeconds, chainSeconds): the fix-up's estimate
  /// Wave quantisation: the K iterations of the longest program under the
  /// schedule, and with one whole tile per program on the same grid.
  int64_t iterationsPerProgram = 0, iterationsUnsplit = 0;
  /// The report's lines (empty for a schedule without a split).
  std::string str() const;
};

/// The fix-up of `s` (splitK or streamK with literal M, N and K) launched
/// on `programs` programs on machine `m` (a GPU row the model has pipes
/// for). A schedule without a split costs nothing (split None, zeros). A
/// UsageError for a ragged schedule, M, N or K not literal, programs
/// below 1, or a machine without the model's row.
FixupCost fixupCost(const Tiles& s, int64_t programs, const Machine& m);

struct ModelPrediction {
  double seconds = 0;  // predicted time of one launch, launch latency included
  std::string bound;   // the term that sets it
  std::vector<ModelTerm> terms;
  double launchSeconds = 0;
  double waves = 0;         // programs / (units x programs per unit)
  double speedOfLight = 0;  // the roofline time of the same work on the machine (SpeedOfLight.h)
  ModelInputs in;
  /// A K-split launch whose schedule was given (ModelOptions::schedule):
  /// its fix-up (reported beside the terms, not added to seconds) and the
  /// compute the split's balance saves against one tile per program,
  /// compute x (iterationsUnsplit / iterationsPerProgram - 1).
  FixupCost fixup;
  double balanceSavedSeconds = 0;
  std::vector<std::string> notes;  // what this prediction had to assume beyond the model's rules
  /// The report: inputs, each term, the prediction and the notes.
  std::string str() const;
};

struct ModelOptions {
  /// Count SASS where the CUDA toolkit's disassembler is found (closer to
  /// what runs); false: always PTX (the same answer on every host).
  bool preferSass = true;
  /// The launch's K-split schedule (Tiles::splitK, Tiles::streamK) with
  /// literal M, N and K, when the caller knows it: the prediction then
  /// reports its fix-up (ModelPrediction::fixup).
  std::optional<Tiles> schedule;
};

/// Predicts one launch of `art` (compiled for a GPU target, not emu:) doing
/// `work`, on machine `m` (a GPU row whose target is the artifact's). A
/// UsageError when they do not match; DeviceError when the resources cannot
/// be read (ptxas missing for NVPTX); ResourceError when the kernel cannot
/// be resident on the machine at all.
ModelPrediction predictGpu(const codegen::Artifact& art, const ir::WorkEstimate& work, const Machine& m,
                           const ModelOptions& opts = {});
/// The same for a compiled kernel launched on `grid` with `args` (the work
/// from launchWork).
ModelPrediction predictGpu(const CompiledKernel& k, Dim3 grid, const std::vector<rt::Arg>& args, const Machine& m,
                           const ModelOptions& opts = {});

/// One row per prediction: machine, predicted time, bound, waves,
/// programs per unit, registers, listing, speed of light and its fraction
/// of the prediction.
std::string formatModelTable(const std::vector<ModelPrediction>& predictions);

/// Tuning options that rank configs by the model on machine `m` instead of
/// measuring them: survivors are compiled for m.target and stored under the
/// device key modelDeviceKey(m).
TuneOptions gpuModelTuneOptions(const Machine& m, const ModelOptions& opts = {});
/// The device key of the model's results for `m`: "model: <id> (<target>)"
/// (a deployed TuneTable falls back to it on a device of that machine:
/// TuneTable::findFor).
std::string modelDeviceKey(const Machine& m);

/// The machines the model can predict for: the GPU rows whose target
/// Tessera compiles for.
std::vector<const Machine*> modelMachines();

}  // namespace tessera::perf
