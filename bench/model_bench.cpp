// tessera_model_bench: the GPU performance model's predictions against
// measured times (docs/model.md, "Checking it against a GPU"). Run by hand:
//
//   cmake --build build --target tessera_model_bench
//   build/bin/tessera_model_bench [--cases NAME:SHAPE,...] [--machines ID,...]
//                                 [--measured FILE.json] [--json FILE] [--budget-ms MS]
//
// For each case (a bundled kernel at a shape) and each machine of the model
// (perf::modelMachines, or --machines), the kernel is compiled for the
// machine's target as a launch with the case's inputs would run it and
// predicted. Measurements come from
//   * the CUDA or HIP device of this machine, when there is one: each case
//     is timed with the benchmark harness and matched to the device's row;
//   * --measured FILE.json: a `tessera bench --json` report taken on a GPU
//     machine (the command is printed, for the same cases); its device name
//     picks the row ("H100" -> h100_sxm).
// The table gives predicted / measured per row and, over the rows with a
// measurement, the geometric mean of that ratio with its range: the figure
// that recalibrates ModelArchs.def's assumed rows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/CommandLine.h"
#include "registry.h"
#include "tessera/perf/Bench.h"
#include "tessera/perf/GpuModel.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ex = tessera::examples;
namespace perf = tessera::perf;

namespace {

struct Case {
  std::string name;
  std::vector<int64_t> shape;  // empty: the example's default
};

// Memory-bound, reduction, GEMM and attention kernels at sizes that fill a
// large GPU.
const std::vector<Case> kDefaultCases = {
    {"vector_add", {1 << 24}},        {"softmax", {4096, 4096}},           {"layernorm", {4096, 4096}},
    {"rmsnorm", {4096, 4096}},        {"gemm_f16", {4096, 4096, 4096}},    {"gemm_bf16", {4096, 4096, 4096}},
    {"gemm_f16", {8192, 8192, 1024}}, {"flash_attention", {16, 4096, 64}}, {"flash_attention_causal", {16, 4096, 64}},
};

struct Row {
  std::string id;  // name[shape], as `tessera bench` names it
  std::string machine;
  std::optional<perf::ModelPrediction> predicted;
  std::string error;
  std::optional<double> measured;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);)
    if (!part.empty()) out.push_back(part);
  return out;
}

Case parseCase(const std::string& text) {
  Case c;
  size_t colon = text.find(':');
  c.name = text.substr(0, colon);
  if (!ex::find(c.name)) throw ts::UsageError("--cases: '" + c.name + "' is not a bundled kernel");
  if (colon != std::string::npos) {
    // The tools' one shape grammar; AxB here, the cases being separated by commas.
    std::optional<std::vector<int64_t>> shape = ts::tools::cli::parseShape(text.substr(colon + 1));
    if (!shape) throw ts::UsageError("--cases: '" + text + "': the shape after ':' is AxBx... (non-negative integers)");
    c.shape = *shape;
  }
  return c;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ts::UsageError("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The machine row a device name stands for: the row whose name's first
// word ("H100", "A100", "MI300X") the device name contains.
const perf::Machine* machineOfDevice(const std::string& device) {
  for (const perf::Machine* m : perf::modelMachines()) {
    std::string word = m->name.substr(0, m->name.find(' '));
    if (device.find(word) != std::string::npos) return m;
  }
  return nullptr;
}

std::optional<ts::Device> gpuDevice() {
  for (auto make : {+[] { return ts::Device::cuda(); }, +[] { return ts::Device::hip(); }}) {
    try {
      return make();
    } catch (const ts::Error&) {
    }
  }
  return std::nullopt;
}

}  // namespace

const ts::tools::cli::Command kProgram{
    "tessera_model_bench",
    "  tessera_model_bench [--cases NAME:SHAPE,...] [--machines ID,...] [--measured FILE.json] [--json FILE]\n"
    "                      [--budget-ms MS]\n",
    {{"--cases", "cases NAME:AxB,..."},
     {"--machines", "machine ids ID,..."},
     {"--measured", "a `tessera bench --json` report"},
     {"--json", "a FILE for the table as JSON"},
     {"--budget-ms", "milliseconds"}},
    0,
    0,
    "",
    nullptr,
    [] {
      return std::string(
          "the GPU performance model's predictions against measured times (docs/model.md): per case and\n"
          "model machine, predicted / measured, and their geometric mean over the measured rows\n"
          "  --cases NAME:AxB,...  bundled kernels at shapes (default: the built-in cases)\n"
          "  --machines ID,...     the model's machines (default all)\n"
          "  --measured FILE.json  measurements from a `tessera bench --json` report of a GPU machine\n"
          "  --json FILE           the table as JSON\n"
          "  --budget-ms MS        timing of each case on this machine's GPU, if any (default 200)\n");
    }};

int main(int argc, char** argv) {
  try {
    const ts::tools::cli::Args args = ts::tools::cli::parseProgram(kProgram, argc, argv);
    std::vector<Case> cases = kDefaultCases;
    if (std::optional<std::string> v = args.value("--cases")) {
      cases.clear();
      for (const std::string& c : split(*v, ',')) cases.push_back(parseCase(c));
    }
    const std::vector<std::string> machineIds = split(args.value("--machines", ""), ',');
    const std::string measuredFile = args.value("--measured", ""), jsonFile = args.value("--json", "");
    const double budgetMs = args.number("--budget-ms", "a time in milliseconds (>= 0)", 0, 3.6e6).value_or(200);
    std::vector<const perf::Machine*> machines;
    for (const perf::Machine* m : perf::modelMachines())
      if (machineIds.empty() || std::find(machineIds.begin(), machineIds.end(), m->id) != machineIds.end())
        machines.push_back(m);
    if (machines.empty()) throw ts::UsageError("--machines names no machine the model knows");

    // Measurements: a report from a GPU machine, and this machine's GPU.
    std::map<std::pair<std::string, std::string>, double> measured;  // (id, machine) -> median seconds
    if (!measuredFile.empty())
      for (const perf::BenchResult& r : perf::fromJson(readFile(measuredFile), measuredFile))
        if (const perf::Machine* m = machineOfDevice(r.device)) measured[{r.id(), m->id}] = r.stats.median;
    std::optional<ts::Device> gpu = gpuDevice();
    const perf::Machine* gpuMachine = gpu ? machineOfDevice(gpu->name()) : nullptr;

    std::vector<Row> rows;
    std::string benchCommand = "tessera bench";
    for (const Case& c : cases) {
      const ex::Example& e = *ex::find(c.name);
      std::string id;
      for (const perf::Machine* m : machines) {
        Row row;
        row.machine = m->id;
        try {
          ex::RunContext ctx;
          ctx.device = ts::Device::emulator(m->target);
          ctx.shape = c.shape;
          ex::Launch l = e.prepare(ctx);
          id = row.id = c.name + "[" + ex::shapeStr(l.shape) + "]";
          ts::CompiledKernel k =
              ts::compile(ts::specializedFor(l.kernel, l.args), ts::Target::parse(m->target), e.optionsFor(ctx));
          row.predicted = perf::predictGpu(k, l.grid, l.args, *m);
        } catch (const ts::Error& err) {
          row.error = err.what();
          row.error = row.error.substr(0, row.error.find('\n'));
        }
        rows.push_back(std::move(row));
      }
      std::string shape;  // `tessera bench` spells a shape with commas
      for (int64_t d : c.shape) shape += (shape.empty() ? ":" : ",") + std::to_string(d);
      benchCommand += " " + c.name + shape;
      // This machine's GPU: time the case there once.
      if (gpu && gpuMachine) {
        ex::RunContext ctx;
        ctx.device = *gpu;
        ctx.shape = c.shape;
        ex::Launch l = e.prepare(ctx);
        ts::CompiledKernel k = ts::compile(l.kernel, *gpu, e.optionsFor(ctx));
        perf::BenchOptions bo;
        bo.budgetSeconds = budgetMs / 1e3;
        perf::BenchResult b = perf::benchmark(k, ex::launchGrid(l, k), l.args, bo);
        measured[{c.name + "[" + ex::shapeStr(l.shape) + "]", gpuMachine->id}] = b.stats.median;
      }
    }
    for (Row& r : rows) {
      auto it = measured.find({r.id, r.machine});
      if (it != measured.end()) r.measured = it->second;
    }

    std::printf("%-34s %-9s %12s %-17s %12s %9s\n", "kernel", "machine", "predicted", "bound", "measured", "pred/meas");
    std::vector<double> ratios;
    for (const Row& r : rows) {
      if (!r.predicted) {
        std::printf("%-34s %-9s %s\n", r.id.empty() ? "?" : r.id.c_str(), r.machine.c_str(), r.error.c_str());
        continue;
      }
      std::string meas = r.measured ? perf::formatSeconds(*r.measured) : "-";
      std::string ratio = "-";
      if (r.measured && *r.measured > 0) {
        ratios.push_back(r.predicted->seconds / *r.measured);
        char b[32];
        std::snprintf(b, sizeof b, "%.2f", ratios.back());
        ratio = b;
      }
      std::printf("%-34s %-9s %12s %-17s %12s %9s\n", r.id.c_str(), r.machine.c_str(),
                  perf::formatSeconds(r.predicted->seconds).c_str(), r.predicted->bound.c_str(), meas.c_str(),
                  ratio.c_str());
    }
    if (ratios.empty()) {
      std::printf(
          "\nno measurements (no CUDA/HIP device here, no --measured report). On a GPU machine:\n  %s "
          "--target nvptx:sm_90a --json bench.json\nthen: tessera_model_bench --measured bench.json\n",
          benchCommand.c_str());
    } else {
      double logSum = 0;
      for (double x : ratios) logSum += std::log(x);
      std::printf("\npredicted / measured over %zu rows: geometric mean %.2f, min %.2f, max %.2f\n", ratios.size(),
                  std::exp(logSum / double(ratios.size())), *std::min_element(ratios.begin(), ratios.end()),
                  *std::max_element(ratios.begin(), ratios.end()));
    }
    if (!jsonFile.empty()) {
      std::ofstream out(jsonFile);
      out << "{\"rows\": [";
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        out << (i ? ",\n  " : "\n  ") << "{\"id\": \"" << r.id << "\", \"machine\": \"" << r.machine << "\"";
        if (r.predicted)
          out << ", \"predicted_s\": " << r.predicted->seconds << ", \"bound\": \"" << r.predicted->bound
              << "\", \"speed_of_light_s\": " << r.predicted->speedOfLight;
        if (r.measured) out << ", \"measured_s\": " << *r.measured;
        out << "}";
      }
      out << "\n]}\n";
      std::printf("written %s\n", jsonFile.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera_model_bench: %s\n", e.what());
    return 2;
  }
}
