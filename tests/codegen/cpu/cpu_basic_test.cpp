// CPU backend, end to end: vector add, softmax, dumps and assembly.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cpu_test_util.h"

using namespace cputest;

namespace {
std::shared_ptr<codegen::Artifact> vaddKernel(int64_t block, const std::string& isa, bool dumpAsm = false) {
  K k("vadd");
  Value* out = k.arg(ptr(DType::F32), "out");
  Value* x = k.arg(ptr(DType::F32), "x");
  Value* y = k.arg(ptr(DType::F32), "y");
  Value* n = k.arg(i32(), "n");
  auto& b = k.b;
  Value* start = b.binary(OpCode::Mul, b.programId(0), k.ci(block));
  Value* offs = b.binary(OpCode::Add, b.splat(start, {block}), b.arange(0, block));
  Value* mask = b.cmp("lt", offs, b.splat(n, {block}));
  Value* xv = b.load(k.at(x, offs), mask);
  Value* yv = b.load(k.at(y, offs), mask);
  b.store(k.at(out, offs), b.binary(OpCode::Add, xv, yv), mask);
  return build(k, isa, dumpAsm);
}

// softmax over rows of a rows x cols matrix; one program per row, BLOCK >= cols.
std::shared_ptr<codegen::Artifact> softmaxKernel(int64_t block, const std::string& isa) {
  K k("softmax");
  Value* out = k.arg(ptr(DType::F32), "out");
  Value* in = k.arg(ptr(DType::F32), "in");
  Value* cols = k.arg(i32(), "cols");
  auto& b = k.b;
  Value* row = b.binary(OpCode::Mul, b.programId(0), cols);
  Value* cidx = b.arange(0, block);
  Value* mask = b.cmp("lt", cidx, b.splat(cols, {block}));
  Value* offs = b.binary(OpCode::Add, b.splat(row, {block}), cidx);
  Value* ninf = b.constant(Type::tile(f32(), {block}), -INFINITY);
  Value* x = b.load(k.at(in, offs), mask, ninf);
  Value* m = b.reduce("max", x, 0);
  Value* e = b.unary(OpCode::Exp, b.binary(OpCode::Sub, x, b.splat(m, {block})));
  Value* s = b.reduce("sum", e, 0);
  Value* y = b.binary(OpCode::Div, e, b.splat(s, {block}));
  b.store(k.at(out, offs), y, mask);
  return build(k, isa);
}
}  // namespace

TEST_CASE("cpu: vector add with a masked tail", "[codegen][cpu]") {
  for (const std::string& isa : runnableIsas()) {
    for (int64_t block : {int64_t{64}, int64_t{1024}, int64_t{24}}) {
      auto a = vaddKernel(block, isa);
      REQUIRE(a->binary.hostEntry != nullptr);
      for (int32_t n : {1, 1000, 4097}) {
        std::vector<float> x(n), y(n), out(n + 64, -7.0f);
        for (int i = 0; i < n; ++i) {
          x[i] = 0.5f * static_cast<float>(i);
          y[i] = 3.0f - static_cast<float>(i % 13);
        }
        float *po = out.data(), *px = x.data(), *py = y.data();
        int32_t programs = static_cast<int32_t>((n + block - 1) / block);
        run(*a, {&po, &px, &py, &n}, {programs, 1, 1});
        INFO("isa " << isa << " block " << block << " n " << n);
        for (int i = 0; i < n; ++i) REQUIRE(out[i] == x[i] + y[i]);
        for (int i = n; i < n + 64; ++i) REQUIRE(out[i] == -7.0f);  // masked-off lanes untouched
      }
    }
  }
}

TEST_CASE("cpu: row softmax, 4 x 1000 with BLOCK 1024", "[codegen][cpu]") {
  const int rows = 4;
  int32_t cols = 1000;
  std::vector<float> in(rows * cols), out(rows * cols, 0.0f);
  for (int i = 0; i < rows * cols; ++i) in[i] = std::sin(0.37f * static_cast<float>(i)) * 5.0f + (i % 7);
  std::vector<double> ref(rows * cols);
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(in[r * cols + c]));
    for (int c = 0; c < cols; ++c) s += std::exp(in[r * cols + c] - m);
    for (int c = 0; c < cols; ++c) ref[r * cols + c] = std::exp(in[r * cols + c] - m) / s;
  }
  for (const std::string& isa : runnableIsas()) {
    auto a = softmaxKernel(1024, isa);
    float *po = out.data(), *pi = in.data();
    run(*a, {&po, &pi, &cols}, {rows, 1, 1});
    INFO("isa " << isa);
    for (int i = 0; i < rows * cols; ++i) REQUIRE(std::fabs(out[i] - ref[i]) <= 1e-6 * ref[i] + 1e-9);
  }
}

TEST_CASE("cpu: dumps are filled and avx512 assembly uses zmm", "[codegen][cpu]") {
  auto a = vaddKernel(1024, "", true);
  REQUIRE(a->dumps.tileIR.size() >= 2);
  CHECK(a->dumps.tileIR.front().first == "input");
  for (auto& [name, text] : a->dumps.tileIR) CHECK(!text.empty());
  CHECK(a->dumps.llvm.find("define") != std::string::npos);
  CHECK(a->dumps.llvmOpt.find("define") != std::string::npos);
  CHECK(!a->dumps.assembly.empty());
  CHECK(a->assembly() == a->dumps.assembly);
  // AVX-512 code can be generated on any host; it runs only on AVX-512 ones.
  auto z = vaddKernel(1024, kAvx512Cpu);
  std::string s = z->assembly();
  CHECK(s.find("zmm") != std::string::npos);
  CHECK((z->binary.hostEntry == nullptr) == (codegen::hostIsa() != "avx512"));
  CHECK(z->notRunnable.empty() == (codegen::hostIsa() == "avx512"));
  auto y = vaddKernel(1024, kAvx2Cpu);
  std::string s2 = y->assembly();
  CHECK(s2.find("ymm") != std::string::npos);
  CHECK(s2.find("zmm") == std::string::npos);
}

TEST_CASE("cpu: cold compile time of softmax (informational)", "[codegen][cpu]") {
  softmaxKernel(1024, "");  // warm the JIT and LLVM's one-time set-up
  auto t0 = std::chrono::steady_clock::now();
  const int reps = 5;
  std::shared_ptr<codegen::Artifact> last;
  for (int i = 0; i < reps; ++i) last = softmaxKernel(1024, "");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
  std::printf("[info] softmax compile: %.2f ms per kernel (verify + passes + lower + O3 + JIT)\n%s", ms,
              last->dumps.extra["compile-times"].c_str());
  SUCCEED();
}

TEST_CASE("cpu: target parsing and unsupported targets", "[codegen][cpu]") {
  CHECK(codegen::Target::parse("cpu").str() == "cpu");
  CHECK(codegen::Target::parse("nvptx:sm_90a").str() == "nvptx:sm_90a");
  CHECK(codegen::Target::parse("emu:amdgpu:gfx942").kind == codegen::Target::Kind::EmuAMDGPU);
  CHECK_THROWS_AS(codegen::Target::parse("nvptx:sm_70"), tessera::CompileError);
  CHECK_THROWS_WITH(codegen::Target::parse("tpu"), Catch::Contains("accepted targets"));
  K k("empty");
  k.b.ret();
  // GPU targets compile without a GPU (PTX text); emulator targets need the
  // SIMT machine's hooks, which only tessera::compile supplies.
  CHECK(codegen::compile(*k.f, codegen::Target::parse("nvptx:sm_80"))->binary.ptx.find(".entry") != std::string::npos);
  CHECK_THROWS_WITH(codegen::compile(*k.f, codegen::Target::parse("emu:nvptx:sm_80")),
                    Catch::Contains("needs the SIMT emulator's hooks"));
  CHECK_THROWS_WITH(codegen::Target::parse("cpu:avx9"), Catch::Contains("not a cpu LLVM knows"));
  CHECK(codegen::Target::parse("cpu:x86-64-v3").str() == "cpu:x86-64-v3");
  CHECK(codegen::Target::parse("cpu:znver4").arch == "znver4");
  CHECK(!codegen::hostIsa().empty());
}
