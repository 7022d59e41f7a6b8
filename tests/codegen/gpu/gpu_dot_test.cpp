// Tensor-core dots: NVIDIA mma.sync m16n8k16 + ldmatrix, AMD MFMA 32x32x8
// and 16x16x16 (gfx90a, gfx942) and WMMA 16x16x16 (gfx1100). Golden checks of the
// generated code, ptxas acceptance and registers, and end-to-end GEMMs on the
// SIMT machine (which emulates the matrix instructions lane by lane) against
// a plain C++ reference, on aligned and ragged M/N/K.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <unistd.h>

#include "../../../codegen/GpuTargets.h"
#include "../emu_util.h"
#include "tessera/ir/Builder.h"

using namespace emutest;
using namespace tessera;
using namespace tessera::ir;

namespace {

Location L(uint32_t line) { return Location{"gpu_dot.cpp", line, 5}; }
Type i32() { return Type::scalar(DType::I32); }

Value* arg(Function& f, Type t, const std::string& name, bool div16) {
  Value* v = f.addArgument(std::move(t), name);
  if (f.argAttrs().size() < f.numArgs()) f.argAttrs().resize(f.numArgs());
  if (div16) f.argAttrs().back()["divisibility"] = int64_t{16};
  return v;
}

/// Triton-style GEMM: c[M,N] = a[M,K] * b[K,N] (row-major, f32 out), one
/// BMxBN tile per program (program_id(0) along M, (1) along N), a K loop of
/// BK steps carrying an f32 accumulator, masked loads and store. With
/// `accumulate`, c += a * b: the accumulator starts from c's tile.
/// Where B comes from: K x N row-major in `in` (the default), N x K
/// row-major (a linear layer's x W^T: each tile contiguous along K), or K x N
/// in f32 cast to `in` in registers (dequantised weights).
enum class BFrom { KxN, NxK, F32Cast };

std::unique_ptr<Function> gemm(DType in, int64_t BM, int64_t BN, int64_t BK, bool div16, DType accDt = DType::F32,
                               bool accumulate = false, BFrom bFrom = BFrom::KxN) {
  auto f = std::make_unique<Function>("gemm", L(1));
  Value* c = arg(*f, Type::ptr(accDt, MemSpace::Global), "c", true);
  Value* a = arg(*f, Type::ptr(in, MemSpace::Global), "a", true);
  Value* bp = arg(*f, Type::ptr(bFrom == BFrom::F32Cast ? DType::F32 : in, MemSpace::Global), "b", true);
  Value* M = arg(*f, i32(), "M", div16);
  Value* N = arg(*f, i32(), "N", div16);
  Value* K = arg(*f, i32(), "K", div16);
  Builder b(&f->body());
  b.setLoc(L(2));
  // Helpers building in the current builder (`cur`: the kernel body or the
  // loop body).
  Builder* cur = &b;
  auto row = [&](Value* v, int64_t n) { return cur->broadcast(cur->expandDims(v, 1), {v->type().shape()[0], n}); };
  auto col = [&](Value* v, int64_t m) { return cur->broadcast(cur->expandDims(v, 0), {m, v->type().shape()[0]}); };
  auto mul = [&](Value* x, Value* s) { return cur->binary(OpCode::Mul, x, cur->splat(s, x->type().shape())); };
  auto lt = [&](Value* x, Value* s) { return cur->cmp("lt", x, cur->splat(s, x->type().shape())); };
  Value* rm = b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, b.programId(0), b.constant(i32(), BM)), {BM}),
                       b.arange(0, BM));
  Value* rn = b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, b.programId(1), b.constant(i32(), BN)), {BN}),
                       b.arange(0, BN));
  Value* rk = b.arange(0, BK);
  Value* zero = b.constant(i32(), int64_t{0});
  Value* step = b.constant(i32(), BK);
  Type accT = Type::tile(Type::scalar(accDt), {BM, BN});
  auto zeroOf = [&](Builder& bb, Type t) {
    return isFloat(t.dtype()) ? bb.constant(std::move(t), 0.0) : bb.constant(std::move(t), int64_t{0});
  };
  // c's offsets and mask, computed after the loop unless the accumulator
  // starts from c (the f16 register counts below are measured that way).
  auto cAccess = [&] {
    return std::pair{b.binary(OpCode::Add, mul(row(rm, BN), N), col(rn, BM)),
                     b.binary(OpCode::And, lt(row(rm, BN), M), lt(col(rn, BM), N))};
  };
  std::pair<Value*, Value*> cAt{nullptr, nullptr};
  if (accumulate) cAt = cAccess();
  Value* init =
      accumulate ? b.load(b.ptrAdd(b.splat(c, {BM, BN}), cAt.first), cAt.second, zeroOf(b, accT)) : zeroOf(b, accT);
  auto res = b.forLoop(zero, K, step, {init}, [&](Builder& ib, Value* k0, std::vector<Value*> cv) {
    ib.setLoc(L(3));
    cur = &ib;
    Value* ka = ib.binary(OpCode::Add, ib.splat(k0, {BK}), rk);
    Value* aOff = ib.binary(OpCode::Add, mul(row(rm, BK), K), col(ka, BM));
    Value* aMask = ib.binary(OpCode::And, lt(row(rm, BK), M), lt(col(ka, BM), K));
    Value* av =
        ib.load(ib.ptrAdd(ib.splat(a, {BM, BK}), aOff), aMask, zeroOf(ib, Type::tile(Type::scalar(in), {BM, BK})));
    Value* bOff = bFrom == BFrom::NxK ? ib.binary(OpCode::Add, row(ka, BN), mul(col(rn, BK), K))
                                      : ib.binary(OpCode::Add, mul(row(ka, BN), N), col(rn, BK));
    Value* bMask = ib.binary(OpCode::And, lt(row(ka, BN), K), lt(col(rn, BK), N));
    const DType bDt = bFrom == BFrom::F32Cast ? DType::F32 : in;
    Value* bv =
        ib.load(ib.ptrAdd(ib.splat(bp, {BK, BN}), bOff), bMask, zeroOf(ib, Type::tile(Type::scalar(bDt), {BK, BN})));
    if (bFrom == BFrom::F32Cast) bv = ib.cast(bv, in);
    ib.setLoc(L(4));
    Value* r = ib.dot(av, bv, cv[0]);
    cur = &b;
    return std::vector<Value*>{r};
  });
  b.setLoc(L(5));
  if (!accumulate) cAt = cAccess();
  auto [cOff, cMask] = cAt;
  b.store(b.ptrAdd(b.splat(c, {BM, BN}), cOff), res[0], cMask);
  b.ret();
  return f;
}

bool havePtxas() {
  return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 || system("command -v ptxas >/dev/null 2>&1") == 0;
}

std::string layoutDump(const codegen::Artifact& a) {
  for (auto& [pass, text] : a.dumps.tileIR)
    if (pass == "layout") return text;
  return {};
}

std::shared_ptr<codegen::Artifact> compileFor(const Function& f, const std::string& target, int warps = 4) {
  codegen::CompileOptions o;
  o.numWarps = warps;
  return codegen::compileGpu(f, codegen::Target::parse(target), o, {});
}
// 128x128 tiles hold 128 accumulators per thread with 4 warps, beyond the
// 255-register file once the fragments are live: they take 8 warps.
int warpsFor(int64_t BM) { return BM >= 128 ? 8 : 4; }

// 16-bit encodings of values that f16 / bf16 hold exactly (multiples of
// 1/8 in [-2, 2]): every product is exact and every sum up to K = 256 too,
// so the GPU result must equal the reference to the last bit; a misplaced
// element changes it by at least 1/64.
uint16_t encode(float f, DType dt) {
  if (dt == DType::BF16) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);
  }
  if (f == 0) return 0;
  uint16_t sign = f < 0 ? 0x8000 : 0;
  int e;
  float m = std::frexp(std::fabs(f), &e);
  return static_cast<uint16_t>(sign | (e - 1 + 15) << 10 | static_cast<uint16_t>(std::lround((m * 2 - 1) * 1024)));
}

Lowered lower(const Function& f, const std::string& target) { return lowerForEmulator(f, target); }

struct GemmRun {
  emu::LaunchReport rep;
  bool exact = true;
};

GemmRun runGemm(const Lowered& l, DType in, int M, int N, int K, int64_t BM, int64_t BN, unsigned seed,
                BFrom bFrom = BFrom::KxN) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-16, 16);
  std::vector<float> A(size_t(M) * K), B(size_t(K) * N);
  for (float& x : A) x = d(rng) / 8.0f;
  for (float& x : B) x = d(rng) / 8.0f;
  std::vector<uint16_t> a16(A.size()), b16(B.size());
  for (size_t i = 0; i < A.size(); ++i) a16[i] = encode(A[i], in);
  // B as the kernel reads it: K x N or N x K 16-bit codes, or K x N f32.
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n)
      b16[bFrom == BFrom::NxK ? size_t(n) * K + k : size_t(k) * N + n] = encode(B[size_t(k) * N + n], in);
  std::vector<float> C(size_t(M) * N, -777.0f);
  Args args;
  args.add(C.data()).add(a16.data());
  if (bFrom == BFrom::F32Cast)
    args.add(B.data());
  else
    args.add(b16.data());
  args.add(int32_t(M)).add(int32_t(N)).add(int32_t(K));
  emu::LaunchConfig cfg = config(l.k, uint32_t((M + BM - 1) / BM), l.art->binary.threadsPerBlock);
  cfg.grid[1] = uint32_t((N + BN - 1) / BN);
  cfg.sharedBytes = l.k.dynamicSharedOffset + (l.k.amd ? 0 : l.art->binary.sharedBytes);
  addBuffer(cfg, C), addBuffer(cfg, a16);
  if (bFrom == BFrom::F32Cast)
    addBuffer(cfg, B);
  else
    addBuffer(cfg, b16);
  GemmRun r;
  r.rep = emu::launch(l.k.threadFn, args.args(), cfg);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += double(A[size_t(i) * K + k]) * B[size_t(k) * N + j];
      if (C[size_t(i) * N + j] != ref) {
        INFO("C(" << i << "," << j << ") = " << C[size_t(i) * N + j] << ", reference " << ref);
        CHECK(C[size_t(i) * N + j] == ref);
        r.exact = false;
        return r;
      }
    }
  return r;
}

uint64_t conflictsOf(const emu::LaunchReport& rep, const std::string& what) {
  uint64_t n = 0;
  for (auto& s : rep.bankConflicts)
    if (s.opName.find(what) != std::string::npos) n += s.conflicts;
  return n;
}

// The mma.sync targets (sm_90a's f16/bf16 dots take wgmma: see below).
const char* const kSms[] = {"sm_80", "sm_86", "sm_89"};

}  // namespace

TEST_CASE("dot: f16/bf16 dots use mma.sync + ldmatrix on NVPTX, f32 dots stay on FMAs", "[gpu][dot]") {
  bool ptxas = havePtxas();
  if (!ptxas) WARN("SKIPPED ptxas checks: ptxas not found");
  for (DType in : {DType::F16, DType::BF16})
    for (auto [BM, BN] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}})
      for (const char* sm : kSms) {
        auto f = gemm(in, BM, BN, 32, true);
        auto art = compileFor(*f, std::string("nvptx:") + sm, warpsFor(BM));
        INFO(sm << " " << BM << "x" << BN << "x32 " << tessera::name(in));
        CHECK(layoutDump(*art).find("#mma<mma.m16n8k16") != std::string::npos);
        CHECK(art->binary.ptx.find(in == DType::F16
                                       ? "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
                                       : "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != std::string::npos);
        CHECK(art->binary.ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16") != std::string::npos);
        CHECK(art->binary.ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") != std::string::npos);
        if (!ptxas) continue;
        codegen::GpuResources r = codegen::gpuResources(*art);
        INFO(r.text);
        CHECK(r.registers > 0);
        // 64x64x32 with 4 warps needs a few registers more than 64: ptxas
        // holds the kernel to 64 (8 blocks per SM instead of 7) and keeps
        // one loop-invariant 4-byte value in local memory, one L1 reload per
        // K step. sm_80 took 72 registers without spill until the
        // rematerialisation after loops (docs/gpu.md) brought the kernel
        // close enough to 64 that ptxas makes the same trade there.
        // `.minnctapersm 1` lifts that target (87 registers, no spill) at
        // the cost of occupancy: ptxas's trade, bounded here so that a real
        // spill regression still fails. 128x128x32 (8 warps) is reported by
        // the [.report] case (docs/gpu.md).
        if (BM == 64) CHECK(r.spillBytes <= 8);
      }
  // f32 x f32: FMAs (tf32 would round the operands).
  auto f = gemm(DType::F32, 32, 32, 16, true);
  auto art = compileFor(*f, "nvptx:sm_80");
  CHECK(art->binary.ptx.find("mma.sync") == std::string::npos);
  CHECK(art->binary.ptx.find("fma.rn.f32") != std::string::npos);
}

TEST_CASE("dot: MFMA on gfx90a/gfx942 and WMMA on gfx1100/gfx1200, code objects link", "[gpu][dot][amdgpu]") {
  // 64x64 tiles over 4 waves give each wave a 32 x 32 tile: MFMA 32x32x8;
  // 32x64 tiles give each wave 16 x 32: MFMA 16x16x16. RDNA4's WMMA
  // accumulator is C^T, 8 consecutive columns per lane.
  for (DType in : {DType::F16, DType::BF16})
    for (const char* gfx : {"gfx90a", "gfx942", "gfx1100", "gfx1200"})
      for (int64_t BM : {64, 32}) {
        auto f = gemm(in, BM, 64, 32, true);
        auto art = compileFor(*f, std::string("amdgpu:") + gfx);
        INFO(gfx << " " << tessera::name(in) << " BM " << BM);
        const bool rdna4 = std::string(gfx) == "gfx1200";
        const bool wmma = std::string(gfx) == "gfx1100" || rdna4, big = BM == 64;
        CHECK(layoutDump(*art).find(rdna4  ? "#mma<wmma.gfx12.16x16x16, spt=[1, 8], tpw=[16, 2]"
                                    : wmma ? "#mma<wmma.16x16x16"
                                    : big  ? "#mma<mfma.32x32x8, spt=[1, 4], tpw=[32, 2], wpb=[2, 2]"
                                           : "#mma<mfma.16x16x16") != std::string::npos);
        // The instruction's spelling: gfx90a v_mfma_f32_32x32x8f16 /
        // ...bf16_1k, gfx942 v_mfma_f32_32x32x8_f16 / _bf16.
        const std::string prefix = wmma ? "v_wmma_f32_16x16x16_" : big ? "v_mfma_f32_32x32x8" : "v_mfma_f32_16x16x16";
        const std::string text = art->assembly();
        const size_t at = text.find(prefix);
        REQUIRE(at != std::string::npos);
        const std::string instr = text.substr(at, text.find_first_of(" \t", at) - at);
        CHECK((instr.find("bf16") != std::string::npos) == (in == DType::BF16));
        CHECK(text.find(big ? "v_mfma_f32_16x16x16" : "v_mfma_f32_32x32x8") == std::string::npos);
        REQUIRE(art->binary.codeObject.size() > 4);
        CHECK(std::string(art->binary.codeObject.data() + 1, 3) == "ELF");
        codegen::GpuResources r = codegen::gpuResources(*art);
        INFO(r.text);
        CHECK(r.spillBytes == 0);
      }
}

TEST_CASE("dot: tensor-core GEMMs on the emulated GPUs match the reference", "[gpu][dot][emu]") {
  struct Shape {
    int M, N, K;
  };
  for (const char* target : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100", "amdgpu:gfx1200"})
    for (DType in : {DType::F16, DType::BF16}) {
      // Tiles of 64x64x32 (4 warps split 2x2) and 32x64x16.
      for (auto [BM, BN, BK] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 32}, {32, 64, 16}}) {
        // M, N, K without a divisibility hint: the ragged shapes break it.
        auto f = gemm(in, BM, BN, BK, false);
        Lowered l = lower(*f, target);
        REQUIRE(layoutDump(*l.art).find("#mma<") != std::string::npos);
        for (Shape s : {Shape{128, 128, 64}, Shape{int(BM), int(BN), int(BK)}, Shape{100, 70, 50}, Shape{33, 17, 7}}) {
          INFO(target << " " << tessera::name(in) << " tile " << BM << "x" << BN << "x" << BK << " M,N,K = " << s.M
                      << "," << s.N << "," << s.K);
          GemmRun r = runGemm(l, in, s.M, s.N, s.K, BM, BN, unsigned(s.M * 7 + s.K));
          CHECK_FALSE(r.rep.hasErrors());
          CHECK(r.exact);
          // ldmatrix reads of the swizzled staging buffers, MFMA's 8-byte
          // reads of the padded rows (32 rows at once for 32x32x8) and RDNA4
          // WMMA's 16-byte reads of them: conflict-free (gfx1100's 32-byte
          // reads are not).
          if (std::string(target) != "amdgpu:gfx1100") CHECK(conflictsOf(r.rep, "dot fragments") == 0);
        }
      }
    }
}

TEST_CASE("dot: registers, spills and bank conflicts of the f16 GEMM", "[gpu][dot][.report]") {
  for (auto [BM, BN] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}}) {
    std::string line = std::to_string(BM) + "x" + std::to_string(BN) + "x32 f16:";
    for (const char* sm : {"sm_80", "sm_86", "sm_89", "sm_90a"}) {  // sm_90a: wgmma
      auto f = gemm(DType::F16, BM, BN, 32, true);
      auto r = codegen::gpuResources(*compileFor(*f, std::string("nvptx:") + sm, warpsFor(BM)));
      line += " " + std::string(sm) + " regs=" + std::to_string(r.registers) + " spill=" + std::to_string(r.spillBytes);
    }
    for (const char* gfx : {"gfx90a", "gfx942", "gfx1100"}) {
      auto f = gemm(DType::F16, BM, BN, 32, true);
      auto r = codegen::gpuResources(
          *compileFor(*f, std::string("amdgpu:") + gfx, BM >= 128 && gfx[3] == '9' ? 4 : warpsFor(BM)));
      line += " " + std::string(gfx) + " vgpr=" + std::to_string(r.registers) +
              " priv=" + std::to_string(r.spillBytes) + " lds=" + std::to_string(r.sharedBytes);
    }
    WARN(line);
  }
  for (const char* target : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    auto f = gemm(DType::F16, 64, 64, 32, true);
    Lowered l = lower(*f, target);
    GemmRun r = runGemm(l, DType::F16, 128, 128, 64, 64, 64, 5);
    std::string line = std::string(target) + " bank conflicts (128x128x64, 64x64x32 tiles):";
    std::map<std::string, std::pair<uint64_t, uint64_t>> byOp;  // accesses, conflicts
    for (auto& s : r.rep.bankConflicts) {
      byOp[s.opName].first += s.warpAccesses;
      byOp[s.opName].second += s.conflicts;
    }
    for (auto& [name, v] : byOp)
      line +=
          "\n  " + name + ": " + std::to_string(v.first) + " warp accesses, " + std::to_string(v.second) + " conflicts";
    WARN(line);
  }
}

TEST_CASE("dot: i8 x i8 -> i32 GEMMs on the emulated GPUs match the reference exactly", "[gpu][dot][emu]") {
  // Full-range i8 operands: products up to 2^14, sums over K up to 2^20 fit
  // i32 exactly; a wrong sign extension or a dropped term changes the sum.
  for (const char* target : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    auto f = gemm(DType::I8, 32, 32, 16, false, DType::I32);
    Lowered l = lower(*f, target);
    for (auto [M, N, K] : {std::tuple<int, int, int>{64, 64, 32}, {33, 17, 7}, {40, 50, 70}}) {
      INFO(target << " M,N,K = " << M << "," << N << "," << K);
      std::mt19937 rng(unsigned(M * 31 + K));
      std::uniform_int_distribution<int> d(-128, 127);
      std::vector<int8_t> A(size_t(M) * K), B(size_t(K) * N);
      for (auto& x : A) x = int8_t(d(rng));
      for (auto& x : B) x = int8_t(d(rng));
      std::vector<int32_t> C(size_t(M) * N, -777);
      Args args;
      args.add(C.data()).add(A.data()).add(B.data()).add(int32_t(M)).add(int32_t(N)).add(int32_t(K));
      emu::LaunchConfig cfg = config(l.k, uint32_t((M + 31) / 32), l.art->binary.threadsPerBlock);
      cfg.grid[1] = uint32_t((N + 31) / 32);
      cfg.sharedBytes = l.k.dynamicSharedOffset + (l.k.amd ? 0 : l.art->binary.sharedBytes);
      addBuffer(cfg, C), addBuffer(cfg, A), addBuffer(cfg, B);
      emu::LaunchReport rep = emu::launch(l.k.threadFn, args.args(), cfg);
      CHECK_FALSE(rep.hasErrors());
      bool exact = true;
      for (int i = 0; i < M && exact; ++i)
        for (int j = 0; j < N && exact; ++j) {
          int64_t ref = 0;
          for (int k = 0; k < K; ++k) ref += int64_t(A[size_t(i) * K + k]) * B[size_t(k) * N + j];
          INFO("C(" << i << "," << j << ") = " << C[size_t(i) * N + j] << ", reference " << ref);
          CHECK(C[size_t(i) * N + j] == ref);
          exact = C[size_t(i) * N + j] == ref;
        }
    }
  }
}

namespace {

/// Runs the i8 GEMM `l` (tiles BM x BN; `accumulate`: c += a * b) on M x N
/// x K with operands over all of -128..127 and checks every element against
/// a plain C++ int32 reference, wrapping mod 2^32 like the i32 adds. With
/// `c0Near` the initial c is drawn near the i32 limits, so the sums cross
/// them. Returns the launch report.
emu::LaunchReport runI8Gemm(const Lowered& l, int M, int N, int K, int64_t BM, int64_t BN, bool accumulate,
                            unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> A(size_t(M) * K), B(size_t(K) * N);
  for (auto& x : A) x = int8_t(d(rng));
  for (auto& x : B) x = int8_t(d(rng));
  // The extremes too: -128 * -128 is the one product of 2^14.
  A[0] = -128;
  if (K > 1) A[1] = 127;
  B[0] = -128;
  if (N > 1) B[1] = -128;
  std::uniform_int_distribution<uint32_t> nearLimit(0, 1u << 20);
  std::vector<int32_t> C(size_t(M) * N, -777), C0;
  if (accumulate)
    for (auto& x : C) {
      uint32_t off = nearLimit(rng);
      x = int32_t(rng() % 2 ? 0x7fffffffu - off : 0x80000000u + off);
    }
  C0 = C;
  Args args;
  args.add(C.data()).add(A.data()).add(B.data()).add(int32_t(M)).add(int32_t(N)).add(int32_t(K));
  emu::LaunchConfig cfg = config(l.k, uint32_t((M + BM - 1) / BM), l.art->binary.threadsPerBlock);
  cfg.grid[1] = uint32_t((N + BN - 1) / BN);
  cfg.sharedBytes = l.k.dynamicSharedOffset + (l.k.amd ? 0 : l.art->binary.sharedBytes);
  addBuffer(cfg, C), addBuffer(cfg, A), addBuffer(cfg, B);
  emu::LaunchReport rep = emu::launch(l.k.threadFn, args.args(), cfg);
  CHECK_FALSE(rep.hasErrors());
  bool wrapped = false;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      int64_t dot = 0;
      for (int k = 0; k < K; ++k) dot += int64_t(A[size_t(i) * K + k]) * B[size_t(k) * N + j];
      int64_t exact = (accumulate ? int64_t(C0[size_t(i) * N + j]) : 0) + dot;
      auto ref = int32_t(uint32_t(accumulate ? uint32_t(C0[size_t(i) * N + j]) : 0u) + uint32_t(uint64_t(dot)));
      wrapped = wrapped || exact != ref;
      if (C[size_t(i) * N + j] != ref) {
        INFO("C(" << i << "," << j << ") = " << C[size_t(i) * N + j] << ", reference " << ref);
        CHECK(C[size_t(i) * N + j] == ref);
        return rep;
      }
    }
  // The near-limit start makes some sums wrap (the test means it).
  if (accumulate) CHECK(wrapped);
  return rep;
}

const char* const kI8Targets[] = {"nvptx:sm_80", "amdgpu:gfx90a", "amdgpu:gfx942", "amdgpu:gfx1100", "amdgpu:gfx1200"};

std::string i8MmaName(const std::string& target) {
  if (target.rfind("nvptx", 0) == 0) return "mma.m16n8k32";
  if (target == "amdgpu:gfx942") return "mfma.16x16x32";
  if (target == "amdgpu:gfx1100") return "wmma.16x16x16";
  if (target == "amdgpu:gfx1200") return "wmma.gfx12.16x16x16";
  return "mfma.16x16x16";
}

}  // namespace

TEST_CASE("dot: i8 dots use mma.sync m16n8k32 s8 with ldmatrix (no .trans) on NVPTX", "[gpu][dot]") {
  bool ptxas = havePtxas();
  if (!ptxas) WARN("SKIPPED ptxas checks: ptxas not found");
  for (const char* sm : kSms)
    for (auto [BM, BN, BK] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 64}, {64, 32, 32}}) {
      auto f = gemm(DType::I8, BM, BN, BK, true, DType::I32);
      auto art = compileFor(*f, std::string("nvptx:") + sm);
      INFO(sm << " " << BM << "x" << BN << "x" << BK);
      CHECK(layoutDump(*art).find("#mma<mma.m16n8k32") != std::string::npos);
      const std::string& ptx = art->binary.ptx;
      CHECK(ptx.find("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") != std::string::npos);
      CHECK(ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16") != std::string::npos);
      // B is staged N x K: .trans would split the 4-byte k runs.
      CHECK(ptx.find(".trans") == std::string::npos);
      CHECK(ptx.find("mma.sync.aligned.m16n8k16") == std::string::npos);
      if (!ptxas) continue;
      codegen::GpuResources r = codegen::gpuResources(*art);
      INFO(r.text);
      CHECK(r.registers > 0);
      if (std::string(sm) == "sm_80" || std::string(sm) == "sm_90a") CHECK(r.spillBytes == 0);
    }
  // K tiles that are not a multiple of the instruction's 32 stay on FMAs.
  auto f = gemm(DType::I8, 32, 32, 16, true, DType::I32);
  auto art = compileFor(*f, "nvptx:sm_80");
  CHECK(art->binary.ptx.find("mma.sync") == std::string::npos);
}

TEST_CASE("dot: i8 x i8 -> i32 tensor-core GEMMs on the emulated GPUs match the int32 reference", "[gpu][dot][emu]") {
  struct Shape {
    int M, N, K;
  };
  for (const char* target : kI8Targets)
    for (auto [BM, BN, BK] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 64}, {32, 64, 32}}) {
      auto f = gemm(DType::I8, BM, BN, BK, false, DType::I32);
      Lowered l = lower(*f, target);
      REQUIRE(layoutDump(*l.art).find("#mma<" + i8MmaName(target)) != std::string::npos);
      // Whole tiles with several K steps (the loop-carried accumulator),
      // one tile, ragged M, N, K.
      for (Shape s : {Shape{128, 128, 192}, Shape{int(BM), int(BN), int(BK)}, Shape{100, 70, 50}, Shape{33, 17, 7}}) {
        INFO(target << " tile " << BM << "x" << BN << "x" << BK << " M,N,K = " << s.M << "," << s.N << "," << s.K);
        emu::LaunchReport rep = runI8Gemm(l, s.M, s.N, s.K, BM, BN, false, unsigned(s.M * 7 + s.K));
        if (std::string(target).rfind("nvptx", 0) == 0) CHECK(conflictsOf(rep, "dot fragments") == 0);
      }
    }
}

TEST_CASE("dot: i8 tensor-core accumulation into i32 wraps mod 2^32", "[gpu][dot][emu]") {
  for (const char* target : kI8Targets) {
    auto f = gemm(DType::I8, 32, 32, 32, false, DType::I32, /*accumulate=*/true);
    Lowered l = lower(*f, target);
    REQUIRE(layoutDump(*l.art).find("#mma<" + i8MmaName(target)) != std::string::npos);
    for (auto [M, N, K] : {std::tuple<int, int, int>{64, 64, 128}, {40, 33, 70}}) {
      INFO(target << " M,N,K = " << M << "," << N << "," << K);
      runI8Gemm(l, M, N, K, 32, 32, true, unsigned(M + N + K));
    }
  }
}

// ---- wgmma (sm_90a) -----------------------------------------------------------

TEST_CASE("dot: sm_90a f16/bf16 dots whose B the dot stages N x K use wgmma.mma_async", "[gpu][dot][wgmma]") {
  bool ptxas = havePtxas();
  if (!ptxas) WARN("SKIPPED ptxas checks: ptxas not found");
  struct Cfg {
    int64_t BM, BN, BK;
    int warps;
    BFrom from;
    const char* shape;  // the instruction
  };
  for (DType in : {DType::F16, DType::BF16})
    for (Cfg c : {Cfg{64, 64, 32, 4, BFrom::NxK, "m64n64k16"}, Cfg{128, 128, 64, 8, BFrom::NxK, "m64n128k16"},
                  Cfg{128, 256, 64, 8, BFrom::NxK, "m64n256k16"}, Cfg{64, 128, 128, 4, BFrom::NxK, "m64n128k16"},
                  Cfg{64, 64, 16, 4, BFrom::F32Cast, "m64n64k16"}, Cfg{128, 128, 64, 8, BFrom::KxN, "m64n128k16"},
                  Cfg{64, 32, 32, 4, BFrom::KxN, "m64n32k16"}, Cfg{64, 16, 32, 4, BFrom::KxN, "m64n16k16"}}) {
      auto f = gemm(in, c.BM, c.BN, c.BK, true, DType::F32, false, c.from);
      auto art = compileFor(*f, "nvptx:sm_90a", c.warps);
      INFO(tessera::name(in) << " " << c.BM << "x" << c.BN << "x" << c.BK << " with " << c.warps << " warps");
      CHECK(layoutDump(*art).find("#mma<wgmma.m64nNk16") != std::string::npos);
      const std::string& ptx = art->binary.ptx;
      const char* t = in == DType::F16 ? ".f32.f16.f16" : ".f32.bf16.bf16";
      CHECK(ptx.find(std::string("wgmma.mma_async.sync.aligned.") + c.shape + t) != std::string::npos);
      CHECK(ptx.find("mma.sync") == std::string::npos);
      for (const char* want : {"wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                               "wgmma.wait_group.sync.aligned 0", "fence.proxy.async.shared::cta", ".align 1024"})
        CHECK(ptx.find(want) != std::string::npos);
      if (!ptxas) continue;
      codegen::GpuResources r = codegen::gpuResources(*art);
      INFO(r.text);
      CHECK(r.registers > 0);
      // 128x256 with 8 warps holds 128 accumulators per thread besides the
      // staged B tile in registers: ptxas spills ~860 bytes (reported by the
      // [.report] case; A from shared memory and a producer warp would free
      // the registers).
      if (c.BN <= 128) CHECK(r.spillBytes == 0);
    }
  // A K x N B (copied along N, or staged from registers) is read N-major:
  // the same instruction with imm-trans-b = 1.
  for (BFrom from : {BFrom::KxN, BFrom::F32Cast}) {
    auto f = gemm(DType::F16, 64, 64, 32, true, DType::F32, false, from);
    auto art = compileFor(*f, "nvptx:sm_90a");
    CHECK(layoutDump(*art).find("#mma<wgmma.m64nNk16") != std::string::npos);
    CHECK(art->binary.ptx.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16") != std::string::npos);
    // A (copied from global memory) is read from shared memory too: both
    // operands by descriptor (imm-trans-a 0, imm-trans-b 1), no ldmatrix.
    CHECK(art->binary.ptx.find("p, 1, 1, 0, 1;") != std::string::npos);
    CHECK(art->binary.ptx.find("ldmatrix") == std::string::npos);
    CHECK(art->binary.ptx.find("mma.sync") == std::string::npos);
  }
  // 2 warps: not a warpgroup.
  auto f2 = gemm(DType::F16, 64, 64, 32, true, DType::F32, false, BFrom::NxK);
  auto art2 = compileFor(*f2, "nvptx:sm_90a", 2);
  CHECK(art2->binary.ptx.find("wgmma") == std::string::npos);
  CHECK(art2->binary.ptx.find("mma.sync.aligned.m16n8k16") != std::string::npos);
}

TEST_CASE("dot: wgmma GEMMs on the emulated sm_90a match the reference exactly", "[gpu][dot][wgmma][emu]") {
  struct Shape {
    int M, N, K;
  };
  struct Cfg {
    int64_t BM, BN, BK;
    BFrom from;
  };
  for (DType in : {DType::F16, DType::BF16})
    for (Cfg c : {Cfg{64, 64, 32, BFrom::NxK}, Cfg{64, 32, 128, BFrom::NxK}, Cfg{64, 64, 16, BFrom::F32Cast},
                  Cfg{64, 128, 32, BFrom::KxN}, Cfg{64, 32, 16, BFrom::KxN}, Cfg{64, 16, 32, BFrom::F32Cast}}) {
      auto f = gemm(in, c.BM, c.BN, c.BK, false, DType::F32, false, c.from);
      Lowered l = lower(*f, "nvptx:sm_90a");
      REQUIRE(layoutDump(*l.art).find("#mma<wgmma.m64nNk16") != std::string::npos);
      REQUIRE(l.art->binary.ptx.find("wgmma.mma_async") != std::string::npos);
      for (Shape s :
           {Shape{128, 128, 256}, Shape{int(c.BM), int(c.BN), int(c.BK)}, Shape{100, 70, 50}, Shape{33, 17, 7}}) {
        INFO(tessera::name(in) << " tile " << c.BM << "x" << c.BN << "x" << c.BK << " M,N,K = " << s.M << "," << s.N
                               << "," << s.K
                               << (c.from == BFrom::NxK   ? " (B N x K)"
                                   : c.from == BFrom::KxN ? " (B K x N)"
                                                          : " (B f32, cast)"));
        GemmRun r = runGemm(l, in, s.M, s.N, s.K, c.BM, c.BN, unsigned(s.M * 7 + s.K), c.from);
        CHECK_FALSE(r.rep.hasErrors());
        CHECK(r.exact);
      }
    }
}
