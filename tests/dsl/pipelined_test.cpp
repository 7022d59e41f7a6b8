// ts::for_pipelined / ts::stage_copy: tracing to `for {stages = S}`, the
// pipeline pass on traced kernels, and the documented misuse errors.
#include "dsl_test_util.h"
#include "tessera/ir/Pass.h"
#include "tessera/ir/Verifier.h"
#include "../codegen/pipelined_gemm.h"

namespace ts = tessera;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using dsltest::at;
using dsltest::traceError;

namespace {

constexpr int BM = 16, BN = 16, BK = 8;

ts::Kernel tileMatmul(int64_t stages) { return gemmtest::tileMatmul("mm", BM, BN, BK, stages); }

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("for_pipelined traces the one-stage program into for {stages = S}", "[dsl][pipeline]") {
  for (int64_t S : {1, 2, 3, 4}) {
    INFO("stages = " << S);
    ts::Kernel k = tileMatmul(S);
    std::string text = dsltest::irText(k);
    std::string s = std::to_string(S);
    CHECK_THAT(text, Contains("alloc() : buffer<shared, " + s + "x16x8xf16>"));
    CHECK_THAT(text, Contains("alloc() : buffer<shared, " + s + "x8x16xf16>"));
    CHECK_THAT(text, Contains("{stages = " + s + "}"));
    CHECK(count(text, "buffer_slot(") == 2);
    CHECK(count(text, "copy(") == 2);
    CHECK(count(text, "async") == 0);  // as written: plain copies

    // The schedule of the traced kernel: S-1 prologue copies per buffer.
    auto f = ts::ir::clone(k.ir());
    ts::ir::PassManager pm;
    pm.add(ts::ir::createPipelineSchedulePass());
    ts::ir::addDefaultPasses(pm);
    REQUIRE_NOTHROW(pm.run(*f));
    std::string sched = ts::ir::print(*f, ts::ir::PrintOptions{false});
    CHECK_THAT(sched, Contains("{pipelined = " + s + "}"));
    CHECK(count(sched, "{async = 1") == 2 * S);  // 2*(S-1) in the prologue, 2 in the loop
    CHECK_THAT(sched, Contains("async_wait() {pending = " + std::to_string(S - 1) + ", stage = 0}"));
    CHECK_THAT(sched, Contains("async_wait() {pending = 0}"));
  }
}

TEST_CASE("for_pipelined without carried values, and several stage_copy handles", "[dsl][pipeline]") {
  ts::Kernel k = ts::kernel("copyout", [](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto s = ts::alloc_shared(ts::f32, {32});
    ts::for_pipelined(0, n, 32, 2, [&](ts::Int i) {
      auto o = ts::arange(32) + i;
      auto t = ts::stage_copy(s, in + o, o < n);
      ts::store(out + o, t.load() * 2.0f, o < n);
    });
  });
  std::string text = dsltest::irText(k);
  CHECK_THAT(text, Contains("buffer<shared, 2x32xf32>"));
  CHECK_THAT(text, Contains("{stages = 2}"));
  auto f = ts::ir::clone(k.ir());
  REQUIRE_NOTHROW(ts::ir::createPipelineSchedulePass()->run(*f));
  CHECK_NOTHROW(ts::ir::verify(*f));
}

TEST_CASE("for_pipelined and stage_copy misuse", "[dsl][pipeline][errors]") {
  int line = 0;
  SECTION("stages < 1") {
    std::string msg = traceError([&](ts::Ptr<const float> in, ts::Int n) {
      line = __LINE__ + 1;  // the next line
      ts::for_pipelined(0, n, 16, 0, [&](ts::Int) {});
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("for_pipelined: stages must be 1..32 (real schedules use 2-8), got 0"));
  }
  SECTION("non-shared buffer") {
    std::string msg = traceError([&](ts::Ptr<const float> in, ts::Int n) {
      auto l = ts::alloc_local(ts::f32, {16});
      ts::for_pipelined(0, n, 16, 2, [&](ts::Int i) {
        line = __LINE__ + 1;  // the next line
        ts::stage_copy(l, in + ts::arange(16) + i);
      });
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("stage_copy: the buffer must be in shared memory (ts::alloc_shared), got "
                             "buffer<local, 16xf32>"));
  }
  SECTION("shape mismatch") {
    std::string msg = traceError([&](ts::Ptr<const float> in, ts::Int n) {
      auto s = ts::alloc_shared(ts::f32, {16, 8});
      ts::for_pipelined(0, n, 16, 2, [&](ts::Int i) {
        auto p = in + ts::expand_dims(ts::arange(16), 1) * 4 + ts::expand_dims(ts::arange(4), 0) + i;
        line = __LINE__ + 1;  // the next line
        ts::stage_copy(s, p);
      });
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("stage_copy: shape mismatch: the pointer tile is [16x4] but the buffer holds tiles of "
                             "[16x8]"));
  }
  SECTION("dtype mismatch") {
    std::string msg = traceError([&](ts::Ptr<const float> in, ts::Int n) {
      auto s = ts::alloc_shared(ts::f16, {16});
      ts::for_pipelined(0, n, 16, 2, [&](ts::Int i) {
        line = __LINE__ + 1;  // the next line
        ts::stage_copy(s, in + ts::arange(16) + i);
      });
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("differ in dtype"));
  }
  SECTION("stage_copy outside for_pipelined, or nested in its body") {
    std::string msg = traceError([&](ts::Ptr<const float> in, ts::Int n) {
      auto s = ts::alloc_shared(ts::f32, {16});
      line = __LINE__ + 1;  // the next line
      ts::stage_copy(s, in + ts::arange(16));
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("must be called directly in the body of ts::for_pipelined"));
    msg = traceError([&](ts::Ptr<const float> in, ts::Int n) {
      auto s = ts::alloc_shared(ts::f32, {16});
      ts::for_pipelined(0, n, 16, 2, [&](ts::Int i) {
        ts::for_range(0, 2, 1, [&](ts::Int) {
          line = __LINE__ + 1;  // the next line
          ts::stage_copy(s, in + ts::arange(16) + i);
        });
      });
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("not outside it, nor inside a nested for_range"));
  }
  SECTION("for_pipelined inside another for_pipelined") {
    int outer = 0;
    std::string msg = traceError([&](ts::Ptr<const float> in, ts::Int n) {
      outer = __LINE__ + 1;  // the next line
      ts::for_pipelined(0, n, 16, 2, [&](ts::Int) {
        ts::for_range(0, n, 1, [&](ts::Int) {
          line = __LINE__ + 1;  // the next line
          ts::for_pipelined(0, n, 16, 2, [&](ts::Int) {});
        });
      });
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("cannot be nested in the for_pipelined at " + std::string(__FILE__) + ":" +
                             std::to_string(outer)));
  }
  SECTION("a staged buffer allocated inside the pipelined loop") {
    std::string msg = traceError([&](ts::Ptr<const float> in, ts::Int n) {
      ts::for_pipelined(0, n, 16, 2, [&](ts::Int i) {
        auto s = ts::alloc_shared(ts::f32, {16});
        line = __LINE__ + 1;  // the next line
        ts::stage_copy(s, in + ts::arange(16) + i);
      });
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("allocate the buffer with ts::alloc_shared before the pipelined loop, outside it"));
  }
  SECTION("addresses that depend on a carried value or a load") {
    std::string msg = traceError([&](ts::Ptr<const float> in, ts::Ptr<const int32_t> idx, ts::Int n) {
      auto s = ts::alloc_shared(ts::f32, {16});
      ts::for_pipelined(0, n, 16, 3, ts::Int(ts::program_id(0)), [&](ts::Int i, ts::Tensor off) {
        line = __LINE__ + 1;  // the next line
        ts::stage_copy(s, in + ts::arange(16) + off);
        return off + 16;
      });
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("cannot depend on a loop-carried value"));
    // A global load (a page table entry) is issued ahead with the copy...
    ts::Kernel k = ts::kernel("k", [&](ts::Ptr<const float> in, ts::Ptr<const int32_t> idx, ts::Int n) {
      auto s = ts::alloc_shared(ts::f32, {16});
      ts::for_pipelined(0, n, 16, 3, [&](ts::Int i) { ts::stage_copy(s, in + ts::arange(16) + ts::load(idx + i)); });
    });
    CHECK(k.valid());
    // ... unless the loop writes global memory, which that load could read.
    try {
      ts::kernel("k", [&](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Ptr<const int32_t> idx, ts::Int n) {
        auto s = ts::alloc_shared(ts::f32, {16});
        ts::for_pipelined(0, n, 16, 3, [&](ts::Int i) {
          line = __LINE__ + 1;  // the next line
          auto t = ts::stage_copy(s, in + ts::arange(16) + ts::load(idx + i));
          ts::store(out + ts::arange(16) + i, t.load());
        });
      });
      FAIL("a load moved ahead of the loop's stores was accepted");
    } catch (const ts::Error& e) {
      msg = e.what();
    }
    CHECK_THAT(msg, Contains(std::string(__FILE__) + ":" + std::to_string(line)));
    CHECK_THAT(msg,
               Contains("which the schedule issues S-1 iterations ahead; the loop writes global memory ('store' at"));
  }
  SECTION("a staged buffer is accessed only through stage_copy") {
    std::string msg = traceError([&](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
      auto s = ts::alloc_shared(ts::f32, {16});
      ts::for_pipelined(0, n, 16, 2, [&](ts::Int i) { ts::stage_copy(s, in + ts::arange(16) + i); });
      line = __LINE__ + 1;  // the next line
      ts::store(out + ts::arange(16), s.load());
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("buffer load: the buffer is staged by the stage_copy at"));
    msg = traceError([&](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
      auto s = ts::alloc_shared(ts::f32, {16});
      s.store(0.0f);
      ts::for_pipelined(0, n, 16, 2, [&](ts::Int i) {
        line = __LINE__ + 1;  // the next line
        ts::stage_copy(s, in + ts::arange(16) + i);
      });
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("stage_copy: the buffer is already used by the 'local_store' at"));
    msg = traceError([&](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
      auto s = ts::alloc_shared(ts::f32, {16});
      ts::for_pipelined(0, n, 16, 2, [&](ts::Int i) {
        ts::stage_copy(s, in + ts::arange(16) + i);
        line = __LINE__ + 1;  // the next line
        ts::stage_copy(s, in + ts::arange(16) + i);
      });
    });
    CHECK_THAT(msg, StartsWith(at(__FILE__, line)));
    CHECK_THAT(msg, Contains("stage_copy: the buffer is staged by the stage_copy at"));
  }
}

TEST_CASE("a staged copy whose address is a loaded value: the load is issued ahead, masked past the end",
          "[dsl][pipeline]") {
  // out[i] = sum over pages p of in[table[p] * 16 + i], a page table walk.
  ts::Kernel k = ts::kernel(
      "gather_sum", [](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Ptr<const int32_t> table, ts::Int pages) {
        auto s = ts::alloc_shared(ts::f32, {16});
        auto acc = ts::for_pipelined(0, pages, 1, 3, ts::zeros({16}, ts::f32), [&](ts::Int p, ts::Tensor acc) {
          return acc + ts::stage_copy(s, in + ts::load(table + p) * 16 + ts::arange(16)).load();
        });
        ts::store(out + ts::arange(16), acc);
      });
  auto f = ts::ir::clone(k.ir());
  ts::ir::createPipelineSchedulePass()->run(*f);
  REQUIRE_NOTHROW(ts::ir::verify(*f));
  // The prologue's two loads and the loop's one (stage 2) read table[p] only
  // where p < n: each carries a mask, the guard of its iteration.
  int guarded = 0;
  ts::ir::walk(f->body(), [&](ts::ir::Op& op) {
    if (op.code() != ts::ir::OpCode::Load || !op.hasAttr("stage")) return;
    CHECK(op.numOperands() == 2);
    const ts::ir::Op* m = op.operand(1)->definingOp();
    REQUIRE(m != nullptr);
    CHECK(m->code() == ts::ir::OpCode::Cmp);
    ++guarded;
  });
  CHECK(guarded == 3);
}
