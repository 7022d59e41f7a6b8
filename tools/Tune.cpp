// `tessera tune`: the autotuner (tessera/perf/Tune.h) on the bundled
// examples that declare a config space (docs/tune.md). Argument handling and
// printing only.
#include <iostream>

#include "Commands.h"
#include "registry.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/perf/GpuModel.h"
#include "tessera/perf/Tune.h"
#include "tessera/perf/TuneTable.h"

namespace tessera::tools {

namespace {

std::string modelMachineIds() {
  std::string ids;
  for (const perf::Machine* m : perf::modelMachines()) ids += (ids.empty() ? "" : ", ") + m->id;
  return ids;
}

std::string tuneOptionsHelp() {
  std::string tunable;
  for (const auto& e : examples::all())
    if (e.tuneSpace) tunable += (tunable.empty() ? "" : ", ") + e.name;
  return "tune:    searches KERNEL's config space (" + tunable +
         ") on the device: prunes configs that violate\n"
         "         a constraint or that the compiler refuses (shared memory, registers), compiles the rest in\n"
         "         parallel, times each with the benchmark harness and checks it against the reference.\n"
         "         Every outcome is kept in the cache folder (TESSERA_CACHE_DIR, else XDG_CACHE_HOME/tessera,\n"
         "         else ~/.cache/tessera; folder tune/) per kernel, shape bucket (each dimension rounded up\n"
         "         to a power of two), dtype, device (with its threads: TESSERA_NUM_THREADS) and toolchain,\n"
         "         so a config is measured once\n"
         "  --shape AxBx...     the problem (or A,B,...); default: the example's\n"
         "  --device D          where to run: cpu (default), cpu:x86-64-v3, emu:nvptx:sm_80, nvptx:sm_90a, ...\n"
         "                      (--target is the same)\n"
         "  --budget-ms MS      timed repetitions of each config (default 100)\n"
         "  --quiet             no progress bar (it is drawn only when standard error is a terminal)\n"
         "  --retune            measure every config again, replacing what is stored (TESSERA_DETERMINISTIC=1:\n"
         "                      and pin the new fastest; otherwise a deterministic run reuses its pinned choice)\n"
         "  --model MACHINE     rank the configs with the GPU performance model for MACHINE (" +
         modelMachineIds() +
         ")\n"
         "                      instead of running them: compiled for its target, predicted, kept under\n"
         "                      the device \"model: MACHINE (TARGET)\" (no GPU needed; docs/model.md)\n"
         "  --export FILE.json  write the deployable table: the best stored config of KERNEL per bucket,\n"
         "                      dtype and device (perf::TuneTable::load reads it)\n"
         "exit codes: 0 a config was chosen; 2 a usage error, or every config pruned or rejected (the\n"
         "            message lists each with its reason)\n";
}

int runTune(const cli::Args& args) {
  std::ostream& out = std::cout;
  const std::string kernel = args.positional(0);
  const std::string model = args.value("--model", "");
  const std::string exportFile = args.value("--export", "");
  const double budgetMs = args.number("--budget-ms", "a time in milliseconds (0 to 3600000)", 0, 3.6e6).value_or(100);
  const examples::Example* ex = examples::find(kernel);
  if (!ex) args.fail("'" + kernel + "' is not a bundled kernel (`tessera list`)");
  if (!ex->tuneSpace) {
    std::string tunable;
    for (const auto& e : examples::all())
      if (e.tuneSpace) tunable += (tunable.empty() ? "" : ", ") + e.name;
    args.fail(kernel + " declares no config space; the tunable kernels are " + tunable);
  }
  const perf::Machine* machine = nullptr;
  if (!model.empty()) {
    for (const perf::Machine* m : perf::modelMachines())
      if (m->id == model) machine = m;
    if (!machine) args.fail("--model expects one of " + modelMachineIds() + ", got '" + model + "'");
  }
  examples::RunContext ctx;
  // The model's candidates are prepared in the emulator of the machine's
  // target (its memory holds the inputs; nothing runs there).
  ctx.device = machine ? Device::emulator(machine->target) : deviceFor(args.value("--target", "cpu"));
  ctx.shape = args.shape("--shape").value_or(std::vector<int64_t>{});
  perf::TuneProblem p = examples::tuneProblem(*ex, ctx);
  perf::TuneOptions o = machine ? perf::gpuModelTuneOptions(*machine) : perf::TuneOptions{};
  o.bench.budgetSeconds = budgetMs / 1e3;
  o.quiet = args.has("--quiet");
  o.retune = args.has("--retune");

  codegen::KeyedStore store(perf::kTuneStoreKind);
  out << "tessera tune " << p.kernel << "[" << examples::shapeStr(p.shape) << "] on "
      << (machine ? "model: " + o.predictKey : perf::tuneDeviceKey(p.device)) << ": " << p.space.candidates().size()
      << " configs, bucket " << perf::shapeBucket(p.shape) << ", " << p.dtype << "\n";
  perf::TuneResult r = perf::tune(p, o);
  out << perf::formatTuneTable(r);
  out << (machine ? "predicted " : "measured ") << r.measured << " config" << (r.measured == 1 ? "" : "s") << ", "
      << r.reused << " taken from the store, " << r.pruned << " pruned; " << perf::formatSeconds(r.seconds) << "\n";
  if (!store.usable())
    out << "note: the store is off (TESSERA_CACHE=0 or no cache folder): nothing was kept\n";
  else
    out << "results kept in " << store.dir() << "/" << perf::kTuneStoreKind << "\n";
  const perf::TuneCandidateResult& best = r.candidates[*r.best];
  out << "best: " << best.config.str() << " (" << perf::formatSeconds(best.seconds) << (machine ? " predicted" : "")
      << ")\n";
  if (!exportFile.empty()) {
    perf::TuneTable t = perf::TuneTable::fromStore(p.kernel, p.code);
    if (!store.usable())
      t.add({r.kernel, r.bucket, r.dtype, r.device, r.toolchain, best.config, best.seconds, best.shape});
    t.save(exportFile);
    out << "table of " << t.entries.size() << " entr" << (t.entries.size() == 1 ? "y" : "ies") << " written to "
        << exportFile << "\n";
  }
  return 0;
}

}  // namespace

cli::Command tuneCommand() {
  return {"tune",
          "  tessera tune KERNEL [--shape AxBx...] [--device cpu|cpu:CPU|emu:nvptx:SM|...] [--budget-ms MS]\n"
          "                  [--quiet] [--retune] [--export FILE.json] [--model MACHINE]\n",
          {kShapeOpt,
           {"--target", "a device (cpu, cpu:x86-64-v3, emu:nvptx:sm_80, ...)", "--device"},
           {"--budget-ms", "milliseconds"},
           {"--quiet", nullptr, "-q"},
           {"--retune"},
           {"--export", "a FILE.json to write the table to"},
           {"--model", "a machine id"}},
          1,
          1,
          "a KERNEL to tune (one of the examples `tessera help tune` names)",
          runTune,
          tuneOptionsHelp};
}

}  // namespace tessera::tools
