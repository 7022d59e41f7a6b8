// The GPU kernels of gemm_f16 and gemm_bf16 (the registry's gpuKernel, as
// `tessera compile` and every GPU device compile them): a K loop software-
// pipelined through shared memory (for_pipelined + stage_copy), lowered to
// tensor-core instructions, without register spills.
//
// Each kernel is checked twice: as traced (what `tessera compile` prints:
// no argument facts, so the f16 rows are not provably aligned and the
// stage copies are program-order loads + shared stores), and as a launch
// whose buffers are 16-byte aligned and whose M, N, K are multiples of 16
// specialises it (dsl/lib/Launch.cpp: {divisibility = 16} on every
// argument), where NVPTX sm_80+ copies with cp.async.
//
// Numerical results on the emulated GPUs are checked by
// emu_examples_test.cpp (every test shape, aligned and ragged).
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <unistd.h>

#include "../ptxas_report.h"
#include "host_threads_check.h"
#include "registry.h"
#include "tessera/ir/IR.h"
#include "tessera/support/Targets.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ex = tessera::examples;

namespace {

const char* const kGemms[] = {"gemm_f16", "gemm_bf16"};

bool havePtxas() {
  return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 || std::system("command -v ptxas >/dev/null 2>&1") == 0;
}

bool contains(const std::string& s, const std::string& x) { return s.find(x) != std::string::npos; }

/// The example's default kernel for `target`.
ts::Kernel defaultKernel(const std::string& name, const ts::Target& target) {
  const ex::Example* e = ex::find(name);
  REQUIRE(e != nullptr);
  return ex::kernelFor(*e, target);
}

/// The kernel as a launch with 16-byte aligned buffers and M, N, K
/// multiples of 16 specialises it.
ts::Kernel withAlignedFacts(const ts::Kernel& k) {
  std::shared_ptr<ts::ir::Function> f = ts::ir::clone(k.ir());
  f->argAttrs().resize(f->numArgs());
  for (unsigned i = 0; i < f->numArgs(); ++i) f->argAttrs()[i]["divisibility"] = int64_t{16};
  return ts::Kernel(std::move(f));
}

size_t countMatches(const std::string& s, const std::string& re) {
  std::regex r(re);
  return size_t(std::distance(std::sregex_iterator(s.begin(), s.end(), r), std::sregex_iterator()));
}

}  // namespace

TEST_CASE("gemm_f16 / gemm_bf16: the GPU kernel is pipelined, the CPU kernel is not", "[examples][gemm][gpu]") {
  ex::GemmBlocks gpu = ex::gemmDefaultBlocks(ts::Device::emulator("nvptx:sm_80"));
  ex::GemmBlocks cpu = ex::gemmDefaultBlocks(ts::Device::cpu());
  CHECK(gpu.stages == 3);
  CHECK((cpu.m == 256 && cpu.n == 256 && cpu.k == 64 && cpu.stages == 0));
  for (const char* name : kGemms) {
    INFO(name);
    // The pipeline pass built the schedule of the GPU kernel's K loop.
    ts::CompiledKernel g =
        ts::compile(defaultKernel(name, ts::Target::parse("nvptx:sm_80")), ts::Target::parse("nvptx:sm_80"));
    std::string tile = g.dump(ts::Stage::TileIR);
    CHECK(contains(tile, "pipelined = 3}"));
    CHECK(countMatches(tile, R"(copy\([^\n]*\{async = 1)") >= 4);  // A and B, prologue and loop
    // The CPU kernel loads its tiles straight into the dot: no shared
    // buffers, no staged copies.
    ts::CompiledKernel c = ts::compile(defaultKernel(name, ts::Target::parse("cpu")), ts::Target::parse("cpu"));
    std::string ctile = c.dump(ts::Stage::TileIR);
    CHECK_FALSE(contains(ctile, "async"));
    CHECK_FALSE(contains(ctile, "pipelined"));
    CHECK_FALSE(contains(ctile, "buffer<shared"));
  }
}

TEST_CASE(
    "gemm_f16 / gemm_bf16 PTX: mma.sync and ldmatrix (sm_90a: wgmma), cp.async (sm_90a: TMA) when the launch proves "
    "alignment",
    "[examples][gemm][gpu]") {
  for (const char* name : kGemms)
    for (const char* sm : {"sm_80", "sm_90a"}) {
      INFO(name << " on " << sm);
      ts::Target target = ts::Target::parse(std::string("nvptx:") + sm);
      std::string plain = ts::compile(defaultKernel(name, target), target).dump(ts::Stage::PTX);
      std::string aligned = ts::compile(withAlignedFacts(defaultKernel(name, target)), target).dump(ts::Stage::PTX);
      const bool bf16 = contains(name, "bf16"), hopper = std::string(sm) == "sm_90a";
      const std::string mma = bf16 ? "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
                                   : "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
      // sm_90a's default 64 x 64 x 32 blocks: one wgmma per k-step reading
      // A and B from their slots by descriptor (imm-trans-b 1: B is K x N).
      const std::string wgmma =
          std::string("wgmma.mma_async.sync.aligned.m64n64k16.f32.") + (bf16 ? "bf16.bf16" : "f16.f16");
      for (const std::string* ptx : {&plain, &aligned}) {
        if (hopper) {
          CHECK(countMatches(*ptx, wgmma) == 2);
          CHECK(contains(*ptx, "p, 1, 1, 0, 1;"));
          CHECK_FALSE(contains(*ptx, "mma.sync"));
          CHECK_FALSE(contains(*ptx, "ldmatrix"));
        } else {
          CHECK(contains(*ptx, mma));
          CHECK(contains(*ptx, "ldmatrix.sync.aligned"));
        }
        // The group structure of a 3-stage schedule: 2 prologue commits and
        // one per iteration, wait for all but 2 groups (sm_90a: all but 1,
        // the refill coming after the dot it kept in flight: async-dots),
        // the drain.
        // sm_90a with alignment proven: the groups are mbarrier phases (one
        // arrival by thread 0 per commit) and the copies TMA boxes.
        if (hopper && ptx == &aligned) {
          CHECK(countMatches(*ptx, R"(mbarrier\.arrive\.shared::cta\.b64)") == 3);
          CHECK(countMatches(*ptx, R"(mbarrier\.try_wait\.parity)") >= 1);
          CHECK_FALSE(contains(*ptx, "cp.async.commit_group"));
          continue;
        }
        CHECK(countMatches(*ptx, R"(cp\.async\.commit_group;)") == 3);
        CHECK(countMatches(*ptx, hopper ? R"(cp\.async\.wait_group\s+1;)" : R"(cp\.async\.wait_group\s+2;)") == 1);
        CHECK(countMatches(*ptx, R"(cp\.async\.wait_group\s+0;)") == 1);
        if (hopper) {
          CHECK(countMatches(*ptx, R"(wgmma\.wait_group\.sync\.aligned 1;)") == 1);
          CHECK(countMatches(*ptx, R"(wgmma\.wait_group\.sync\.aligned 0;)") == 1);
        }
      }
      // Aligned: every tile chunk is one 16-byte cp.async (zero-filled by
      // its ignore-src predicate where masked), none goes through registers;
      // on sm_90a each slot is TMA boxes (A: 8 of 8 rows in warpgroup order,
      // B: one), issued by one thread.
      if (hopper)
        CHECK(countMatches(aligned, R"(cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile)") == 27);
      else
        CHECK(countMatches(aligned,
                           R"(cp\.async\.cg\.shared\.global \[%r[d]?\d+(\+\d+)?\], \[%rd\d+(\+\d+)?\], 16, %p\d+;)") >=
              6);
      CHECK_FALSE(contains(aligned, "ld.global.nc.v4"));
      // As traced nothing proves a row 4-byte aligned: program-order copies.
      CHECK_FALSE(contains(plain, "cp.async.cg"));
      CHECK_FALSE(contains(plain, "cp.async.ca"));
    }
}

TEST_CASE("gemm_f16 / gemm_bf16 AMDGCN: matrix-core instructions in the pipelined loop", "[examples][gemm][gpu]") {
  for (const char* name : kGemms)
    for (auto [gfx, insn] : {std::pair{"gfx90a", "v_mfma_f32_16x16x16"}, std::pair{"gfx942", "v_mfma_f32_16x16x16"},
                             std::pair{"gfx950", "v_mfma_f32_16x16x32"}, std::pair{"gfx1100", "v_wmma_f32_16x16x16"},
                             std::pair{"gfx1200", "v_wmma_f32_16x16x16"}}) {
      INFO(name << " on " << gfx);
      ts::Target target = ts::Target::parse(std::string("amdgpu:") + gfx);
      for (bool facts : {false, true}) {
        INFO((facts ? "aligned launch" : "as traced"));
        ts::Kernel k = defaultKernel(name, target);
        std::string gcn = ts::compile(facts ? withAlignedFacts(k) : k, target).dump(ts::Stage::AMDGCN);
        CHECK(contains(gcn, insn));
        CHECK(std::regex_search(gcn, std::regex(R"(ds_(write|store)_b)")));  // the staged tiles go through LDS
        CHECK(contains(gcn, "s_barrier"));
      }
    }
}

TEST_CASE(
    "gemm_fp8: the pipelined loop runs mma.sync e4m3 on sm_89, wgmma e4m3 on sm_90a, without spills, the f16 mma on "
    "sm_80 / sm_86",
    "[examples][gemm][gpu][ptxas]") {
  bool ptxas = havePtxas();
  if (!ptxas) WARN("SKIPPED the ptxas checks: ptxas not found (/usr/local/cuda/bin/ptxas or on PATH)");
  for (bool facts : {false, true})
    for (const char* sm : {"sm_80", "sm_86", "sm_89", "sm_90a"}) {
      const char* variant = facts ? "aligned" : "traced";
      INFO("gemm_fp8 on " << sm << ", " << variant);
      ts::Target target = ts::Target::parse(std::string("nvptx:") + sm);
      ts::Kernel k = defaultKernel("gemm_fp8", target);
      ts::CompiledKernel ck = ts::compile(facts ? withAlignedFacts(k) : k, target);
      const bool fp8 = std::string(sm) == "sm_89" || std::string(sm) == "sm_90a";
      CHECK(contains(ck.dump(ts::Stage::TileIR), "pipelined = 3}"));  // the scheduled K loop
      const std::string ptx = ck.dump(ts::Stage::PTX);
      const bool wgmma = std::string(sm) == "sm_90a";
      CHECK(contains(ptx, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == (fp8 && !wgmma));
      CHECK(contains(ptx, "wgmma.mma_async.sync.aligned.m64n") == wgmma);
      CHECK(contains(ptx, "k32.f32.e4m3.e4m3") == wgmma);
      CHECK(contains(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == !fp8);
      if (!ptxas) continue;
      testptx::PtxasFigures f = testptx::ptxasFigures(ck);
      INFO(f.report);
      CHECK(f.spillBytes == 0);
      std::printf("gemm_fp8  %-7s %-8s registers %3d, spill bytes %d\n", sm, variant, f.registers, f.spillBytes);
    }
}

TEST_CASE(
    "Blackwell (sm_100a, sm_103a, sm_120a): the f16/bf16/fp8/int8 GEMMs take tcgen05 where the row has their kind, "
    "the rest mma.sync, without spills, and the resource report says so",
    "[examples][gemm][gpu][ptxas][blackwell]") {
  bool ptxas = havePtxas();
  if (!ptxas) WARN("SKIPPED the ptxas checks: ptxas not found (/usr/local/cuda/bin/ptxas or on PATH)");
  struct Gemm {
    const char* name;
    const char* mma;   // the instruction its dots take without tcgen05
    const char* kind;  // tcgen05.mma's kind where the row has it
    bool i8;           // kind::i8: Targets.def's tcgen05I8 column (sm_100a, not sm_103a)
  };
  for (const char* sm : {"sm_100a", "sm_103a", "sm_120a"})
    for (Gemm g : {Gemm{"gemm_f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "kind::f16", false},
                   Gemm{"gemm_bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "kind::f16", false},
                   Gemm{"gemm_fp8", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "kind::f8f6f4", false},
                   Gemm{"gemm_int8", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "kind::i8", true}})
      for (bool facts : {false, true}) {
        const char* variant = facts ? "aligned" : "traced";
        INFO(g.name << " on " << sm << ", " << variant);
        ts::Target target = ts::Target::parse(std::string("nvptx:") + sm);
        const ts::GpuArch* row = ts::findGpuArch(ts::GpuArch::Vendor::NVIDIA, sm);
        REQUIRE(row);
        const bool tc = g.i8 ? row->tcgen05I8 : row->tcgen05;
        ts::Kernel k = defaultKernel(g.name, target);
        ts::CompiledKernel ck = ts::compile(facts ? withAlignedFacts(k) : k, target);
        const std::string ptx = ck.dump(ts::Stage::PTX);
        CHECK(contains(ptx, std::string(".target ") + sm));
        CHECK_FALSE(contains(ptx, "wgmma"));
        CHECK_FALSE(contains(ptx, "setmaxnreg"));
        if (tc) {
          // One thread issues the MMAs into tensor memory, the warps read
          // the accumulator back; the allocation is freed in the kernel.
          CHECK(contains(ptx, std::string("tcgen05.mma.cta_group::1.") + g.kind));
          CHECK(contains(ptx, "tcgen05.alloc.cta_group::1"));
          CHECK(contains(ptx, "tcgen05.dealloc.cta_group::1"));
          CHECK(contains(ptx, "tcgen05.commit.cta_group::1.mbarrier::arrive::one"));
          CHECK(contains(ptx, "tcgen05.ld.sync.aligned.16x256b"));
          CHECK_FALSE(contains(ptx, "mma.sync"));
        } else {
          CHECK(contains(ptx, g.mma));
          CHECK(contains(ptx, "ldmatrix.sync.aligned"));
          CHECK_FALSE(contains(ptx, "tcgen05"));
        }
        if (!ptxas) continue;
        testptx::PtxasFigures f = testptx::ptxasFigures(ck);
        INFO(f.report);
        CHECK(f.spillBytes == 0);
        CHECK(contains(f.report, "tensor-core dots: tcgen05.mma (") == tc);
        CHECK(contains(f.report, "tensor-core dots: mma.sync (") == !tc);
        CHECK_FALSE(contains(f.report, "wgmma.mma_async ("));
        std::printf("%-9s %-7s %-8s registers %3d, spill bytes %d\n", g.name, sm, variant, f.registers, f.spillBytes);
      }
}

TEST_CASE(
    "Blackwell warp specialisation: a TMA producer warp feeds consumers whose one thread issues tcgen05.mma, "
    "emulated against the reference",
    "[examples][gemm][gpu][ptxas][blackwell][emu]") {
  const bool ptxas = havePtxas();
  if (!ptxas) WARN("SKIPPED the ptxas checks: ptxas not found (/usr/local/cuda/bin/ptxas or on PATH)");
  struct Case {
    const char* name;
    const char* kind;
    ex::GemmBlocks blocks;
    int warps;
  };
  const Case cases[] = {{"gemm_f16", "kind::f16", {64, 64, 32, 3}, 4},
                        {"gemm_bf16", "kind::f16", {128, 128, 64, 2}, 4},
                        {"gemm_f16", "kind::f16", {128, 256, 64, 2}, 8},
                        {"gemm_fp8", "kind::f8f6f4", {64, 64, 64, 3}, 4}};
  for (const char* sm : {"sm_100a", "sm_103a"})
    for (const Case& c : cases) {
      INFO(c.name << " " << c.blocks.m << "x" << c.blocks.n << "x" << c.blocks.k << " s" << c.blocks.stages << " w"
                  << c.warps << " on " << sm);
      const ex::Example* e = ex::find(c.name);
      REQUIRE(e != nullptr);
      ex::GemmBlocks b = c.blocks;
      b.warpSpecialized = true;
      ex::RunContext ctx;
      ctx.device = ts::Device::emulator(std::string("nvptx:") + sm);
      ctx.shape = {256, 256, 256};
      ctx = ex::withConfig(
          ctx, ts::perf::TuneConfig::parse("BLOCK_M=" + std::to_string(b.m) + ",BLOCK_N=" + std::to_string(b.n) +
                                           ",BLOCK_K=" + std::to_string(b.k) + ",STAGES=" + std::to_string(b.stages) +
                                           ",WARP_SPECIALIZE=1,num_warps=" + std::to_string(c.warps)));
      ex::Launch l = e->prepare(ctx);
      const ts::CompileOptions o = e->optionsFor(ctx);
      REQUIRE(o.numWarps == c.warps);
      // The code an aligned launch runs: a producer warp (or warpgroup)
      // beside the consumers, its TMA boxes, and the consumers' MMAs
      // committed to the accumulators' barrier; no whole-block barrier once
      // the warps split.
      ts::CompiledKernel ck =
          ts::compile(ts::assumeAligned(l.kernel), ts::Target::parse(std::string("nvptx:") + sm), o);
      const std::string ptx = ck.dump(ts::Stage::PTX);
      // One producer warp, or a warpgroup where it trades registers.
      CHECK((contains(ptx, ".maxntid " + std::to_string(32 * c.warps + 32) + "\n") ||
             contains(ptx, ".maxntid " + std::to_string(32 * c.warps + 128) + "\n")));
      CHECK(contains(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"));
      CHECK(contains(ptx, std::string("tcgen05.mma.cta_group::1.") + c.kind));
      CHECK(contains(ptx, "tcgen05.commit.cta_group::1.mbarrier::arrive::one"));
      CHECK(countMatches(ptx, "bar\\.sync\\s+1, " + std::to_string(32 * c.warps) + ";") > 0);
      if (ptxas) {
        testptx::PtxasFigures f = testptx::ptxasFigures(ck);
        INFO(f.report);
        CHECK(f.spillBytes == 0);
        std::printf("%-9s %3dx%3dx%2d s%d w%d %-7s warp-specialised: registers %3d, spill bytes %d\n", c.name, b.m, b.n,
                    b.k, b.stages, c.warps, sm, f.registers, f.spillBytes);
      }
      {
        // The same blocks without warp specialisation, for the figures.
        ex::RunContext plain = ex::withConfig(
            ctx, ts::perf::TuneConfig::parse("BLOCK_M=" + std::to_string(b.m) + ",BLOCK_N=" + std::to_string(b.n) +
                                             ",BLOCK_K=" + std::to_string(b.k) + ",STAGES=" + std::to_string(b.stages) +
                                             ",WARP_SPECIALIZE=0,num_warps=" + std::to_string(c.warps)));
        ex::Launch pl = e->prepare(plain);
        ts::CompiledKernel pk =
            ts::compile(ts::assumeAligned(pl.kernel), ts::Target::parse(std::string("nvptx:") + sm), o);
        if (ptxas) {
          testptx::PtxasFigures f = testptx::ptxasFigures(pk);
          std::printf("%-9s %3dx%3dx%2d s%d w%d %-7s usual schedule:    registers %3d, spill bytes %d\n", c.name, b.m,
                      b.n, b.k, b.stages, c.warps, sm, f.registers, f.spillBytes);
        }
      }
      // The emulator runs the same specialisation (the launch's buffers are
      // aligned and 256 is a multiple of 16) and the result is checked.
      examples_test::checkOnHostThreads(ts::compile(l.kernel, ctx.device, o), *e, ctx, {2});
    }
}

TEST_CASE("Blackwell dynamic tile schedules: the GEMMs' registers with and without cluster launch control",
          "[examples][gemm][gpu][ptxas][blackwell]") {
  if (!havePtxas()) {
    WARN("SKIPPED: ptxas not found (/usr/local/cuda/bin/ptxas or on PATH)");
    return;
  }
  for (const char* sm : {"sm_100a", "sm_103a", "sm_120a"})
    for (const char* name : {"gemm_f16", "gemm_bf16", "gemm_fp8"})
      for (const char* cfg : {"DYNAMIC=0", "DYNAMIC=1"}) {
        INFO(name << " on " << sm << " " << cfg);
        const ex::Example* e = ex::find(name);
        REQUIRE(e != nullptr);
        ex::RunContext ctx;
        ctx.device = ts::Device::emulator(std::string("nvptx:") + sm);
        ctx.shape = {256, 256, 256};
        ctx = ex::withConfig(ctx, ts::perf::TuneConfig::parse(cfg));
        ex::Launch l = e->prepare(ctx);
        ts::CompiledKernel k =
            ts::compile(ts::assumeAligned(l.kernel), ts::Target::parse(std::string("nvptx:") + sm), e->optionsFor(ctx));
        CHECK(contains(k.dump(ts::Stage::PTX), "clusterlaunchcontrol.try_cancel") == (cfg[8] == '1'));
        testptx::PtxasFigures f = testptx::ptxasFigures(k);
        CHECK(f.spillBytes == 0);
        std::printf("%-9s %-7s %s: registers %3d, spill bytes %d\n", name, sm, cfg, f.registers, f.spillBytes);
      }
}

TEST_CASE("gemm_f16 / gemm_bf16 default GPU configs: no spills on sm_80 and sm_90a, no scratch on AMDGPU",
          "[examples][gemm][gpu][ptxas]") {
  // Prints the table of docs/gemm.md ("GPU GEMM examples").
  bool ptxas = havePtxas();
  if (!ptxas) WARN("SKIPPED the ptxas checks: ptxas not found (/usr/local/cuda/bin/ptxas or on PATH)");
  for (const char* name : kGemms)
    for (bool facts : {false, true}) {
      const char* variant = facts ? "aligned" : "traced";
      if (ptxas)
        for (const char* sm : {"sm_80", "sm_90a"}) {
          INFO(name << " on " << sm << ", " << variant);
          ts::Target target = ts::Target::parse(std::string("nvptx:") + sm);
          ts::Kernel k = defaultKernel(name, target);
          ts::CompiledKernel ck = ts::compile(facts ? withAlignedFacts(k) : k, target);
          testptx::PtxasFigures f = testptx::ptxasFigures(ck);
          INFO(f.report);
          CHECK(f.spillBytes == 0);
          CHECK(contains(f.report, "0 bytes stack frame"));
          std::printf("%-9s %-7s %-8s registers %3d, spill bytes %d, shared %u bytes (dynamic)\n", name, sm, variant,
                      f.registers, f.spillBytes, ck.artifact().binary.sharedBytes);
        }
      for (const char* gfx : {"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1200"}) {
        INFO(name << " on " << gfx << ", " << variant);
        ts::Target target = ts::Target::parse(std::string("amdgpu:") + gfx);
        ts::Kernel k = defaultKernel(name, target);
        std::string res = ts::compile(facts ? withAlignedFacts(k) : k, target).dump(ts::Stage::Resources);
        INFO(res);
        std::smatch m;
        REQUIRE(std::regex_search(res, m, std::regex(R"(VGPRs (\d+), SGPRs (\d+), group segment (\d+) bytes)")));
        CHECK(contains(res, "private segment (spills/stack) 0 bytes"));
        std::printf("%-9s %-7s %-8s VGPRs %3s, SGPRs %3s, LDS %s bytes\n", name, gfx, variant, m[1].str().c_str(),
                    m[2].str().c_str(), m[3].str().c_str());
      }
    }
}
