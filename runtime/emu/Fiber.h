// Fibers of the SIMT machine: bare stack switching and a pool of stacks.
//
// A GPU thread switches at every barrier and warp collective, so the switch
// must cost a few nanoseconds: on x86-64 it is a hand-written register swap
// (callee-saved registers, MXCSR and the x87 control word; no signal mask,
// unlike swapcontext which makes a sigprocmask system call). Elsewhere it
// falls back to POSIX ucontext. A context never unwinds: a fiber abandoned by
// an aborted block is simply forgotten and its stack reused.
//
// Under AddressSanitizer or ThreadSanitizer (TESSERA_SANITIZE) every switch
// also tells the sanitizer which stack and which fiber run next: both track
// the running stack, and a stack pointer that jumps between mmap'ed regions
// behind their back makes them report errors that are not there. None of
// that is compiled into a normal build, whose switch stays the bare swap.
#pragma once

#include <cstddef>
#include <vector>

#include "tessera/support/Sanitizers.h"

#if defined(__x86_64__) && !defined(TESSERA_EMU_FORCE_UCONTEXT)
#define TESSERA_EMU_ASM_SWITCH 1
// The register swap (Fiber.cpp): saves the running context's registers on
// its stack and that stack's pointer in *saveSp, and resumes the context
// whose saved registers newSp points to.
extern "C" __attribute__((visibility("hidden"))) void tessera_emu_switch_stack(void** saveSp, void* newSp);
#else
#define TESSERA_EMU_ASM_SWITCH 0
#include <ucontext.h>
#endif

#if TESSERA_ASAN || TESSERA_TSAN
#define TESSERA_EMU_FIBER_SANITIZED 1
#else
#define TESSERA_EMU_FIBER_SANITIZED 0
#endif

namespace tessera::emu::detail {

struct Context {
#if TESSERA_EMU_ASM_SWITCH
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
#if TESSERA_EMU_FIBER_SANITIZED
  // What the sanitizers need to hear about this context at a switch (see
  // Fiber.cpp). A context made by makeContext owns its sanitizer state; one
  // that only ever switched away (a scheduler on its thread's own stack)
  // learns its stack at its first switch.
  void (*entry)() = nullptr;          // called by the start trampoline
  const void* stackBottom = nullptr;  // ASan: lowest byte of this context's stack
  size_t stackSize = 0;
  void* fakeStack = nullptr;  // ASan: its fake stack (use-after-return frames) while switched out
  void* tsanFiber = nullptr;  // TSan: its fiber; the thread's own for a scheduler
  bool ownsTsanFiber = false;

  Context() = default;
  // Moved only while a vector of fibers grows, before any switch; never copied.
  Context(Context&& o) noexcept;
  Context& operator=(Context&&) = delete;
  ~Context();  // frees what the sanitizers keep for a fiber that will not run again
#endif
};

/// Prepares `ctx` so that switching to it calls `entry` on the given stack.
/// `entry` must never return: it leaves by switching away for good.
void makeContext(Context& ctx, void* stackLow, size_t stackBytes, void (*entry)());
/// Saves the running context into `from` and resumes `to`.
#if TESSERA_EMU_ASM_SWITCH && !TESSERA_EMU_FIBER_SANITIZED
// Unsanitized x86-64: the bare swap, called from the switching code itself
// (no wrapper: one call and return fewer per switch).
inline void switchContext(Context& from, Context& to) { tessera_emu_switch_stack(&from.sp, to.sp); }
#else
void switchContext(Context& from, Context& to);
#endif

/// An mmap'ed stack with a PROT_NONE guard page below it, so an overflow
/// faults instead of corrupting the neighbouring fiber.
struct Stack {
  void* low = nullptr;  // lowest usable byte
  size_t bytes = 0;
};

/// Process-wide pool: stacks are mapped once and reused by every launch.
Stack acquireStack(size_t bytes);
void releaseStacks(std::vector<Stack>& stacks);

}  // namespace tessera::emu::detail
