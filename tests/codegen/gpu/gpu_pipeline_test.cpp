// Asynchronous copies on the GPU backends (docs/pipelining.md, "Status"):
//  * NVPTX sm_80: `copy {async = 1}` becomes cp.async per aligned chunk with
//    commit / wait groups (golden PTX, ptxas acceptance);
//  * AMDGPU: register-staged copies, whose LDS stores are deferred past the
//    compute of the iteration (golden AMDGCN);
//  * the SIMT machine performs a cp.async only when a wait retires its
//    group, so a missing or too weak wait is reported (hand-written NVPTX
//    modules, which the tile-IR verifier would reject).
// Numerical results of the pipelined GEMM on both emulators are checked by
// pipeline_lowering_test.cpp.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <iostream>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

#include "../emu_util.h"
#include "../pipelined_gemm.h"
#include "tessera/ir/IR.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using namespace emutest;

namespace {

constexpr int64_t BM = 32, BN = 32, BK = 16;

/// The GEMM of pipeline_lowering_test.cpp (f16 inputs, f32 out), K loop
/// written with for_pipelined.
ts::Kernel pipelinedGemmF16(int64_t stages) { return gemmtest::pipelinedGemmF16("pl_gemm", BM, BN, BK, stages); }

/// The kernel as a launch with 16-byte aligned buffers and N, K multiples
/// of 16 specialises it (dsl/lib/Launch.cpp): the divisibility facts that
/// let the copies be proven aligned.
ts::Kernel withAlignedFacts(const ts::Kernel& k) {
  std::shared_ptr<ts::ir::Function> f = ts::ir::clone(k.ir());
  f->argAttrs().resize(f->numArgs());
  for (unsigned i : {0u, 1u, 2u, 4u, 5u}) f->argAttrs()[i]["divisibility"] = int64_t{16};
  return ts::Kernel(std::move(f));
}

bool havePtxas() {
  return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 || system("command -v ptxas >/dev/null 2>&1") == 0;
}

bool contains(const std::string& s, const std::string& x) { return s.find(x) != std::string::npos; }

size_t count(const std::string& s, const std::string& x) {
  size_t n = 0;
  for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("NVPTX sm_80: pipelined copies are cp.async with commit and wait groups", "[gpu][pipeline]") {
  bool ptxas = havePtxas();
  if (!ptxas) WARN("SKIPPED ptxas checks: ptxas not found (/usr/local/cuda/bin/ptxas or on PATH)");
  for (int64_t stages : {2, 3}) {
    INFO("stages = " << stages);
    ts::CompiledKernel k = ts::compile(withAlignedFacts(pipelinedGemmF16(stages)), ts::Target::parse("nvptx:sm_80"));
    std::string ptx = k.dump(ts::Stage::PTX);
    // A 32x16 / 16x32 f16 tile over 128 threads: 8 contiguous halves
    // (16 bytes) per thread and operand, one .cg copy each, masked by its
    // ignore-src predicate (set for masked chunks: no read, zero fill).
    std::regex cp(R"(cp\.async\.cg\.shared\.global \[%rd\d+(\+\d+)?\], \[%rd\d+(\+\d+)?\], 16, %p\d+;)");
    size_t copies = std::distance(std::sregex_iterator(ptx.begin(), ptx.end(), cp), std::sregex_iterator());
    // Two operands, in the prologue (stages - 1 copies each) and the loop.
    CHECK(copies == size_t(2 * stages));
    CHECK(count(ptx, "cp.async.commit_group;") == size_t(stages));
    CHECK(std::regex_search(ptx, std::regex("cp\\.async\\.wait_group\\s+" + std::to_string(stages - 1) + ";")));
    CHECK(std::regex_search(ptx, std::regex(R"(cp\.async\.wait_group\s+0;)")));  // the drain after the loop
    // The K loop (from the target of the first branch after the wait that
    // jumps back above it, to that branch) has only the schedule's two
    // barriers, and the dot reads
    // its fragments with ldmatrix straight from the slots the cp.async
    // wrote: no shared stores or loads of its own (no operand staging, no
    // layout conversions of the copies' pointers or masks).
    std::smatch w;
    REQUIRE(std::regex_search(ptx, w, std::regex("cp\\.async\\.wait_group\\s+" + std::to_string(stages - 1) + ";")));
    size_t at = static_cast<size_t>(w.position(0));
    size_t from = std::string::npos, to = std::string::npos;
    std::regex bra(R"(bra(\.uni)?\s+(\$L__BB\d+_\d+);)");
    for (auto it = std::sregex_iterator(ptx.begin() + static_cast<std::ptrdiff_t>(at), ptx.end(), bra);
         it != std::sregex_iterator(); ++it) {
      size_t label = ptx.find("\n" + (*it)[2].str() + ":");
      if (label != std::string::npos && label < at) {
        from = label;
        to = at + static_cast<size_t>(it->position(0));
        break;
      }
    }
    REQUIRE(from != std::string::npos);
    std::string loop = ptx.substr(from, to - from);
    INFO(loop);
    CHECK(count(loop, "bar.sync") == 2);
    CHECK(count(loop, "st.shared") == 0);
    CHECK(count(loop, "ld.shared") == 0);
    CHECK(count(loop, "ldmatrix.sync.aligned") > 0);
    CHECK(count(loop, "mma.sync.aligned") > 0);
    // The synchronous path would load the tiles into registers.
    CHECK_FALSE(contains(ptx, "ld.global.nc.v4.u32"));
    CHECK_FALSE(contains(ptx, "ld.global.v4"));
    if (ptxas) {
      // Throws DeviceError if ptxas rejects the PTX.
      std::string res = k.dump(ts::Stage::Resources);
      INFO(res);
      CHECK(contains(res, "ptxas sm_80: registers"));
    }
  }
  SECTION("copies that cannot be proven aligned stay synchronous") {
    // Without facts on N and K a row of A or B may start at any element, so
    // no 4-byte chunk is provably aligned: every copy is a program-order
    // load + store; the groups remain (empty).
    ts::CompiledKernel k = ts::compile(pipelinedGemmF16(3), ts::Target::parse("nvptx:sm_80"));
    std::string ptx = k.dump(ts::Stage::PTX);
    CHECK_FALSE(contains(ptx, "cp.async.ca"));
    CHECK_FALSE(contains(ptx, "cp.async.cg"));
    CHECK(std::regex_search(ptx, std::regex(R"(cp\.async\.wait_group\s+2;)")));
    CHECK(contains(ptx, "ld.global"));
    if (ptxas) CHECK(contains(k.dump(ts::Stage::Resources), "registers"));
  }
}

TEST_CASE("AMDGPU gfx942/gfx90a: the next stage's global loads overlap the MFMAs, LDS stores come after",
          "[gpu][pipeline]") {
  struct Arch {
    const char* target;
    const char* mfma;
    const char* load;
    const char* store;
  };
  // A 32x16 f16 tile over 256 lanes: 2 halves each, one 4-byte
  // global_load_dword, no lane loading what another loads.
  for (Arch arch : {Arch{"amdgpu:gfx942", "v_mfma_f32_16x16x16_f16", "global_load_dword", "ds_write"},
                    Arch{"amdgpu:gfx90a", "v_mfma_f32_16x16x16f16", "global_load_dword", "ds_write"}})
    for (int64_t stages : {2, 3}) {
      INFO(arch.target << ", stages = " << stages);
      const std::string mfma = arch.mfma;
      ts::CompiledKernel k = ts::compile(withAlignedFacts(pipelinedGemmF16(stages)), ts::Target::parse(arch.target));
      std::string gcn = k.dump(ts::Stage::AMDGCN);
      // The K loop: the longest span from a label to a backward branch to it
      // that contains the MFMAs.
      std::regex br(R"(s_c?branch\w* (\.LBB\d+_\d+))");
      std::string body;
      for (auto it = std::sregex_iterator(gcn.begin(), gcn.end(), br); it != std::sregex_iterator(); ++it) {
        size_t at = static_cast<size_t>(it->position(0));
        size_t lbl = gcn.rfind("\n" + (*it)[1].str() + ":", at);
        if (lbl == std::string::npos) continue;
        std::string span = gcn.substr(lbl, at - lbl);
        if (contains(span, mfma) && span.size() > body.size()) body = span;
      }
      REQUIRE_FALSE(body.empty());
      size_t firstLoad = body.find(arch.load), firstMfma = body.find(mfma);
      // The slots are stored in the MFMA operand layouts (A rows padded: 8-byte
      // stores; B transposed: 2-byte stores) and read by the MFMA fragment
      // loads directly, so the LDS stores are the copies' own.
      REQUIRE(firstMfma != std::string::npos);
      size_t lastMfma = body.rfind(mfma), lastStore = body.rfind(arch.store);
      INFO(body);
      // Issued at the copy, at the top of the iteration (or, where the backend
      // rotated the loop, at the bottom of the previous one): the MFMAs never
      // wait for loads in flight...
      CHECK(firstLoad != std::string::npos);
      CHECK(body.substr(0, lastMfma).find("vmcnt") == std::string::npos);
      // ... stored to LDS after the compute (the synchronous lowering stores
      // right after the loads, before any MFMA of the iteration).
      REQUIRE(lastStore != std::string::npos);
      CHECK(lastStore > lastMfma);
      CHECK(body.find(arch.store) > lastMfma);  // no operand staging before the MFMAs
      // The loads' latency is hidden only if nothing waits for them before
      // the MFMAs: the first vmcnt wait of the iteration is the deferred LDS
      // stores' (a wait right after each load, e.g. to split the loaded f16
      // pairs inside the masked load's branch, would serialise them).
      std::smatch w;
      REQUIRE(std::regex_search(body, w, std::regex(R"(s_waitcnt[^\n]*vmcnt)")));
      CHECK(static_cast<size_t>(w.position(0)) > lastMfma);
      // One barrier: the schedule's {stage = 0} barrier after the wait. Its
      // barrier at the top of the body orders the copies' LDS writes after
      // the previous iteration's reads, and those writes wait for the end of
      // the body, after the first barrier: not emitted
      // (Lower::redundantSlotBarrier). This tile's slots do not limit the
      // occupancy, so all S are kept (no second barrier before the stores:
      // Lower::planFewerSlots, tests/lit/gpu/gemm_s3.tir).
      CHECK(count(body, "s_barrier") == 1);
    }
}

TEST_CASE("AMDGPU gfx1100: the schedule's barriers do not wait for the next stage's loads", "[gpu][pipeline]") {
  // On gfx10+ a workgroup may span the two CUs of a WGP, so a full
  // workgroup release fence waits for every global load in flight
  // (s_waitcnt vmcnt(0) before s_barrier). The schedule's barriers order
  // the LDS slots only (nothing in the loop writes global memory): their
  // fences are restricted to LDS, and the loads issued before the second
  // barrier are still in flight across it.
  for (int64_t stages : {2, 3}) {
    INFO("stages = " << stages);
    ts::CompiledKernel k = ts::compile(withAlignedFacts(pipelinedGemmF16(stages)), ts::Target::parse("amdgpu:gfx1100"));
    std::string gcn = k.dump(ts::Stage::AMDGCN);
    size_t wmma = gcn.find("v_wmma_f32_16x16x16_f16");
    REQUIRE(wmma != std::string::npos);
    // The last global load before the first WMMA, and the barrier after it.
    size_t load = gcn.rfind("global_load_b", wmma);  // b64: 4 halves per lane of 128
    REQUIRE(load != std::string::npos);
    size_t bar = gcn.find("s_barrier", load);
    REQUIRE(bar < wmma);
    std::string between = gcn.substr(load, bar - load);
    INFO(between);
    CHECK(between.find("vmcnt") == std::string::npos);
  }
}

// ---- the SIMT machine's cp.async --------------------------------------------

namespace {

/// Thread t copies in[t] (4 bytes) into tile[t] with cp.async, then reads
/// its neighbour's tile[(t + 1) % 32] after a barrier. WAIT is replaced by
/// the wait under test, SRC by the src-size operand.
const char* kCpAsyncModule = R"(
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@tile = internal addrspace(3) global [64 x i32] undef, align 16

define ptx_kernel void @exchange(ptr addrspace(1) %in, ptr addrspace(1) %out) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %sp = getelementptr inbounds [64 x i32], ptr addrspace(3) @tile, i32 0, i32 %tid
  %gp = getelementptr inbounds i32, ptr addrspace(1) %in, i32 %tid
  call void @llvm.nvvm.cp.async.ca.shared.global.4.s(ptr addrspace(3) %sp, ptr addrspace(1) %gp, i32 SRC), !tessera.op !0
  call void @llvm.nvvm.cp.async.commit.group()
  %t32 = add i32 %tid, 32
  %sp2 = getelementptr inbounds [64 x i32], ptr addrspace(3) @tile, i32 0, i32 %t32
  %gp2 = getelementptr inbounds i32, ptr addrspace(1) %in, i32 %t32
  call void @llvm.nvvm.cp.async.ca.shared.global.4.s(ptr addrspace(3) %sp2, ptr addrspace(1) %gp2, i32 4), !tessera.op !2
  call void @llvm.nvvm.cp.async.commit.group()
  WAIT
  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)
  %t1 = add i32 %tid, 1
  %nb = and i32 %t1, 31
  %np = getelementptr inbounds [64 x i32], ptr addrspace(3) @tile, i32 0, i32 %nb
  %v = load i32, ptr addrspace(3) %np, align 4, !tessera.op !1
  %po = getelementptr inbounds i32, ptr addrspace(1) %out, i32 %tid
  store i32 %v, ptr addrspace(1) %po, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.barrier.cta.sync.aligned.all(i32)
declare void @llvm.nvvm.cp.async.ca.shared.global.4.s(ptr addrspace(3), ptr addrspace(1), i32)
declare void @llvm.nvvm.cp.async.commit.group()
declare void @llvm.nvvm.cp.async.wait.group(i32)
declare void @llvm.nvvm.cp.async.wait.all()

!0 = !{!"copy {async = 1} tile[t] @ cpasync.cpp:5"}
!1 = !{!"local_load tile[t + 1] @ cpasync.cpp:9"}
!2 = !{!"copy {async = 1} tile[t + 32] @ cpasync.cpp:6"}
)";

struct CpAsyncRun {
  std::vector<int32_t> out;
  tessera::emu::LaunchReport rep;
};

CpAsyncRun runCpAsync(const std::string& wait, const std::string& srcSize = "4") {
  std::string text = kCpAsyncModule;
  text.replace(text.find("WAIT"), 4, wait);
  text.replace(text.find("SRC"), 3, srcSize);
  tessera::codegen::EmuKernel k = tessera::codegen::compileForEmulator(text, false, 32, hooks());
  std::vector<int32_t> in(64), out(32, -1);
  for (int i = 0; i < 64; ++i) in[size_t(i)] = 1000 + i;
  auto cfg = config(k, 1, 32);
  cfg.sharedBytes = std::max<size_t>(k.staticSharedBytes, 256);
  cfg.throwOnError = false;
  addBuffer(cfg, in);
  addBuffer(cfg, out);
  Args args;
  args.add(in.data()).add(out.data());
  CpAsyncRun r;
  r.rep = tessera::emu::launch(k.threadFn, args.args(), cfg);
  r.out = out;
  return r;
}

bool reported(const tessera::emu::LaunchReport& rep, tessera::emu::IssueKind kind, const std::string& text) {
  for (const auto& is : rep.issues)
    if (is.kind == kind && contains(is.message, text)) return true;
  return false;
}

}  // namespace

TEST_CASE("emu: cp.async is performed when a wait retires its group", "[emu][pipeline]") {
  using tessera::emu::IssueKind;
  SECTION("wait_group 0: every copy landed; neighbours' values") {
    CpAsyncRun r = runCpAsync("call void @llvm.nvvm.cp.async.wait.group(i32 0)");
    INFO(r.rep.summary());
    CHECK_FALSE(r.rep.hasErrors());
    for (int t = 0; t < 32; ++t) REQUIRE(r.out[size_t(t)] == 1000 + (t + 1) % 32);
  }
  SECTION("wait_all: the same") {
    CpAsyncRun r = runCpAsync("call void @llvm.nvvm.cp.async.wait.all()");
    CHECK_FALSE(r.rep.hasErrors());
    for (int t = 0; t < 32; ++t) REQUIRE(r.out[size_t(t)] == 1000 + (t + 1) % 32);
  }
  SECTION("wait_group 1 retires the older group only: tile[0..31] landed, tile[32..63] pending at exit") {
    CpAsyncRun r = runCpAsync("call void @llvm.nvvm.cp.async.wait.group(i32 1)");
    for (int t = 0; t < 32; ++t) REQUIRE(r.out[size_t(t)] == 1000 + (t + 1) % 32);
    CHECK(r.rep.count(IssueKind::SharedRace) == 0);
    CHECK(r.rep.count(IssueKind::AsyncCopyMisuse) == 32);
    CHECK(reported(r.rep, IssueKind::AsyncCopyMisuse, "cpasync.cpp:6"));
    CHECK(reported(r.rep, IssueKind::AsyncCopyMisuse, "1 cp.async copies in flight"));
  }
  SECTION("pending too large (wait_group 2): the read sees in-flight data") {
    CpAsyncRun r = runCpAsync("call void @llvm.nvvm.cp.async.wait.group(i32 2)");
    // The copies were not performed at issue: shared memory still holds the
    // machine's 0xCD poison when the neighbour reads it.
    for (int t = 0; t < 32; ++t) REQUIRE(r.out[size_t(t)] == int32_t(0xCDCDCDCDu));
    CHECK(r.rep.count(IssueKind::SharedRace) == 32);
    CHECK(reported(r.rep, IssueKind::SharedRace, "cpasync.cpp:9"));
    CHECK(reported(r.rep, IssueKind::SharedRace, "still in flight"));
    CHECK(r.rep.count(IssueKind::AsyncCopyMisuse) == 32);
    CHECK(reported(r.rep, IssueKind::AsyncCopyMisuse, "2 cp.async copies in flight"));
  }
  SECTION("no wait at all: the same reports, and the launch throws by default") {
    CpAsyncRun r = runCpAsync("");
    CHECK(r.rep.count(IssueKind::SharedRace) == 32);
    CHECK(r.rep.count(IssueKind::AsyncCopyMisuse) == 32);
    for (int t = 0; t < 32; ++t) REQUIRE(r.out[size_t(t)] == int32_t(0xCDCDCDCDu));
  }
  SECTION("src-size 0: zero fill, no global read") {
    CpAsyncRun r = runCpAsync("call void @llvm.nvvm.cp.async.wait.group(i32 0)", "0");
    CHECK_FALSE(r.rep.hasErrors());
    for (int t = 0; t < 32; ++t) REQUIRE(r.out[size_t(t)] == 0);
  }
}
