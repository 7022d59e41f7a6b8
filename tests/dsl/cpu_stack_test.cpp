// A CPU program keeps its tiles on the stack of the thread that runs it:
// tiles beyond what a thread's stack holds are a ResourceError naming the
// user's lines (at compile time past the CPU budget, at launch on a thread
// whose stack has less room), never a SIGSEGV.
#include <catch2/catch.hpp>

#include <pthread.h>

#include <exception>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;
using Catch::Matchers::Contains;

namespace {

std::string at(int line) { return std::string(__FILE__) + ":" + std::to_string(line); }

/// out[i] = sum of an N x N tile of ones kept in a shared buffer.
int gBufferLine = 0;
ts::Kernel bufferKernel(int N) {
  return ts::kernel("stack_buffer", {"out"}, [=](ts::Ptr<float> out) {
    // clang-format off
    gBufferLine = __LINE__; auto buf = ts::alloc_shared(ts::f32, {N, N});
    // clang-format on
    buf.store(ts::full({N, N}, 1.0f, ts::f32));
    ts::store(out + ts::program_id(0), ts::sum(ts::sum(buf.load(), 1), 0));
  });
}

/// Runs `f` on a thread with a stack of `bytes` and returns what it threw.
std::string onSmallStack(size_t bytes, void (*f)(void*), void* arg) {
  struct Job {
    void (*f)(void*);
    void* arg;
    std::string error;
  } job{f, arg, {}};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t t;
  REQUIRE(pthread_create(
              &t, &attr,
              [](void* p) -> void* {
                auto* j = static_cast<Job*>(p);
                try {
                  j->f(j->arg);
                } catch (const std::exception& e) {
                  j->error = e.what();
                }
                return nullptr;
              },
              &job) == 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  return job.error;
}

}  // namespace

TEST_CASE("cpu: tiles past the stack budget are a ResourceError naming the user's line", "[dsl][cpu][resources]") {
  // 1024 x 1024 f32: 4 MiB for the buffer alone, and as much for the tile
  // stored into it.
  ts::Kernel k = bufferKernel(1024);
  try {
    ts::compile(k, ts::Device::cpu());
    FAIL("a 1024 x 1024 f32 shared buffer compiled for the CPU");
  } catch (const ts::ResourceError& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK_THAT(msg, Contains("of tiles on the stack of the CPU thread that runs it"));
    CHECK_THAT(msg, Contains("alloc buffer<shared, 1024x1024xf32> at " + at(gBufferLine)));
    CHECK_THAT(msg, Contains("above the 4.00 MiB a CPU program may use"));
  }
  // A 1024 x 1024 f32 dot: its accumulator alone is 4 MiB.
  int dotLine = 0;
  ts::Kernel d =
      ts::kernel("stack_dot", {"c", "a", "b"}, [&](ts::Ptr<float> c, ts::Ptr<const float> a, ts::Ptr<const float> b) {
        auto r = ts::expand_dims(ts::arange(1024), 1), col = ts::expand_dims(ts::arange(1024), 0);
        // clang-format off
    dotLine = __LINE__; auto acc = ts::dot(ts::load(a + r * 1024 + col), ts::load(b + r * 1024 + col), ts::zeros({1024, 1024}, ts::f32));
        // clang-format on
        ts::store(c + r * 1024 + col, acc);
      });
  CHECK_THROWS_AS(ts::compile(d, ts::Device::cpu()), ts::ResourceError);
  CHECK_THROWS_WITH(ts::compile(d, ts::Device::cpu()), Contains(at(dotLine)));
}

TEST_CASE("cpu: a thread without stack room for a program's tiles gets a ResourceError at launch",
          "[dsl][cpu][resources]") {
  // 256 x 256 f32: 256 KiB per tile, within the budget; a thread of 256 KiB
  // cannot hold it, the usual 8 MiB can.
  struct Arg {
    ts::CompiledKernel k;
    ts::Buffer out;
    unsigned threads;
  };
  ts::Device dev = ts::Device::cpu();
  Arg arg{ts::compile(bufferKernel(256), dev), dev.alloc(ts::DType::F32, 4), 1};
  auto launch = [](void* p) {
    auto* a = static_cast<Arg*>(p);
    ts::LaunchOptions o;
    o.threads = a->threads;
    a->k.launchWith({4}, {a->out}, o);
  };
  std::string small = onSmallStack(256 << 10, launch, &arg);
  INFO(small);
  CHECK_THAT(small, Contains("cpu: kernel 'stack_buffer' keeps") && Contains("bytes of stack left"));
  // The pool's workers, too: the first chunk runs on the caller's thread.
  arg.threads = 2;
  CHECK_THAT(onSmallStack(256 << 10, launch, &arg), Contains("bytes of stack left"));
  arg.out.fillBytes(0);
  CHECK(onSmallStack(8 << 20, launch, &arg).empty());
  for (float v : arg.out.read<float>()) CHECK(v == 256.0f * 256.0f);
}
