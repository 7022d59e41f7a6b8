// GPU backends: tile IR -> PTX (ptxas-checked) and -> AMDGPU .hsaco
// (linked, metadata read back), plus layout and resource-error checks.
#include <catch2/catch.hpp>

#include "../ir_build_util.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <unistd.h>

#include "../../../codegen/GpuTargets.h"
#include "tessera/codegen/Export.h"
#include "tessera/ir/Builder.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

namespace {

using namespace tessera;
using namespace tessera::ir;
using codegen::Target;

Location L(uint32_t line) { return Location{"gpu_kern.cpp", line, 3}; }
using namespace irtest;

std::unique_ptr<Function> vecAdd(int64_t block = 1024) { return irtest::vecAdd("gpu_kern.cpp", block, true); }

std::unique_ptr<Function> softmax() { return irtest::softmax("gpu_kern.cpp", 1024, true); }

/// y = (x - mean) * rstd * w + b over rows of `cols` <= 1024: two reductions.
std::unique_ptr<Function> layerNorm() {
  const int64_t B = 1024;
  auto f = std::make_unique<Function>("layer_norm", L(20));
  Value* out = arg(*f, gptr(), "out", true);
  Value* in = arg(*f, gptr(), "in", true);
  Value* w = arg(*f, gptr(), "w", true);
  Value* bias = arg(*f, gptr(), "b", true);
  Value* cols = arg(*f, i32(), "cols", true);
  Builder b(&f->body());
  b.setLoc(L(21));
  Value* row = b.programId(0);
  Value* offs = b.arange(0, B);
  Value* mask = b.cmp("lt", offs, b.splat(cols, {B}));
  Value* base = b.binary(OpCode::Mul, row, cols);
  Value* x = b.load(b.ptrAdd(b.splat(b.ptrAdd(in, base), {B}), offs), mask);
  Value* n = b.cast(cols, DType::F32);
  Value* mean = b.binary(OpCode::Div, b.reduce("sum", x, 0), n);
  Value* xc = b.select(mask, b.binary(OpCode::Sub, x, b.splat(mean, {B})), b.constant(ftile({B}), 0.0));
  Value* var = b.binary(OpCode::Div, b.reduce("sum", b.binary(OpCode::Mul, xc, xc), 0), n);
  Value* rstd = b.unary(OpCode::Rsqrt, b.binary(OpCode::Add, var, b.constant(f32(), 1e-5)));
  Value* wv = b.load(b.ptrAdd(b.splat(w, {B}), offs), mask);
  Value* bv = b.load(b.ptrAdd(b.splat(bias, {B}), offs), mask);
  Value* y = b.fma(b.binary(OpCode::Mul, xc, b.splat(rstd, {B})), wv, bv);
  b.store(b.ptrAdd(b.splat(b.ptrAdd(out, base), {B}), offs), y, mask);
  b.ret();
  return f;
}

/// A 32x32 tile through a shared buffer, transposed on the way out:
/// out[j][i] = in[i][j] (per program, tiles of a 32-wide matrix).
std::unique_ptr<Function> sharedTranspose(int64_t rows = 32, int64_t cols = 32) {
  auto f = std::make_unique<Function>("smem_transpose", L(30));
  Value* out = arg(*f, gptr(), "out", true);
  Value* in = arg(*f, gptr(), "in", true);
  Builder b(&f->body());
  b.setLoc(L(31));
  Shape s{rows, cols};
  Value* r = b.broadcast(b.expandDims(b.arange(0, rows), 1), s);
  Value* c = b.broadcast(b.expandDims(b.arange(0, cols), 0), s);
  Value* lin = b.binary(OpCode::Add, b.binary(OpCode::Mul, r, b.splat(b.constant(i32(), cols), s)), c);
  Value* x = b.load(b.ptrAdd(b.splat(in, s), lin));
  Value* buf = b.alloc(MemSpace::Shared, DType::F32, s);
  b.localStore(buf, x);
  b.barrier();
  Value* t = b.transpose(b.localLoad(buf), {1, 0});
  Shape ts{cols, rows};
  Value* r2 = b.broadcast(b.expandDims(b.arange(0, cols), 1), ts);
  Value* c2 = b.broadcast(b.expandDims(b.arange(0, rows), 0), ts);
  Value* lin2 = b.binary(OpCode::Add, b.binary(OpCode::Mul, r2, b.splat(b.constant(i32(), rows), ts)), c2);
  b.store(b.ptrAdd(b.splat(out, ts), lin2), t);
  b.ret();
  return f;
}

/// Row sums of a 64x64 tile (2-D reduction along the contiguous axis) and
/// a dot of two 32x32 tiles, accumulated in a loop.
std::unique_ptr<Function> rowsAndDot() {
  auto f = std::make_unique<Function>("rows_dot", L(40));
  Value* out = arg(*f, gptr(), "out", true);
  Value* in = arg(*f, gptr(), "in", true);
  Value* k = arg(*f, i32(), "k", false);
  Builder b(&f->body());
  b.setLoc(L(41));
  Shape s{32, 32};
  Value* r = b.broadcast(b.expandDims(b.arange(0, 32), 1), s);
  Value* c = b.broadcast(b.expandDims(b.arange(0, 32), 0), s);
  Value* lin = b.binary(OpCode::Add, b.binary(OpCode::Mul, r, b.splat(b.constant(i32(), int64_t{32}), s)), c);
  Value* a = b.load(b.ptrAdd(b.splat(in, s), lin));
  Value* zero = b.constant(i32(), int64_t{0});
  Value* one = b.constant(i32(), int64_t{1});
  auto res = b.forLoop(zero, k, one, {b.constant(ftile(s), 0.0)}, [&](Builder& ib, Value*, std::vector<Value*> cv) {
    return std::vector<Value*>{ib.dot(a, a, cv[0])};
  });
  Value* rs = b.reduce("sum", res[0], 1);  // 32, slice layout
  Value* mx = b.reduce("argmax", rs, 0);   // scalar i32
  Value* bc = b.broadcast(b.expandDims(rs, 1), s);
  b.store(b.ptrAdd(b.splat(out, s), lin), b.binary(OpCode::Add, res[0], bc));
  b.atomic(AtomicKind::Add, out, b.cast(mx, DType::F32));
  b.ret();
  return f;
}

struct NamedKernel {
  const char* name;
  std::unique_ptr<Function> (*make)();
};
const NamedKernel kKernels[] = {
    {"vec_add", [] { return vecAdd(); }},
    {"softmax", softmax},
    {"layer_norm", layerNorm},
    {"smem_transpose", [] { return sharedTranspose(); }},
    {"rows_dot", rowsAndDot},
};
const char* kSms[] = {"sm_80", "sm_86", "sm_89", "sm_90a"};
const char* kGfx[] = {"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1200", "gfx1201"};

std::shared_ptr<codegen::Artifact> compileFor(const Function& f, const std::string& target) {
  verify(f);
  return codegen::compileGpu(f, Target::parse(target), {}, {});
}

bool havePtxas() {
  return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 || system("command -v ptxas >/dev/null 2>&1") == 0;
}

std::string layoutDump(const codegen::Artifact& a) {
  for (auto& [pass, text] : a.dumps.tileIR)
    if (pass == "layout") return text;
  return {};
}

}  // namespace

TEST_CASE("gpu: layouts are printed on tile ops and loads are 128-bit", "[gpu]") {
  auto f = vecAdd();
  auto art = compileFor(*f, "nvptx:sm_80");
  std::string dump = layoutDump(*art);
  INFO(dump);
  CHECK(dump.find("layout = \"#blocked<spt=[4], tpw=[32], wpb=[4], order=[0]>\"") != std::string::npos);
  CHECK(art->binary.threadsPerBlock == 128);
  // LLVM 22 prints untyped vector loads as .b32.
  std::regex v4("ld\\.global\\.v4\\.(f32|b32)");
  CHECK(std::regex_search(art->binary.ptx, v4));
  CHECK(std::regex_search(art->binary.ptx, std::regex("st\\.global\\.v4\\.(f32|b32)")));
  CHECK(art->dumps.extra.count("llvm-gpu") == 1);
  CHECK(art->dumps.extra.at("llvm-gpu").find("ptx_kernel") != std::string::npos);
}

TEST_CASE("gpu: softmax reduces with shuffles and a cross-warp barrier", "[gpu]") {
  auto f = softmax();
  auto art = compileFor(*f, "nvptx:sm_80");
  INFO(art->binary.ptx.substr(0, 4000));
  CHECK(art->binary.ptx.find("shfl.sync.bfly.b32") != std::string::npos);
  CHECK(art->binary.ptx.find("bar.sync") != std::string::npos);
  CHECK(std::regex_search(art->binary.ptx, std::regex("ld\\.global\\.v4\\.(f32|b32)")));
  // Reduce results are slices of the input layout.
  CHECK(layoutDump(*art).find("#blocked<spt=[4]") != std::string::npos);
  // Two cross-warp reductions of 4 warps, f32: 16 bytes each, reused.
  CHECK(art->binary.sharedBytes == 16);
}

TEST_CASE("gpu: every kernel compiles to PTX for every sm and ptxas accepts it without spills", "[gpu][ptxas]") {
  bool ptxas = havePtxas();
  if (!ptxas) WARN("SKIPPED ptxas checks: ptxas not found (install the CUDA toolkit or put ptxas on PATH)");
  for (auto& k : kKernels) {
    for (const char* sm : kSms) {
      auto f = k.make();
      auto art = compileFor(*f, std::string("nvptx:") + sm);
      INFO(k.name << " " << sm);
      CHECK(art->binary.ptx.find(std::string(".target ") + sm) != std::string::npos);
      CHECK(art->binary.ptx.find(".entry " + std::string(k.name)) != std::string::npos);
      if (std::string(k.name) != "vec_add") CHECK(art->binary.ptx.find("bar.sync") != std::string::npos);
      if (!ptxas) continue;
      codegen::GpuResources r = codegen::gpuResources(*art);
      INFO(r.text);
      CHECK(r.registers > 0);
      CHECK(r.spillBytes == 0);
    }
  }
}

TEST_CASE("gpu: AMDGPU code objects link and their metadata reads back", "[gpu][amdgpu]") {
  const int waves[] = {64, 64, 64, 32, 32, 32};
  for (auto& k : kKernels) {
    for (int i = 0; i < 6; ++i) {
      auto f = k.make();
      auto art = compileFor(*f, std::string("amdgpu:") + kGfx[i]);
      INFO(k.name << " " << kGfx[i]);
      REQUIRE(art->binary.codeObject.size() > 4);
      CHECK(std::string(art->binary.codeObject.data() + 1, 3) == "ELF");
      CHECK(art->dumps.extra.at("hsaco").size() == art->binary.codeObject.size());
      CHECK(art->assembly().find(".amdhsa_kernel " + std::string(k.name)) != std::string::npos);
      codegen::GpuResources r = codegen::gpuResources(*art);
      INFO(r.text);
      CHECK(r.wavefrontSize == waves[i]);
      CHECK(r.sharedBytes == static_cast<int64_t>(art->binary.sharedBytes));
      CHECK(r.spillBytes == 0);
      CHECK(art->binary.threadsPerBlock == 4u * static_cast<unsigned>(waves[i]));
    }
  }
}

TEST_CASE("gpu: cross-lane reductions exchange lanes by DPP, swizzles and permlanex16 on AMDGPU", "[gpu][amdgpu]") {
  auto f = softmax();
  // wave64 (gfx942): DPP quad permutations for xor 1 and 2, DPP
  // row_half_mirror and row_mirror for 4 and 8 (the groups below agree by
  // then), ds_swizzle for 16 and ds_bpermute only for 32.
  auto art = compileFor(*f, "amdgpu:gfx942");
  const std::string& a = art->assembly();
  CHECK(a.find("quad_perm:[1,0,3,2]") != std::string::npos);
  CHECK(a.find("row_half_mirror") != std::string::npos);
  CHECK(a.find("row_mirror") != std::string::npos);
  CHECK(a.find("swizzle(SWAP,4)") == std::string::npos);
  CHECK(a.find("swizzle(SWAP,8)") == std::string::npos);
  CHECK(a.find("swizzle(SWAP,16)") != std::string::npos);
  CHECK(a.find("ds_bpermute_b32") != std::string::npos);
  CHECK(a.find("s_barrier") != std::string::npos);
  CHECK(art->dumps.llvmOpt.find("amdhsa_code_object_version") != std::string::npos);
  // wave32 (gfx1100): DPP row_xmask and v_permlanex16, no LDS exchange.
  auto art11 = compileFor(*f, "amdgpu:gfx1100");
  const std::string& b = art11->assembly();
  CHECK(b.find("row_xmask:4") != std::string::npos);
  CHECK(b.find("v_permlanex16_b32") != std::string::npos);
  CHECK(b.find("ds_bpermute_b32") == std::string::npos);
  CHECK(b.find("ds_swizzle_b32") == std::string::npos);
}

TEST_CASE("gpu: unknown architectures are rejected with the valid list", "[gpu][errors]") {
  auto f = vecAdd();
  Target t{Target::Kind::NVPTX, "sm_75"};
  try {
    codegen::compileGpu(*f, t, {}, {});
    FAIL("sm_75 was accepted");
  } catch (const CompileError& e) {
    std::string m = e.what();
    CHECK(m.find("sm_75") != std::string::npos);
    CHECK(m.find("sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_103a, sm_120a") != std::string::npos);
  }
  // Blackwell is the architecture-specific targets: the plain ones are not rows.
  for (const char* plain : {"sm_100", "sm_120", "sm_121a"})
    CHECK_THROWS_AS(codegen::compileGpu(*f, Target{Target::Kind::NVPTX, plain}, {}, {}), CompileError);
  Target a{Target::Kind::AMDGPU, "gfx908"};
  CHECK_THROWS_AS(codegen::compileGpu(*f, a, {}, {}), CompileError);
}

TEST_CASE("gpu: the Blackwell targets parse in every form and read their facts from Targets.def", "[gpu][blackwell]") {
  struct Row {
    const char* arch;
    int ptxIsa, minCuda, sharedKiB, smemPerSmKiB, threadsPerSm, blocksPerSm, tmemColumns;
    bool tcgen05;
  };
  for (Row r : {Row{"sm_100a", 88, 12090, 227, 228, 2048, 32, 512, true},
                Row{"sm_103a", 88, 12090, 227, 228, 2048, 32, 512, true},
                Row{"sm_120a", 87, 12080, 99, 100, 1536, 24, 0, false}}) {
    INFO(r.arch);
    for (const std::string& s : {std::string("nvptx:") + r.arch, std::string("emu:nvptx:") + r.arch}) {
      const Target t = Target::parse(s);
      CHECK(t.str() == s);
      const codegen::GpuConfig c = codegen::gpuConfig(t, 4);
      REQUIRE(c.row);
      CHECK(std::string(c.row->arch) == r.arch);
      CHECK(c.row->ptxIsa == r.ptxIsa);
      CHECK(std::string(c.row->llvmFeatures) == "+ptx" + std::to_string(r.ptxIsa));
      CHECK(c.row->minCuda == r.minCuda);
      CHECK(c.row->maxSharedBytes == int64_t{r.sharedKiB} * 1024);
      CHECK(c.row->sharedPerUnit == int64_t{r.smemPerSmKiB} * 1024);
      CHECK(c.row->threadsPerSm == r.threadsPerSm);
      CHECK(c.row->blocksPerSm == r.blocksPerSm);
      CHECK(c.row->registersPerSm == 65536);
      CHECK(c.row->maxRegistersPerThread == 255);
      CHECK(c.row->tcgen05 == r.tcgen05);
      CHECK(c.row->tmemColumns == r.tmemColumns);
      CHECK(c.row->fp8Mma);
      CHECK_FALSE(c.row->wgmma);  // Hopper's alone
      CHECK(c.row->tensorCopies);
      CHECK(c.row->maxClusterBlocks == 8);
    }
    // The PTX states the row's ISA version and architecture.
    auto art = codegen::compile(*vecAdd(), Target::parse(std::string("nvptx:") + r.arch));
    CHECK(art->binary.ptx.find(".version " + std::to_string(r.ptxIsa / 10) + "." + std::to_string(r.ptxIsa % 10)) !=
          std::string::npos);
    CHECK(art->binary.ptx.find(std::string(".target ") + r.arch) != std::string::npos);
  }
  CHECK(gpuTargetsWith(&GpuArch::tcgen05) == "nvptx:sm_100a, nvptx:sm_103a");
  CHECK(gpuTargetsWith(&GpuArch::wgmma) == "nvptx:sm_90a");
}

TEST_CASE("gpu: a ptxas older than the target needs is refused before it runs, naming both versions",
          "[gpu][errors][ptxas]") {
  // A fake ptxas of CUDA 12.4: it answers --version, and records and refuses
  // everything else.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tessera_fake_ptxas." + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path ptxas = dir / "ptxas", calls = dir / "calls";
  {
    std::ofstream s(ptxas);
    s << "#!/bin/sh\n"
         "if [ \"$1\" = --version ]; then\n"
         "  echo 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
         "  echo 'Cuda compilation tools, release 12.4, V12.4.131'\n"
         "  exit 0\n"
         "fi\n"
         "echo \"$@\" >> '"
      << calls.string()
      << "'\n"
         "echo 'ptxas fatal   : the fake assembler assembles nothing' >&2\n"
         "exit 1\n";
  }
  fs::permissions(ptxas, fs::perms::owner_all);
  ::setenv("TESSERA_PTXAS", ptxas.c_str(), 1);
  auto f = vecAdd(1024);
  struct Case {
    const char* target;
    const char* needs;
  };
  for (Case c : {Case{"nvptx:sm_100a", "needs ptxas 12.9 or newer"}, Case{"nvptx:sm_103a", "needs ptxas 12.9 or newer"},
                 Case{"nvptx:sm_120a", "needs ptxas 12.8 or newer"}}) {
    INFO(c.target);
    auto art = codegen::compile(*f, Target::parse(c.target));  // PTX needs no ptxas
    std::string msg;
    try {
      codegen::resourceReport(*art);
    } catch (const CompileError& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(msg.find("ptxas 12.4 (V12.4.131)") != std::string::npos);
    CHECK(msg.find(c.needs) != std::string::npos);
    CHECK(msg.find(Target::parse(c.target).arch) != std::string::npos);
    // Export's cubin as well.
    const fs::path out = dir / "export";
    fs::create_directories(out);
    CHECK_THROWS_AS(codegen::exportArtifact(*art, out.string()), CompileError);
  }
  CHECK_FALSE(fs::exists(calls));  // refused before it ran
  // sm_80's PTX (ISA 8.0, CUDA 12.0 on) is handed to it; its refusal names
  // the version.
  auto art = codegen::compile(*f, Target::parse("nvptx:sm_80"));
  std::string msg;
  try {
    codegen::resourceReport(*art);
  } catch (const DeviceError& e) {
    msg = e.what();
  }
  CHECK(msg.find("ptxas 12.4 (V12.4.131)") != std::string::npos);
  CHECK(msg.find("rejected the PTX of @") != std::string::npos);
  CHECK(msg.find("the fake assembler assembles nothing") != std::string::npos);
  CHECK(fs::exists(calls));
  ::unsetenv("TESSERA_PTXAS");
  fs::remove_all(dir);
}

TEST_CASE("gpu: gfx950 reads its facts from Targets.def (160 KiB of LDS, CDNA4's f16 MFMA)", "[gpu][amdgpu][gfx950]") {
  for (const std::string s : {"amdgpu:gfx950", "emu:amdgpu:gfx950"}) {
    INFO(s);
    const Target t = Target::parse(s);
    CHECK(t.str() == s);
    const codegen::GpuConfig c = codegen::gpuConfig(t, 4);
    REQUIRE(c.row);
    CHECK(std::string(c.row->arch) == "gfx950");
    CHECK(c.row->warpSize == 64);
    CHECK(c.row->maxSharedBytes == 160 * 1024);
    CHECK(c.row->sharedPerUnit == 160 * 1024);
    CHECK(c.row->maxRegistersPerThread == 512);
    CHECK(c.row->gfxMajor == 9);
    CHECK(c.row->matrixCore == GpuArch::MatrixCore::Mfma);
    CHECK(c.row->f16MfmaK == 32);
    CHECK(c.row->i8MfmaK == 32);
    CHECK(c.row->fp8Mfma == tessera::GpuArch::Fp8Mfma::Ocp);
    CHECK(c.row->f8f6f4MfmaK == 128);
    // The occupancy estimate from the row: two 80 KiB workgroups of 4 waves
    // fit a CU (2 waves per SIMD), where gfx942's 64 KiB holds none.
    CHECK(occupancy(*c.row, 64, 80 * 1024, 256).value == 2);
    CHECK(occupancy(*c.row, 64, 32 * 1024, 256).value == 5);
  }
}

TEST_CASE("gpu: gfx1200 and gfx1201 read their facts from Targets.def (RDNA4's WMMA layouts, fp8 WMMA)",
          "[gpu][amdgpu][gfx1200]") {
  for (const std::string s : {"amdgpu:gfx1200", "emu:amdgpu:gfx1200", "amdgpu:gfx1201", "emu:amdgpu:gfx1201"}) {
    INFO(s);
    const Target t = Target::parse(s);
    CHECK(t.str() == s);
    const codegen::GpuConfig c = codegen::gpuConfig(t, 4);
    REQUIRE(c.row);
    CHECK(s.ends_with(c.row->arch));
    CHECK(c.row->warpSize == 32);
    CHECK(c.row->maxSharedBytes == 64 * 1024);
    CHECK(c.row->sharedPerUnit == 64 * 1024);
    CHECK(c.row->maxRegistersPerThread == 256);
    CHECK(c.row->vgprsPerSimd == 1536);
    CHECK(c.row->vgprGranule == 24);
    CHECK(c.row->gfxMajor == 12);
    CHECK(c.row->matrixCore == GpuArch::MatrixCore::Wmma);
    CHECK(c.row->wmmaLaneElems == 8);
    CHECK(c.row->fp8Wmma);
    CHECK(c.row->f16MfmaK == 0);
    CHECK(c.row->fp8Mfma == GpuArch::Fp8Mfma::None);
    CHECK(c.row->f8f6f4MfmaK == 0);
    // As gfx1100's file: 211 VGPRs take 216 (granule 24), 7 waves per SIMD;
    // two 32 KiB workgroups of 8 waves fill the 64 KiB of LDS (8 waves).
    CHECK(occupancy(*c.row, 211, 0, 256).value == 7);
    CHECK(occupancy(*c.row, 64, 32 * 1024, 256).value == 8);
  }
  // gfx1100 keeps RDNA3's layout and has no fp8 WMMA.
  const codegen::GpuConfig rdna3 = codegen::gpuConfig(Target::parse("amdgpu:gfx1100"), 4);
  REQUIRE(rdna3.row);
  CHECK(rdna3.row->wmmaLaneElems == 16);
  CHECK_FALSE(rdna3.row->fp8Wmma);
}

TEST_CASE("gpu: shared memory over the target limit names every buffer", "[gpu][errors]") {
  // 2 x 128x128 f32 buffers live together = 128 KB: fits sm_80 (163 KB),
  // not sm_86 (99 KB) nor gfx942 (64 KB).
  auto make = [] {
    auto f = std::make_unique<Function>("big_smem", L(50));
    Value* out = arg(*f, gptr(), "out", true);
    Builder b(&f->body());
    b.setLoc(L(51));
    Shape s{128, 128};
    Value* b1 = b.alloc(MemSpace::Shared, DType::F32, s);
    b.setLoc(L(52));
    Value* b2 = b.alloc(MemSpace::Shared, DType::F32, s);
    b.localStore(b1, b.constant(ftile(s), 1.0));
    b.localStore(b2, b.constant(ftile(s), 2.0));
    Value* sum = b.binary(OpCode::Add, b.localLoad(b1), b.localLoad(b2));
    Value* r = b.reduce("sum", b.reduce("sum", sum, 1), 0);
    b.store(out, r);
    b.ret();
    return f;
  };
  auto f = make();
  auto ok = compileFor(*f, "nvptx:sm_80");
  CHECK(ok->binary.sharedBytes >= 131072);
  // gfx950's workgroup may use all 160 KiB of its CU's LDS.
  auto cdna4 = compileFor(*f, "amdgpu:gfx950");
  CHECK(cdna4->binary.sharedBytes >= 131072);
  for (const char* t : {"nvptx:sm_86", "amdgpu:gfx942"}) {
    try {
      compileFor(*f, t);
      FAIL("over-budget shared memory was accepted for " << t);
    } catch (const ResourceError& e) {
      std::string m = e.what();
      INFO(m);
      CHECK(m.find("65536 bytes at offset 0: alloc buffer<shared, 128x128xf32> at gpu_kern.cpp:51:3") !=
            std::string::npos);
      CHECK(m.find("65536 bytes at offset 65536: alloc buffer<shared, 128x128xf32> at gpu_kern.cpp:52:3") !=
            std::string::npos);
      // The user's buffers by ir::checkSharedMemory against what the
      // compiler's scratch leaves of the limit, with its suggestion.
      CHECK(m.find("bytes of compiler scratch") != std::string::npos);
      CHECK(m.find("128x128 x f32 = 65536 bytes (64 KiB), allocated at gpu_kern.cpp:51:3") != std::string::npos);
      CHECK(m.find("128x128 x f32 = 65536 bytes (64 KiB), allocated at gpu_kern.cpp:52:3") != std::string::npos);
      CHECK(m.find("suggestion: halve the tile sizes") != std::string::npos);
    }
  }
}

TEST_CASE("gpu: dead buffers share bytes", "[gpu]") {
  auto f = std::make_unique<Function>("reuse", L(60));
  Value* out = arg(*f, gptr(), "out", true);
  Builder b(&f->body());
  b.setLoc(L(61));
  Shape s{64, 64};
  Value* b1 = b.alloc(MemSpace::Shared, DType::F32, s);
  b.localStore(b1, b.constant(ftile(s), 1.0));
  Value* x = b.localLoad(b1);
  Value* b2 = b.alloc(MemSpace::Shared, DType::F32, s);
  b.localStore(b2, x);
  Value* y = b.localLoad(b2);
  b.store(out, b.reduce("sum", b.reduce("sum", y, 1), 0));
  b.ret();
  auto art = compileFor(*f, "amdgpu:gfx90a");
  // b1 dies at its local_load, so b2 reuses its 16 KB.
  CHECK(art->binary.sharedBytes == 64 * 64 * 4);
  CHECK(codegen::gpuResources(*art).sharedBytes == 64 * 64 * 4);
}

TEST_CASE("gpu: resource table and compile latency", "[gpu][.report]") {
  // Not part of the default run: prints the numbers recorded in docs/gpu.md.
  for (auto& k : kKernels) {
    std::string line = std::string(k.name) + ":";
    for (const char* sm : kSms) {
      auto f = k.make();
      auto t0 = std::chrono::steady_clock::now();
      auto art = compileFor(*f, std::string("nvptx:") + sm);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      auto r = codegen::gpuResources(*art);
      line += " " + std::string(sm) + " regs=" + std::to_string(r.registers) +
              " spill=" + std::to_string(r.spillBytes) + " (" + std::to_string(static_cast<int>(ms)) + " ms)";
    }
    for (const char* gfx : kGfx) {
      auto f = k.make();
      auto t0 = std::chrono::steady_clock::now();
      auto art = compileFor(*f, std::string("amdgpu:") + gfx);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      auto r = codegen::gpuResources(*art);
      line += " " + std::string(gfx) + " vgpr=" + std::to_string(r.registers) + " sgpr=" + std::to_string(r.sgprs) +
              " priv=" + std::to_string(r.spillBytes) + " lds=" + std::to_string(r.sharedBytes) + " (" +
              std::to_string(static_cast<int>(ms)) + " ms)";
    }
    WARN(line);
  }
}

TEST_CASE("gpu: a missing ptxas and too many threads per block are clear errors", "[gpu][errors]") {
  auto f = vecAdd(1024);
  // TESSERA_PTXAS names the assembler exactly; a path that does not exist
  // stands for a machine without the CUDA toolkit.
  ::setenv("TESSERA_PTXAS", "/nonexistent/ptxas", 1);
  auto art = codegen::compile(*f, codegen::Target::parse("nvptx:sm_80"));  // PTX needs no ptxas
  CHECK(art->binary.ptx.find(".entry") != std::string::npos);
  CHECK_THROWS_WITH(codegen::resourceReport(*art), Catch::Contains("ptxas not found"));
  ::unsetenv("TESSERA_PTXAS");
  codegen::CompileOptions o;
  o.numWarps = 64;  // 2048 threads
  CHECK_THROWS_AS(codegen::compile(*f, codegen::Target::parse("nvptx:sm_80"), o), tessera::ResourceError);
  CHECK_THROWS_WITH(codegen::compile(*f, codegen::Target::parse("amdgpu:gfx942"), o),
                    Catch::Contains("threads per block"));
}
