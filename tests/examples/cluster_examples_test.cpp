// Thread-block clusters from the DSL down: rmsnorm_cluster on emulated
// sm_90a and sm_100a in clusters of up to 8 (the exact module ptxas takes,
// run with distributed shared memory and cluster barriers), the same kernel
// as clusters of one on the CPU and emulated sm_80 / gfx942, and the
// mistakes the emulator and the compiler name: a partial read before the
// cluster barrier, a program leaving while another reads its buffer, a
// cluster a target does not have.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "registry.h"
#include "tessera/runtime/Emulator.h"

namespace ts = tessera;
namespace ex = tessera::examples;

namespace {

std::string shapeStr(const std::vector<int64_t>& s) {
  std::string r;
  for (auto d : s) r += (r.empty() ? "" : "x") + std::to_string(d);
  return r;
}

void checkAll(const ts::Device& dev, const ex::Example& e, unsigned threads) {
  for (const auto& shape : e.testShapes) {
    INFO(e.name << " " << shapeStr(shape) << " on " << dev.name() << " with " << threads << " threads");
    ex::RunContext ctx;
    ctx.device = dev;
    ctx.shape = shape;
    ctx.launch.threads = threads;
    ex::CheckResult r = e.run(ctx);
    INFO(r.detail << " (max abs error " << r.maxAbsError << ", max rel error " << r.maxRelError << ")");
    REQUIRE(r.ok);
  }
}

/// rmsnorm_cluster's own kernel (BLOCK 64, clusters of 4) without its
/// `which`-th cluster barrier (0: before the partials are read, 1: after).
ts::Kernel rmsnormWithoutBarrier(int which) {
  const ts::Kernel k = ex::rmsnormCluster(64, 4);
  std::shared_ptr<ts::ir::Function> f = ts::ir::clone(k.ir());
  auto& ops = f->body().ops();
  int seen = 0;
  for (auto it = ops.begin(); it != ops.end(); ++it)
    if ((*it)->code() == ts::ir::OpCode::ClusterBarrier && seen++ == which) {
      ops.erase(it);  // no operands, no results: nothing refers to it
      break;
    }
  REQUIRE(seen > which);
  return ts::Kernel(std::move(f)).withCluster(k.cluster());
}

std::string launchError(const ts::Device& dev, const ts::Kernel& k) {
  const int64_t rows = 2, cols = 256;
  ts::Buffer x = dev.upload(ts::DType::F32, std::vector<float>(size_t(rows * cols), 1.0f));
  ts::Buffer w = dev.upload(ts::DType::F32, std::vector<float>(size_t(cols), 1.0f));
  ts::Buffer y = dev.alloc(ts::DType::F32, size_t(rows * cols));
  ts::CompiledKernel ck = ts::compile(k, dev);
  ts::LaunchOptions o;
  o.threads = 2;
  try {
    ck.launchWith(ts::Dim3(uint32_t(rows * 4)), {y, x, w, int32_t(cols), 1e-6f}, o);
  } catch (const ts::emu::EmulatorError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("rmsnorm_cluster on emulated sm_90a and sm_100a: clusters of 1 to 8 programs", "[examples][emu][cluster]") {
  const ex::Example* e = ex::find("rmsnorm_cluster");
  REQUIRE(e);
  for (const char* arch : {"nvptx:sm_90a", "nvptx:sm_100a"}) {
    ts::Device dev = ts::Device::emulator(arch);
    // The shapes' splits: 1000 and 3 columns one program, 3000 three,
    // 7000 seven, 8192 eight.
    const ts::Target t = ex::deviceTarget(dev);
    CHECK(ex::rmsnormClusterSplit(t, 1000).programs == 1);
    CHECK(ex::rmsnormClusterSplit(t, 3000).programs == 3);
    CHECK(ex::rmsnormClusterSplit(t, 7000).programs == 7);
    CHECK(ex::rmsnormClusterSplit(t, 8192).programs == 8);
    CHECK(ex::rmsnormClusterSplit(t, 8192).block == 1024);
    // A cluster's blocks run at once on one host thread; two threads take
    // two clusters at a time.
    checkAll(dev, *e, 1);
    checkAll(dev, *e, 2);
  }
  // The compiled kernel carries the shape, and the PTX requires it.
  ts::CompiledKernel k = ts::compile(ex::rmsnormCluster(1024, 4), ts::Target::parse("nvptx:sm_90a"));
  const std::string ptx = k.dump(ts::Stage::PTX);
  CHECK(ptx.find(".reqnctapercluster 4, 1, 1") != std::string::npos);
  CHECK(ptx.find("mapa.shared::cluster") != std::string::npos);
  CHECK(ptx.find("ld.shared::cluster") != std::string::npos);
  CHECK(ptx.find("barrier.cluster.wait") != std::string::npos);
  CHECK(k.artifact().binary.cluster[0] == 4);
  CHECK(k.artifact().binary.clusterBlocks() == 4);
}

TEST_CASE("rmsnorm_cluster as clusters of one: the CPU, emulated sm_80 and gfx942", "[examples][emu][cluster]") {
  const ex::Example* e = ex::find("rmsnorm_cluster");
  REQUIRE(e);
  checkAll(ts::Device::cpu(), *e, 2);
  for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942"}) {
    const ts::Device dev = ts::Device::emulator(arch);
    CHECK(ex::rmsnormClusterSplit(ex::deviceTarget(dev), 7000).programs == 1);
    checkAll(dev, *e, 2);
  }
}

TEST_CASE("the emulator names a remote read before the cluster barrier and a program that leaves too early",
          "[examples][emu][cluster]") {
  ts::Device dev = ts::Device::emulator("nvptx:sm_90a");
  // Both barriers: clean.
  CHECK(launchError(dev, ex::rmsnormCluster(64, 4)).empty());
  // The partials read before every program wrote its own: a race between
  // two programs of the cluster.
  const std::string race = launchError(dev, rmsnormWithoutBarrier(0));
  INFO(race);
  CHECK(race.find("race") != std::string::npos);
  CHECK(race.find("rmsnorm_cluster.cpp") != std::string::npos);
  // No barrier after the reads: a program may leave (its shared memory
  // gone) while another still reads its partial.
  const std::string early = launchError(dev, rmsnormWithoutBarrier(1));
  INFO(early);
  CHECK(early.find("exited") != std::string::npos);
}

TEST_CASE("cluster shapes a target cannot take are compile errors, and a kernel keeps its own shape",
          "[examples][cluster]") {
  const ts::Kernel k = ex::rmsnormCluster(1024, 2);
  auto compileError = [&](const ts::Kernel& kern, const char* target, ts::CompileOptions o = {}) -> std::string {
    try {
      ts::compile(kern, ts::Target::parse(target), o);
    } catch (const ts::Error& e) {
      return e.what();
    }
    return "";
  };
  CHECK(compileError(k, "nvptx:sm_90a").empty());
  CHECK(compileError(k, "nvptx:sm_80").find("nvptx:sm_80, which has no thread-block clusters") != std::string::npos);
  CHECK(compileError(k, "amdgpu:gfx942").find("which has no thread-block clusters") != std::string::npos);
  CHECK(compileError(k, "cpu").find("which has no thread-block clusters") != std::string::npos);
  CHECK(compileError(ex::rmsnormCluster(64, 9), "nvptx:sm_100a").find("is 9 programs; nvptx:sm_100a takes at most 8") !=
        std::string::npos);
  // The options may name the kernel's own shape, not another.
  ts::CompileOptions same, other;
  same.cluster = {2, 1, 1};
  other.cluster = {4, 1, 1};
  CHECK(compileError(k, "nvptx:sm_90a", same).empty());
  CHECK(compileError(k, "nvptx:sm_90a", other).find("written for clusters of {2, 1, 1}") != std::string::npos);
  CHECK_THROWS_AS(k.withCluster({0, 1, 1}), ts::UsageError);
  // A remote view of a remote view, and a slot of one, are refused where
  // they are written.
  auto traceError = [](auto body) -> std::string {
    try {
      ts::kernel("k", {"x"}, [&](ts::Ptr<float>) { body(); });
    } catch (const ts::Error& e) {
      return e.what();
    }
    return "";
  };
  CHECK(traceError([] {
          ts::alloc_shared(ts::f32, {16}).remote(1).remote(0);
        }).find("remote: the buffer is already another program's") != std::string::npos);
  CHECK(traceError([] { ts::alloc_local(ts::f32, {16}).remote(1); }).find("is not a shared buffer") !=
        std::string::npos);
}
