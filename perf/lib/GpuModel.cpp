// The GPU performance model (GpuModel.h): the rules are in the header; this
// file applies them. Cycles are per SM / CU unless a name says otherwise.
#include "tessera/perf/GpuModel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "Format.h"
#include "tessera/codegen/Compiler.h"
#include "tessera/ir/IR.h"
#include "tessera/perf/Bench.h"
#include "tessera/support/Error.h"
#include "tessera/support/Targets.h"

namespace tessera::perf {

namespace {

/// A row of ModelArchs.def.
struct ModelArch {
  const char* arch;
  double issue, scalar, lsu, sfu, syncMma, l2, latency, launchUs;
};

const ModelArch* findModelArch(const std::string& arch) {
  static const ModelArch rows[] = {
#define TS_MODEL_ARCH(arch, issue, scalar, lsu, sfu, syncMma, l2, latency, launchUs) \
  {#arch, issue, scalar, lsu, sfu, syncMma, l2, latency, launchUs},
#include "tessera/perf/ModelArchs.def"
  };
  for (const ModelArch& r : rows)
    if (arch == r.arch) return &r;
  return nullptr;
}

std::string num(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

/// Dynamic instructions of one class per program: each warp runs the rest
/// of the kernel once and the main loop `iters` times.
double perProgram(const CodeProfile& p, InstrClass c, double warps, double iters) {
  if (!p.hasLoop) return warps * p.all[c];
  // The loop's issue-only code (TMA copies one warp issues) runs once a
  // program, the rest in every warp. A warp-specialised kernel's producer
  // loop runs in its one issuing warp, once per iteration; its main loop in
  // the consumer warps: whole warpgroups (gpuWarpSpecializeRefusal) beside
  // one to four producer warps (gpuProducerWarps), so the largest multiple
  // of 4 below the block's warps.
  const double everyWarp = p.loop[c] - p.loopIssue[c];
  const double producer = p.hasProducerLoop ? p.producerLoop[c] : 0;
  const double loopWarps = p.hasProducerLoop ? std::max(1.0, std::floor((warps - 1) / 4) * 4) : warps;
  return warps * (p.all[c] - p.loop[c] - producer) + (loopWarps * everyWarp + p.loopIssue[c] + producer) * iters;
}

int64_t literalOf(const Operand& o, const char* what) {
  if (!o.isLiteral() || o.kind() != Operand::Kind::Int || o.intValue() < 0)
    throw UsageError(std::string("fixupCost: the schedule's ") + what +
                     " must be a non-negative integer literal (the host's value), got " + o.str());
  return o.intValue();
}

const ModelArch& modelArchOf(const Machine& m) {
  const size_t colon = m.target.find(':');
  const ModelArch* a = colon == std::string::npos ? nullptr : findModelArch(m.target.substr(colon + 1));
  if (!a)
    throw UsageError("the performance model has no row for machine " + m.id +
                     " (perf/include/tessera/perf/ModelArchs.def)");
  return *a;
}

}  // namespace

FixupCost fixupCost(const Tiles& s, int64_t programs, const Machine& m) {
  FixupCost f;
  f.split = s.split();
  if (s.split() == TileSplit::None) return f;
  if (s.isRagged()) throw UsageError("fixupCost: the model covers dense schedules, not ragged ones");
  if (programs < 1)
    throw UsageError("fixupCost: the grid must have at least 1 program, got " + std::to_string(programs));
  const ModelArch& pipes = modelArchOf(m);
  TS_ASSERT(m.units > 0 && m.clockMHz > 0, "machine " + m.id + " has no units or clock");
  const int64_t M = literalOf(s.m(), "M"), N = literalOf(s.n(), "N"), K = literalOf(s.k(), "K");
  f.programs = programs;
  f.tiles = Tiles::count(M, N, s.tileM(), s.tileN());
  f.iterations = std::max<int64_t>(1, (K + s.tileK() - 1) / s.tileK());
  const int64_t T = f.tiles, I = f.iterations, P = programs;
  auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  // Units per tile, as TilesSplit.cpp deals them.
  auto join = [&](int64_t unitsOfTile) {
    f.units += unitsOfTile;
    if (unitsOfTile < 2) return;
    ++f.joinedTiles;
    f.partials += unitsOfTile;
    f.maxUnitsPerTile = std::max(f.maxUnitsPerTile, unitsOfTile);
  };
  if (s.split() == TileSplit::SplitK) {
    const int64_t S = s.splits();
    for (int64_t t = 0; t < T; ++t) join(S);
    // Program p computes unit p (persistent: p, p + P, ...): the longest
    // program runs ceil(units / P) units of at most ceil(I / S) iterations.
    f.iterationsPerProgram = T == 0 ? 0 : cdiv(T * S, P) * cdiv(I, S);
  } else {
    // Shares of q or q + 1 iterations, the first r longer; tile t spans
    // the shares holding its first and its last iteration.
    const int64_t total = T * I, q = total / P, r = total % P, longEnd = r * (q + 1);
    auto shareOf = [&](int64_t it) {
      return it < longEnd ? it / (q + 1) : r + (it - longEnd) / std::max<int64_t>(q, 1);
    };
    for (int64_t t = 0; t < T; ++t) join(shareOf(t * I + I - 1) - shareOf(t * I) + 1);
    f.iterationsPerProgram = q + (r > 0 ? 1 : 0);
  }
  f.iterationsUnsplit = T == 0 ? 0 : cdiv(T, P) * I;
  f.maxUnitsPerTile = std::max<int64_t>(f.maxUnitsPerTile, f.units > 0 ? 1 : 0);

  const double tileElems = double(s.tileM()) * double(s.tileN()), tileBytes = tileElems * 4;
  f.bytes = 2 * double(f.partials) * tileBytes;
  f.atomics = f.partials;
  f.sumFlops = double(f.partials - f.joinedTiles) * tileElems;
  const double clock = m.clockMHz * 1e6, units = m.units;
  f.trafficSeconds = f.bytes / (units * pipes.l2 * clock);
  if (f.joinedTiles > 0) {
    // One program's longest join: its partial stored, released and its
    // ticket drawn (two round trips), then U slots read back (a round trip,
    // then the bytes at its unit's share of the L2 rate) and U - 1 adds.
    const double U = double(f.maxUnitsPerTile);
    const double addRate = m.vecF32 > 0 ? m.vecF32 / units / clock : 1;  // flops per cycle per unit
    const double cycles =
        tileBytes / pipes.l2 + 3 * pipes.latency + U * tileBytes / pipes.l2 + (U - 1) * tileElems / addRate;
    f.chainSeconds = cycles / clock;
  }
  f.seconds = std::max(f.trafficSeconds, f.chainSeconds);
  return f;
}

std::string FixupCost::str() const {
  if (split == TileSplit::None) return {};
  std::string s = std::string("  fix-up (") + (split == TileSplit::StreamK ? "stream-K" : "split-K") + ", " +
                  std::to_string(programs) + " programs): " + std::to_string(joinedTiles) + " of " +
                  std::to_string(tiles) + " tiles joined from " + std::to_string(partials) + " partials (at most " +
                  std::to_string(maxUnitsPerTile) + " a tile), " + formatSI(bytes, "B") +
                  " of workspace written and read back, " + std::to_string(atomics) + " tickets, " +
                  formatSI(sumFlops, "FLOP") + " of adds\n";
  s += "    workspace at the L2's rate " + num("%.3f us", trafficSeconds * 1e6) + ", longest join in one program " +
       num("%.3f us", chainSeconds * 1e6) + ": fix-up " + num("%.3f us", seconds * 1e6) +
       " (not added: the terms count both of its branches)\n";
  s += "    balance: " + std::to_string(iterationsPerProgram) + " K iterations in the longest program, " +
       std::to_string(iterationsUnsplit) + " with one tile per program\n";
  return s;
}

ModelPrediction predictGpu(const codegen::Artifact& art, const ir::WorkEstimate& work, const Machine& m,
                           const ModelOptions& opts) {
  const Target& t = art.target;
  if (t.kind != Target::Kind::NVPTX && t.kind != Target::Kind::AMDGPU) {
    const bool emu = t.kind == Target::Kind::EmuNVPTX || t.kind == Target::Kind::EmuAMDGPU;
    throw UsageError(
        "the performance model reads code compiled for a GPU target (nvptx:..., amdgpu:...), not " + t.str() +
        (emu ? ": the emulated target's code is host code; compile for " + t.str().substr(4) + " instead" : ""));
  }
  if (m.target != t.str())
    throw UsageError("machine " + m.id + " runs " + (m.target.empty() ? "no Tessera target" : m.target) +
                     " code, but the kernel was compiled for " + t.str());
  const bool nvidia = t.kind == Target::Kind::NVPTX;
  const GpuArch* arch = findGpuArch(nvidia ? GpuArch::Vendor::NVIDIA : GpuArch::Vendor::AMD, t.arch);
  const ModelArch* pipes = findModelArch(t.arch);
  TS_ASSERT(arch, "no Targets.def row for " + t.str());
  if (!pipes)
    throw UsageError("the performance model has no row for " + t.str() +
                     " yet (perf/include/tessera/perf/ModelArchs.def): it cannot predict machine " + m.id);
  TS_ASSERT(m.units > 0 && m.clockMHz > 0, "machine " + m.id + " has no units or clock");

  ModelPrediction r;
  ModelInputs& in = r.in;
  in.kernel = art.kernelName();
  in.machine = m.id;
  in.target = t.str();
  in.programs = work.programs;
  in.threadsPerBlock = art.binary.threadsPerBlock;
  in.warpSize = arch->warpSize;
  in.warpsPerBlock = (in.threadsPerBlock + in.warpSize - 1) / in.warpSize;

  codegen::GpuResources res = codegen::gpuResources(art);
  in.registers = res.registers;
  in.spillBytes = std::max<int64_t>(0, res.spillBytes);
  // The larger of the code's static allocation and what the launch passes.
  in.sharedBytes = std::max<int64_t>(res.sharedBytes, art.binary.sharedBytes);
  Occupancy occ = occupancy(*arch, in.registers, in.sharedBytes, static_cast<int>(in.threadsPerBlock));
  in.programsPerUnit = occ.blocks;
  in.occupancy = occ.text;
  if (occ.blocks <= 0)
    throw ResourceError("@" + art.kernelName() + " cannot be resident on " + m.name + ": " + occ.text);

  if (nvidia) {
    in.code.listing = Listing::PTX;
    // The PTX the runtime loads (the binary has it even where the stage
    // dumps were not kept, e.g. an artifact read back from the disk cache).
    std::string text = art.binary.ptx.empty() ? art.dumps.assembly : art.binary.ptx;
    if (opts.preferSass) {
      try {
        text = codegen::sass(art);
        in.code.listing = Listing::SASS;
      } catch (const DeviceError&) {  // no disassembler: PTX, and say so
        r.notes.push_back("no SASS disassembler found: the instruction mix is PTX's");
      }
    }
    if (in.code.listing == Listing::PTX && text.empty()) text = art.assembly();
    in.code = profileListing(text, in.code.listing);
  } else {
    in.code = profileListing(art.assembly(), Listing::AMDGCN);
  }

  const double clock = m.clockMHz * 1e6;
  const double units = m.units;
  const double P = static_cast<double>(std::max<uint64_t>(1, work.programs));
  in.loopIterationsPerProgram = work.hotLoop.iterations / P;
  in.stages = std::max<int64_t>(1, work.hotLoop.stages);
  if (in.code.hasLoop && work.hotLoop.iterations == 0)
    r.notes.push_back("the code has a loop the work analysis did not find: it is counted once");
  if (!in.code.hasLoop && work.hotLoop.iterations > P)
    r.notes.push_back("the main loop (" + work.hotLoop.loc + ") was unrolled whole: its instructions are counted as " +
                      "they stand in the listing");
  const double iters = in.code.hasLoop ? std::max(1.0, in.loopIterationsPerProgram) : 0;

  // Flops per program at their units' per-unit, per-cycle rates. Without
  // asynchronous MMAs a kernel reaches only the syncMma share of the
  // tensor peak (Hopper: wgmma's peak).
  const bool asyncMma = in.code.all[InstrClass::AsyncMma] > 0;
  if (!asyncMma && pipes->syncMma < 1 && in.code.all[InstrClass::Mma] > 0)
    r.notes.push_back("the dots use mma.sync, not wgmma: tensor rate " + num("%.2f", pipes->syncMma) + " of the peak");
  double tensorCycles = 0, vectorCycles = 0;
  for (const ir::WorkEstimate::Flops& f : work.flops) {
    std::string unit;
    double peak = m.peakFor(f.unit, f.dtype, &unit);
    if (unit == "tensor" && !asyncMma) peak *= pipes->syncMma;
    if (peak <= 0) continue;
    double cycles = (f.count / P) / (peak / units / clock);
    (unit == "tensor" ? tensorCycles : vectorCycles) += cycles;
    if (f.unit == ir::FlopUnit::Dot && unit == "tensor")
      in.dotFlops += f.count;
    else if (f.dtype == DType::F64)
      in.f64Flops += f.count;
    else
      in.vectorFlops += f.count;
  }
  in.bytes = work.bytes();
  in.accessedBytes = work.accessedBytes();

  // Pipes, per program.
  const double warps = in.warpsPerBlock;
  auto n = [&](InstrClass c) { return perProgram(in.code, c, warps, iters); };
  double all = 0;
  for (size_t c = 0; c < kNumInstrClasses; ++c) all += n(static_cast<InstrClass>(c));
  const double scalar = n(InstrClass::Scalar);
  const double memory = n(InstrClass::GlobalLoad) + n(InstrClass::GlobalStore) + n(InstrClass::Atomic) +
                        n(InstrClass::SharedLoad) + n(InstrClass::SharedStore) + n(InstrClass::AsyncCopy) +
                        n(InstrClass::Local);
  struct Pipe {
    const char* name;
    double cycles;
  };
  std::vector<Pipe> pipesUsed = {
      {"tensor", tensorCycles},
      {"vector", vectorCycles},
      {"issue", (all - scalar) / pipes->issue},
      {"scalar", pipes->scalar > 0 ? scalar / pipes->scalar : 0},
      {"load/store", memory / pipes->lsu},
      {"special function", n(InstrClass::Special) / pipes->sfu},
  };
  if (in.spillBytes > 0)
    r.notes.push_back("spills (" + std::to_string(in.spillBytes) +
                      " bytes of spill instructions) are charged as local-memory instructions where the listing has "
                      "them, not as DRAM traffic");

  // The latency chain of one program.
  const bool loopTouchesMemory =
      in.code.hasLoop && (in.code.loop[InstrClass::GlobalLoad] > 0 || in.code.loop[InstrClass::AsyncCopy] > 0 ||
                          in.code.loop[InstrClass::Atomic] > 0);
  double chain = pipes->latency * (loopTouchesMemory ? 1 + iters / std::max<double>(1, double(in.stages - 1)) : 2);
  chain = std::max(chain, all / std::max(1.0, warps));

  // Waves: k programs resident per unit take max(k x pipe, chain).
  const double slots = units * in.programsPerUnit;
  const double fullWaves = std::floor(P / slots);
  const double rest = P - fullWaves * slots;
  auto launchCycles = [&](double perProgramCycles, double chainCycles) {
    auto wave = [&](double k) { return std::max(k * perProgramCycles, chainCycles); };
    return fullWaves * wave(in.programsPerUnit) + (rest > 0 ? wave(std::ceil(rest / units)) : 0);
  };
  r.waves = P / slots;
  double busiest = 0;
  for (const Pipe& p : pipesUsed) busiest = std::max(busiest, p.cycles);
  const double computeSeconds = launchCycles(busiest, chain) / clock;
  for (const Pipe& p : pipesUsed)
    if (p.cycles > 0) r.terms.push_back({p.name, launchCycles(p.cycles, 0) / clock});
  r.terms.push_back({"latency", launchCycles(0, chain) / clock});
  r.terms.push_back({"L2", in.accessedBytes / (units * pipes->l2 * clock)});
  r.terms.push_back({"memory", m.bandwidth > 0 ? in.bytes / m.bandwidth : 0});
  r.launchSeconds = pipes->launchUs * 1e-6;
  r.seconds = std::max({computeSeconds, r.terms[r.terms.size() - 2].seconds, r.terms.back().seconds}) + r.launchSeconds;
  const ModelTerm* top = &r.terms.front();
  for (const ModelTerm& term : r.terms)
    if (term.seconds > top->seconds) top = &term;
  r.bound = top->name;
  r.speedOfLight = roofline(work, m).seconds;
  if (opts.schedule && opts.schedule->split() != TileSplit::None) {
    r.fixup = fixupCost(*opts.schedule, static_cast<int64_t>(P), m);
    if (r.fixup.iterationsPerProgram > 0)
      r.balanceSavedSeconds =
          computeSeconds * (double(r.fixup.iterationsUnsplit) / double(r.fixup.iterationsPerProgram) - 1);
  }
  for (const std::string& note : work.notes) r.notes.push_back("work: " + note);
  return r;
}

ModelPrediction predictGpu(const CompiledKernel& k, Dim3 grid, const std::vector<rt::Arg>& args, const Machine& m,
                           const ModelOptions& opts) {
  return predictGpu(k.artifact(), launchWork(k.source(), grid, args).ir, m, opts);
}

std::string ModelPrediction::str() const {
  std::string s;
  s += "model of @" + in.kernel + " on " + in.machine + " (" + in.target + ")\n";
  s += "  programs " + std::to_string(in.programs) + " x " + std::to_string(in.threadsPerBlock) + " threads (" +
       std::to_string(in.warpsPerBlock) + " warps of " + std::to_string(in.warpSize) + ")\n";
  s += "  registers " + std::to_string(in.registers) + ", spills " + std::to_string(in.spillBytes) + " B, shared " +
       std::to_string(in.sharedBytes) + " B: " + in.occupancy + "\n";
  s += "  waves " + num("%.2f", waves) + "\n";
  s += std::string("  listing ") + name(in.code.listing) + ": " + std::to_string(in.code.all.total()) +
       " instructions (" + in.code.all.str() + ")\n";
  if (in.code.hasLoop)
    s += "  main loop: " + std::to_string(in.code.loop.total()) + " instructions (" + in.code.loop.str() + "), " +
         num("%.1f", in.loopIterationsPerProgram) + " iterations per program, " + std::to_string(in.stages) + " stage" +
         (in.stages == 1 ? "" : "s") + "\n";
  if (in.code.hasProducerLoop)
    s += "  producer loop (warp-specialised: one warp issues the copies, the others run the main loop): " +
         std::to_string(in.code.producerLoop.total()) + " instructions (" + in.code.producerLoop.str() + ")\n";
  s += "  work: " + formatSI(in.dotFlops, "FLOP") + " on tensor units, " + formatSI(in.vectorFlops, "FLOP") +
       " vector, " + formatSI(in.bytes, "B") + " compulsory, " + formatSI(in.accessedBytes, "B") + " accessed\n";
  s += "  terms (the launch, were each the only limit):\n";
  for (const ModelTerm& t : terms)
    s += "    " + t.name + std::string(t.name.size() < 18 ? 18 - t.name.size() : 0, ' ') +
         num("%.3f us", t.seconds * 1e6) + "\n";
  s += "  launch latency " + num("%.1f us", launchSeconds * 1e6) + "\n";
  if (fixup.split != TileSplit::None) {
    s += fixup.str();
    s += "    the balance saves " + num("%.3f us", balanceSavedSeconds * 1e6) +
         " of compute against one tile per program; the fix-up costs " + num("%.3f us", fixup.seconds * 1e6) + "\n";
  }
  s += "  predicted " + num("%.3f us", seconds * 1e6) + ", " + bound + " bound; speed of light " +
       num("%.3f us", speedOfLight * 1e6) + "\n";
  for (const std::string& n : notes) s += "  note: " + n + "\n";
  return s;
}

std::string formatModelTable(const std::vector<ModelPrediction>& predictions) {
  fmt::Table t({"machine", "predicted", "bound", "waves", "per unit", "regs", "listing", "speed of light", "of it"});
  t.leftAlign(2);
  t.leftAlign(6);
  for (const ModelPrediction& p : predictions)
    t.add({p.in.machine, formatSeconds(p.seconds), p.bound, fmt::fixed(p.waves, 2),
           std::to_string(p.in.programsPerUnit), std::to_string(p.in.registers), name(p.in.code.listing),
           formatSeconds(p.speedOfLight), p.seconds > 0 ? fmt::percent(p.speedOfLight / p.seconds) : "-"});
  return t.str();
}

std::vector<const Machine*> modelMachines() {
  std::vector<const Machine*> out;
  for (const Machine& m : gpuMachines()) {
    // Rows for GPUs whose architecture the model has no row for yet
    // (ModelArchs.def; B200: sm_100a) are left out.
    const size_t colon = m.target.find(':');
    if (colon == std::string::npos || !findModelArch(m.target.substr(colon + 1))) continue;
    out.push_back(&m);
  }
  return out;
}

std::string modelDeviceKey(const Machine& m) { return "model: " + m.id + " (" + m.target + ")"; }

TuneOptions gpuModelTuneOptions(const Machine& m, const ModelOptions& opts) {
  if (m.target.empty()) throw UsageError("machine " + m.id + " has no Tessera target: the model cannot compile for it");
  TuneOptions o;
  o.predictTarget = Target::parse(m.target);
  o.predictKey = modelDeviceKey(m).substr(std::string("model: ").size());
  o.predict = [m, opts](const codegen::Artifact& art, const TuneCandidate& cand) {
    return predictGpu(art, launchWork(cand.kernel, cand.grid, cand.args).ir, m, opts).seconds;
  };
  return o;
}

}  // namespace tessera::perf
