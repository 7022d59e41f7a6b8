// `tessera tune` (Tune.h): parses its own options, like bench and sol, so
// that a bad flag is reported with what tune expected.
#include "Tune.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <sstream>

#include "Perf.h"
#include "registry.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/perf/GpuModel.h"
#include "tessera/perf/Tune.h"
#include "tessera/perf/TuneTable.h"

namespace tessera::tools {

const char* const kTuneSynopsis =
    "  tessera tune KERNEL [--shape AxBx...] [--device cpu|cpu:CPU|emu:nvptx:SM|...] [--budget-ms MS]\n"
    "                  [--quiet] [--retune] [--export FILE.json] [--model MACHINE]\n";

namespace {
std::string modelMachineIds() {
  std::string ids;
  for (const perf::Machine* m : perf::modelMachines()) ids += (ids.empty() ? "" : ", ") + m->id;
  return ids;
}
}  // namespace

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
         "  --shape AxBx...     the problem (also A,B,...); default: the example's\n"
         "  --device D          where to run: cpu (default), cpu:x86-64-v3, emu:nvptx:sm_80, nvptx:sm_90a, ...\n"
         "                      (--target is the same)\n"
         "  --budget-ms MS      timed repetitions of each config (default 100)\n"
         "  --quiet             no progress bar (it is drawn only when standard error is a terminal)\n"
         "  --retune            measure every config again, replacing what is stored\n"
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

namespace {

struct TuneArgs {
  std::string kernel, device = "cpu", exportFile, model;
  std::vector<int64_t> shape;
  double budgetMs = 100;
  bool quiet = false, retune = false, help = false;
};

[[noreturn]] void fail(const std::string& msg) { throw CommandLineError("tune", msg); }

std::vector<int64_t> parseShape(const std::string& s) {
  std::vector<int64_t> out;
  std::string part;
  std::string norm = s;
  for (char& c : norm)
    if (c == 'x' || c == 'X') c = ',';
  std::stringstream ss(norm);
  while (std::getline(ss, part, ',')) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end || errno || v < 0)
      fail("--shape expects AxBx... (or A,B,...) of non-negative integers, got '" + s + "'");
    out.push_back(v);
  }
  if (out.empty()) fail("--shape expects AxBx... (or A,B,...) of non-negative integers, got '" + s + "'");
  return out;
}

TuneArgs parse(const std::vector<std::string>& args) {
  TuneArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string s = args[i];
    std::optional<std::string> inl;
    if (s.rfind("--", 0) == 0 && s.find('=') != std::string::npos) {
      inl = s.substr(s.find('=') + 1);
      s = s.substr(0, s.find('='));
    }
    auto value = [&](const std::string& what) {
      if (inl) return *inl;
      if (i + 1 >= args.size()) fail(s + " needs a value: " + what);
      return args[++i];
    };
    if (s == "--help" || s == "-h") {
      a.help = true;
    } else if (s == "--shape") {
      a.shape = parseShape(value("a shape AxBx..."));
    } else if (s == "--device" || s == "--target") {
      a.device = value("a device (cpu, cpu:x86-64-v3, emu:nvptx:sm_80, ...)");
    } else if (s == "--budget-ms") {
      std::string v = value("milliseconds");
      char* end = nullptr;
      errno = 0;
      double ms = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || errno || !std::isfinite(ms) || ms < 0 || ms > 3.6e6)
        fail("--budget-ms expects a time in milliseconds (0 to 3600000), got '" + v + "'");
      a.budgetMs = ms;
    } else if (s == "--quiet" || s == "-q") {
      a.quiet = true;
    } else if (s == "--retune") {
      a.retune = true;
    } else if (s == "--model") {
      a.model = value("a machine id (" + modelMachineIds() + ")");
    } else if (s == "--export") {
      a.exportFile = value("a FILE.json to write the table to");
    } else if (!s.empty() && s[0] == '-') {
      fail("unknown option " + s + " (`tessera help tune` lists the options of tune)");
    } else if (a.kernel.empty()) {
      a.kernel = s;
    } else {
      fail("takes one KERNEL, got '" + a.kernel + "' and '" + s + "'");
    }
  }
  if (!a.help && a.kernel.empty()) fail("needs a KERNEL to tune (one of the examples `tessera help tune` names)");
  return a;
}

}  // namespace

int runTune(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  TuneArgs a = parse(args);
  if (a.help) {
    out << "usage:\n" << kTuneSynopsis << tuneOptionsHelp();
    return 0;
  }
  const examples::Example* ex = examples::find(a.kernel);
  if (!ex) fail("'" + a.kernel + "' is not a bundled kernel (`tessera list`)");
  if (!ex->tuneSpace) {
    std::string tunable;
    for (const auto& e : examples::all())
      if (e.tuneSpace) tunable += (tunable.empty() ? "" : ", ") + e.name;
    fail(a.kernel + " declares no config space; the tunable kernels are " + tunable);
  }
  const perf::Machine* machine = nullptr;
  if (!a.model.empty()) {
    for (const perf::Machine* m : perf::modelMachines())
      if (m->id == a.model) machine = m;
    if (!machine) fail("--model expects one of " + modelMachineIds() + ", got '" + a.model + "'");
  }
  examples::RunContext ctx;
  // The model's candidates are prepared in the emulator of the machine's
  // target (its memory holds the inputs; nothing runs there).
  ctx.device = machine ? Device::emulator(machine->target) : deviceForTarget(Target::parse(a.device));
  ctx.shape = a.shape;
  perf::TuneProblem p = examples::tuneProblem(*ex, ctx);
  perf::TuneOptions o = machine ? perf::gpuModelTuneOptions(*machine) : perf::TuneOptions{};
  o.bench.budgetSeconds = a.budgetMs / 1e3;
  o.quiet = a.quiet;
  o.retune = a.retune;

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
  if (!a.exportFile.empty()) {
    perf::TuneTable t = perf::TuneTable::fromStore(p.kernel, p.code);
    if (!store.usable())
      t.add({r.kernel, r.bucket, r.dtype, r.device, r.toolchain, best.config, best.seconds, best.shape});
    t.save(a.exportFile);
    out << "table of " << t.entries.size() << " entr" << (t.entries.size() == 1 ? "y" : "ies") << " written to "
        << a.exportFile << "\n";
  }
  (void)err;
  return 0;
}

}  // namespace tessera::tools
