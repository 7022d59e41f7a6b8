// Speed of light (SpeedOfLight.h): the machine table, peaks per flop class,
// the roofline of a launch's work, and the tables `tessera sol` prints. The
// host's measured peaks are in HostPeaks.cpp.
#include "tessera/perf/SpeedOfLight.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "Format.h"

namespace tessera::perf {

namespace {
constexpr double kTera = 1e12;
constexpr uint64_t kMiB = uint64_t{1} << 20;
}  // namespace

const std::vector<Machine>& gpuMachines() {
  static const std::vector<Machine> table = [] {
    std::vector<Machine> t;
#define TS_MACHINE(id_, name_, target_, units_, mhz_, gbs_, l2_, llc_, chiplets_, f64_, f32_, f16_, bf16_, tf32_, \
                   df16_, dbf16_, dfp8_, di8_, source_)                                                           \
  {                                                                                                               \
    Machine m;                                                                                                    \
    m.id = #id_;                                                                                                  \
    m.name = name_;                                                                                               \
    m.target = target_;                                                                                           \
    m.units = units_;                                                                                             \
    m.clockMHz = mhz_;                                                                                            \
    m.bandwidth = (gbs_) * 1e9;                                                                                   \
    m.l2Bytes = static_cast<uint64_t>(l2_) * kMiB;                                                                \
    m.llcBytes = static_cast<uint64_t>(llc_) * kMiB;                                                              \
    m.chiplets = chiplets_;                                                                                       \
    m.vecF64 = (f64_) * kTera;                                                                                    \
    m.vecF32 = (f32_) * kTera;                                                                                    \
    m.vecF16 = (f16_) * kTera;                                                                                    \
    m.vecBF16 = (bf16_) * kTera;                                                                                  \
    m.tf32 = (tf32_) * kTera;                                                                                     \
    m.dotF16 = (df16_) * kTera;                                                                                   \
    m.dotBF16 = (dbf16_) * kTera;                                                                                 \
    m.dotFP8 = (dfp8_) * kTera;                                                                                   \
    m.dotI8 = (di8_) * kTera;                                                                                     \
    m.source = source_;                                                                                           \
    t.push_back(std::move(m));                                                                                    \
  }
#include "tessera/perf/Machines.def"
    return t;
  }();
  return table;
}

const Machine* findGpuMachine(const std::string& id) {
  for (const Machine& m : gpuMachines())
    if (m.id == id) return &m;
  return nullptr;
}

std::string machineIds() {
  std::string s = "host";
  for (const Machine& m : gpuMachines()) s += ", " + m.id;
  return s;
}

std::vector<Machine> allMachines(const HostPeaks& host) {
  std::vector<Machine> all = {hostMachine(host)};
  all.insert(all.end(), gpuMachines().begin(), gpuMachines().end());
  return all;
}

double Machine::peakFor(ir::FlopUnit unit, DType dtype, std::string* unitName) const {
  auto pick = [&](double tensor, const char* what) {
    if (tensor > 0) {
      if (unitName) *unitName = what;
      return tensor;
    }
    if (unitName) *unitName = "vector";
    return vecF32;
  };
  if (dtype == DType::F64) {
    if (unitName) *unitName = "vector";
    return vecF64 > 0 ? vecF64 : vecF32 / 2;
  }
  if (unit == ir::FlopUnit::Vector) {
    if (unitName) *unitName = "vector";
    return vecF32;
  }
  switch (dtype) {
    case DType::F16: return pick(dotF16, "tensor");
    case DType::BF16: return pick(dotBF16, "tensor");
    case DType::I8: return pick(dotI8, "tensor");
    // fp8: the fp8 tensor cores where the machine has them; elsewhere the
    // dot is widened to f16 (widen-fp8-dots) and runs on the f16 ones.
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2FNUZ: return pick(dotFP8 > 0 ? dotFP8 : dotF16, "tensor");
    default:
      if (unitName) *unitName = "vector";
      return vecF32;
  }
}

Roofline roofline(const ir::WorkEstimate& work, const Machine& m) {
  Roofline r;
  r.machine = m.id;
  r.memorySeconds = m.bandwidth > 0 ? work.bytes() / m.bandwidth : 0;
  // Flops of one unit add up; different units run side by side.
  std::map<std::string, double> unitTime;
  std::map<std::string, std::pair<double, std::string>> unitTop;  // the class taking most of a unit's time
  for (const auto& f : work.flops) {
    std::string unit;
    double peak = m.peakFor(f.unit, f.dtype, &unit);
    if (peak <= 0) continue;
    double t = f.count / peak;
    unitTime[unit] += t;
    auto& top = unitTop[unit];
    if (t > top.first) top = {t, ir::flopClassName(f.unit, f.dtype) + " on " + unit + " units"};
  }
  std::string busiest;
  for (const auto& [unit, t] : unitTime)
    if (t > r.computeSeconds) {
      r.computeSeconds = t;
      busiest = unit;
    }
  r.seconds = std::max(r.memorySeconds, r.computeSeconds);
  if (r.seconds <= 0)
    r.bound = "-";
  else if (r.memorySeconds >= r.computeSeconds)
    r.bound = "memory";
  else
    r.bound = "compute (" + unitTop[busiest].second + ")";
  r.attainableFlops = r.seconds > 0 ? work.totalFlops() / r.seconds : 0;
  return r;
}

const Machine* machineForDevice(const std::string& deviceKind, const std::string& arch, const std::string& deviceName,
                                const std::vector<Machine>& machines) {
  if (deviceKind == "cpu") {
    for (const Machine& m : machines)
      if (m.id == "host") return &m;
    return nullptr;
  }
  if (deviceKind != "cuda" && deviceKind != "hip") return nullptr;
  const Machine* first = nullptr;
  for (const Machine& m : machines) {
    if (m.target.empty() || m.target != arch) continue;
    if (!first) first = &m;
    // The model ("H100", "MI300X") as a word of the device name: "NVIDIA
    // H100 80GB HBM3" is an H100, "NVIDIA GH200" is not an H200.
    std::string model = m.name.substr(0, m.name.find(' '));
    for (size_t at = deviceName.find(model); at != std::string::npos; at = deviceName.find(model, at + 1)) {
      auto word = [&](size_t i) { return std::isalnum(static_cast<unsigned char>(deviceName[i])) != 0; };
      size_t end = at + model.size();
      if ((at == 0 || !word(at - 1)) && (end >= deviceName.size() || !word(end))) return &m;
    }
  }
  return first;
}

std::string formatSI(double v, const std::string& unit) { return fmt::si(v, unit); }

std::string formatSolTable(const std::string& title, const ir::WorkEstimate& w, const std::vector<Machine>& machines) {
  std::string out = title + "\n";
  std::string classes;
  for (const auto& f : w.flops)
    classes += (classes.empty() ? "" : ", ") + ir::flopClassName(f.unit, f.dtype) + " " + fmt::si(f.count, "");
  while (!classes.empty() && classes.back() == ' ') classes.pop_back();
  out += "  flops:   " + fmt::si(w.totalFlops(), "FLOP") + (classes.empty() ? "" : " (" + classes + ")");
  if (w.transcendentals > 0) out += "; of which " + fmt::si(w.transcendentals, "") + " exp/log/tanh/erf";
  out += "\n";
  std::string reads, writes;
  for (const auto& a : w.args) {
    if (a.bytesRead > 0) reads += (reads.empty() ? "" : ", ") + a.name + " " + fmt::si(a.bytesRead, "B");
    if (a.bytesWritten > 0) writes += (writes.empty() ? "" : ", ") + a.name + " " + fmt::si(a.bytesWritten, "B");
  }
  out += "  bytes:   " + fmt::si(w.bytes(), "B") + " compulsory (read " + (reads.empty() ? "nothing" : reads) +
         "; written " + (writes.empty() ? "nothing" : writes) + ")\n";
  if (w.bytes() > 0)
    out += "           " + fmt::si(w.accessedBytes(), "B") + " accessed by the tiles (" +
           fmt::fixed(w.accessedBytes() / w.bytes(), 1) + "x the compulsory bytes: the reuse caches must give)\n";
  out += "  intensity: " + (w.bytes() > 0 ? fmt::sig3(w.intensity()) + " FLOP/B" : std::string("-")) + "\n";
  for (const std::string& n : w.notes) out += "  note: " + n + "\n";
  fmt::Table t({"machine", "bandwidth", "peak used", "memory time", "compute time", "roofline", "bound"});
  t.leftAlign(6);
  for (const Machine& m : machines) {
    Roofline r = roofline(w, m);
    // The peak of the busiest unit (or the FP32 vector peak when no flops).
    std::string peak = fmt::si(m.vecF32, "FLOP/s");
    double best = 0;
    for (const auto& f : w.flops) {
      std::string unit;
      double p = m.peakFor(f.unit, f.dtype, &unit);
      double tt = p > 0 ? f.count / p : 0;
      if (tt > best) {
        best = tt;
        peak = fmt::si(p, "FLOP/s") + " " + unit;
      }
    }
    t.add({m.name, fmt::si(m.bandwidth, "B/s"), peak, fmt::si(r.memorySeconds, "s"), fmt::si(r.computeSeconds, "s"),
           fmt::si(r.seconds, "s"), r.bound});
  }
  return out + t.str();
}

std::string formatMachineTable(const std::vector<Machine>& machines) {
  fmt::Table t({"id", "name", "target", "bandwidth", "L2", "last cache", "FP64", "FP32", "TF32", "F16 dot", "BF16 dot",
                "FP8 dot", "I8 dot"});
  t.leftAlign(1);
  t.leftAlign(2);
  auto rate = [](double v) { return v > 0 ? fmt::si(v, "") : std::string("-"); };
  for (const Machine& m : machines)
    t.add({m.id, m.name, m.target.empty() ? "-" : m.target, fmt::si(m.bandwidth, "B/s"), fmt::binary(m.l2Bytes),
           fmt::binary(m.llcBytes), rate(m.vecF64), rate(m.vecF32), rate(m.tf32), rate(m.dotF16), rate(m.dotBF16),
           rate(m.dotFP8), rate(m.dotI8)});
  std::string out = t.str() + "rates in FLOP/s (I8: op/s), dense; sources:\n";
  for (const Machine& m : machines) out += "  " + m.id + ": " + m.source + "\n";
  return out;
}

}  // namespace tessera::perf
