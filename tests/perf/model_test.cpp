// The GPU performance model (tessera/perf/GpuModel.h) and the listing
// analysis it reads (CodeProfile.h). Listings written here pin the
// classification and the main loop; the model is checked on properties a
// wrong model would break (bounds, scaling with the work, waves, the
// speed of light as a floor), on targets pinned in the test: AMDGPU needs
// only LLD, which is always there; NVPTX needs ptxas for registers and is
// skipped without it. Nothing here is timed.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "registry.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/perf/GpuModel.h"
#include "tessera/perf/TuneTable.h"
#include "tessera/tessera.h"

#ifdef TESSERA_FAKE_CUDA
#include "gpu_test_support.h"
#endif

namespace ts = tessera;
namespace ex = tessera::examples;
namespace perf = tessera::perf;
using Catch::Matchers::Contains;
using perf::InstrClass;

namespace {

const perf::Machine& machine(const std::string& id) {
  const perf::Machine* m = perf::findGpuMachine(id);
  REQUIRE(m != nullptr);
  return *m;
}

struct Predicted {
  perf::ModelPrediction p;
  ts::ir::WorkEstimate work;
};

// An example at `shape`, compiled for the machine's target as a launch with
// its (aligned) inputs would run it, and predicted there.
Predicted predictExample(const std::string& name, std::vector<int64_t> shape, const std::string& machineId) {
  const perf::Machine& m = machine(machineId);
  ex::RunContext ctx;
  ctx.device = ts::Device::emulator(m.target);
  ctx.shape = std::move(shape);
  const ex::Example& e = *ex::find(name);
  ex::Launch l = e.prepare(ctx);
  ts::CompiledKernel k =
      ts::compile(ts::specializedFor(l.kernel, l.args), ts::Target::parse(m.target), e.optionsFor(ctx));
  perf::ModelOptions o;
  o.preferSass = false;  // the same listing on every host
  Predicted r{perf::predictGpu(k, l.grid, l.args, m, o), ts::perf::launchWork(l.kernel, l.grid, l.args).ir};
  return r;
}

double term(const perf::ModelPrediction& p, const std::string& name) {
  for (const perf::ModelTerm& t : p.terms)
    if (t.name == name) return t.seconds;
  return 0;
}

bool havePtxas() {
  return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 || std::system("command -v ptxas >/dev/null 2>&1") == 0;
}

}  // namespace

TEST_CASE("code profile: PTX statements over several lines, classes and the main loop", "[perf][model]") {
  const char* ptx = R"(
.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .b32 	%r<9>;
	ld.param.u64 	%rd1, [k_param_0];
$L__BB0_1:
	cp.async.cg.shared.global [%r1], [%rd1], 16;
	cp.async.commit_group;
	cp.async.wait_group 1;
	bar.sync 	0;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];
	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
		{%f1, %f2, %f3, %f4},
		{%r1, %r2, %r3, %r4},
		{%r5, %r6},
		{%f1, %f2, %f3, %f4};
	ex2.approx.f32 	%f5, %f1;
	fma.rn.f32 	%f6, %f5, %f5, %f5;
	add.s32 	%r7, %r7, 1;
	setp.lt.s32 	%p1, %r7, %r8;
	@%p1 bra 	$L__BB0_1;
	st.global.v4.f32 	[%rd1], {%f1, %f2, %f3, %f4};
	ret;
}
)";
  perf::CodeProfile p = perf::profileListing(ptx, perf::Listing::PTX);
  REQUIRE(p.hasLoop);
  CHECK(p.loop.total() == 11);  // the label to the branch; the 5-line mma is one
  CHECK(p.loop[InstrClass::Mma] == 1);
  CHECK(p.loop[InstrClass::AsyncCopy] == 1);
  CHECK(p.loop[InstrClass::Wait] == 2);
  CHECK(p.loop[InstrClass::Barrier] == 1);
  CHECK(p.loop[InstrClass::SharedLoad] == 1);
  CHECK(p.loop[InstrClass::Special] == 1);
  CHECK(p.loop[InstrClass::FloatMath] == 1);
  CHECK(p.loop[InstrClass::Branch] == 1);
  CHECK(p.loop[InstrClass::Other] == 2);
  CHECK(p.all.total() == 14);
  CHECK(p.all[InstrClass::GlobalStore] == 1);
  CHECK(p.loopInstructions() == 11);
  CHECK_THAT(p.loop.str(), Contains("1 mma"));
}

TEST_CASE("code profile: TMA copies one warp issues are counted apart from the loop others run", "[perf][model]") {
  const char* sass = R"(
        /*0000*/                   MOV R1, R2 ;
.L_x_1:
        /*0010*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0020*/               @P0 BRA `(.L_x_2) ;
        /*0030*/                   UIADD3 UR4, UR5, 0x200, URZ ;
        /*0040*/                   UTMALDG.2D [UR4], [UR6] ;
        /*0050*/                   UTMALDG.2D [UR8], [UR6] ;
.L_x_2:
        /*0060*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R4 ;
        /*0070*/                   HGMMA.64x64x16.F32 R24, gdesc[UR48].tnspB, R24 ;
        /*0080*/               @P2 BRA `(.L_x_3) ;
        /*0090*/                   FADD R3, R3, R4 ;
.L_x_3:
        /*00a0*/               @P3 BRA `(.L_x_1) ;
        /*00b0*/                   EXIT ;
)";
  perf::CodeProfile p = perf::profileListing(sass, perf::Listing::SASS);
  REQUIRE(p.hasLoop);
  CHECK(p.loop.total() == 10);
  CHECK(p.loop[InstrClass::AsyncCopy] == 2);
  CHECK(p.loopIssueOnly == 3);  // the skipped region with the copies; not the FADD's
  CHECK(p.loopIssue[InstrClass::AsyncCopy] == 2);
  CHECK(p.loopIssue.total() == 3);
}

TEST_CASE("code profile: a warp-specialised kernel's main loop is the MMA loop, its copy loop the producer's",
          "[perf][model]") {
  // The producer's loop (longer: its boxes) comes first in the listing, as
  // the lowering places it; the consumers' loop holds the HGMMA.
  const char* sass = R"(
        /*0000*/                   MOV R1, R2 ;
.L_x_1:
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R4 ;
        /*0020*/                   UIADD3 UR4, UR5, 0x200, URZ ;
        /*0030*/                   UTMALDG.2D [UR4], [UR6] ;
        /*0040*/                   UIADD3 UR8, UR5, 0x400, URZ ;
        /*0050*/                   UTMALDG.2D [UR8], [UR6] ;
        /*0060*/                   SYNCS.ARRIVE.TRANS64.RED.A0TR RZ, [UR57], R2 ;
        /*0070*/               @P3 BRA `(.L_x_1) ;
        /*0080*/                   EXIT ;
.L_x_2:
        /*0090*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R4 ;
        /*00a0*/                   HGMMA.64x64x16.F32 R24, gdesc[UR48].tnspB, R24 ;
        /*00b0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*00c0*/               @P2 BRA `(.L_x_2) ;
        /*00d0*/                   EXIT ;
)";
  perf::CodeProfile p = perf::profileListing(sass, perf::Listing::SASS);
  REQUIRE(p.hasLoop);
  CHECK(p.loop.total() == 4);
  CHECK(p.loop[InstrClass::AsyncMma] == 1);
  CHECK(p.loopIssueOnly == 0);
  REQUIRE(p.hasProducerLoop);
  CHECK(p.producerLoop.total() == 7);
  CHECK(p.producerLoop[InstrClass::AsyncCopy] == 2);
  // Without matrix instructions anywhere, the longest loop is the main one
  // and there is no producer loop.
  std::string noMma = sass;
  noMma.replace(noMma.find("HGMMA.64x64x16.F32 R24, gdesc[UR48].tnspB, R24"), 46, "FADD R3, R3, R4");
  perf::CodeProfile q = perf::profileListing(noMma, perf::Listing::SASS);
  CHECK(q.loop.total() == 7);
  CHECK_FALSE(q.hasProducerLoop);
}

TEST_CASE("code profile: SASS and AMDGCN listings, the trailing self-branch is no loop", "[perf][model]") {
  const char* sass = R"(
        /*0000*/                   LDC R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   LDGSTS.E.BYPASS.128 [R2], desc[UR4][R4.64] ;
        /*0020*/                   LDGDEPBAR ;
        /*0030*/                   HMMA.16816.F32 R8, R12, R16, R8 ;
        /*0040*/                   HGMMA.64x128x16.F32 R24, gdesc[UR8], R24 ;
        /*0050*/                   MUFU.EX2 R3, R3 ;
        /*0060*/                   ISETP.GE.AND P0, PT, R5, R6, PT ;
        /*0070*/               @P0 BRA `(.L_x_0) ;
        /*0080*/                   STG.E [R2.64], R8 ;
        /*0090*/                   EXIT ;
.L_x_1:
        /*00a0*/                   BRA `(.L_x_1);
        /*00b0*/                   NOP;
)";
  perf::CodeProfile s = perf::profileListing(sass, perf::Listing::SASS);
  REQUIRE(s.hasLoop);
  CHECK(s.loop.total() == 7);
  CHECK(s.loop[InstrClass::Mma] == 1);
  CHECK(s.loop[InstrClass::AsyncMma] == 1);
  CHECK(s.loop[InstrClass::AsyncCopy] == 1);
  CHECK(s.loop[InstrClass::Wait] == 1);
  CHECK(s.loop[InstrClass::Special] == 1);
  CHECK(s.all.total() == 11);  // NOP not counted
  CHECK(s.all[InstrClass::GlobalStore] == 1);

  const char* gcn = R"(
	.text
kernel:
	s_load_dwordx4 s[0:3], s[4:5], 0x0
.LBB0_1:
	global_load_dwordx4 v[0:3], v[4:5], off
	s_waitcnt vmcnt(0)
	ds_write_b128 v6, v[0:3]
	s_barrier
	ds_read_b128 v[8:11], v7
	v_mfma_f32_32x32x8_f16 a[0:15], v[8:9], v[10:11], a[0:15]
	v_exp_f32_e32 v12, v12
	v_fma_f32 v13, v12, v12, v13
	s_add_i32 s6, s6, 1
	s_cmp_lt_i32 s6, s7
	s_cbranch_scc1 .LBB0_1
	global_store_dword v[4:5], v13, off
	s_endpgm
.Lfunc_end0:
	v_nop
)";
  perf::CodeProfile g = perf::profileListing(gcn, perf::Listing::AMDGCN);
  REQUIRE(g.hasLoop);
  CHECK(g.loop.total() == 11);
  CHECK(g.loop[InstrClass::GlobalLoad] == 1);
  CHECK(g.loop[InstrClass::Wait] == 1);
  CHECK(g.loop[InstrClass::SharedStore] == 1);
  CHECK(g.loop[InstrClass::SharedLoad] == 1);
  CHECK(g.loop[InstrClass::Barrier] == 1);
  CHECK(g.loop[InstrClass::Mma] == 1);
  CHECK(g.loop[InstrClass::Special] == 1);
  CHECK(g.loop[InstrClass::FloatMath] == 1);
  CHECK(g.loop[InstrClass::Scalar] == 2);
  CHECK(g.loop[InstrClass::Branch] == 1);
  CHECK(g.all.total() == 14);  // from the kernel's label to .Lfunc_end

  perf::CodeProfile none = perf::profileListing("\tadd.s32 %r1, %r1, 1;\n\tret;\n", perf::Listing::PTX);
  CHECK_FALSE(none.hasLoop);
  CHECK(none.loopInstructions() == -1);
  CHECK(none.all.total() == 2);
}

TEST_CASE("model: a large vector add is memory bound at about the bandwidth's time", "[perf][model]") {
  Predicted r = predictExample("vector_add", {1 << 24}, "mi300x");
  const perf::Machine& m = machine("mi300x");
  const double dram = r.work.bytes() / m.bandwidth;
  CHECK(r.p.bound == "memory");
  CHECK(r.p.seconds >= dram);
  CHECK(r.p.seconds <= dram * 1.05 + r.p.launchSeconds);
  CHECK(r.p.speedOfLight == Approx(dram));
  CHECK(r.p.in.code.listing == perf::Listing::AMDGCN);
  CHECK(r.p.in.programsPerUnit > 0);
  CHECK(r.p.waves == Approx(double(r.p.in.programs) / (m.units * r.p.in.programsPerUnit)));
}

TEST_CASE("model: a GEMM is never faster than its speed of light and scales with K", "[perf][model]") {
  Predicted a = predictExample("gemm_f16", {2048, 2048, 2048, 0}, "mi300x");
  Predicted b = predictExample("gemm_f16", {2048, 2048, 4096, 0}, "mi300x");
  CHECK(a.p.bound != "memory");
  CHECK(a.p.seconds > a.p.speedOfLight);
  // The tensor term alone is at least the dense peak's time.
  CHECK(term(a.p, "tensor") >= a.work.totalFlops() * 0.98 / machine("mi300x").dotF16 - 1e-12);
  CHECK(a.p.in.code.hasLoop);
  CHECK(a.p.in.code.loop[InstrClass::Mma] > 0);
  CHECK(a.p.in.loopIterationsPerProgram > 1);
  // Twice the K: twice the main loop's iterations, about twice the time.
  CHECK(b.p.in.loopIterationsPerProgram == Approx(2 * a.p.in.loopIterationsPerProgram));
  const double ratio = (b.p.seconds - b.p.launchSeconds) / (a.p.seconds - a.p.launchSeconds);
  CHECK(ratio > 1.7);
  CHECK(ratio < 2.1);
  CHECK_THAT(a.p.str(), Contains("main loop") && Contains("predicted") && Contains("bound"));
}

TEST_CASE("model: one program more than a full wave costs a second wave", "[perf][model]") {
  const perf::Machine& m = machine("mi300x");
  ex::RunContext ctx;
  ctx.device = ts::Device::emulator(m.target);
  ctx.shape = {512, 512, 512, 0};
  const ex::Example& e = *ex::find("gemm_f16");
  ex::Launch l = e.prepare(ctx);
  ts::CompiledKernel k =
      ts::compile(ts::specializedFor(l.kernel, l.args), ts::Target::parse(m.target), e.optionsFor(ctx));
  ts::ir::WorkEstimate w = ts::perf::launchWork(l.kernel, l.grid, l.args).ir;
  // The same per-program work over exactly one full wave, and one program more.
  perf::ModelPrediction p0 = perf::predictGpu(k.artifact(), w, m);
  const double perProgram = w.hotLoop.iterations / double(w.programs);
  auto scaled = [&](uint64_t programs) {
    ts::ir::WorkEstimate s = w;
    const double f = double(programs) / double(w.programs);
    for (auto& fl : s.flops) fl.count *= f;
    for (auto& a : s.args) a.bytesRead *= f, a.bytesWritten *= f, a.accessedRead *= f, a.accessedWritten *= f;
    s.programs = programs;
    s.hotLoop.iterations = perProgram * double(programs);
    return perf::predictGpu(k.artifact(), s, m);
  };
  const uint64_t slots = uint64_t(m.units) * uint64_t(p0.in.programsPerUnit);
  perf::ModelPrediction full = scaled(slots), over = scaled(slots + 1);
  CHECK(full.waves == Approx(1.0));
  CHECK(term(over, "latency") == Approx(2 * term(full, "latency")));
  CHECK(over.seconds > full.seconds);
}

TEST_CASE("model: wrong targets and machines are usage errors naming both", "[perf][model]") {
  ex::RunContext ctx;
  ctx.device = ts::Device::emulator("amdgpu:gfx942");
  ctx.shape = {4096};
  ex::Launch l = ex::find("vector_add")->prepare(ctx);
  ts::CompiledKernel emu = ts::compile(l.kernel, ts::Target::parse("emu:amdgpu:gfx942"));
  CHECK_THROWS_WITH(perf::predictGpu(emu, l.grid, l.args, machine("mi300x")),
                    Contains("host code") && Contains("compile for amdgpu:gfx942"));
  ts::CompiledKernel gfx942 = ts::compile(l.kernel, ts::Target::parse("amdgpu:gfx942"));
  CHECK_THROWS_AS(perf::predictGpu(gfx942, l.grid, l.args, machine("mi250x")), ts::UsageError);
  CHECK_THROWS_WITH(perf::predictGpu(gfx942, l.grid, l.args, machine("mi250x")),
                    Contains("amdgpu:gfx90a") && Contains("amdgpu:gfx942"));
  // The machines the model knows: every GPU row with a target Tessera compiles for.
  std::vector<std::string> ids;
  for (const perf::Machine* m : perf::modelMachines()) ids.push_back(m->id);
  CHECK(std::find(ids.begin(), ids.end(), "h100_sxm") != ids.end());
  CHECK(std::find(ids.begin(), ids.end(), "mi300x") != ids.end());
  CHECK(std::find(ids.begin(), ids.end(), "b200") == ids.end());  // no ModelArchs.def row for sm_100a yet
}

TEST_CASE("model: NVPTX GEMM on H100 from the PTX, registers from ptxas", "[perf][model][gpu]") {
  if (!havePtxas()) {
    WARN("SKIP: ptxas (CUDA toolkit) not found: the model reads NVPTX registers from ptxas -v");
    return;
  }
  Predicted r = predictExample("gemm_f16", {4096, 4096, 4096, 0}, "h100_sxm");
  CHECK(r.p.in.code.listing == perf::Listing::PTX);
  CHECK(r.p.in.registers > 0);
  CHECK(r.p.in.code.loop[InstrClass::AsyncMma] > 0);  // wgmma in the main loop
  CHECK(r.p.seconds > r.p.speedOfLight);
  CHECK(r.p.bound != "memory");
  const std::string table = perf::formatModelTable({r.p});
  CHECK_THAT(table, Contains("h100_sxm") && Contains("ptx"));
}

TEST_CASE("model: the tuner ranks GPU configs by the model and keeps them apart from measurements",
          "[perf][model][tune]") {
  const std::string dir = std::string(TESSERA_BINARY_DIR) + "/tune-test/model";
  std::filesystem::remove_all(dir);
  ts::codegen::DiskCacheSettings s;
  s.dir = dir;
  ts::codegen::setDiskCacheSettings(s);
  const perf::Machine& m = machine("mi300x");
  ex::RunContext ctx;
  ctx.device = ts::Device::emulator(m.target);
  ctx.shape = {1024, 1024, 1024, 0};
  perf::TuneProblem p = ex::tuneProblem(*ex::find("gemm_f16"), ctx);
  perf::TuneOptions o = perf::gpuModelTuneOptions(m);
  o.quiet = true;
  perf::TuneResult r = perf::tune(p, o);
  CHECK(r.device == "model: mi300x (amdgpu:gfx942)");
  REQUIRE(r.best);
  size_t predicted = 0;
  for (const perf::TuneCandidateResult& c : r.candidates)
    if (c.valid()) {
      ++predicted;
      CHECK(c.seconds > 0);
      CHECK(c.reason == "predicted by the performance model");
    }
  CHECK(predicted >= 2);
  // Again: every prediction comes from the store.
  perf::TuneResult again = perf::tune(p, o);
  CHECK(again.measured == 0);
  CHECK(again.bestConfig()->str() == r.bestConfig()->str());
  ts::codegen::resetDiskCacheSettings();
}

#ifdef TESSERA_FAKE_CUDA
TEST_CASE("model: a table tuned by the model serves a device of its machine, measurements first",
          "[perf][model][tune][fake]") {
  ts::rt::testing::EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  const ts::Device h100 = ts::Device::cuda(1), a100 = ts::Device::cuda(0);  // the fake driver's "Fake H100" (sm_90a)
  const perf::Machine& m = machine("h100_sxm");
  CHECK(perf::modelDeviceKey(m) == "model: h100_sxm (nvptx:sm_90a)");
  CHECK(perf::gpuModelTuneOptions(m).predictKey == "h100_sxm (nvptx:sm_90a)");
  perf::TuneTable t;
  const perf::TuneConfig predicted = perf::TuneConfig::parse("BLOCK_M=128,BLOCK_N=256");
  t.add({"gemm_f16", "4096x4096x4096x2", "f16", perf::modelDeviceKey(m), "tc", predicted, 1e-4, "4096x4096x4096x2"});
  const perf::TuneConfig fallback = perf::TuneConfig::parse("BLOCK_M=64,BLOCK_N=64");
  const std::vector<int64_t> shape{4000, 4000, 4000, 2};
  // No measurement on the device: the model's entry for its machine.
  CHECK(t.pickFor("gemm_f16", shape, "f16", h100, fallback) == predicted);
  // Another machine (an A100): nothing of it in the table.
  CHECK(t.findFor("gemm_f16", shape, "f16", a100) == nullptr);
  CHECK(t.pickFor("gemm_f16", shape, "f16", a100, fallback) == fallback);
  // A measurement on the device itself comes first.
  const perf::TuneConfig measured = perf::TuneConfig::parse("BLOCK_M=128,BLOCK_N=128");
  t.add({"gemm_f16", "4096x4096x4096x2", "f16", perf::tuneDeviceKey(h100), "tc", measured, 2e-4, "4096x4096x4096x2"});
  CHECK(t.pickFor("gemm_f16", shape, "f16", h100, fallback) == measured);
}
#endif

namespace {

// The model's row of an architecture (ModelArchs.def): the L2's bytes per
// clock per unit and the DRAM latency in cycles.
struct ArchRow {
  double l2 = 0, latency = 0;
};
ArchRow archRow(const std::string& arch) {
#define TS_MODEL_ARCH(a, issue, scalar, lsu, sfu, syncMma, l2, latency, launchUs) \
  if (arch == #a) return {l2, latency};
#include "tessera/perf/ModelArchs.def"
  FAIL("no ModelArchs.def row for " << arch);
  return {};
}

}  // namespace

TEST_CASE("model: the fix-up of a small stream-K GEMM, counted and timed by its formula", "[perf][model]") {
  const perf::Machine& m = machine("mi300x");
  const ArchRow a = archRow("gfx942");
  const double clock = m.clockMHz * 1e6, tileBytes = 128.0 * 128 * 4;
  // 256 x 256 in 128 x 128 tiles: 4 tiles of 1024 / 64 = 16 K iterations,
  // 64 in all, dealt to 3 programs in shares [0, 22), [22, 43), [43, 64):
  // tile 0 is share 0's and tile 3 share 2's whole; tiles 1 and 2 are each
  // joined from 2 partials.
  ts::Tiles s(256, 256, 128, 128);
  s.streamK(1024, 64);
  const perf::FixupCost f = perf::fixupCost(s, 3, m);
  CHECK(f.split == ts::TileSplit::StreamK);
  CHECK(f.tiles == 4);
  CHECK(f.iterations == 16);
  CHECK(f.programs == 3);
  CHECK(f.units == 6);
  CHECK(f.joinedTiles == 2);
  CHECK(f.partials == 4);
  CHECK(f.maxUnitsPerTile == 2);
  CHECK(f.bytes == 2 * 4 * tileBytes);  // 4 partials written, 4 read back: 512 KiB
  CHECK(f.atomics == 4);
  CHECK(f.sumFlops == 2 * 128.0 * 128);  // one add of two partials per joined tile
  CHECK(f.iterationsPerProgram == 22);
  CHECK(f.iterationsUnsplit == 32);  // two tile rows of 16 iterations on the busiest program
  CHECK(f.trafficSeconds == Approx(f.bytes / (m.units * a.l2 * clock)));
  const double chainCycles =
      tileBytes / a.l2 + 3 * a.latency + 2 * tileBytes / a.l2 + 128.0 * 128 / (m.vecF32 / m.units / clock);
  CHECK(f.chainSeconds == Approx(chainCycles / clock));
  CHECK(f.seconds == std::max(f.trafficSeconds, f.chainSeconds));
  CHECK(f.seconds > 0);
  CHECK_THAT(f.str(),
             Contains("fix-up (stream-K, 3 programs): 2 of 4 tiles joined from 4 partials (at most 2 a tile)") &&
                 Contains("4 tickets") && Contains("22 K iterations in the longest program, 32 with one tile"));

  // Two programs split the 64 iterations at a tile boundary: nothing to join.
  const perf::FixupCost even = perf::fixupCost(s, 2, m);
  CHECK(even.joinedTiles == 0);
  CHECK(even.partials == 0);
  CHECK(even.bytes == 0);
  CHECK(even.seconds == 0);
  CHECK(even.iterationsPerProgram == even.iterationsUnsplit);

  // Split-K, 4 splits of 4 iterations over 4 tiles of 64 x 64, one program
  // per unit: every tile joined from 4 partials of 16 KiB.
  ts::Tiles k4(128, 128, 64, 64);
  k4.splitK(4, 256, 64);
  const perf::FixupCost sk = perf::fixupCost(k4, 16, m);
  CHECK(sk.units == 16);
  CHECK(sk.joinedTiles == 4);
  CHECK(sk.partials == 16);
  CHECK(sk.maxUnitsPerTile == 4);
  CHECK(sk.bytes == 2 * 16 * 64.0 * 64 * 4);
  CHECK(sk.sumFlops == 12 * 64.0 * 64);
  CHECK(sk.iterationsPerProgram == 1);
  CHECK(sk.iterationsUnsplit == 4);
  // One split is no fix-up; no split costs nothing.
  ts::Tiles k1(128, 128, 64, 64);
  k1.splitK(1, 256, 64);
  CHECK(perf::fixupCost(k1, 4, m).bytes == 0);
  CHECK(perf::fixupCost(ts::Tiles(128, 128, 64, 64), 4, m).split == ts::TileSplit::None);
  CHECK(perf::fixupCost(ts::Tiles(128, 128, 64, 64), 4, m).str().empty());
  CHECK_THROWS_AS(perf::fixupCost(s, 0, m), ts::UsageError);
}

TEST_CASE("model: a split-K GEMM's prediction reports its fix-up when the schedule is given", "[perf][model]") {
  const perf::Machine& m = machine("mi300x");
  ex::RunContext ctx;
  ctx.device = ts::Device::emulator(m.target);
  ctx.shape = {128, 128, 1024, 4};
  const ex::Example& e = *ex::find("gemm_split_k");
  ex::Launch l = e.prepare(ctx);
  REQUIRE(l.schedule);
  ts::CompiledKernel k =
      ts::compile(ts::specializedFor(l.kernel, l.args), ts::Target::parse(m.target), e.optionsFor(ctx));
  perf::ModelOptions o;
  o.preferSass = false;
  const perf::ModelPrediction plain = perf::predictGpu(k, l.grid, l.args, m, o);
  CHECK(plain.fixup.split == ts::TileSplit::None);
  CHECK_THAT(plain.str(), !Contains("fix-up"));
  o.schedule = l.schedule;
  const perf::ModelPrediction p = perf::predictGpu(k, l.grid, l.args, m, o);
  const perf::FixupCost want = perf::fixupCost(*l.schedule, int64_t(l.grid.x), m);
  CHECK(p.fixup.partials == want.partials);
  CHECK(p.fixup.partials == 4 * p.fixup.tiles);
  CHECK(p.fixup.seconds == want.seconds);
  CHECK(p.seconds == plain.seconds);  // reported, not added
  CHECK(p.balanceSavedSeconds > 0);
  CHECK_THAT(p.str(), Contains("fix-up (split-K, ") && Contains("the balance saves"));
}
