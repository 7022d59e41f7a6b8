// The pipelined GEMM's tensor-core dot reads its operands straight from the
// shared slots the stage copies fill (LowerPlan.cpp, planDirectDots): on
// NVPTX the slots are stored in the swizzled ldmatrix layout, so the copies
// (cp.async chunks or program-order stores) write it and ldmatrix reads it
// without an operand-staging round trip. Checked on the SIMT emulator: the
// product is exact against a plain C++ reference, no op of the kernel is the
// dot's operand staging, and the ldmatrix reads of the slots have no bank
// conflicts (the emulator's per-op statistics).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <cstring>
#include <random>
#include <string>

#include "../../../codegen/gpu/GpuCompile.h"
#include "../emu_util.h"
#include "../../amd_code_object.h"
#include "../pipelined_gemm.h"
#include "tessera/ir/Pass.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using namespace emutest;

namespace {

ts::Kernel slotGemm(int64_t BM, int64_t BN, int64_t BK, int64_t stages) {
  return gemmtest::pipelinedGemmF16("slot_gemm", BM, BN, BK, stages);
}

uint16_t toHalf(float f) {  // exact for multiples of 1/8 in [-2, 2]
  if (f == 0) return 0;
  uint16_t sign = f < 0 ? 0x8000 : 0;
  int e;
  float m = std::frexp(std::fabs(f), &e);
  return static_cast<uint16_t>(sign | (e - 1 + 15) << 10 | static_cast<uint16_t>(std::lround((m * 2 - 1) * 1024)));
}

struct Run {
  tessera::emu::LaunchReport rep;
  bool exact = true;
  std::string ptx;
  std::string plan;         // the shared-memory plan
  std::string conversions;  // the layout conversions, one per line
};

/// Schedules the traced kernel (default passes + pipeline), adds the
/// launch facts when `aligned`, compiles for `target` and runs it on the
/// emulator.
Run run(const ts::Kernel& k, const std::string& target, bool aligned, int M, int N, int K, int64_t BM, int64_t BN,
        int numWarps = 4) {
  std::unique_ptr<tessera::ir::Function> f = tessera::ir::clone(k.ir());
  if (aligned)
    for (unsigned i = 0; i < f->numArgs(); ++i) f->argAttrs()[i]["divisibility"] = int64_t{16};
  tessera::ir::PassManager pm;
  tessera::ir::addDefaultPasses(pm);
  pm.add(tessera::ir::createPipelineSchedulePass());
  pm.run(*f);
  auto [art, ek] = lowerForEmulator(*f, target, numWarps);

  std::mt19937 rng(unsigned(M * 7 + K));
  std::uniform_int_distribution<int> d(-16, 16);
  std::vector<float> A(size_t(M) * K), B(size_t(K) * N);
  for (float& x : A) x = d(rng) / 8.0f;
  for (float& x : B) x = d(rng) / 8.0f;
  std::vector<uint16_t> a16(A.size()), b16(B.size());
  for (size_t i = 0; i < A.size(); ++i) a16[i] = toHalf(A[i]);
  for (size_t i = 0; i < B.size(); ++i) b16[i] = toHalf(B[i]);
  std::vector<float> C(size_t(M) * N, -777.0f);
  Args args;
  args.add(C.data()).add(a16.data()).add(b16.data()).add(int32_t(M)).add(int32_t(N)).add(int32_t(K));
  tessera::emu::LaunchConfig cfg = config(ek, uint32_t((M + BM - 1) / BM), art->binary.threadsPerBlock);
  cfg.grid[1] = uint32_t((N + BN - 1) / BN);
  cfg.sharedBytes = ek.dynamicSharedOffset + (ek.amd ? 0 : art->binary.sharedBytes);
  addBuffer(cfg, C), addBuffer(cfg, a16), addBuffer(cfg, b16);
  Run r;
  r.ptx = ek.amd ? std::string() : art->binary.ptx;
  r.plan = art->dumps.extra.at("shared-memory");
  r.conversions = art->dumps.extra.at("layout-stats");
  r.rep = tessera::emu::launch(ek.threadFn, args.args(), cfg);
  for (int i = 0; i < M && r.exact; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0;
      for (int kk = 0; kk < K; ++kk) ref += double(A[size_t(i) * K + kk]) * B[size_t(kk) * N + j];
      if (C[size_t(i) * N + j] != ref) {
        INFO("C(" << i << "," << j << ") = " << C[size_t(i) * N + j] << ", reference " << ref);
        CHECK(C[size_t(i) * N + j] == ref);
        r.exact = false;
        break;
      }
    }
  return r;
}

uint64_t conflictsOf(const tessera::emu::LaunchReport& rep, const std::string& what, uint64_t* accesses = nullptr) {
  uint64_t n = 0;
  for (auto& s : rep.bankConflicts)
    if (s.opName.find(what) != std::string::npos) {
      n += s.conflicts;
      if (accesses) *accesses += s.warpAccesses;
    }
  return n;
}

}  // namespace

TEST_CASE("pipelined f16 GEMM: the dot reads ldmatrix fragments straight from the swizzled slots", "[gpu][dot][emu]") {
  struct Tile {
    int64_t BM, BN, BK, stages;
  };
  // 32-wide rows (4 chunks: the swizzle of R < 8 chunks) and 64-wide rows
  // (8 chunks), two and three stages.
  for (Tile t : {Tile{32, 32, 16, 2}, Tile{64, 64, 32, 3}, Tile{32, 64, 64, 2}})
    for (bool aligned : {true, false}) {
      // Aligned: cp.async writes whole swizzled chunks; not aligned:
      // program-order element stores into the swizzled slot.
      int M = aligned ? 128 : 100, N = aligned ? 128 : 70, K = aligned ? 96 : 50;
      INFO("tile " << t.BM << "x" << t.BN << "x" << t.BK << ", stages " << t.stages
                   << (aligned ? ", aligned" : ", ragged"));
      Run r = run(slotGemm(t.BM, t.BN, t.BK, t.stages), "nvptx:sm_80", aligned, M, N, K, t.BM, t.BN);
      CHECK_FALSE(r.rep.hasErrors());
      CHECK(r.exact);
      CHECK(r.ptx.find("ldmatrix.sync.aligned") != std::string::npos);
      CHECK((r.ptx.find("cp.async.cg") != std::string::npos) == aligned);
      uint64_t accesses = 0;
      CHECK(conflictsOf(r.rep, "dot fragments", &accesses) == 0);
      CHECK(accesses > 0);
      // No op of the kernel is the dot's operand staging.
      for (auto& s : r.rep.bankConflicts) CHECK(s.opName.find("operand staging") == std::string::npos);
    }
}

TEST_CASE("pipelined f16 GEMM on AMDGPU: MFMA / WMMA fragments straight from the padded and transposed slots",
          "[gpu][dot][emu]") {
  // The register-staged copies store A's slot with rows padded by 4
  // elements and B's slot transposed (N x K, padded), the layouts the MFMA
  // and WMMA fragment loads read.
  for (const char* target : {"amdgpu:gfx942", "amdgpu:gfx950", "amdgpu:gfx1100", "amdgpu:gfx1200"})
    for (bool aligned : {true, false}) {
      int M = aligned ? 128 : 100, N = aligned ? 128 : 70, K = aligned ? 96 : 50;
      INFO(target << (aligned ? ", aligned" : ", ragged"));
      Run r = run(slotGemm(64, 64, 32, 2), target, aligned, M, N, K, 64, 64);
      CHECK_FALSE(r.rep.hasErrors());
      CHECK(r.exact);
      uint64_t accesses = 0;
      uint64_t conflicts = conflictsOf(r.rep, "dot fragments", &accesses);
      CHECK(accesses > 0);
      // The padding spreads the MFMA's 8-byte reads over the banks (the
      // WMMA's 32-byte reads are not conflict-free with it, as before).
      if (std::string(target) == "amdgpu:gfx942") CHECK(conflicts == 0);
      for (auto& s : r.rep.bankConflicts) CHECK(s.opName.find("operand staging") == std::string::npos);
    }
}

namespace {

/// The 128x128x32 tile of 3 stages on `target` with `warps` warps, aligned
/// and ragged: exact against the reference, no race (the detector checks
/// the barriers between slots and between conversion chunks); `more`
/// checks the rest.
void run128(const std::string& target, int warps, const std::function<void(const Run&)>& more) {
  for (bool aligned : {true, false}) {
    int M = aligned ? 256 : 200, N = aligned ? 256 : 150, K = aligned ? 128 : 100;
    INFO(target << ", " << warps << " warps, " << (aligned ? "aligned" : "ragged"));
    Run r = run(slotGemm(128, 128, 32, 3), target, aligned, M, N, K, 128, 128, warps);
    CHECK_FALSE(r.rep.hasErrors());
    CHECK(r.exact);
    INFO(r.plan << r.conversions);
    more(r);
  }
}

}  // namespace

// On gfx942 (MFMA 32x32x8, 4 waves) the tile's padded slots (55296 bytes,
// 36864 in two) hold the waves at 1 per SIMD, so it keeps 2 slots and
// swizzles them, B's rows permuted first (mfmaColWarps): 32768 bytes,
// Triton's footprint.
TEST_CASE("pipelined 128x128x32 f16 GEMM on gfx942: 3 stages in 2 swizzled LDS slots, MFMA 32x32x8",
          "[gpu][dot][emu]") {
  run128("amdgpu:gfx942", 4, [](const Run& r) {
    uint64_t accesses = 0;
    uint64_t conflicts = conflictsOf(r.rep, "dot fragments", &accesses);
    CHECK(accesses > 0);
    INFO(conflicts << " bank conflicts in " << accesses << " fragment reads");
    CHECK(conflicts == 0);
  });
}

// gfx950 (CDNA4): MFMA 32x32x16, each lane reading 8 k of a row (16-byte
// units when swizzled), B's rows permuted as for 32x32x8; 4 and 8 waves.
TEST_CASE("pipelined 128x128x32 f16 GEMM on gfx950: MFMA 32x32x16 from the LDS slots", "[gpu][dot][emu][gfx950]") {
  for (int warps : {4, 8}) run128("amdgpu:gfx950", warps, [](const Run&) {});
}

// gfx1200 (RDNA4): WMMA with 8 k per lane (one 16-byte read of a row, the
// two half-waves reading the two halves of K), fed swapped as MFMA; 4 and 8
// waves.
TEST_CASE("pipelined 128x128x32 f16 GEMM on gfx1200: RDNA4 WMMA from the LDS slots", "[gpu][dot][emu][gfx1200]") {
  for (int warps : {4, 8}) run128("amdgpu:gfx1200", warps, [](const Run&) {});
}

// On gfx1100 (WMMA, wave32) the f32 accumulator goes through the LDS to the
// store's layout, 65536 bytes in one piece, which alone held the waves at 2
// per SIMD. In 4 chunks of 32 rows (16384 bytes) with 2 swizzled slots the
// plan is 32768 bytes (4 waves).
//
// On gfx942 with 8 warps the MFMA 32x32x8 accumulator runs each warp's 32
// lanes down 32 rows and its 4 warp rows over all 128, so a chunk of 32
// rows is written by one warp row (a warp-uniform branch) and read by every
// thread (the store's layout has every row in each chunk).
TEST_CASE("pipelined 128x128x32 f16 GEMM: the epilogue conversion in row chunks (gfx1100, and gfx942 with 8 warps)",
          "[gpu][dot][emu]") {
  for (auto [target, warps] : {std::pair<const char*, int>{"amdgpu:gfx1100", 4}, {"amdgpu:gfx942", 8}})
    run128(target, warps, [](const Run& r) {
      CHECK(r.plan.find("32768 bytes per block") != std::string::npos);
      CHECK(r.conversions.find("(4 chunks of 32 rows)") != std::string::npos);
    });
}

namespace {

/// The pipelined i8 GEMM, scheduled and compiled as `run` does, on
/// operands over all of -128..127 against a plain int32 reference.
Run runI8(const ts::Kernel& k, const std::string& target, bool aligned, int M, int N, int K, int64_t BM, int64_t BN) {
  std::unique_ptr<tessera::ir::Function> f = tessera::ir::clone(k.ir());
  if (aligned)
    for (unsigned i = 0; i < f->numArgs(); ++i) f->argAttrs()[i]["divisibility"] = int64_t{16};
  tessera::ir::PassManager pm;
  tessera::ir::addDefaultPasses(pm);
  pm.add(tessera::ir::createPipelineSchedulePass());
  pm.run(*f);
  auto [art, ek] = lowerForEmulator(*f, target);
  std::mt19937 rng(unsigned(M * 5 + K));
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> A(size_t(M) * K), B(size_t(K) * N);
  for (auto& x : A) x = int8_t(d(rng));
  for (auto& x : B) x = int8_t(d(rng));
  std::vector<int32_t> C(size_t(M) * N, -777);
  Args args;
  args.add(C.data()).add(A.data()).add(B.data()).add(int32_t(M)).add(int32_t(N)).add(int32_t(K));
  tessera::emu::LaunchConfig cfg = config(ek, uint32_t((M + BM - 1) / BM), art->binary.threadsPerBlock);
  cfg.grid[1] = uint32_t((N + BN - 1) / BN);
  cfg.sharedBytes = ek.dynamicSharedOffset + (ek.amd ? 0 : art->binary.sharedBytes);
  addBuffer(cfg, C), addBuffer(cfg, A), addBuffer(cfg, B);
  Run r;
  r.ptx = ek.amd ? art->assembly() : art->binary.ptx;
  r.rep = tessera::emu::launch(ek.threadFn, args.args(), cfg);
  for (int i = 0; i < M && r.exact; ++i)
    for (int j = 0; j < N; ++j) {
      int64_t ref = 0;
      for (int kk = 0; kk < K; ++kk) ref += int64_t(A[size_t(i) * K + kk]) * B[size_t(kk) * N + j];
      if (C[size_t(i) * N + j] != ref) {
        INFO("C(" << i << "," << j << ") = " << C[size_t(i) * N + j] << ", reference " << ref);
        CHECK(C[size_t(i) * N + j] == ref);
        r.exact = false;
        break;
      }
    }
  return r;
}

}  // namespace

TEST_CASE("pipelined i8 GEMM on the tensor cores matches the int32 reference", "[gpu][dot][emu]") {
  // NVPTX: A is read by ldmatrix straight from its swizzled slot (16 i8 a
  // chunk); B, whose cp.async chunks run along N, goes through the dot's
  // N x K staging buffer. AMDGPU: both slots are stored in the staging
  // layouts (A padded, B transposed) and read directly.
  struct Case {
    const char* target;
    const char* mnemonic;
  };
  for (Case c : {Case{"nvptx:sm_80", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"},
                 Case{"amdgpu:gfx90a", "v_mfma_i32_16x16x16"}, Case{"amdgpu:gfx942", "v_mfma_i32_16x16x32"},
                 Case{"amdgpu:gfx1100", "v_wmma_i32_16x16x16_iu8"}})
    for (bool aligned : {true, false}) {
      int M = aligned ? 128 : 100, N = aligned ? 128 : 70, K = aligned ? 192 : 90;
      INFO(c.target << (aligned ? ", aligned" : ", ragged"));
      Run r = runI8(gemmtest::pipelinedGemmI8("slot_gemm_i8", 64, 64, 64, 3), c.target, aligned, M, N, K, 64, 64);
      CHECK_FALSE(r.rep.hasErrors());
      CHECK(r.exact);
      CHECK(r.ptx.find(c.mnemonic) != std::string::npos);
      uint64_t accesses = 0;
      uint64_t conflicts = conflictsOf(r.rep, "dot fragments", &accesses);
      CHECK(accesses > 0);
      if (std::string(c.target) == "nvptx:sm_80") {
        CHECK(conflicts == 0);
        CHECK((r.ptx.find("cp.async.cg") != std::string::npos) == aligned);
      }
    }
}

TEST_CASE("i8 GEMM code objects link for gfx90a, gfx942 and gfx1100 with the i8 matrix instructions",
          "[gpu][dot][amdgpu]") {
  struct Case {
    const char* gfx;
    int wave;
    const char* mnemonic;
  };
  for (Case c : {Case{"gfx90a", 64, "v_mfma_i32_16x16x16"}, Case{"gfx942", 64, "v_mfma_i32_16x16x32"},
                 Case{"gfx1100", 32, "v_wmma_i32_16x16x16_iu8"}}) {
    INFO(c.gfx);
    ts::CompiledKernel k = ts::compile(gemmtest::pipelinedGemmI8("gemm_i8", 64, 64, 32, 2),
                                       ts::Target::parse(std::string("amdgpu:") + c.gfx));
    std::string report = testamd::checkCodeObject(k, c.wave);
    INFO(report);
    CHECK(report.find("private segment (spills/stack) 0 bytes") != std::string::npos);
    CHECK(k.dump(ts::Stage::AMDGCN).find(c.mnemonic) != std::string::npos);
  }
}
