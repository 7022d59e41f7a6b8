// Fibers of the SIMT machine: bare stack switching and a pool of stacks.
//
// A GPU thread switches at every barrier and warp collective, so the switch
// must cost a few nanoseconds: on x86-64 it is a hand-written register swap
// (callee-saved registers, MXCSR and the x87 control word; no signal mask,
// unlike swapcontext which makes a sigprocmask system call). Elsewhere it
// falls back to POSIX ucontext. A context never unwinds: a fiber abandoned by
// an aborted block is simply forgotten and its stack reused.
#pragma once

#include <cstddef>
#include <vector>

#if defined(__x86_64__) && !defined(TESSERA_EMU_FORCE_UCONTEXT)
#define TESSERA_EMU_ASM_SWITCH 1
#else
#define TESSERA_EMU_ASM_SWITCH 0
#include <ucontext.h>
#endif

namespace tessera::emu::detail {

struct Context {
#if TESSERA_EMU_ASM_SWITCH
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
};

/// Prepares `ctx` so that switching to it calls `entry` on the given stack.
/// `entry` must never return: it leaves by switching away for good.
void makeContext(Context& ctx, void* stackLow, size_t stackBytes, void (*entry)());
/// Saves the running context into `from` and resumes `to`.
void switchContext(Context& from, Context& to);

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
