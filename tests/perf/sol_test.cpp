// Speed of light: the machine table, the roofline of made-up work, the
// mapping of devices to machines, the remembered host peaks (in a
// temporary cache folder) and the roofline chart. Nothing here depends on
// how fast this machine is: the host's peaks are written by the test, or
// measured with tiny sizes only to check they are remembered.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tessera/perf/Roofline.h"
#include "tessera/perf/SpeedOfLight.h"
#include "tessera/support/Targets.h"
#include "tessera/tessera.h"

#include "../env_guard.h"

namespace ts = tessera;
namespace perf = tessera::perf;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using tessera::testing::EnvGuard;

/// A fresh temporary folder, removed with the scope.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tessera-perf-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
};

ts::ir::WorkEstimate work(double f32Flops, double f16DotFlops, double bytes) {
  ts::ir::WorkEstimate w;
  if (f32Flops > 0) w.flops.push_back({ts::ir::FlopUnit::Vector, ts::DType::F32, f32Flops});
  if (f16DotFlops > 0) w.flops.push_back({ts::ir::FlopUnit::Dot, ts::DType::F16, f16DotFlops});
  ts::ir::WorkEstimate::ArgTraffic t;
  t.name = "x";
  t.bytesRead = bytes;
  t.accessedRead = bytes;
  w.args.push_back(t);
  return w;
}

perf::HostPeaks fakeHost() {
  perf::HostPeaks p;
  p.cpu = "Test CPU";
  p.isa = "avx2";
  p.threads = 2;
  p.fmaFlops = 100e9;
  p.triadBytes = 20e9;
  p.l2Bytes = 1 << 20;
  p.llcBytes = 32 << 20;
  return p;
}

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("sol: the machine table has every required machine, sane figures and unique ids", "[perf][sol]") {
  const auto& ms = perf::gpuMachines();
  std::set<std::string> ids;
  for (const perf::Machine& m : ms) {
    INFO(m.id);
    CHECK(ids.insert(m.id).second);
    CHECK(m.bandwidth > 1e11);
    CHECK(m.vecF32 > 1e12);
    CHECK(m.vecF64 > 0);
    CHECK(m.l2Bytes > 0);
    CHECK(m.llcBytes >= m.l2Bytes);
    CHECK(m.units > 0);
    CHECK(m.clockMHz > 0);
    CHECK(!m.source.empty());
    // Tensor rates are dense figures, above the vector rate where present.
    for (double t : {m.dotF16, m.dotBF16, m.dotFP8, m.dotI8})
      if (t > 0) CHECK(t > m.vecF32);
    // A row's target is a Tessera target.
    CHECK_NOTHROW(ts::codegen::Target::parse(m.target));
  }
  for (const char* id : {"h100_sxm", "h200", "b200", "a100_sxm", "mi300x", "mi250x"}) CHECK(perf::findGpuMachine(id));
  CHECK(perf::findGpuMachine("nope") == nullptr);
  // Spot checks against the datasheets (Machines.def cites them).
  const perf::Machine* h100 = perf::findGpuMachine("h100_sxm");
  CHECK(h100->bandwidth == Approx(3.352e12));
  CHECK(h100->dotF16 == Approx(989.4e12));
  CHECK(h100->l2Bytes == 50ull << 20);
  CHECK(perf::findGpuMachine("mi300x")->llcBytes == 256ull << 20);
  CHECK_THAT(perf::machineIds(), Contains("host, h100_sxm"));
}

TEST_CASE("sol: flop classes map to vector and tensor peaks", "[perf][sol]") {
  const perf::Machine& h = *perf::findGpuMachine("h100_sxm");
  std::string unit;
  CHECK(h.peakFor(ts::ir::FlopUnit::Vector, ts::DType::F32, &unit) == h.vecF32);
  CHECK(unit == "vector");
  CHECK(h.peakFor(ts::ir::FlopUnit::Vector, ts::DType::F16) == h.vecF32);  // f16 math is computed in f32
  CHECK(h.peakFor(ts::ir::FlopUnit::Dot, ts::DType::F32) == h.vecF32);     // f32 dots are FMAs
  CHECK(h.peakFor(ts::ir::FlopUnit::Dot, ts::DType::F16, &unit) == h.dotF16);
  CHECK(unit == "tensor");
  CHECK(h.peakFor(ts::ir::FlopUnit::Dot, ts::DType::BF16) == h.dotBF16);
  CHECK(h.peakFor(ts::ir::FlopUnit::Dot, ts::DType::I8) == h.dotI8);
  // fp8 dots: the fp8 tensor cores (H100); the f16 ones where the dot is
  // widened because the machine has none (A100).
  REQUIRE(h.dotFP8 > 0);
  CHECK(h.peakFor(ts::ir::FlopUnit::Dot, ts::DType::F8E4M3, &unit) == h.dotFP8);
  CHECK(unit == "tensor");
  const perf::Machine& a100 = *perf::findGpuMachine("a100_sxm");
  REQUIRE(a100.dotFP8 == 0);
  CHECK(a100.peakFor(ts::ir::FlopUnit::Dot, ts::DType::F8E5M2) == a100.dotF16);
  CHECK(h.peakFor(ts::ir::FlopUnit::Vector, ts::DType::F64) == h.vecF64);
  // The host has no tensor units: its dots run at the FMA peak.
  perf::Machine host = perf::hostMachine(fakeHost());
  CHECK(host.peakFor(ts::ir::FlopUnit::Dot, ts::DType::F16, &unit) == 100e9);
  CHECK(unit == "vector");
  CHECK(host.id == "host");
  CHECK(host.bandwidth == 20e9);
  CHECK(host.measured);
}

TEST_CASE("sol: the roofline is the larger of memory and the busiest unit's compute time", "[perf][sol]") {
  perf::Machine host = perf::hostMachine(fakeHost());  // 100 GFLOP/s, 20 GB/s
  SECTION("memory bound") {
    perf::Roofline r = perf::roofline(work(1e9, 0, 4e9), host);
    CHECK(r.memorySeconds == Approx(0.2));
    CHECK(r.computeSeconds == Approx(0.01));
    CHECK(r.seconds == Approx(0.2));
    CHECK(r.bound == "memory");
    CHECK(r.attainableFlops == Approx(1e9 / 0.2));
  }
  SECTION("compute bound, vector and tensor flops on one unit add up on the host") {
    perf::Roofline r = perf::roofline(work(50e9, 50e9, 1e9), host);
    CHECK(r.computeSeconds == Approx(1.0));
    CHECK(r.bound == "compute (f32 on vector units)");
  }
  SECTION("on a GPU the tensor and vector units run side by side") {
    const perf::Machine& h = *perf::findGpuMachine("h100_sxm");
    perf::Roofline r = perf::roofline(work(66.9e12, 989.4e12 * 2, 1e6), h);
    CHECK(r.computeSeconds == Approx(2.0));  // the tensor unit's 2 s, not 3
    CHECK(r.bound == "compute (f16 dot on tensor units)");
  }
  SECTION("no work") {
    perf::Roofline r = perf::roofline(ts::ir::WorkEstimate{}, host);
    CHECK(r.seconds == 0);
    CHECK(r.bound == "-");
  }
}

TEST_CASE("sol: devices map to their machine", "[perf][sol]") {
  std::vector<perf::Machine> all = perf::allMachines(fakeHost());
  CHECK(perf::machineForDevice("cpu", "", "cpu (avx2, 2 threads)", all)->id == "host");
  CHECK(perf::machineForDevice("cuda", "nvptx:sm_90a", "cuda:0 NVIDIA H200", all)->id == "h200");
  CHECK(perf::machineForDevice("cuda", "nvptx:sm_90a", "cuda:0 NVIDIA H100 80GB HBM3", all)->id == "h100_sxm");
  CHECK(perf::machineForDevice("cuda", "nvptx:sm_90a", "cuda:0 NVIDIA GH200", all)->id ==
        "h100_sxm");  // the arch's first
  CHECK(perf::machineForDevice("hip", "amdgpu:gfx942", "hip:0 AMD Instinct MI300X", all)->id == "mi300x");
  CHECK(perf::machineForDevice("cuda", "nvptx:sm_86", "cuda:0 RTX 3090", all) == nullptr);
  CHECK(perf::machineForDevice("emulator", "nvptx:sm_80", "emulator", all) == nullptr);
}

TEST_CASE("sol: the table states the work and each machine's roofline", "[perf][sol]") {
  std::vector<perf::Machine> ms = {perf::hostMachine(fakeHost()), *perf::findGpuMachine("a100_sxm")};
  ts::ir::WorkEstimate w = work(2e9, 0, 4e9);
  w.transcendentals = 5e8;
  w.notes.push_back("k.tir:3:4: for: trip count unknown");
  std::string t = perf::formatSolTable("k[8], grid {1, 1, 1}", w, ms);
  CHECK_THAT(t, Contains("k[8], grid {1, 1, 1}") && Contains("2.00 GFLOP") && Contains("500 M exp/log") &&
                    Contains("4.00 GB compulsory") && Contains("read x 4.00 GB") &&
                    Contains("intensity: 0.500 FLOP/B"));
  CHECK_THAT(t, Contains("note: k.tir:3:4: for: trip count unknown"));
  CHECK_THAT(t, Contains("host") && Contains("A100 SXM") && Contains("200 ms") && Contains("memory"));
  std::string mt = perf::formatMachineTable(perf::allMachines(fakeHost()));
  CHECK_THAT(mt, Contains("h100_sxm") && Contains("MI250X (1 GCD)") && Contains("sources:") &&
                     Contains("measured on Test CPU"));
}

TEST_CASE("sol: the host's peaks are remembered in the cache folder and re-measured when unusable", "[perf][sol]") {
  TempDir dir;
  EnvGuard cacheDir("TESSERA_CACHE_DIR", dir.path.c_str());
  CHECK(perf::machineCacheDir() == (dir.path / "machine").string());
  perf::HostMeasureOptions tiny;  // small and quick: only remembering is tested here
  tiny.triadBytes = 1 << 20;
  tiny.targetSeconds = 0.002;
  tiny.repeats = 1;

  perf::HostPeaks first = perf::hostPeaks(false, tiny);
  CHECK_FALSE(first.fromCache);
  CHECK_THAT(first.warning, !Contains("could not remember") && !Contains("not usable"));  // "busy" may be said
  CHECK(first.fmaFlops > 0);
  CHECK(first.triadBytes > 0);
  REQUIRE(fs::exists(first.cacheFile));
  CHECK(fs::path(first.cacheFile).parent_path() == dir.path / "machine");
  // No temporary file is left behind by the atomic write.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path / "machine")) files += e.is_regular_file();
  CHECK(files == 1);

  perf::HostPeaks again = perf::hostPeaks(false, tiny);
  CHECK(again.fromCache);
  CHECK(again.fmaFlops == first.fmaFlops);
  CHECK(again.triadBytes == first.triadBytes);

  SECTION("a truncated file is measured again, said once, and rewritten") {
    std::string text = readFile(first.cacheFile);
    std::ofstream(first.cacheFile, std::ios::trunc) << text.substr(0, text.size() / 2);
    perf::HostPeaks p = perf::hostPeaks(false, tiny);
    CHECK_FALSE(p.fromCache);
    CHECK_THAT(p.warning, Contains("were not usable") && Contains("unreadable"));
    CHECK(perf::hostPeaks(false, tiny).fromCache);
  }
  SECTION("a file of another host is not used") {
    std::string text = readFile(first.cacheFile);
    auto at = text.find("\"key\": \"");
    REQUIRE(at != std::string::npos);
    text.insert(at + 8, "other-");
    std::ofstream(first.cacheFile, std::ios::trunc) << text;
    perf::HostPeaks p = perf::hostPeaks(false, tiny);
    CHECK_FALSE(p.fromCache);
    CHECK_THAT(p.warning, Contains("another host"));
  }
  SECTION("--remeasure-host measures again") { CHECK_FALSE(perf::hostPeaks(true, tiny).fromCache); }
  SECTION("a folder that cannot be written: measured, used, and the reason given") {
    if (geteuid() == 0) {
      // root writes anywhere; a path under a regular file cannot be a folder for anyone.
      std::ofstream(dir.path / "file") << "x";
      EnvGuard blocked("TESSERA_CACHE_DIR", (dir.path / "file").c_str());
      perf::HostPeaks p = perf::hostPeaks(false, tiny);
      CHECK(p.fmaFlops > 0);
      CHECK(p.cacheFile.empty());
      CHECK_THAT(p.warning, Contains("could not remember the host peaks") && Contains("TESSERA_CACHE_DIR"));
    } else {
      fs::create_directories(dir.path / "ro");
      fs::permissions(dir.path / "ro", fs::perms::owner_read | fs::perms::owner_exec);
      EnvGuard blocked("TESSERA_CACHE_DIR", (dir.path / "ro").c_str());
      perf::HostPeaks p = perf::hostPeaks(false, tiny);
      CHECK(p.fmaFlops > 0);
      CHECK_THAT(p.warning, Contains("could not remember the host peaks"));
    }
  }
}

TEST_CASE("sol: the cache folder is TESSERA_CACHE_DIR, else XDG_CACHE_HOME/tessera, else ~/.cache/tessera",
          "[perf][sol]") {
  EnvGuard home("HOME", "/home/someone");
  {
    EnvGuard a("TESSERA_CACHE_DIR", nullptr);
    EnvGuard b("XDG_CACHE_HOME", "/xdg");
    CHECK(perf::machineCacheDir() == "/xdg/tessera/machine");
  }
  {
    EnvGuard a("TESSERA_CACHE_DIR", nullptr);
    EnvGuard b("XDG_CACHE_HOME", "relative/ignored");  // the XDG spec: relative paths are invalid
    CHECK(perf::machineCacheDir() == "/home/someone/.cache/tessera/machine");
  }
  {
    EnvGuard a("TESSERA_CACHE_DIR", "/c");
    EnvGuard b("XDG_CACHE_HOME", "/xdg");
    CHECK(perf::machineCacheDir() == "/c/machine");
  }
}

TEST_CASE("sol: the roofline chart has log axes, a roof per machine and labelled points", "[perf][sol]") {
  std::vector<perf::Machine> ms = {perf::hostMachine(fakeHost()), *perf::findGpuMachine("h100_sxm")};
  perf::BenchResult r;
  r.name = "softmax";
  r.shape = "64x1000";
  r.stats = perf::summarize({1e-3});
  r.work.flops = 1e9;
  r.work.bytes = 2e9;
  r.rooflineMachine = "host";
  r.rooflineFraction = 0.42;
  perf::BenchResult none = r;
  none.name = "copy<&>";
  none.work.flops = 0;
  std::string svg = perf::rooflineSvg({r, none}, ms, "chart <title>");
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK_THAT(svg, Contains("<svg xmlns=\"http://www.w3.org/2000/svg\"") && Contains("chart &lt;title&gt;"));
  CHECK_THAT(svg, Contains("data-machine=\"host\"") && Contains("data-machine=\"h100_sxm\""));
  CHECK_THAT(svg, Contains("softmax[64x1000] (42.0% of host)"));
  CHECK_THAT(svg, Contains("not placed (no flops or no bytes): copy&lt;&amp;&gt;"));
  CHECK_THAT(svg, Contains("log scale") && Contains(">1 G<") && Contains(">1 T<"));
  // Well formed: every element opened is closed, in order.
  std::vector<std::string> stack;
  for (size_t p = svg.find('<'); p != std::string::npos; p = svg.find('<', p + 1)) {
    size_t e = svg.find('>', p);
    REQUIRE(e != std::string::npos);
    std::string tag = svg.substr(p + 1, e - p - 1);
    if (tag[0] == '?' || tag.back() == '/') continue;
    std::string name = tag.substr(tag[0] == '/' ? 1 : 0, tag.find_first_of(" />", 1) - (tag[0] == '/' ? 1 : 0));
    if (tag[0] == '/') {
      REQUIRE(!stack.empty());
      CHECK(stack.back() == name);
      stack.pop_back();
    } else {
      stack.push_back(name);
    }
  }
  CHECK(stack.empty());

  TempDir dir;
  perf::ChartFiles f = perf::writeRoofline((dir.path / "r.svg").string(), {r}, ms, "t");
  CHECK(readFile(f.svg).find("</svg>") != std::string::npos);
  if (f.png.empty()) {
    CHECK_THAT(f.pngSkipped, Contains("PNG"));
  } else {
    CHECK(readFile(f.png).substr(1, 3) == "PNG");
  }
  CHECK_THROWS_AS(perf::writeRoofline((dir.path / "no/such/dir/r.svg").string(), {r}, ms, "t"), ts::UsageError);
}
