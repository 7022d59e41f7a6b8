#include "Fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "tessera/runtime/Emulator.h"

#if TESSERA_EMU_ASM_SWITCH
// void tessera_emu_switch_stack(void** saveSp, void* newSp)
// Pushes the callee-saved registers and the FP control state on the current
// stack, stores the stack pointer in *saveSp, loads newSp and pops the same
// frame from there. A fresh context is a forged frame whose return address is
// the fiber's entry function.
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
  ret
  .size tessera_emu_switch_stack,.-tessera_emu_switch_stack
  .section .note.GNU-stack,"",@progbits
  .text
)");
extern "C" void tessera_emu_switch_stack(void** saveSp, void* newSp);
#endif

namespace tessera::emu::detail {

void makeContext(Context& ctx, void* stackLow, size_t stackBytes, void (*entry)()) {
#if TESSERA_EMU_ASM_SWITCH
  auto top = (reinterpret_cast<uintptr_t>(stackLow) + stackBytes) & ~uintptr_t{15};
  // `ret` pops the entry address at top-16, leaving rsp == top-8, i.e. the
  // alignment of a function just entered by `call`; top-8 holds a null
  // return address so unwinders stop at the fiber's first frame.
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

void switchContext(Context& from, Context& to) {
#if TESSERA_EMU_ASM_SWITCH
  tessera_emu_switch_stack(&from.sp, to.sp);
#else
  swapcontext(&from.uc, &to.uc);
#endif
}

namespace {
std::mutex gPoolMutex;
std::vector<Stack> gPool;  // all of one size: the most recent stackBytes
constexpr size_t kMaxPooled = 4096;

size_t pageSize() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
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
      munmap(static_cast<char*>(s.low) - page, s.bytes + page);
    }
  }
  void* p = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED)
    throw ResourceError("emulator: cannot map a fiber stack of " + std::to_string(bytes) +
                        " bytes: " + std::strerror(errno));
  mprotect(p, page, PROT_NONE);  // guard page below the stack
  return Stack{static_cast<char*>(p) + page, bytes};
}

void releaseStacks(std::vector<Stack>& stacks) {
  const size_t page = pageSize();
  std::lock_guard<std::mutex> lock(gPoolMutex);
  for (Stack& s : stacks) {
    if (gPool.size() < kMaxPooled)
      gPool.push_back(s);
    else
      munmap(static_cast<char*>(s.low) - page, s.bytes + page);
  }
  stacks.clear();
}

}  // namespace tessera::emu::detail
