// Fiber-switch benchmark: two fibers of the SIMT emulator switch to each
// other in a loop (ns per switch), next to a plain function call and glibc's
// swapcontext measured the same way in the same run.
#include "fiber_bench.h"

#include <ucontext.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "runtime/emu/Fiber.h"

namespace tessera::bench {
namespace {

namespace fiber = tessera::emu::detail;
using Clock = std::chrono::steady_clock;

struct Stats {
  double median, min, max;
};

// ns per operation of `fn`, which performs `ops` operations: median [min,
// max] over `reps` runs after a warm-up run.
Stats nsPerOp(int reps, double ops, const std::function<void()>& fn) {
  std::vector<double> t;
  fn();
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::nano>(Clock::now() - a).count() / ops);
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back()};
}

// ---- the emulator's switch ---------------------------------------------------
// Fiber A switches to B and B back to A, gRounds times each; then A switches
// back to the benchmark's own context for good. Fiber entries take no
// argument, hence the globals.
fiber::Context gMain, gA, gB;
long gRounds = 0;

void pingA() {
  for (long i = 0; i < gRounds; ++i) fiber::switchContext(gA, gB);
  fiber::switchContext(gA, gMain);
  std::abort();  // never resumed: the next run makes both contexts afresh
}

void pingB() {
  for (;;) fiber::switchContext(gB, gA);
}

// ---- baseline: a call and its return ------------------------------------------
__attribute__((noinline)) void plainCall(long* n) {
  asm volatile("" : : "r"(n) : "memory");
  ++*n;
}

// ---- glibc's swapcontext (the fallback of other architectures) ------------------
ucontext_t gUcMain, gUcA, gUcB;

void ucPingA() {
  for (long i = 0; i < gRounds; ++i) swapcontext(&gUcA, &gUcB);
  swapcontext(&gUcA, &gUcMain);
  std::abort();
}

void ucPingB() {
  for (;;) swapcontext(&gUcB, &gUcA);
}

void ucMake(ucontext_t& uc, const fiber::Stack& s, void (*entry)()) {
  getcontext(&uc);
  uc.uc_stack.ss_sp = s.low;
  uc.uc_stack.ss_size = s.bytes;
  uc.uc_link = nullptr;
  makecontext(&uc, entry, 0);
}

void printRow(const char* what, Stats s) {
  std::printf("  %-44s %8.2f ns [%8.2f, %8.2f]\n", what, s.median, s.min, s.max);
}

}  // namespace

void fiberSwitchBench(int reps) {
  const long rounds = 1000000;  // 2M switches per run
  std::printf("\nfiber switch: ping-pong between two fibers, ns per switch, median [min, max] of %d runs\n", reps);
  std::vector<fiber::Stack> stacks;
  for (int i = 0; i < 2; ++i) stacks.push_back(fiber::acquireStack(64 * 1024));
  // Stack colouring as in the emulator (Machine.cpp): fiber i's stack top is
  // offset by i * 64 bytes, so the two hot top frames do not fall into the
  // same cache sets.
  auto top = [&](int i) { return stacks[i].bytes - static_cast<size_t>(i) * 64; };

  gRounds = rounds;
  Stats emu = nsPerOp(reps, 2.0 * rounds, [&] {
    fiber::makeContext(gA, stacks[0].low, top(0), &pingA);
    fiber::makeContext(gB, stacks[1].low, top(1), &pingB);
    fiber::switchContext(gMain, gA);
  });
  printRow(TESSERA_EMU_ASM_SWITCH ? "emulator fibers (Fiber.h, x86-64 switch)" : "emulator fibers (Fiber.h, ucontext)",
           emu);

  long calls = 0;
  Stats call = nsPerOp(reps, 2.0 * rounds, [&] {
    for (long i = 0; i < 2 * rounds; ++i) plainCall(&calls);
  });
  printRow("baseline: a function call and its return", call);

  // swapcontext makes a sigprocmask system call per switch: fewer rounds.
  gRounds = rounds / 50;
  Stats uc = nsPerOp(reps, 2.0 * gRounds, [&] {
    ucMake(gUcA, stacks[0], &ucPingA);
    ucMake(gUcB, stacks[1], &ucPingB);
    swapcontext(&gUcMain, &gUcA);
  });
  printRow("glibc swapcontext (ucontext)", uc);
  std::printf("  emulator switch = %.1f function calls, %.3f x swapcontext\n", emu.median / call.median,
              emu.median / uc.median);
  fiber::releaseStacks(stacks);
}

}  // namespace tessera::bench
