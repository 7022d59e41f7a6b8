// NVPTX's mbarrier and TMA inline assembly -> the machine's hooks. The texts
// are exactly those of codegen/nvptx/NVPTXTma.h (one file defines both
// sides); operands are passed through, shared addresses flattened, and each
// call names its instruction (opId) for the machine's reports. The forms
// with elect.sync run in the elected lane only (a ballot of the warp).
#include <string_view>
#include <utility>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>

#include "codegen/emu/EmuPasses.h"
#include "codegen/nvptx/NVPTXTma.h"

namespace tessera::codegen::emu {

namespace {
enum class TmaText { Init, InitFence, ExpectTx, Load2d, Load3d, Store2d, Arrive, TryWait };

bool is(std::string_view text, std::string_view cons, const nvptx::TmaAsm& a) {
  return text == a.text && cons == a.constraints;
}

std::optional<TmaText> match(std::string_view text, std::string_view cons) {
  if (is(text, cons, nvptx::kMbarrierInit)) return TmaText::Init;
  if (is(text, cons, nvptx::kMbarrierInitFence)) return TmaText::InitFence;
  if (is(text, cons, nvptx::kMbarrierExpectTx)) return TmaText::ExpectTx;
  if (is(text, cons, nvptx::kTmaLoad2d)) return TmaText::Load2d;
  if (is(text, cons, nvptx::kTmaLoad3d)) return TmaText::Load3d;
  if (is(text, cons, nvptx::kTmaStore2d)) return TmaText::Store2d;
  if (is(text, cons, nvptx::kMbarrierArrive)) return TmaText::Arrive;
  if (is(text, cons, nvptx::kMbarrierTryWait)) return TmaText::TryWait;
  return std::nullopt;
}
}  // namespace

void rewriteTma(EmuModule& em) {
  if (em.amd) return;
  std::vector<std::pair<llvm::CallInst*, TmaText>> work;
  for (const AsmCall& a : inlineAsmCalls(em))
    if (auto t = match(a.text, a.constraints)) work.emplace_back(a.call, *t);
  for (auto& [c, t] : work) {
    // expect_tx, the copies and arrive run in the lane elect.sync picks:
    // the lowest of the warp's lanes (all 32 take part), found by a ballot.
    if (t == TmaText::ExpectTx || t == TmaText::Load2d || t == TmaText::Load3d || t == TmaText::Store2d ||
        t == TmaText::Arrive) {
      llvm::IRBuilder<> e(c);
      llvm::Value* all = e.CreateCall(em.hook("tessera_emu_ballot_sync"), {e.getInt64(0xffffffffu), e.getInt32(1)});
      llvm::Value* first = e.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, all, e.getTrue());
      llvm::Value* lane = e.CreateZExt(e.CreateCall(em.hook("tessera_emu_lane_id"), {}), e.getInt64Ty());
      llvm::Instruction* then =
          llvm::SplitBlockAndInsertIfThen(e.CreateICmpEQ(lane, first), c->getIterator(), /*Unreachable=*/false);
      c->moveBefore(then->getIterator());
    }
    llvm::IRBuilder<> b(c);
    auto flat = [&](unsigned i) { return b.CreateAddrSpaceCast(c->getArgOperand(i), em.flatPtr()); };
    llvm::Value* op = b.getInt32(static_cast<uint32_t>(em.opId(*c)));
    switch (t) {
      case TmaText::Init: b.CreateCall(em.hook("tessera_emu_mbarrier_init"), {flat(0), c->getArgOperand(1), op}); break;
      case TmaText::InitFence: break;
      case TmaText::ExpectTx:
        b.CreateCall(em.hook("tessera_emu_mbarrier_expect_tx"), {flat(0), c->getArgOperand(1), op});
        break;
      case TmaText::Load2d:
      case TmaText::Load3d: {
        const bool three = t == TmaText::Load3d;
        llvm::Value* c2 = three ? c->getArgOperand(4) : b.getInt32(0);
        b.CreateCall(em.hook("tessera_emu_tma_load"), {flat(0), flat(1), b.getInt32(three ? 3 : 2), c->getArgOperand(2),
                                                       c->getArgOperand(3), c2, flat(three ? 5 : 4), op});
        break;
      }
      case TmaText::Store2d:
        b.CreateCall(em.hook("tessera_emu_tma_store"),
                     {flat(3), flat(0), c->getArgOperand(1), c->getArgOperand(2), op});
        break;
      case TmaText::Arrive: b.CreateCall(em.hook("tessera_emu_mbarrier_arrive"), {flat(0), op}); break;
      case TmaText::TryWait: {
        // $0 is the output: the call's operands are $1 (barrier), $2 (parity).
        llvm::Value* r = b.CreateCall(em.hook("tessera_emu_mbarrier_try_wait"), {flat(0), c->getArgOperand(1), op});
        c->replaceAllUsesWith(r);
        break;
      }
    }
    c->eraseFromParent();
  }
}

}  // namespace tessera::codegen::emu
