// NVPTX's predicated global accesses -> host IR. The GPU lowering's own
// inline assembly is NVPTX's predicated global access
// (codegen/nvptx/NVPTXPredicated.h), and the emulator runs exactly its
// forms: `@p ld.global` becomes a branch on p around a plain load whose
// registers otherwise keep the `other` values the assembly's movs put there,
// `@p st.global` a branch around a plain store. The plain accesses are then
// checked like any other (instrumentMemory runs next): a masked-off lane
// performs no access, so it is never reported out of bounds. The wgmma
// texts become the machine's hook, and `setmaxnreg` (a register budget the
// machine does not have) nothing once its count is checked. Other inline
// assembly is left to rewriteInlineAsm (EmuLibcalls.cpp), which runs after
// the libcalls and knows libdevice's 128-bit helpers, and refuses the rest
// with a CompileError: text for the GPU's assembler means nothing on the
// host.
#include <array>
#include <cctype>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>

#include "codegen/emu/EmuPasses.h"
#include "codegen/nvptx/NVPTXPredicated.h"
#include "codegen/nvptx/NVPTXSpecialRegisters.h"
#include "codegen/nvptx/NVPTXWgmma.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::emu {

namespace {

[[noreturn]] void refuse(const llvm::CallBase& c, const std::string& why) {
  const auto* ia = llvm::cast<llvm::InlineAsm>(c.getCalledOperand());
  throw CompileError("the emulator does not support the inline assembly \"" + ia->getAsmString().str() + "\" (\"" +
                     ia->getConstraintString().str() + "\"" + (why.empty() ? "" : ", " + why) + "), used by `" +
                     describe(c) + "`");
}

void expand(EmuModule& em, llvm::CallInst& c, const nvptx::PredicatedAccess& a) {
  const unsigned n = a.words;
  // Register type of the words and memory type of the whole access.
  llvm::Type* word = a.wordBits == 32 ? llvm::Type::getInt32Ty(em.ctx) : llvm::Type::getInt16Ty(em.ctx);
  llvm::Type* mem = a.wordBits == 8 ? llvm::Type::getInt8Ty(em.ctx)
                    : n == 1        ? word
                                    : static_cast<llvm::Type*>(llvm::FixedVectorType::get(word, n));
  // Operands: load: address, predicate, others; store: values, address, predicate.
  const unsigned addrIdx = a.store ? n : 0;
  llvm::Value* addr = c.getArgOperand(addrIdx);
  llvm::Value* pred = c.getArgOperand(addrIdx + 1);
  if (!addr->getType()->isPointerTy()) refuse(c, "its address is not a pointer");
  const llvm::Align align(a.bytes());

  llvm::BasicBlock* head = c.getParent();
  llvm::Instruction* thenTerm = llvm::SplitBlockAndInsertIfThen(pred, c.getIterator(), /*Unreachable=*/false);
  llvm::IRBuilder<> b(thenTerm);
  if (a.store) {
    llvm::Value* v;
    if (a.wordBits == 8) {
      v = b.CreateTrunc(c.getArgOperand(0), mem);  // st.u8 stores the register's low byte
    } else if (n == 1) {
      v = c.getArgOperand(0);
    } else {
      v = llvm::PoisonValue::get(mem);
      for (unsigned k = 0; k < n; ++k) v = b.CreateInsertElement(v, c.getArgOperand(k), k);
    }
    llvm::StoreInst* st = b.CreateAlignedStore(v, addr, align);
    em.nameAs(*st, c);
    c.eraseFromParent();
    return;
  }
  llvm::LoadInst* ld = b.CreateAlignedLoad(mem, addr, align);
  em.nameAs(*ld, c);
  std::vector<llvm::Value*> got;
  if (a.wordBits == 8)
    got.push_back(b.CreateZExt(ld, word));  // ld.global.u8 zero-extends
  else if (n == 1)
    got.push_back(ld);
  else
    for (unsigned k = 0; k < n; ++k) got.push_back(b.CreateExtractElement(ld, k));
  llvm::BasicBlock* loaded = thenTerm->getParent();
  // The join: each register holds what the load wrote, or its mov's `other`.
  b.SetInsertPoint(c.getParent(), c.getParent()->begin());
  std::vector<llvm::Value*> regs;
  for (unsigned k = 0; k < n; ++k) {
    llvm::PHINode* phi = b.CreatePHI(word, 2);
    phi->addIncoming(got[k], loaded);
    phi->addIncoming(c.getArgOperand(2 + k), head);
    regs.push_back(phi);
  }
  b.SetInsertPoint(&c);
  llvm::Value* r = regs[0];
  if (n > 1) {
    r = llvm::PoisonValue::get(c.getType());
    for (unsigned k = 0; k < n; ++k) r = b.CreateInsertValue(r, regs[k], k);
  }
  c.replaceAllUsesWith(r);
  c.eraseFromParent();
}

// setmaxnreg.{inc,dec}.sync.aligned.u32 N, N a literal or $0 bound to an
// immediate ("n" or "i"), with nothing but clobbers besides: the
// instruction's name, and N when it is a literal (else -1: the operand).
struct Setmaxnreg {
  std::string inst;
  int64_t literal = -1;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<Setmaxnreg> matchSetmaxnreg(std::string_view text, std::string_view cons) {
  text = trim(text);
  if (text.ends_with(';')) text = trim(text.substr(0, text.size() - 1));
  Setmaxnreg r;
  for (const char* inst : {"setmaxnreg.inc.sync.aligned.u32", "setmaxnreg.dec.sync.aligned.u32"})
    if (text.starts_with(inst) && text.size() > std::string_view(inst).size() &&
        std::isspace(static_cast<unsigned char>(text[std::string_view(inst).size()])))
      r.inst = inst;
  if (r.inst.empty()) return std::nullopt;
  std::string_view arg = trim(text.substr(r.inst.size()));
  // The constraints: an immediate input for $0, then only clobbers.
  std::string_view rest = cons;
  if (arg == "$0") {
    if (!rest.starts_with("n") && !rest.starts_with("i")) return std::nullopt;
    rest.remove_prefix(1);
    if (rest.starts_with(",")) rest.remove_prefix(1);
  } else {
    if (arg.empty() || arg.size() > 9) return std::nullopt;
    r.literal = 0;
    for (char ch : arg) {
      if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
      r.literal = r.literal * 10 + (ch - '0');
    }
  }
  while (!rest.empty()) {
    size_t end = rest.find(',');
    std::string_view one = rest.substr(0, end);
    if (!one.starts_with("~{") || !one.ends_with("}")) return std::nullopt;
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  return r;
}

}  // namespace

std::vector<AsmCall> inlineAsmCalls(EmuModule& em) {
  std::vector<AsmCall> r;
  for (llvm::Function& f : em.m)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb)
        if (auto* c = llvm::dyn_cast<llvm::CallInst>(&i); c && c->isInlineAsm()) {
          const auto* ia = llvm::cast<llvm::InlineAsm>(c->getCalledOperand());
          r.push_back({c, std::string_view(ia->getAsmString()), std::string_view(ia->getConstraintString())});
        }
  return r;
}

void rewriteWarpgroupMma(EmuModule& em) {
  if (em.amd) return;
  std::vector<std::pair<llvm::CallInst*, std::optional<nvptx::WgmmaForm>>> work;
  std::vector<std::pair<llvm::CallInst*, Setmaxnreg>> maxnreg;
  for (const AsmCall& a : inlineAsmCalls(em)) {
    if (auto s = matchSetmaxnreg(a.text, a.constraints))
      maxnreg.emplace_back(a.call, *s);
    else if (auto w = nvptx::matchWgmma(a.text, a.constraints))
      work.emplace_back(a.call, w);
    else if (nvptx::matchWgmmaPassThrough(a.text, a.constraints))
      work.emplace_back(a.call, std::nullopt);
  }
  // setmaxnreg (the warpgroups of a warp-specialised kernel trading
  // registers): the machine has no register budget, so it only checks the
  // count as ptxas does, and drops the instruction.
  for (auto& [c, s] : maxnreg) {
    int64_t n = s.literal;
    if (n < 0) {
      auto* ci = c->arg_size() == 1 ? llvm::dyn_cast<llvm::ConstantInt>(c->getArgOperand(0)) : nullptr;
      if (!ci) refuse(*c, "its register count is not an immediate");
      n = ci->getSExtValue();
    }
    if (n < 24 || n > 256 || n % 8 != 0) {
      const auto* ia = llvm::cast<llvm::InlineAsm>(c->getCalledOperand());
      throw CompileError(s.inst + " " + std::to_string(n) +
                         ": the register count must be a multiple of 8 in [24, 256] (inline assembly \"" +
                         ia->getAsmString().str() + "\"), used by `" + describe(*c) + "`");
    }
    c->eraseFromParent();
  }
  // Per function: the lane's A registers and accumulators handed to the
  // hook (the largest N is 256: 128 floats).
  std::map<llvm::Function*, std::array<llvm::Value*, 3>> scratch;
  const llvm::DataLayout& dl = em.m.getDataLayout();
  for (auto& [c, form] : work) {
    llvm::IRBuilder<> b(c);
    if (!form) {
      // Fence / wait: the registers pass through unchanged; a wait retires
      // the MMAs' operand reads (the hook).
      const auto* ia = llvm::cast<llvm::InlineAsm>(c->getCalledOperand());
      if (int n = nvptx::wgmmaWaitPending(std::string_view(ia->getAsmString())); n >= 0)
        b.CreateCall(em.hook("tessera_emu_wgmma_wait"), {b.getInt32(static_cast<uint32_t>(n))});
      if (c->arg_size() == 0) {  // a wait with no registers
        c->eraseFromParent();
        continue;
      }
      llvm::Value* r = c->getArgOperand(0);
      if (c->arg_size() > 1) {
        r = llvm::PoisonValue::get(c->getType());
        for (unsigned k = 0; k < c->arg_size(); ++k) r = b.CreateInsertValue(r, c->getArgOperand(k), k);
      }
      c->replaceAllUsesWith(r);
      c->eraseFromParent();
      continue;
    }
    llvm::Function* fn = c->getFunction();
    auto it = scratch.find(fn);
    if (it == scratch.end()) {
      llvm::IRBuilder<> eb(&*fn->getEntryBlock().getFirstInsertionPt());
      auto one = [&](llvm::Type* t, unsigned n, const char* name) -> llvm::Value* {
        llvm::AllocaInst* a = eb.CreateAlloca(llvm::ArrayType::get(t, n), dl.getAllocaAddrSpace(), nullptr, name);
        a->setAlignment(llvm::Align(16));
        return eb.CreateAddrSpaceCast(a, em.flatPtr());
      };
      it = scratch
               .emplace(fn, std::array<llvm::Value*, 3>{one(b.getInt32Ty(), 4, "wgmma.a"),
                                                        one(b.getFloatTy(), 128, "wgmma.c"),
                                                        one(b.getFloatTy(), 128, "wgmma.d")})
               .first;
    }
    auto [aBuf, cBuf, dBuf] = it->second;
    const unsigned h = static_cast<unsigned>(form->n / 2);
    for (unsigned k = 0; k < h; ++k)
      b.CreateAlignedStore(c->getArgOperand(k), b.CreateConstInBoundsGEP1_32(b.getFloatTy(), cBuf, k), llvm::Align(4));
    // A: four fragment registers, or (aShared) its descriptor in the first two words.
    const unsigned aWords = form->aShared ? 1 : 4;
    for (unsigned k = 0; k < aWords; ++k)
      b.CreateAlignedStore(c->getArgOperand(h + k),
                           b.CreateConstInBoundsGEP1_32(c->getArgOperand(h + k)->getType(), aBuf, k), llvm::Align(4));
    const int32_t mode =
        form->n | (form->bf16 ? TESSERA_EMU_WGMMA_BF16 : 0) | (form->transB ? TESSERA_EMU_WGMMA_TRANS_B : 0) |
        (form->aShared ? TESSERA_EMU_WGMMA_A_SHARED : 0) | (form->isFp8() ? TESSERA_EMU_WGMMA_FP8 : 0) |
        (form->fp8A == nvptx::WgmmaFp8::E5M2 ? TESSERA_EMU_WGMMA_A_E5M2 : 0) |
        (form->fp8B == nvptx::WgmmaFp8::E5M2 ? TESSERA_EMU_WGMMA_B_E5M2 : 0);
    b.CreateCall(em.hook("tessera_emu_wgmma"),
                 {b.getInt32(mode), aBuf, c->getArgOperand(h + aWords), cBuf, dBuf, b.getInt32(em.opId(*c))});
    llvm::Value* r = llvm::PoisonValue::get(c->getType());
    for (unsigned k = 0; k < h; ++k)
      r = b.CreateInsertValue(
          r, b.CreateAlignedLoad(b.getFloatTy(), b.CreateConstInBoundsGEP1_32(b.getFloatTy(), dBuf, k), llvm::Align(4)),
          k);
    c->replaceAllUsesWith(r);
    c->eraseFromParent();
  }
}

void rewritePredicatedAccesses(EmuModule& em) {
  if (em.amd) return;  // AMDGPU's masked accesses are branches already
  std::vector<std::pair<llvm::CallInst*, nvptx::PredicatedAccess>> work;
  std::vector<std::pair<llvm::CallInst*, unsigned>> copies;
  for (const AsmCall& c : inlineAsmCalls(em)) {
    if (std::optional<nvptx::PredicatedAccess> a = nvptx::matchPredicatedAccess(c.text, c.constraints))
      work.emplace_back(c.call, *a);
    else if (unsigned bytes = nvptx::matchCpAsyncIgnoreSrc(c.text, c.constraints))
      copies.emplace_back(c.call, bytes);
  }
  for (auto& [c, a] : work) expand(em, *c, a);
  // cp.async with ignore-src: the machine's cp.async (EmuIntrinsicsNvvm.cpp)
  // reading 0 bytes where the predicate is set.
  for (auto& [c, bytes] : copies) {
    llvm::IRBuilder<> b(c);
    llvm::Value* dst = b.CreateAddrSpaceCast(c->getArgOperand(0), em.flatPtr());
    llvm::Value* src = b.CreateAddrSpaceCast(c->getArgOperand(1), em.flatPtr());
    llvm::Value* srcBytes = b.CreateSelect(c->getArgOperand(2), b.getInt32(0), b.getInt32(bytes));
    b.CreateCall(em.hook("tessera_emu_cp_async"),
                 {dst, src, b.getInt32(bytes), srcBytes, b.getInt32(static_cast<uint32_t>(em.opId(*c)))});
    c->eraseFromParent();
  }
}

void rewriteRereads(EmuModule& em) {
  if (em.amd) return;  // AMDGPU reads no special register again
  for (const AsmCall& c : inlineAsmCalls(em)) {
    if (unsigned id = nvptx::matchSpecialRegisterRead(c.text, c.constraints)) {
      llvm::IRBuilder<> b(c.call);
      c.call->replaceAllUsesWith(b.CreateIntrinsic(static_cast<llvm::Intrinsic::ID>(id), {}));
      c.call->eraseFromParent();
    }
  }
}

}  // namespace tessera::codegen::emu
