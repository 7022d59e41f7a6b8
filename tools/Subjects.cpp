#include "Subjects.h"

#include <algorithm>
#include <climits>
#include <fstream>

#include "tessera/perf/SpeedOfLight.h"

namespace tessera::tools {

Subject resolveSubject(const cli::Args& a, const std::string& s) {
  Subject sub;
  std::string name = s, shape;
  if (auto colon = s.find(':'); colon != std::string::npos && examples::find(s.substr(0, colon))) {
    name = s.substr(0, colon);
    shape = s.substr(colon + 1);
  }
  if (const examples::Example* ex = examples::find(name)) {
    if (!ex->prepare)
      a.fail("'" + name +
             "' runs several launches (GEMMs and collectives across ranks), not one: run it with `tessera run " + name +
             "` or its program; " + a.command() + " takes a single-launch kernel");
    sub.example = ex;
    sub.shape = a.shape("--shape").value_or(std::vector<int64_t>{});
    if (!shape.empty()) {
      std::optional<std::vector<int64_t>> parsed = cli::parseShape(shape);
      if (!parsed) a.fail("'" + s + "': the shape after ':' is " + cli::kShapeGrammar);
      sub.shape = *parsed;
    }
    return sub;
  }
  std::ifstream f(s);
  if (!f) {
    std::string names;
    for (const auto& e : examples::all()) names += (names.empty() ? "" : ", ") + e.name;
    a.fail("'" + s + "' is neither a bundled kernel (" + names + ") nor a readable FILE.tir");
  }
  sub.file = s;
  return sub;
}

std::vector<std::string> machinesOf(const cli::Args& a) {
  std::optional<std::string> v = a.value("--machines");
  if (!v) return {};
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= v->size()) {
    size_t end = v->find(',', start);
    std::string part = v->substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!part.empty()) {
      if (part != "host" && !perf::findGpuMachine(part))
        a.fail("--machines: unknown machine '" + part + "' (expected some of: " + perf::machineIds() + ")");
      out.push_back(part);
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (out.empty()) a.fail("--machines expects machine ids separated by commas (" + perf::machineIds() + ")");
  return out;
}

perf::FileLaunchSpec fileSpecOf(const cli::Args& a, const std::string& path) {
  perf::FileLaunchSpec s;
  s.path = path;
  s.kernelName = a.value("--kernel", "");
  if (std::optional<std::string> g = a.value("--grid")) {
    std::vector<int64_t> d;
    size_t start = 0;
    while (true) {
      size_t end = g->find(',', start);
      std::string part = g->substr(start, end == std::string::npos ? std::string::npos : end - start);
      char* stop = nullptr;
      long long v = std::strtoll(part.c_str(), &stop, 10);
      if (part.empty() || *stop || v < 1 || v > INT32_MAX)
        a.fail("--grid expects a grid X[,Y[,Z]] of integers 1..2^31-1, got '" + *g + "'");
      d.push_back(v);
      if (end == std::string::npos) break;
      start = end + 1;
    }
    if (d.size() > 3) a.fail("--grid expects a grid X[,Y[,Z]] (one to three sizes), got '" + *g + "'");
    std::array<uint32_t, 3> grid{1, 1, 1};
    for (size_t i = 0; i < d.size(); ++i) grid[i] = static_cast<uint32_t>(d[i]);
    s.grid = grid;
  }
  for (const std::string& v : a.values("--arg")) {
    auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
      a.fail("--arg expects NAME=VALUE (a scalar argument's value or a buffer's element count), got '" + v + "'");
    s.args.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  }
  return s;
}

examples::Launch fileLaunchOf(const cli::Args& a, const Subject& sub, const Device& dev) {
  perf::FileLaunch f;
  try {
    f = perf::fileLaunch(fileSpecOf(a, sub.file), dev);
  } catch (const UsageError& e) {
    a.fail(e.what());
  }
  examples::Launch l(f.kernel, f.grid, std::move(f.args), {});
  l.check = [] {
    examples::CheckResult r;
    r.ok = true;
    r.detail = "no reference for a FILE.tir";
    return r;
  };
  return l;
}

examples::RunContext contextFor(const cli::Args& a, const Subject& sub, const Device& dev,
                                const std::optional<perf::TuneConfig>& config) {
  examples::RunContext ctx;
  ctx.device = dev;
  ctx.shape = sub.shape;
  if (a.command() == "bench") {
    ctx.seed = seedOf(a);
    ctx.launch.threads = threadsOf(a);
  }
  if (!config) return ctx;
  // --config: names of the example's tune space only, so that a misspelt
  // parameter is an error rather than a silently ignored default.
  if (!sub.example || !sub.example->tuneSpace)
    a.fail("--config: " + (sub.example ? "example " + sub.example->name : sub.file) +
           " declares no tune space (`tessera tune` lists the tunable examples)");
  const std::string target = a.value("--target", "cpu");
  const std::vector<int64_t> shape = sub.shape.empty() ? sub.example->prepare(ctx).shape : sub.shape;
  if (config->values.empty()) {
    // --config tuned: the best config `tessera tune` stored for this
    // device (or ranked with the performance model for its machine).
    const perf::TuneTable table = perf::TuneTable::fromStore(sub.example->name);
    const perf::TuneTableEntry* e = table.findFor(sub.example->name, shape, sub.example->dtype, dev);
    if (!e)
      a.fail("--config tuned: nothing tuned for " + sub.example->name + " at " + examples::shapeStr(shape) + " on " +
             dev.name() + "; run `tessera tune " + sub.example->name + " --shape " + examples::shapeStr(shape) +
             " --device " + target + "` first (or with --model MACHINE)");
    return examples::withConfig(ctx, e->config);
  }
  perf::TuneSpace space = sub.example->tuneSpace(Target::parse(target), shape);
  std::string names;
  for (const auto& p : space.params) names += (names.empty() ? "" : ", ") + p.name;
  for (const auto& [k, v] : config->values)
    if (std::none_of(space.params.begin(), space.params.end(), [&](const auto& p) { return p.name == k; }))
      a.fail("--config: " + sub.example->name + " on " + target + " has no parameter " + k +
             " (its parameters: " + names + ")");
  return examples::withConfig(ctx, *config);
}

}  // namespace tessera::tools
