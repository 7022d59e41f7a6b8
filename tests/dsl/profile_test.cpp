// Profiled launches (LaunchOptions::profile; docs/profiling.md): the
// user's scopes and the automatic ones (ir/passes/InsertProbes.cpp) are
// recorded per warp on the CPU and the emulated GPUs, nest, keep their
// order, and make a trace that parses as JSON; an unprofiled compile of a
// kernel with scopes is the compile of the kernel without them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "registry.h"
#include "support.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ex = tessera::examples;
using Catch::Matchers::Contains;

namespace {

/// A strict JSON reader that only says whether `s` is one JSON value.
class Json {
 public:
  explicit Json(const std::string& s) : s_(s) {}
  bool valid() {
    ws();
    if (!value()) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  bool value() {
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return string();
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return number();
    for (const char* w : {"true", "false", "null"})
      if (s_.compare(i_, std::strlen(w), w) == 0) {
        i_ += std::strlen(w);
        return true;
      }
    return false;
  }
  bool object() {
    ++i_;
    ws();
    if (peek('}')) return ++i_, true;
    for (;;) {
      ws();
      if (!string()) return false;
      ws();
      if (!peek(':')) return false;
      ++i_;
      ws();
      if (!value()) return false;
      ws();
      if (peek('}')) return ++i_, true;
      if (!peek(',')) return false;
      ++i_;
    }
  }
  bool array() {
    ++i_;
    ws();
    if (peek(']')) return ++i_, true;
    for (;;) {
      ws();
      if (!value()) return false;
      ws();
      if (peek(']')) return ++i_, true;
      if (!peek(',')) return false;
      ++i_;
    }
  }
  bool string() {
    if (!peek('"')) return false;
    for (++i_; i_ < s_.size(); ++i_) {
      if (s_[i_] == '"') return ++i_, true;
      if (static_cast<unsigned char>(s_[i_]) < 0x20) return false;
      if (s_[i_] == '\\') ++i_;
    }
    return false;
  }
  bool number() {
    const size_t start = i_;
    if (peek('-')) ++i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' || s_[i_] == 'e' ||
                              s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-'))
      ++i_;
    return i_ > start;
  }
  bool peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  const std::string& s_;
  size_t i_ = 0;
};

std::string bare(const std::string& scope) { return scope.substr(0, scope.find(" @ ")); }

/// Per warp, slices nest (a slice of depth d lies within the enclosing
/// slice of depth d-1 before it) and begin no later than they end.
void checkNesting(const ts::rt::Profile& p) {
  std::map<std::pair<uint64_t, uint32_t>, std::vector<const ts::rt::ProfileSlice*>> open;
  for (const ts::rt::ProfileSlice& s : p.slices) {
    INFO(s.scope << " program " << s.program << " warp " << s.warp);
    REQUIRE(s.begin <= s.end);
    auto& stack = open[{s.program, s.warp}];
    while (stack.size() > s.depth) stack.pop_back();
    REQUIRE(stack.size() == s.depth);
    if (!stack.empty()) {
      CHECK(stack.back()->begin <= s.begin);
      CHECK(s.end <= stack.back()->end);
    }
    stack.push_back(&s);
  }
}

ts::Kernel scaled(int line[2]) {
  return ts::kernel("scaled", [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto i = ts::program_id(0) * 64 + ts::arange(64);
    line[0] = __LINE__ + 1;
    ts::profile_scope("load", [&] {
      auto x = ts::load(in + i, i < n, 0.0f);
      line[1] = __LINE__ + 1;
      ts::profile_scope("scale and store", [&] { ts::store(out + i, x * 3.0f, i < n); });
    });
  });
}

}  // namespace

TEST_CASE("profiled CPU launches record the user's scopes per program, nested and in order", "[dsl][profile]") {
  int line[2] = {0, 0};
  ts::Kernel k = scaled(line);
  ts::Device cpu = ts::Device::cpu();
  ts::CompiledKernel c = ts::compile(k, cpu);
  const int n = 1000, programs = (n + 63) / 64;  // 16, the last one partial
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = float(i) * 0.5f;
  ts::Buffer bi = cpu.upload(ts::DType::F32, in), bo = cpu.alloc(ts::DType::F32, n);
  ts::rt::Profile p;
  p.options.programs = 10;  // not all of them
  ts::LaunchOptions o;
  o.profile = &p;
  c.launchWith({uint32_t(programs)}, {bo, bi, int32_t(n)}, o);
  // The profiled code computes what the kernel does.
  std::vector<float> got = bo.read<float>();
  for (int i = 0; i < n; ++i) REQUIRE(got[i] == in[i] * 3.0f);
  CHECK(p.programs == 10);
  CHECK(p.warpsPerProgram == 1);
  CHECK(p.overwritten == 0);
  CHECK(p.unmatched == 0);
  CHECK_THAT(p.clock, Contains("time-stamp counter") || Contains("cycles"));
  // Each recorded program: kernel > load > scale and store, once each.
  std::map<uint64_t, std::vector<std::string>> byProgram;
  for (const ts::rt::ProfileSlice& s : p.slices) byProgram[s.program].push_back(bare(s.scope));
  REQUIRE(byProgram.size() == 10);
  for (const auto& [program, scopes] : byProgram) {
    INFO("program " << program);
    CHECK(scopes == std::vector<std::string>{"kernel", "load", "scale and store"});
  }
  const std::string file = std::string(__FILE__);
  bool named = false;
  for (const ts::rt::ProfileSlice& s : p.slices)
    if (s.scope.rfind("scale and store @ " + file + ":" + std::to_string(line[1]) + ":", 0) == 0) named = true;
  CHECK(named);
  checkNesting(p);
  std::string trace = p.chromeTrace();
  CHECK(Json(trace).valid());
  CHECK_THAT(trace, Contains("\"ph\": \"X\"") && Contains("\"name\": \"scale and store\"") &&
                        Contains("\"name\": \"process_name\""));
  CHECK_THAT(p.summary(), Contains("scale and store") && Contains("median"));

  // An unprofiled compile removes the scopes first: its code is the code
  // of the same kernel without them.
  ts::Kernel plain = ts::kernel("scaled", [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto i = ts::program_id(0) * 64 + ts::arange(64);
    auto x = ts::load(in + i, i < n, 0.0f);
    ts::store(out + i, x * 3.0f, i < n);
  });
  ts::CompileOptions noCache;
  noCache.useDiskCache = false;
  const ts::Target t = ts::Target::parse("cpu:x86-64-v3");
  CHECK(ts::compile(k, t, noCache).dump(ts::Stage::LLVMOptimized) ==
        ts::compile(plain, t, noCache).dump(ts::Stage::LLVMOptimized));
  // And the unprofiled launch of the kernel with scopes needs no buffer.
  bo.fillBytes(0);
  c.launch({uint32_t(programs)}, bo, bi, int32_t(n));
  CHECK(bo.read<float>() == got);
}

TEST_CASE("a profiled launch asks for a profiled compile, and a scope must be named", "[dsl][profile]") {
  int line[2] = {0, 0};
  ts::Device cpu = ts::Device::cpu();
  ts::CompiledKernel c = ts::compile(scaled(line), cpu);
  ts::Buffer b = cpu.alloc(ts::DType::F32, 64);
  // The runtime refuses a profile of a kernel compiled without probes.
  ts::rt::Binary bin = c.artifact().binary;
  ts::rt::Kernel raw = cpu.load(bin);
  ts::rt::Profile p;
  ts::LaunchOptions o;
  o.profile = &p;
  CHECK_THROWS_WITH(raw.launch({1}, {b, b, int32_t(64)}, o), Contains("CompileOptions::profile"));
  p.options.programs = 0;
  CHECK_THROWS_WITH(c.launchWith({1}, {b, b, int32_t(64)}, o), Contains("must be positive"));
  // An empty name is the user's mistake, at their line.
  int bad = 0;
  auto unnamed = [&] {
    return ts::kernel("unnamed", [&](ts::Ptr<float> out) {
      bad = __LINE__ + 1;
      ts::profile_scope("", [&] { ts::store(out + ts::arange(4), ts::zeros({4}, ts::f32)); });
    });
  };
  CHECK_THROWS_AS(unnamed(), ts::DslError);
  try {
    unnamed();
  } catch (const ts::DslError& e) {
    CHECK_THAT(e.what(), Contains(std::string(__FILE__) + ":" + std::to_string(bad)) && Contains("needs a name"));
  }
}

TEST_CASE("profiled launches on emulated GPUs: the pipeline's stages and waits, in order, per warp",
          "[dsl][profile][emu]") {
  for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    INFO(arch);
    ex::RunContext ctx;
    ctx.device = ts::Device::emulator(arch);
    ctx.shape = {96, 80, 200};  // M, N, K: none a multiple of the tiles
    ts::rt::Profile p;
    p.options.programs = 4;
    ctx.launch.profile = &p;
    const ex::Example* gemm = ex::find("gemm_f16");
    REQUIRE(gemm);
    ex::CheckResult r = gemm->run(ctx);
    INFO(r.detail);
    CHECK(r.ok);
    CHECK(p.clock == "emulated operations");
    CHECK(p.overwritten == 0);
    CHECK(p.unmatched == 0);
    REQUIRE(p.programs == 4);
    REQUIRE(p.warpsPerProgram >= 2);
    // Every warp of every recorded program ran the kernel, the prologue,
    // the main loop with both of its stages, the waits and the epilogue.
    std::map<std::pair<uint64_t, uint32_t>, std::vector<std::string>> byWarp;
    for (const ts::rt::ProfileSlice& s : p.slices) byWarp[{s.program, s.warp}].push_back(bare(s.scope));
    CHECK(byWarp.size() == size_t{4} * p.warpsPerProgram);
    for (const auto& [key, scopes] : byWarp) {
      INFO("program " << key.first << " warp " << key.second);
      auto pos = [&](const std::string& s) { return std::find(scopes.begin(), scopes.end(), s) - scopes.begin(); };
      REQUIRE(pos("kernel") == 0);
      CHECK(pos("prologue") < pos("mainloop"));
      CHECK(pos("mainloop") < pos("epilogue"));
      CHECK(pos("epilogue") < std::ssize(scopes));
      CHECK(std::count(scopes.begin(), scopes.end(), "wait: async copies") >= 2);  // per iteration, and the drain
      // One compute stage per iteration: K = 200 is at least 4 of BLOCK_K.
      CHECK(std::count(scopes.begin(), scopes.end(), "stage 0 (iteration k+0)") >= 4);
      CHECK(std::count(scopes.begin(), scopes.end(), "mainloop") == 1);
    }
    checkNesting(p);
    CHECK(Json(p.chromeTrace()).valid());
  }
}

TEST_CASE("a warp-specialised GEMM's trace has the producer and the consumers as roles", "[dsl][profile][emu]") {
  ex::GemmBlocks blocks;
  blocks.m = 64;
  blocks.n = 64;
  blocks.k = 32;
  blocks.stages = 3;
  blocks.warpSpecialized = true;
  ts::Device dev = ts::Device::emulator("nvptx:sm_90a");
  ts::CompiledKernel c = ts::compile(ex::gemmF16(blocks, ex::Activation::None), dev);
  const int M = 64, N = 64, K = 160;
  std::vector<float> a(size_t(M) * K), b(size_t(K) * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 7) - 3) * 0.25f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 5) - 2) * 0.5f;
  auto half = [&](const std::vector<float>& v) {
    std::vector<uint16_t> h;
    for (float x : v) h.push_back(ex::toHalf(x));
    return dev.upload(ts::DType::F16, h);
  };
  ts::Buffer out = dev.alloc(ts::DType::F16, size_t(M) * N), bias = dev.upload(ts::DType::F32, std::vector<float>(N));
  ts::rt::Profile p;
  ts::LaunchOptions o;
  o.profile = &p;
  c.launchWith({1, 1}, {out, half(a), half(b), bias, int32_t(M), int32_t(N), int32_t(K)}, o);
  // The sums are exact in f16 here: every product is a multiple of 1/8.
  std::vector<uint16_t> got = out.read<uint16_t>();
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double want = 0;
      for (int k = 0; k < K; ++k) want += double(a[size_t(i) * K + k]) * b[size_t(k) * N + j];
      REQUIRE(ex::fromHalf(got[size_t(i) * N + j]) == Approx(want).margin(1e-3));
    }
  std::set<std::string> producer, consumer;
  for (const ts::rt::ProfileSlice& s : p.slices) (s.role == "producer" ? producer : consumer).insert(bare(s.scope));
  CHECK(producer.count("producer"));
  CHECK(producer.count("wait: slot released"));
  CHECK(!producer.count("kernel"));
  CHECK(consumer.count("consumer"));
  CHECK(consumer.count("mainloop"));
  CHECK(consumer.count("wait: stage filled"));
  // Both roles run a pipelined loop of their own; the roles' own scopes
  // are only theirs.
  CHECK(producer.count("mainloop"));
  for (const ts::rt::ProfileSlice& s : p.slices) {
    if (bare(s.scope) == "consumer") CHECK(s.role == "consumer");
    if (bare(s.scope) == "producer") CHECK(s.role == "producer");
  }
  INFO(p.summary());
  checkNesting(p);
  std::string trace = p.chromeTrace();
  CHECK(Json(trace).valid());
  CHECK_THAT(trace, Contains("(producer)") && Contains("(consumer)"));
  if (std::getenv("TESSERA_TEST_SHOW_PROFILE")) WARN(p.summary());
}
