// Shared state of the emulator rewrite steps: the op-name table and hook
// declarations.
#include <map>
#include <optional>
#include <type_traits>
#include <vector>

#include <llvm/IR/DebugInfo.h>
#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/ModuleSlotTracker.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/emu/EmuPasses.h"
#include "tessera/support/EmuAbi.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::emu {

namespace {
// The instruction's text without trailing metadata attachments (", !tbaa
// !5" says nothing to a reader of a race report).
std::string trimText(std::string s) {
  size_t md = s.find(", !");
  if (md != std::string::npos) s.resize(md);
  size_t b = s.find_first_not_of(' ');
  return b == std::string::npos ? s : s.substr(b);
}

bool mayGetOpId(const llvm::Instruction& i) {
  return llvm::isa<llvm::LoadInst, llvm::StoreInst, llvm::AtomicRMWInst, llvm::AtomicCmpXchgInst, llvm::CallBase>(i);
}
}  // namespace

EmuModule::EmuModule(llvm::Module& mod, bool isAmd, unsigned warp)
    : m(mod), ctx(mod.getContext()), amd(isAmd), warpSize(warp), gpuDL(mod.getDataLayout()) {
  // Tessera's GPU lowering gives every instruction a DILocation whose
  // column identifies its op and lists the op texts in `!tessera.ops`
  // (!{i32 line, i32 column, !"text"}): an access the optimiser rebuilt
  // without its `!tessera.op` is named from there.
  std::map<std::pair<unsigned, unsigned>, std::string> byLoc;
  if (llvm::NamedMDNode* table = m.getNamedMetadata("tessera.ops")) {
    for (llvm::MDNode* n : table->operands()) {
      if (n->getNumOperands() != 3) continue;
      auto* line = llvm::mdconst::dyn_extract_or_null<llvm::ConstantInt>(n->getOperand(0));
      auto* col = llvm::mdconst::dyn_extract_or_null<llvm::ConstantInt>(n->getOperand(1));
      auto* text = llvm::dyn_cast_or_null<llvm::MDString>(n->getOperand(2));
      if (line && col && text && col->getZExtValue() != 0)
        byLoc[{static_cast<unsigned>(line->getZExtValue()), static_cast<unsigned>(col->getZExtValue())}] =
            text->getString().str();
    }
  }
  llvm::ModuleSlotTracker mst(&m, /*ShouldInitializeAllMetadata=*/false);
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    mst.incorporateFunction(f);
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb) {
        if (!mayGetOpId(i) || i.getMetadata("tessera.op")) continue;
        const llvm::DebugLoc& dl = i.getDebugLoc();
        if (dl && !byLoc.empty()) {
          // Merged locations (two accesses folded into one) have column 0
          // or another line and match no entry: named as instructions.
          auto it = byLoc.find({dl.getLine(), dl.getCol()});
          if (it != byLoc.end()) {
            texts_[&i] = it->second;
            continue;
          }
        }
        std::string s;
        llvm::raw_string_ostream os(s);
        i.print(os, mst);
        std::string name = trimText(s) + " in @" + f.getName().str();
        if (dl && !dl->getFilename().empty())
          name += " @ " + dl->getFilename().str() + ":" + std::to_string(dl.getLine());
        texts_[&i] = std::move(name);
      }
  }
  // Every name is taken: the host module carries no debug info, so the
  // rewrites (which move bodies into new functions) need not keep
  // subprograms and locations consistent, and the JIT sees plain code.
  llvm::StripDebugInfo(m);
  if (llvm::NamedMDNode* table = m.getNamedMetadata("tessera.ops")) m.eraseNamedMetadata(table);
}

int32_t EmuModule::opId(const llvm::Instruction& inst) {
  std::string name;
  if (llvm::MDNode* md = inst.getMetadata("tessera.op")) {
    if (md->getNumOperands() > 0)
      if (auto* s = llvm::dyn_cast<llvm::MDString>(md->getOperand(0))) name = s->getString().str();
  }
  if (name.empty()) {
    // Texts (and debug locations) were taken before any rewrite; an
    // instruction a rewrite created is described as it is now.
    auto it = texts_.find(&inst);
    name = it != texts_.end() ? it->second : describe(inst);
  }
  opNames.push_back(std::move(name));
  return static_cast<int32_t>(opNames.size() - 1);
}

void EmuModule::nameAs(llvm::Instruction& to, const llvm::Instruction& from) {
  if (llvm::MDNode* md = from.getMetadata("tessera.op")) {
    to.setMetadata("tessera.op", md);
    return;
  }
  auto it = texts_.find(&from);
  if (it == texts_.end()) return;
  std::string text = std::move(it->second);
  // `from` is about to be erased: a later instruction at its address must
  // not inherit its text.
  texts_.erase(it);
  texts_[&to] = std::move(text);
}

namespace {
// The LLVM type of a C type of the hook table: every pointer is a flat
// (address space 0) host pointer once the kernel runs on the machine.
template <typename T>
llvm::Type* llvmTypeOf(llvm::LLVMContext& ctx) {
  if constexpr (std::is_void_v<T>)
    return llvm::Type::getVoidTy(ctx);
  else if constexpr (std::is_pointer_v<T>)
    return llvm::PointerType::get(ctx, 0);
  else {
    static_assert(std::is_integral_v<T>, "hook types are integers, pointers or void");
    return llvm::Type::getIntNTy(ctx, 8 * sizeof(T));
  }
}

template <typename... Ts>
std::vector<llvm::Type*> paramTypes(llvm::LLVMContext& ctx) {
  return {llvmTypeOf<Ts>(ctx)...};
}

struct HookSignature {
  bool pure;
  llvm::FunctionType* type;
};

enum HookEffects : bool { Effects = false, Pure = true };

std::optional<HookSignature> hookSignature(llvm::StringRef name, llvm::LLVMContext& ctx) {
#define TS_EMU_HOOK(hook, effects, ret, ...) \
  if (name == "tessera_emu_" #hook)          \
    return HookSignature{effects, llvm::FunctionType::get(llvmTypeOf<ret>(ctx), paramTypes<__VA_ARGS__>(ctx), false)};
#include "tessera/support/EmuHooks.def"
  return std::nullopt;
}
}  // namespace

llvm::FunctionCallee EmuModule::hook(llvm::StringRef name) {
  std::optional<HookSignature> sig = hookSignature(name, ctx);
  TS_ASSERT(sig, "emulator rewrite calls " + name.str() + ", which is not in EmuHooks.def");
  llvm::FunctionCallee c = m.getOrInsertFunction(name, sig->type);
  if (auto* f = llvm::dyn_cast<llvm::Function>(c.getCallee())) {
    if (sig->pure) {
      // Ids, sizes and the shared base are constant for the life of a GPU
      // thread: letting the optimiser CSE and hoist them matters, as the
      // GPU code re-reads special registers freely.
      f->setDoesNotAccessMemory();
      f->setDoesNotThrow();
      f->setWillReturn();
    } else {
      // Barriers and warp collectives must not be moved across control
      // flow or duplicated into divergent paths, exactly as on the GPU.
      f->setConvergent();
    }
  }
  return c;
}

std::string describe(const llvm::Instruction& inst) {
  std::string s;
  llvm::raw_string_ostream os(s);
  inst.print(os);
  s = trimText(s);
  if (inst.getFunction()) s += " in @" + inst.getFunction()->getName().str();
  return s;
}

}  // namespace tessera::codegen::emu
