#include "Fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "tessera/runtime/Emulator.h"

#if TESSERA_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if TESSERA_TSAN
#include <sanitizer/tsan_interface.h>
#endif
#if TESSERA_EMU_FIBER_SANITIZED
#include <cstdlib>
#endif

#if TESSERA_EMU_ASM_SWITCH
// void tessera_emu_switch_stack(void** saveSp, void* newSp), declared in Fiber.h
// Pushes the callee-saved registers and the FP control state on the current
// stack, below the return address its call pushed; stores the stack pointer
// in *saveSp, loads newSp, pops the same frame from there, the return
// address last, and jumps to that address. A fresh context is a forged frame
// whose return address is the fiber's entry function.
//
// The resume is `popq %rcx; jmpq *%rcx`, not `ret`: on the x86-64 machine it
// was measured on (tessera_bench --fibers), a `ret` there made the switch
// about twice as slow, even with both contexts switching from one call site,
// where the return-address predictor's guess is right. Most of what remains
// is stmxcsr.
asm(R"(
  .text
  .p2align 4
  .globl tessera_emu_switch_stack
  .hidden tessera_emu_switch_stack
  .type tessera_emu_switch_stack,@function
tessera_emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw 12(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr 8(%rsp)
  fldcw 12(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  popq %rcx
  jmpq *%rcx
  .size tessera_emu_switch_stack,.-tessera_emu_switch_stack
  .section .note.GNU-stack,"",@progbits
  .text
)");
#endif

namespace tessera::emu::detail {

#if TESSERA_EMU_FIBER_SANITIZED
// ---- sanitizer bookkeeping (sanitized builds only) ----------------------------
//
// AddressSanitizer keeps the bounds of the running stack (to tell stack from
// heap in reports, to unpoison dead frames below the stack pointer when an
// exception unwinds, and to place use-after-return "fake" frames); a silent
// jump to another stack makes it see a stack pointer outside those bounds
// and report stack-buffer overflows and bad unwinds that are not there. So a
// switch is bracketed: __sanitizer_start_switch_fiber(save my fake stack,
// next stack's bounds) before, __sanitizer_finish_switch_fiber(my saved fake
// stack, -> the previous stack's bounds) after, on the arriving side.
//
// ThreadSanitizer keeps a shadow call stack and a vector clock per thread;
// fibers sharing one without it would be one "thread" whose call stack never
// unwinds. Each fiber gets its own (__tsan_create_fiber), entered with
// __tsan_switch_to_fiber just before the switch; a switch synchronises
// (the fibers of a block hand data to each other through their worker).
namespace {

// The switch under way on this thread: the context leaving and the one
// arriving. The arriving side reads them to finish the switch.
thread_local Context* tlsLeaving = nullptr;
thread_local Context* tlsArriving = nullptr;

void finishSwitch(Context& self) {
#if TESSERA_ASAN
  // Learns (or refreshes) the stack of the context we came from: a scheduler
  // running on its thread's stack has no other way to know it.
  Context* prev = tlsLeaving;
  __sanitizer_finish_switch_fiber(self.fakeStack, &prev->stackBottom, &prev->stackSize);
  self.fakeStack = nullptr;  // running again: ASan holds it now
#else
  (void)self;
#endif
}

// Where a fresh context starts (its forged frame returns here instead of to
// the entry): finishes the switch, then runs the entry. The fake stack this
// context saved in its previous life (a fiber is never unwound: it leaves by
// a last switch away, or is abandoned) is adopted rather than leaked, so one
// context keeps one fake stack however many blocks it runs.
[[noreturn]] void fiberStart() {
  Context& self = *tlsArriving;
  finishSwitch(self);
  self.entry();
  std::abort();  // entries never return
}

#if TESSERA_ASAN
// ASan frees a fake stack only when told at a switch that its fiber leaves
// for good; a context destroyed while switched out (every fiber of a finished
// launch) still holds its own. Adopt it for a moment with a "switch" to this
// very stack, and leave it for good. No instrumented frame of this function
// may live on a fake stack meanwhile, hence no_sanitize.
__attribute__((no_sanitize("address"))) void freeFakeStack(void* fake) {
  void* mine = nullptr;
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_start_switch_fiber(&mine, nullptr, 0);
  __sanitizer_finish_switch_fiber(fake, &bottom, &size);  // bottom/size: this stack's bounds
  __sanitizer_start_switch_fiber(nullptr, bottom, size);  // null save: frees `fake`
  __sanitizer_finish_switch_fiber(mine, nullptr, nullptr);
}
#endif

}  // namespace

Context::Context(Context&& o) noexcept
#if TESSERA_EMU_ASM_SWITCH
    : sp(o.sp),
#else
    : uc(o.uc),
#endif
      entry(o.entry),
      stackBottom(o.stackBottom),
      stackSize(o.stackSize),
      fakeStack(o.fakeStack),
      tsanFiber(o.tsanFiber),
      ownsTsanFiber(o.ownsTsanFiber) {
  o.fakeStack = nullptr;
  o.tsanFiber = nullptr;
  o.ownsTsanFiber = false;
}

Context::~Context() {
#if TESSERA_ASAN
  if (fakeStack) freeFakeStack(fakeStack);
#endif
#if TESSERA_TSAN
  if (ownsTsanFiber) __tsan_destroy_fiber(tsanFiber);
#endif
}
#endif  // TESSERA_EMU_FIBER_SANITIZED

void makeContext(Context& ctx, void* stackLow, size_t stackBytes, void (*entry)()) {
#if TESSERA_EMU_FIBER_SANITIZED
  ctx.entry = entry;
  entry = &fiberStart;
#endif
#if TESSERA_ASAN
  // The stack may be a pooled one, or this context's own from the previous
  // block, whose frames never returned and so left their redzones poisoned:
  // the new fiber's frames would land on them.
  ASAN_UNPOISON_MEMORY_REGION(stackLow, stackBytes);
  ctx.stackBottom = stackLow;
  ctx.stackSize = stackBytes;
#endif
#if TESSERA_TSAN
  // A fresh TSan fiber each time: the previous one's shadow call stack still
  // holds the frames its fiber never returned from, and would only grow.
  if (ctx.ownsTsanFiber) __tsan_destroy_fiber(ctx.tsanFiber);
  ctx.tsanFiber = __tsan_create_fiber(0);
  ctx.ownsTsanFiber = true;
#endif
#if TESSERA_EMU_ASM_SWITCH
  auto top = (reinterpret_cast<uintptr_t>(stackLow) + stackBytes) & ~uintptr_t{15};
  // The switch pops the entry address at top-16 and jumps to it, leaving rsp
  // == top-8, i.e. the alignment of a function just entered by `call`; top-8
  // holds a null return address so unwinders stop at the fiber's first frame.
  auto* slot = reinterpret_cast<uint64_t*>(top);
  slot[-1] = 0;
  slot[-2] = reinterpret_cast<uint64_t>(entry);
  for (int i = 3; i <= 8; ++i) slot[-i] = 0;  // rbp rbx r12 r13 r14 r15
  auto* csr = reinterpret_cast<uint32_t*>(slot - 10);
  csr[2] = 0x1F80;  // MXCSR: all exceptions masked, round to nearest
  csr[3] = 0x037F;  // x87 control word: default
  ctx.sp = slot - 10;
#else
  getcontext(&ctx.uc);
  ctx.uc.uc_stack.ss_sp = stackLow;
  ctx.uc.uc_stack.ss_size = stackBytes;
  ctx.uc.uc_link = nullptr;
  makecontext(&ctx.uc, entry, 0);
#endif
}

#if !TESSERA_EMU_ASM_SWITCH || TESSERA_EMU_FIBER_SANITIZED
// (Unsanitized x86-64 builds inline the bare swap: Fiber.h.)
void switchContext(Context& from, Context& to) {
#if TESSERA_EMU_FIBER_SANITIZED
  tlsLeaving = &from;
  tlsArriving = &to;
#if TESSERA_TSAN
  if (!from.tsanFiber) from.tsanFiber = __tsan_get_current_fiber();  // a scheduler: its thread's
  __tsan_switch_to_fiber(to.tsanFiber, 0);
#endif
#if TESSERA_ASAN
  __sanitizer_start_switch_fiber(&from.fakeStack, to.stackBottom, to.stackSize);
#endif
#endif
#if TESSERA_EMU_ASM_SWITCH
  tessera_emu_switch_stack(&from.sp, to.sp);
#else
  swapcontext(&from.uc, &to.uc);
#endif
#if TESSERA_EMU_FIBER_SANITIZED
  finishSwitch(from);  // resumed: `from` runs again
#endif
}
#endif

namespace {
std::mutex gPoolMutex;
std::vector<Stack> gPool;  // all of one size: the most recent stackBytes
constexpr size_t kMaxPooled = 4096;

size_t pageSize() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

void unmapStack(const Stack& s) {
#if TESSERA_ASAN
  // Frames abandoned on it left poisoned shadow, which would outlive the
  // mapping and trip whatever is mapped at these addresses next.
  ASAN_UNPOISON_MEMORY_REGION(s.low, s.bytes);
#endif
  munmap(static_cast<char*>(s.low) - pageSize(), s.bytes + pageSize());
}
}  // namespace

Stack acquireStack(size_t bytes) {
  const size_t page = pageSize();
  bytes = (bytes + page - 1) / page * page;
  {
    std::lock_guard<std::mutex> lock(gPoolMutex);
    while (!gPool.empty()) {
      Stack s = gPool.back();
      gPool.pop_back();
      if (s.bytes == bytes) return s;
      unmapStack(s);
    }
  }
  void* p = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw ResourceError("emulator: cannot map a fiber stack of " + std::to_string(bytes) +
                        " bytes: " + std::strerror(errno));
  mprotect(p, page, PROT_NONE);  // guard page below the stack
  return Stack{static_cast<char*>(p) + page, bytes};
}

void releaseStacks(std::vector<Stack>& stacks) {
  std::lock_guard<std::mutex> lock(gPoolMutex);
  for (Stack& s : stacks) {
    if (gPool.size() < kMaxPooled)
      gPool.push_back(s);
    else
      unmapStack(s);
  }
  stacks.clear();
}

}  // namespace tessera::emu::detail
