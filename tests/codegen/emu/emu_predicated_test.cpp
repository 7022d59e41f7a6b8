// Masked global loads and stores at ragged shapes, run on the SIMT machine
// with every buffer exactly as long as the data, so that any access of a
// masked-off element would be reported out of bounds. On NVPTX they are
// predicated `@p ld.global` / `@p st.global` (inline assembly the emulator
// rewrites, codegen/emu/EmuInlineAsm.cpp); on AMDGPU raw buffer loads and
// stores whose masked-off lanes' offset is past the resource's end
// (codegen/emu/EmuBuffer.cpp). Both forms are run with predication off too:
// a branch around each access.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "../../../codegen/emu/EmuCompile.h"
#include "../../../codegen/GpuTargets.h"
#include "../../../codegen/nvptx/NVPTXPredicated.h"
#include "../emu_util.h"
#include "../ir_build_util.h"
#include "registry.h"
#include "tessera/support/Error.h"
#include "tessera/tessera.h"

using namespace emutest;
using namespace irtest;
using namespace tessera;

namespace {

constexpr const char* kFile = "masked.cpp";
Location L(uint32_t line) { return Location{kFile, line, 5}; }

Type ptrOf(DType d) { return Type::ptr(d, MemSpace::Global); }

/// out[i] = in[i] + s for i < n, `other` (7.5) + s where the load is
/// masked off but the store is not (n <= i < m); half copy h -> ho for
/// i < n; s is a masked scalar load (program 0 only; 0 elsewhere) and a
/// masked scalar store of s + 1. `block` elements
/// per program. Lines: 2 the f32 load, 3 the f32 store, 4 the f16 copy, 5
/// the scalar accesses.
std::unique_ptr<Function> masked(int64_t block, bool div16) {
  auto f = std::make_unique<Function>("masked", L(1));
  Value* out = arg(*f, ptrOf(DType::F32), "out", div16);
  Value* in = arg(*f, ptrOf(DType::F32), "in", div16);
  Value* h = arg(*f, ptrOf(DType::F16), "h", div16);
  Value* ho = arg(*f, ptrOf(DType::F16), "ho", div16);
  Value* n = arg(*f, irtest::i32(), "n", div16);
  Value* m = arg(*f, irtest::i32(), "m", div16);
  Value* s = arg(*f, ptrOf(DType::F32), "s", false);
  Builder b(&f->body());
  b.setLoc(L(2));
  Value* pid = b.programId(0);
  Value* offs = b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, pid, b.constant(irtest::i32(), block)), {block}),
                         b.arange(0, block));
  Value* loadMask = b.cmp("lt", offs, b.splat(n, {block}));
  Value* storeMask = b.cmp("lt", offs, b.splat(m, {block}));
  Value* x = b.load(b.ptrAdd(b.splat(in, {block}), offs), loadMask, b.constant(ftile({block}), 7.5));
  b.setLoc(L(5));
  Value* first = b.cmp("eq", pid, b.constant(irtest::i32(), int64_t{0}));
  Value* sv = b.load(s, first);
  b.setLoc(L(3));
  b.store(b.ptrAdd(b.splat(out, {block}), offs), b.binary(OpCode::Add, x, b.splat(sv, {block})), storeMask);
  b.setLoc(L(4));
  Value* hv = b.load(b.ptrAdd(b.splat(h, {block}), offs), loadMask);
  b.store(b.ptrAdd(b.splat(ho, {block}), offs), hv, loadMask);
  b.setLoc(L(5));
  b.store(s, b.binary(OpCode::Add, sv, b.constant(irtest::f32(), 1.0)), first);
  b.ret();
  return f;
}

Lowered lowerWith(const Function& f, const std::string& target, bool predicated) {
  using codegen::Target;
  Target t = Target::parse(target);
  codegen::GpuOptions g;
  g.predicatedAccesses = predicated;
  Lowered r;
  r.art = codegen::compileGpu(f, t, {}, {}, g);
  bool amd = t.kind == Target::Kind::AMDGPU;
  // The wave size from the target's Targets.def row.
  const GpuArch* row = findGpuArch(amd ? GpuArch::Vendor::AMD : GpuArch::Vendor::NVIDIA, t.arch);
  REQUIRE(row);
  r.k = codegen::compileForEmulator(r.art->dumps.extra.at("llvm-gpu"), amd, row->warpSize, hooks());
  return r;
}

struct Run {
  std::vector<float> out;
  std::vector<uint16_t> ho;
  float s = 0;
  emu::LaunchReport rep;
};

/// One launch over ceil(m / block) programs with n as the kernel's element
/// count, buffers of exactly m (out) and n (h, ho) elements and `in` as
/// given (shorter than n: the mask lets accesses past its end).
Run launchMasked(const Lowered& l, int64_t block, int n, int m, const std::vector<float>& in,
                 const std::vector<uint16_t>& h) {
  Run r;
  r.out.assign(size_t(m), -1.0f);
  r.ho.assign(size_t(n), 0xffff);
  std::vector<float> s = {2.0f};
  Args args;
  args.add(r.out.data()).add(in.data()).add(h.data()).add(r.ho.data()).add(int32_t(n)).add(int32_t(m)).add(s.data());
  emu::LaunchConfig c = config(l.k, uint32_t((m + block - 1) / block), l.art->binary.threadsPerBlock);
  c.sharedBytes = l.k.dynamicSharedOffset + (l.k.amd ? 0 : l.art->binary.sharedBytes);
  c.throwOnError = false;
  addBuffer(c, r.out), addBuffer(c, in), addBuffer(c, h), addBuffer(c, r.ho), addBuffer(c, s);
  r.rep = emu::launch(l.k.threadFn, args.args(), c);
  r.s = s[0];
  return r;
}

}  // namespace

TEST_CASE("emu: masked loads and stores at ragged shapes touch no masked-off element", "[emu]") {
  const int64_t block = 512;
  for (bool div16 : {true, false}) {
    auto f = masked(block, div16);
    for (const char* target : {"nvptx:sm_80", "nvptx:sm_90a", "amdgpu:gfx942", "amdgpu:gfx1100", "amdgpu:gfx1200"}) {
      const bool nv = std::string(target).starts_with("nvptx");
      for (bool predicated : {true, false}) {
        Lowered l = lowerWith(*f, target, predicated);
        // Each module takes its branch-free forms exactly when asked: the
        // pointers are a uniform base plus a block of 512 (UniformSplit).
        const std::string& ir = l.art->dumps.extra.at("llvm-gpu");
        CHECK((ir.find("@$") != std::string::npos) == (nv && predicated));
        CHECK((ir.find("llvm.amdgcn.raw.ptr.buffer.load") != std::string::npos) == (!nv && predicated));
        CHECK((ir.find("llvm.amdgcn.raw.ptr.buffer.store") != std::string::npos) == (!nv && predicated));
        // n, m: multiples of 16 (whole vectors masked) when the launch says
        // so, else ragged inside a vector; m > n: the store covers elements
        // whose load was masked off (they get `other`).
        for (auto [n, m] : div16 ? std::vector<std::pair<int, int>>{{1504, 1520}, {2048, 2048}, {16, 32}}
                                 : std::vector<std::pair<int, int>>{{1501, 1507}, {3, 5}, {1024, 1024}}) {
          INFO(target << (div16 ? " aligned" : " ragged") << (predicated ? " predicated" : " branches") << ", n = " << n
                      << ", m = " << m);
          std::mt19937 rng(uint32_t(n + m));
          std::uniform_real_distribution<float> d(-4, 4);
          std::vector<float> in(static_cast<size_t>(n));
          std::vector<uint16_t> h(static_cast<size_t>(n));
          for (float& x : in) x = d(rng);
          for (auto& x : h) x = uint16_t(rng());
          // `in` and `h` are n elements long and `out` m: any access of an
          // element the mask excludes is an out-of-bounds report.
          Run r = launchMasked(l, block, n, m, in, h);
          INFO(r.rep.summary());
          CHECK_FALSE(r.rep.hasErrors());
          // s is loaded by program 0 only (0 elsewhere, the default `other`).
          for (int i = 0; i < m; ++i)
            REQUIRE(r.out[size_t(i)] == (i < n ? in[size_t(i)] : 7.5f) + (i < block ? 2.0f : 0.0f));
          for (int i = 0; i < n; ++i) REQUIRE(r.ho[size_t(i)] == h[size_t(i)]);
          CHECK(r.s == 3.0f);
        }
      }
    }
  }
}

TEST_CASE("emu: a predicated access whose mask lets it out of bounds is reported with its op", "[emu]") {
  // The f32 load's mask admits n elements, the buffer holds 3 fewer: the
  // predicated load (and the f16 copy of the same mask) must be checked
  // like any access and reported naming the tile op and its line.
  const int64_t block = 512;
  auto f = masked(block, false);
  for (const char* target : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    INFO(target);
    Lowered l = lowerWith(*f, target, true);
    const int n = 1000, m = 1000;
    std::vector<float> in(size_t(n - 3), 1.0f);
    std::vector<uint16_t> h(size_t(n), 0);
    emu::LaunchReport rep = launchMasked(l, block, n, m, in, h).rep;
    CHECK(rep.count(emu::IssueKind::GlobalOutOfBounds) == 3);
    bool named = false;
    for (const emu::Issue& is : rep.issues) named |= is.message.find("load @ masked.cpp:2") != std::string::npos;
    CHECK(named);
  }
}

TEST_CASE("emu: every predicated PTX form runs as a branch around a checked access", "[emu]") {
  // One kernel per form of codegen/nvptx/NVPTXPredicated.h, built from the
  // table itself: lane i loads element i of `src` where i < 3 (else the
  // `other` pattern) and stores it to `dst` where i < 5; both buffers hold
  // exactly 5 accesses, so lanes 5.. must touch nothing.
  using codegen::nvptx::PredicatedAccess;
  for (unsigned bits : {8u, 16u, 32u})
    for (unsigned words : {1u, 2u, 4u}) {
      if (bits != 32 && words != 1) continue;
      PredicatedAccess ld{false, words, bits}, st{true, words, bits};
      auto la = codegen::nvptx::predicatedAsm(ld), sa = codegen::nvptx::predicatedAsm(st);
      CHECK(codegen::nvptx::matchPredicatedAccess(la.text, la.constraints) == ld);
      CHECK(codegen::nvptx::matchPredicatedAccess(sa.text, sa.constraints) == st);
      const std::string reg = bits == 32 ? "i32" : "i16";
      const unsigned bytes = ld.bytes();
      std::string outs, others, storeArgs, extract;
      for (unsigned k = 0; k < words; ++k) {
        outs += (k ? ", " : "") + reg;
        others += ", " + reg + " " + std::to_string(0x5a + k);
      }
      std::string retTy = words == 1 ? reg : "{ " + outs + " }";
      for (unsigned k = 0; k < words; ++k)
        extract += "  %w" + std::to_string(k) + " = " +
                   (words == 1 ? "add " + reg + " %r, 0" : "extractvalue " + retTy + " %r, " + std::to_string(k)) +
                   "\n";
      for (unsigned k = 0; k < words; ++k) storeArgs += reg + " %w" + std::to_string(k) + ", ";
      auto esc = [](const std::string& s) {
        std::string r;
        for (char ch : s) {
          if (ch == '\n')
            r += "\\0A";
          else if (ch == '\t')
            r += "\\09";
          else
            r += ch;
        }
        return r;
      };
      std::string text =
          "target datalayout = \"e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64\"\n"
          "target triple = \"nvptx64-nvidia-cuda\"\n"
          "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
          "define ptx_kernel void @k(ptr addrspace(1) %src, ptr addrspace(1) %dst) {\n"
          "  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
          "  %pl = icmp ult i32 %t, 3\n"
          "  %ps = icmp ult i32 %t, 5\n"
          "  %off = mul i32 %t, " +
          std::to_string(bytes) +
          "\n"
          "  %a = getelementptr i8, ptr addrspace(1) %src, i32 %off\n"
          "  %b = getelementptr i8, ptr addrspace(1) %dst, i32 %off\n"
          "  %r = call " +
          retTy + " asm \"" + esc(la.text) + "\", \"" + la.constraints + "\"(ptr addrspace(1) %a, i1 %pl" + others +
          ")\n" + extract + "  call void asm \"" + esc(sa.text) + "\", \"" + sa.constraints + "\"(" + storeArgs +
          "ptr addrspace(1) %b, i1 %ps)\n"
          "  ret void\n}\n";
      INFO(text);
      codegen::EmuKernel k = codegen::compileForEmulator(text, false, 32, hooks());
      std::vector<uint8_t> src(3 * bytes), dst(5 * bytes, 0xee);
      for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 1);
      Args args;
      args.add(src.data()).add(dst.data());
      emu::LaunchConfig c = config(k, 1, 32);
      c.throwOnError = false;
      addBuffer(c, src), addBuffer(c, dst);
      emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), c);
      INFO(rep.summary());
      CHECK_FALSE(rep.hasErrors());
      for (unsigned lane = 0; lane < 5; ++lane)
        for (unsigned k2 = 0; k2 < words; ++k2) {
          // Bytes of word k2 of lane `lane`: loaded (lanes < 3) or the
          // `other` value 0x5a + k2 (little-endian, zero-extended).
          const unsigned wb = bits / 8;
          for (unsigned byte = 0; byte < wb; ++byte) {
            size_t at = size_t(lane) * bytes + k2 * wb + byte;
            uint8_t want = lane < 3 ? src[at] : uint8_t(byte == 0 ? 0x5a + k2 : 0);
            INFO("lane " << lane << " word " << k2 << " byte " << byte);
            REQUIRE(dst[at] == want);
          }
        }
    }
}

TEST_CASE("emu: GEMM with the blocked B-tile copy and row-grouped masked loads on AMDGPU", "[emu]") {
  // One wave per program: 16 (gfx942) / 32 (gfx1100) elements of the
  // 32x32 B tile per thread, which the register-staged copy loads as a
  // block of rows x columns and stores K-contiguous (transposedCopyLayout);
  // at aligned shapes (a launch adds {divisibility = 16}) the K mask of a
  // run of rows is one value and one branch guards the run's loads. Ragged
  // shapes take per-row guards. Checked against the reference, every
  // access bounds-checked.
  for (const char* arch : {"amdgpu:gfx942", "amdgpu:gfx1100", "nvptx:sm_80"}) {
    for (const char* name : {"gemm_f16", "gemm_bf16"})
      for (std::vector<int64_t> shape : {std::vector<int64_t>{64, 96, 128, 2}, {50, 70, 45, 2}, {64, 64, 64, 0}}) {
        INFO(name << " on " << arch << ", shape " << shape[0] << "x" << shape[1] << "x" << shape[2]);
        examples::RunContext ctx;
        ctx.device = Device::emulator(arch);
        ctx.options.numWarps = 1;
        ctx.shape = shape;
        ctx.launch.threads = 2;
        const examples::Example* e = nullptr;
        for (const auto& x : examples::all())
          if (x.name == name) e = &x;
        REQUIRE(e);
        examples::CheckResult r = e->run(ctx);
        INFO(r.detail);
        CHECK(r.ok);
      }
  }
}

TEST_CASE("emu: AMDGPU raw buffer accesses read zeros and write nothing out of range, and are checked in range",
          "[emu]") {
  // Lane i loads dword i of `src` through a resource of 2^31 - 1 records
  // where i < lim (else offset 2^31: out of range, zero) and stores it to
  // dst where i < 5 (else out of range: nothing written). src holds 3
  // dwords and dst 5: with lim = 3 nothing touches memory outside them;
  // with lim = 4 lane 3's load is in the resource's range but past the
  // buffer, which the machine must report like any global access.
  const std::string text =
      "target datalayout = \"e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-"
      "p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-"
      "v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9\"\n"
      "target triple = \"amdgcn-amd-amdhsa\"\n"
      "declare i32 @llvm.amdgcn.workitem.id.x()\n"
      "declare ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p8.p1(ptr addrspace(1), i16, i64, i32)\n"
      "declare i32 @llvm.amdgcn.raw.ptr.buffer.load.i32(ptr addrspace(8), i32, i32, i32)\n"
      "declare void @llvm.amdgcn.raw.ptr.buffer.store.i32(i32, ptr addrspace(8), i32, i32, i32)\n"
      "define amdgpu_kernel void @k(ptr addrspace(1) %src, ptr addrspace(1) %dst, i32 %lim) {\n"
      "  %t = call i32 @llvm.amdgcn.workitem.id.x()\n"
      "  %off = shl i32 %t, 2\n"
      "  %pl = icmp ult i32 %t, %lim\n"
      "  %ps = icmp ult i32 %t, 5\n"
      "  %ol = select i1 %pl, i32 %off, i32 2147483648\n"
      "  %os = select i1 %ps, i32 %off, i32 2147483648\n"
      "  %rs = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p8.p1(ptr addrspace(1) %src, i16 0, i64 "
      "2147483647, i32 131072)\n"
      "  %rd = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p8.p1(ptr addrspace(1) %dst, i16 0, i64 "
      "2147483647, i32 131072)\n"
      "  %x = call i32 @llvm.amdgcn.raw.ptr.buffer.load.i32(ptr addrspace(8) %rs, i32 %ol, i32 0, i32 0)\n"
      "  call void @llvm.amdgcn.raw.ptr.buffer.store.i32(i32 %x, ptr addrspace(8) %rd, i32 %os, i32 0, i32 0)\n"
      "  ret void\n}\n";
  codegen::EmuKernel k = codegen::compileForEmulator(text, true, 64, hooks());
  for (int32_t lim : {3, 4}) {
    INFO("lim = " << lim);
    std::vector<int32_t> src = {11, 22, 33}, dst(5, -1);
    Args args;
    args.add(src.data()).add(dst.data()).add(lim);
    emu::LaunchConfig c = config(k, 1, 64);
    c.throwOnError = false;
    addBuffer(c, src), addBuffer(c, dst);
    emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), c);
    INFO(rep.summary());
    CHECK(rep.count(emu::IssueKind::GlobalOutOfBounds) == (lim == 3 ? 0 : 1));
    CHECK(dst[0] == 11);
    CHECK(dst[1] == 22);
    CHECK(dst[2] == 33);
    if (lim == 3) CHECK(dst[3] == 0);  // out of range: zero
    CHECK(dst[4] == 0);
  }
}

TEST_CASE("masked accesses: CompileOptions::predicatedAccesses and TESSERA_PREDICATED_ACCESSES choose the branch form",
          "[gpu]") {
  // vector_add's masked loads and store: raw buffer accesses on AMDGPU and
  // predicated ld/st.global on NVPTX by default; branches with the option
  // or the variable off (a compile key of its own: the cached default
  // compile must not answer for it). Another value is a UsageError.
  const Kernel k = assumeAligned(examples::vectorAdd(1024));
  for (const char* target : {"amdgpu:gfx942", "amdgpu:gfx1100", "nvptx:sm_80"}) {
    INFO(target);
    const bool amd = std::string(target).starts_with("amdgpu");
    const Stage stage = amd ? Stage::AMDGCN : Stage::PTX;
    const std::string branchFree = !amd                                     ? "@%p1 ld.global"
                                   : std::string(target) == "amdgpu:gfx942" ? "buffer_load_dwordx4"
                                                                            : "buffer_load_b128";
    auto has = [&](const CompiledKernel& c, const std::string& s) {
      return c.dump(stage).find(s) != std::string::npos;
    };
    CompileOptions o;
    CHECK(has(compile(k, Target::parse(target), o), branchFree));
    CompileOptions off = o;
    off.predicatedAccesses = false;
    CompiledKernel b = compile(k, Target::parse(target), off);
    CHECK_FALSE(has(b, branchFree));
    CHECK(has(b, amd ? "s_cbranch_execz" : "bra"));
    setenv("TESSERA_PREDICATED_ACCESSES", "0", 1);
    CompiledKernel e = compile(k, Target::parse(target), o);
    setenv("TESSERA_PREDICATED_ACCESSES", "maybe", 1);
    CHECK_THROWS_AS(compile(k, Target::parse(target), o), UsageError);
    unsetenv("TESSERA_PREDICATED_ACCESSES");
    CHECK_FALSE(has(e, branchFree));
  }
}
