// `tessera sol`: the speed of light of a launch on each machine of the
// table (tessera/perf/SpeedOfLight.h, docs/sol.md) and, with --model, the
// GPU performance model's prediction (docs/model.md). Argument handling and
// printing only.
#include <algorithm>
#include <iostream>
#include <optional>

#include "Subjects.h"
#include "tessera/perf/Bench.h"
#include "tessera/perf/GpuModel.h"
#include "tessera/perf/SpeedOfLight.h"

namespace tessera::tools {

namespace {

std::string solOptionsHelp() {
  return "sol:     the speed of light of one launch of each KERNEL (or FILE.tir with --grid and --arg):\n"
         "         its flops and compulsory bytes (counted from the IR) and, per machine, the roofline\n"
         "         time max(bytes / bandwidth, flops / peak) and what bounds it. Without a kernel: the\n"
         "         machine table. Machines: " +
         perf::machineIds() +
         ".\n"
         "         The host's FMA peak and triad bandwidth are measured once and remembered\n"
         "         (TESSERA_CACHE_DIR, else XDG_CACHE_HOME/tessera, else ~/.cache/tessera; docs/sol.md)\n"
         "  --machines ID,...   the machines to list (default all)\n"
         "  --remeasure-host    measure the host's peaks again\n"
         "  --model             also predict each launch with the GPU performance model on every GPU\n"
         "                      machine Tessera compiles for (or those of --machines): the kernel is\n"
         "                      compiled for the machine's target and its listing, registers, occupancy\n"
         "                      and work give the time (no GPU needed; docs/model.md)\n"
         "  --config K=V,...    trace each example with this point of its tune space for --target (as\n"
         "                      bench --config): the work and the model's prediction of that config\n"
         "  FILE.tir            --grid X[,Y[,Z]] and --arg NAME=VALUE (integer scalars: their value;\n"
         "                      buffers: their element count, which bounds the bytes counted)\n";
}

/// --config: a point of the examples' tune spaces (a usage error naming
/// what is wrong), or none.
std::optional<perf::TuneConfig> configOf(const cli::Args& args) {
  std::optional<std::string> v = args.value("--config");
  if (!v) return std::nullopt;
  try {
    return perf::TuneConfig::parse(*v);
  } catch (const UsageError& e) {
    args.fail(std::string("--config: ") + e.what());
  }
}

/// `sol --model`: the subject compiled for each model machine's target
/// (its inputs in that target's emulator's memory), predicted there.
std::string modelReport(const cli::Args& args, const Subject& sub, const std::vector<std::string>& machineIds) {
  std::vector<perf::ModelPrediction> preds;
  std::vector<std::string> skipped;
  for (const perf::Machine* m : perf::modelMachines()) {
    if (!machineIds.empty() && std::find(machineIds.begin(), machineIds.end(), m->id) == machineIds.end()) continue;
    Target t = Target::parse(m->target);
    Device dev = Device::emulator(m->target);
    try {
      if (sub.example) {
        examples::RunContext ctx = contextFor(args, sub, dev, configOf(args));
        examples::Launch l = sub.example->prepare(ctx);
        CompiledKernel k = compile(specializedFor(l.kernel, l.args), t, sub.example->optionsFor(ctx));
        perf::ModelOptions mo;
        mo.schedule = l.schedule;  // a K-split launch: its fix-up is reported too
        preds.push_back(perf::predictGpu(k, l.grid, l.args, *m, mo));
      } else {
        examples::Launch l = fileLaunchOf(args, sub, dev);
        preds.push_back(perf::predictGpu(compile(specializedFor(l.kernel, l.args), t), l.grid, l.args, *m));
      }
    } catch (const ResourceError& e) {
      skipped.push_back(m->id + ": " + e.what());
    }
  }
  if (preds.empty() && skipped.empty())
    args.fail("--model: none of the machines asked for has a target Tessera compiles for");
  std::string s = "  performance model (docs/model.md):\n" + perf::formatModelTable(preds);
  for (const std::string& why : skipped) s += "  cannot run on " + why + "\n";
  for (const perf::ModelPrediction& p : preds) s += p.str();
  return s;
}

int runSol(const cli::Args& args) {
  std::ostream& out = std::cout;
  const std::vector<std::string> machineIds = machinesOf(args);
  const bool remeasure = args.has("--remeasure-host");
  if (args.positionals().empty()) {
    out << perf::formatMachineTable(perf::selectMachines(machineIds, false, remeasure, std::cerr));
    return 0;
  }
  // Inputs are generated where the target's code would read them; GPU
  // targets use the emulator's host memory, so no GPU is needed.
  Device dev = perf::inputDeviceForTarget(Target::parse(args.value("--target", "cpu")));
  // Every launch's work first, so that a mistake is reported before the
  // host is measured.
  std::vector<std::pair<std::string, ir::WorkEstimate>> works;
  std::vector<Subject> subjects;
  for (const std::string& s : args.positionals()) {
    Subject sub = resolveSubject(args, s);
    ir::WorkEstimate w;
    std::string title;
    if (sub.example) {
      examples::Launch l = sub.example->prepare(contextFor(args, sub, dev, configOf(args)));
      w = perf::launchWork(l.kernel, l.grid, l.args).ir;
      title = sub.example->name + "[" + examples::shapeStr(l.shape) + "], grid " + l.grid.str();
    } else {
      perf::FileLaunchFacts f;
      try {
        f = perf::fileLaunchFacts(fileSpecOf(args, sub.file));
      } catch (const UsageError& e) {
        args.fail(e.what());
      }
      w = perf::launchWork(f.kernel, f.facts).ir;
      title = f.kernel.ir().name() + " (" + sub.file + "), grid " + f.grid.str();
    }
    works.emplace_back(title, std::move(w));
    subjects.push_back(sub);
  }
  std::vector<perf::Machine> machines = perf::selectMachines(machineIds, false, remeasure, std::cerr);
  for (size_t i = 0; i < works.size(); ++i) {
    out << (i ? "\n" : "") << perf::formatSolTable(works[i].first, works[i].second, machines);
    if (args.has("--model")) out << modelReport(args, subjects[i], machineIds);
  }
  return 0;
}

}  // namespace

cli::Command solCommand() {
  return {"sol",
          "  tessera sol [KERNEL[:SHAPE]...|FILE.tir] [--target T] [--shape A,B,...] [--machines ID,...]\n"
          "                  [--grid X,Y,Z] [--arg NAME=VALUE]... [--kernel NAME] [--remeasure-host] [--model]\n"
          "                  [--config K=V,...]\n",
          {kTargetOpt,
           kShapeOpt,
           kMachinesOpt,
           kGridOpt,
           kArgOpt,
           kKernelOpt,
           {"--remeasure-host"},
           {"--model"},
           {"--config", "a config K=V,... (BLOCK_M=128,num_warps=8)"}},
          0,
          -1,
          "KERNEL[:SHAPE] names or a FILE.tir",
          runSol,
          solOptionsHelp};
}

}  // namespace tessera::tools
