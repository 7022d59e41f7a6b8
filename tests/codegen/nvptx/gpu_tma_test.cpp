// sm_90a's tensor copies (TMA) and transaction barriers on the kernels as
// users write them: the pipelined GEMMs of examples/gemm_f16.cpp and
// gemm_bf16.cpp fill their slots with cp.async.bulk.tensor boxes completing
// on mbarriers. On the emulated H100 (which reads the launch's tensor maps,
// swizzles the boxes and zero-fills outside the tensor as TMA does) the
// result must equal the reference and the cp.async path bit for bit, over
// shapes that are and are not multiples of the tile; rows whose stride is
// not 16-byte aligned keep cp.async.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "../../gemm_check.h"
#include "registry.h"
#include "tessera/codegen/Compiler.h"
#include "tessera/ir/Parser.h"
#include "tessera/ir/Verifier.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ex = tessera::examples;
using tessera_test::checkGemm;

TEST_CASE("tma: the pipelined f16 GEMM on emulated sm_90a fills its slots by TMA, exact and equal to cp.async",
          "[gpu][tma][emu]") {
  struct Cfg {
    ex::GemmBlocks blocks;
    int warps;
  };
  // 64x64x32 (A: 64-byte rows, boxes of 8 rows in warpgroup order; B: one
  // 128-byte swizzled box), 64x128x64 (B in two column blocks), 128x32x16
  // (two warpgroups, 32-byte rows).
  for (Cfg c : {Cfg{{64, 64, 32, 3}, 4}, Cfg{{64, 128, 64, 2}, 4}, Cfg{{128, 32, 16, 3}, 8}}) {
    const ts::Kernel kernel = ex::gemmF16(c.blocks, ex::Activation::None);
    // Multiples of the tile, ragged edges (zero-filled boxes; the
    // arguments multiples of 16, as the aligned variant needs), and a K
    // whose rows are not 16-byte aligned (cp.async stays).
    checkGemm("f16", ts::DType::F16, ts::DType::F16, kernel, c.blocks, c.warps, {128, 128, 96}, true);
    checkGemm("f16", ts::DType::F16, ts::DType::F16, kernel, c.blocks, c.warps, {72, 144, 48}, true);
    checkGemm("f16", ts::DType::F16, ts::DType::F16, kernel, c.blocks, c.warps, {70, 150, 41}, false);
  }
}

TEST_CASE("tma: the pipelined bf16 GEMM on emulated sm_90a, exact and equal to cp.async", "[gpu][tma][emu]") {
  ex::GemmBlocks blocks{64, 64, 32, 3};
  const ts::Kernel kernel = ex::gemmBF16(blocks, ex::Activation::None);
  checkGemm("bf16", ts::DType::BF16, ts::DType::F32, kernel, blocks, 4, {96, 80, 64}, true);
  checkGemm("bf16", ts::DType::BF16, ts::DType::F32, kernel, blocks, 4, {33, 80, 48}, true);
}

TEST_CASE("warp specialisation: producer warps issue the GEMM's TMA copies, exact and equal to cp.async",
          "[gpu][tma][emu][warp-specialize]") {
  struct Cfg {
    ex::GemmBlocks blocks;
    int warps;
  };
  // Two consumer warpgroups (128 x 256: registers rebalanced by
  // setmaxnreg), one; two and three slots.
  for (Cfg c : {Cfg{{128, 128, 64, 3, true}, 8}, Cfg{{128, 256, 64, 3, true}, 8}, Cfg{{64, 64, 32, 2, true}, 4}}) {
    INFO(c.blocks.m << "x" << c.blocks.n << "x" << c.blocks.k << " w" << c.warps);
    const ts::Kernel kernel = ex::gemmF16(c.blocks, ex::Activation::None);
    checkGemm("f16 ws", ts::DType::F16, ts::DType::F16, kernel, c.blocks, c.warps, {128, 256, 192}, true);
    checkGemm("f16 ws", ts::DType::F16, ts::DType::F16, kernel, c.blocks, c.warps, {200, 144, 80}, true);
    // Unaligned rows: no tensor copies, so the loop keeps the usual schedule.
    checkGemm("f16 ws", ts::DType::F16, ts::DType::F16, kernel, c.blocks, c.warps, {70, 150, 41}, false);
    // The code a launch's aligned variant gets: producer warps beside
    // the consumers, the consumers' barriers counting them alone, no
    // cp.async groups; the unaligned one says why it is not specialised.
    ts::CompileOptions o;
    o.numWarps = c.warps;
    ts::CompiledKernel k = ts::compile(ts::assumeAligned(kernel), ts::Target::parse("nvptx:sm_90a"), o);
    const std::string ptx = k.dump(ts::Stage::PTX);
    // The producer: a warpgroup where it trades registers with two consumer
    // warpgroups (128 x 256), else one warp (one lane issues the copies;
    // idle warps would hold registers: 128 x 128 fits two blocks per SM
    // at 288 threads, one at 384).
    const bool rebalanced = c.blocks.n == 256;
    const std::string threads = std::to_string(32 * (c.warps + (rebalanced ? 4 : 1)));
    CHECK(ptx.find(".maxntid " + threads) != std::string::npos);
    CHECK(ptx.find("bar.sync \t1, " + std::to_string(32 * c.warps) + ";") != std::string::npos);
    size_t whole = 0;  // the one whole-block barrier, after the mbarriers' initialisation
    for (size_t at = ptx.find("bar.sync \t0;"); at != std::string::npos; at = ptx.find("bar.sync \t0;", at + 1))
      ++whole;
    CHECK(whole == 1);
    CHECK(ptx.find("cp.async.commit_group") == std::string::npos);
    CHECK(k.warnings().empty());
    CHECK(std::regex_search(ptx, std::regex(R"(setmaxnreg\.dec\.sync\.aligned\.u32\s+40;)")) == rebalanced);
    CHECK(std::regex_search(ptx, std::regex(R"(setmaxnreg\.inc\.sync\.aligned\.u32\s+232;)")) == rebalanced);
    CHECK(std::regex_search(ptx, std::regex(R"(\.maxnreg\s+168)")) == rebalanced);
    ts::CompiledKernel plain = ts::compile(kernel, ts::Target::parse("nvptx:sm_90a"), o);
    REQUIRE(plain.warnings().size() == 1);
    CHECK(plain.warnings()[0].find("not warp-specialised (the staged copy at") != std::string::npos);
    CHECK(plain.warnings()[0].find("is not known 16-byte aligned") != std::string::npos);
  }
  ex::GemmBlocks blocks{64, 64, 32, 3, true};
  const ts::Kernel bf16 = ex::gemmBF16(blocks, ex::Activation::None);
  checkGemm("bf16 ws", ts::DType::BF16, ts::DType::F32, bf16, blocks, 4, {96, 80, 64}, true);
  checkGemm("bf16 ws", ts::DType::BF16, ts::DType::F32, bf16, blocks, 4, {33, 80, 48}, true);
}

TEST_CASE("warp specialisation on Blackwell: a producer warp feeds tcgen05 consumers, exact and equal to cp.async",
          "[gpu][tma][emu][warp-specialize][blackwell]") {
  struct Cfg {
    ex::GemmBlocks blocks;
    int warps;
  };
  for (const char* sm : {"nvptx:sm_100a", "nvptx:sm_103a"}) {
    const ts::Device dev = ts::Device::emulator(sm);
    for (Cfg c : {Cfg{{128, 128, 64, 3, true}, 4}, Cfg{{128, 256, 64, 2, true}, 8}, Cfg{{64, 64, 32, 2, true}, 4}}) {
      INFO(sm << " " << c.blocks.m << "x" << c.blocks.n << "x" << c.blocks.k << " w" << c.warps);
      const ts::Kernel kernel = ex::gemmF16(c.blocks, ex::Activation::None);
      checkGemm("f16 ws", ts::DType::F16, ts::DType::F16, kernel, c.blocks, c.warps, {128, 256, 192}, true, dev);
      checkGemm("f16 ws", ts::DType::F16, ts::DType::F16, kernel, c.blocks, c.warps, {200, 144, 80}, true, dev);
      ts::CompileOptions o;
      o.numWarps = c.warps;
      ts::CompiledKernel k = ts::compile(ts::assumeAligned(kernel), ts::Target::parse(sm), o);
      const std::string ptx = k.dump(ts::Stage::PTX);
      CHECK(k.warnings().empty());
      CHECK(ptx.find("tcgen05.mma.cta_group::1.kind::f16") != std::string::npos);
      CHECK(ptx.find("bar.sync \t1, " + std::to_string(32 * c.warps) + ";") != std::string::npos);
      CHECK(ptx.find("cp.async.commit_group") == std::string::npos);
    }
    ex::GemmBlocks blocks{64, 64, 32, 3, true};
    const ts::Kernel bf16 = ex::gemmBF16(blocks, ex::Activation::None);
    checkGemm("bf16 ws", ts::DType::BF16, ts::DType::F32, bf16, blocks, 4, {96, 80, 64}, true, dev);
  }
}

TEST_CASE("tma: sm_80 and TESSERA_TENSOR_COPIES=0 keep cp.async, and the tensor maps are in the signature",
          "[gpu][tma]") {
  ex::GemmBlocks blocks{64, 64, 32, 3};
  const ts::Kernel kernel = ex::gemmF16(blocks, ex::Activation::None);
  ts::CompileOptions o;
  ts::CompiledKernel a100 = ts::compile(kernel, ts::Target::parse("nvptx:sm_80"), o);
  CHECK(a100.dump(ts::Stage::PTX).find("cp.async.bulk.tensor") == std::string::npos);
  CHECK(a100.signature().tensorMaps.empty());
  // The aligned variant a launch specialises to (16-byte facts).
  ts::CompiledKernel h100 = ts::compile(ts::assumeAligned(kernel), ts::Target::parse("nvptx:sm_90a"), o);
  const ts::rt::KernelSignature& sig = h100.signature();
  REQUIRE(sig.tensorMaps.size() == 3);
  CHECK(sig.str().find("tma(a: f16 dims [K, M] strides [1, K] box [32, 8] swizzle 64)") != std::string::npos);
  CHECK(sig.str().find("tma(b: f16 dims [N, K] strides [1, N] box [64, 32] swizzle 128)") != std::string::npos);
  // The epilogue's store: one unswizzled 64 x 64 box, clipped at M and N.
  CHECK(sig.str().find("tma(c: f16 dims [N, M] strides [1, N] box [64, 64] swizzle 0)") != std::string::npos);
  const std::string ptx = h100.dump(ts::Stage::PTX);
  CHECK(ptx.find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") != std::string::npos);
  CHECK(ptx.find("cp.async.bulk.wait_group 0;") != std::string::npos);
  CHECK(ptx.find("mbarrier.try_wait.parity") != std::string::npos);
  CHECK(ptx.find(".param .align 64 .b8") != std::string::npos);
  setenv("TESSERA_TENSOR_COPIES", "0", 1);
  ts::CompiledKernel off = ts::compile(ts::assumeAligned(kernel), ts::Target::parse("nvptx:sm_90a"), o);
  unsetenv("TESSERA_TENSOR_COPIES");
  CHECK(off.dump(ts::Stage::PTX).find("cp.async.bulk.tensor") == std::string::npos);
  CHECK(off.signature().tensorMaps.empty());
}

TEST_CASE("tma: flash attention on emulated sm_90a copies K and V by 3-D TMA boxes, equal to cp.async and sm_80",
          "[gpu][tma][emu]") {
  // [heads, n, D]: a head is a plane of n rows, its bound n; n = 144 leaves
  // a partial last block whose rows past n (the next head's) TMA zero-fills.
  for (std::vector<int64_t> shape : {std::vector<int64_t>{2, 128, 64}, std::vector<int64_t>{3, 144, 128}})
    for (bool causal : {false, true}) {
      INFO("shape " << shape[0] << "x" << shape[1] << "x" << shape[2] << (causal ? " causal" : ""));
      std::vector<std::vector<uint16_t>> outs;
      for (int run = 0; run < 3; ++run) {
        const bool h100 = run < 2, tensorCopies = run == 0;
        ts::Device dev = ts::Device::emulator(h100 ? "nvptx:sm_90a" : "nvptx:sm_80");
        ex::RunContext ctx;
        ctx.device = dev;
        ctx.shape = shape;
        ctx.seed = 11;
        ex::Launch l = ex::prepareAttention(ctx, causal, ex::AttentionBlocks{64, 64});
        ts::CompileOptions o;
        o.tensorCopies = tensorCopies;
        if (run == 0) {
          const std::string ptx =
              ts::compile(ts::specializedFor(l.kernel, l.args), ts::Target::parse("nvptx:sm_90a"), o)
                  .dump(ts::Stage::PTX);
          CHECK(ptx.find("cp.async.bulk.tensor.3d") != std::string::npos);
        }
        ts::CompiledKernel k = ts::compile(l.kernel, dev, o);
        k.launchWith(l.grid, l.args, {});
        ex::CheckResult r = l.check();
        INFO("run " << run << ": " << r.detail);
        CHECK(r.ok);
        outs.push_back(l.args[0].buffer.read<uint16_t>());
      }
      CHECK(outs[0] == outs[1]);
      CHECK(outs[0] == outs[2]);
    }
}

namespace {
/// `slots` async copies of a 16 x 32 f16 box into the slots of one buffer,
/// committed one group each, with `waits` (async_wait pending counts) placed
/// after commit number `waitAfter` (1-based); then the tiles are read back.
std::string groupsKernel(int slots, int waitAfter, std::vector<int> waits, bool barrierAfterWait = true) {
  std::string t =
      "kernel @groups(%out: ptr<f16, global> {divisibility = 16}, %a: ptr<f16, global> {divisibility = 16}, "
      "%M: i32 {divisibility = 16}, %K: i32 {divisibility = 16}) {\n"
      "  %r = arange() {end = 16, start = 0} : tile<16xi32>\n"
      "  %r1 = expand_dims(%r) {axis = 1} : tile<16x1xi32>\n"
      "  %c = arange() {end = 32, start = 0} : tile<32xi32>\n"
      "  %c1 = expand_dims(%c) {axis = 0} : tile<1x32xi32>\n"
      "  %k = splat(%K) : tile<16x1xi32>\n"
      "  %rk = mul(%r1, %k) : tile<16x1xi32>\n"
      "  %rkb = broadcast(%rk) : tile<16x32xi32>\n"
      "  %cb = broadcast(%c1) : tile<16x32xi32>\n"
      "  %off = add(%rkb, %cb) : tile<16x32xi32>\n"
      "  %pa = splat(%a) : tile<16x32xptr<f16, global>>\n"
      "  %p = ptr_add(%pa, %off) : tile<16x32xptr<f16, global>>\n"
      "  %kc = splat(%K) : tile<1x32xi32>\n"
      "  %cm = cmp(%c1, %kc) {pred = lt} : tile<1x32xi1>\n"
      "  %m = broadcast(%cm) : tile<16x32xi1>\n"
      "  %buf = alloc() : buffer<shared, " +
      std::to_string(slots) + "x16x32xf16>\n";
  for (int s = 0; s < slots; ++s) {
    const std::string i = std::to_string(s);
    t += "  %i" + i + " = constant() {value = " + i + "} : i32\n";
    t += "  %s" + i + " = buffer_slot(%buf, %i" + i + ") : buffer<shared, 16x32xf16>\n";
    t += "  copy(%s" + i + ", %p, %m) {async = 1}\n  async_commit()\n";
    if (s + 1 == waitAfter)
      for (int w : waits) {
        t += "  async_wait() {pending = " + std::to_string(w) + "}\n";
        if (barrierAfterWait) t += "  barrier()\n";
      }
  }
  t += "  async_wait() {pending = 0}\n  barrier()\n";
  t += "  %o = splat(%out) : tile<16x32xptr<f16, global>>\n  %po = ptr_add(%o, %off) : tile<16x32xptr<f16, global>>\n";
  for (int s = 0; s < slots; ++s) {
    const std::string i = std::to_string(s);
    t += "  %t" + i + " = local_load(%s" + i + ") : tile<16x32xf16>\n  store(%po, %t" + i + ", %m)\n";
  }
  return t + "  return()\n}\n";
}

bool usesTma(const std::string& ir) {
  auto m = ts::ir::parseModule(ir, "groups.tir");
  ts::ir::verify(*m);
  auto art = ts::codegen::compile(*m->functions.at(0), ts::codegen::Target::parse("nvptx:sm_90a"));
  return art->binary.ptx.find("cp.async.bulk.tensor.2d.shared::cluster.global") != std::string::npos;  // loads
}
}  // namespace

TEST_CASE("tma: the group copies take TMA only where the reuse of their mbarriers is proven", "[gpu][tma]") {
  // Two groups in flight at most (a wait of pending 1 before the third
  // commit, and a barrier after it): S = 2 barriers suffice.
  CHECK(usesTma(groupsKernel(3, 2, {1})));
  // Three groups committed before any wait, whose largest `pending` is 1:
  // the third would reuse the first group's barrier while its phase is
  // still awaited. cp.async instead.
  CHECK_FALSE(usesTma(groupsKernel(3, 3, {1})));
  // Group 0 waited for but no block barrier before group 2 reuses its
  // barrier: a slow thread may still wait on that phase. cp.async instead.
  CHECK_FALSE(usesTma(groupsKernel(3, 2, {1}, /*barrierAfterWait=*/false)));
}
