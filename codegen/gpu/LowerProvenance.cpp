// Provenance of the emitted code: the `!tessera.op` tags, debug locations
// and `!tessera.ops` table by which the SIMT emulator names tile ops (see
// Lower::tag in LowerImpl.h).

#include <string>

#include <llvm/BinaryFormat/Dwarf.h>
#include <llvm/IR/DIBuilder.h>
#include <llvm/IR/Metadata.h>

#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

void Lower::tag(llvm::Instruction* i) {
  if (!opTag_) return;
  bool wanted = llvm::isa<llvm::LoadInst, llvm::StoreInst, llvm::AtomicRMWInst, llvm::AtomicCmpXchgInst>(i);
  if (auto* call = llvm::dyn_cast<llvm::CallBase>(i)) {
    // Inline assembly: the predicated global accesses (GpuTargetInfo).
    if (call->isInlineAsm()) wanted = true;
    if (const llvm::Function* callee = call->getCalledFunction())
      // Convergent calls (barriers, collectives) and intrinsics that access
      // memory (cp.async): the emulator names them in its reports.
      wanted = callee->isConvergent() || (callee->isIntrinsic() && !callee->doesNotAccessMemory());
  }
  if (wanted) i->setMetadata(opKind_, opTag_);
}

void Lower::setCurrentOp(const ir::Op& op) {
  curOp_ = &op;
  setTag(op, "");
}

void Lower::setTag(const ir::Op& op, const std::string& what) {
  std::string s = ir::userName(op);
  if (!what.empty()) s += " " + what;
  uint32_t line = 0;
  if (op.loc().known()) {
    s += " @ " + op.loc().file + ":" + std::to_string(op.loc().line);
    line = op.loc().line;
  }
  opTag_ = llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, s)});
  if (!sp_) return;
  auto [it, fresh] = tagIds_.try_emplace(s, 0);
  if (fresh) {
    // DILocation columns are 16 bits; past that, tags are not told apart
    // by location (column 0 is in no table entry).
    if (tagTable_.size() + 1 < (1u << 16)) {
      it->second = static_cast<unsigned>(tagTable_.size() + 1);
      tagTable_.push_back(llvm::MDNode::get(
          ctx_, {llvm::ConstantAsMetadata::get(b_.getInt32(line)),
                 llvm::ConstantAsMetadata::get(b_.getInt32(it->second)), llvm::MDString::get(ctx_, s)}));
    }
  }
  b_.SetCurrentDebugLocation(llvm::DILocation::get(ctx_, line, it->second, sp_));
}

void Lower::startProvenance(llvm::Function* fn) {
  di_ = std::make_unique<llvm::DIBuilder>(m_);
  std::string file = f_.loc().known() ? f_.loc().file : "<tessera>";
  llvm::DIFile* df = di_->createFile(file, "");
  di_->createCompileUnit(llvm::dwarf::DW_LANG_C_plus_plus_14, df, "tessera", /*isOptimized=*/true, "", 0, "",
                         llvm::DICompileUnit::DebugEmissionKind::NoDebug);
  sp_ = di_->createFunction(df, f_.name(), fn->getName(), df, f_.loc().line,
                            di_->createSubroutineType(di_->getOrCreateTypeArray({})), f_.loc().line,
                            llvm::DINode::FlagZero, llvm::DISubprogram::SPFlagDefinition);
  fn->setSubprogram(sp_);
}

void Lower::finishProvenance() {
  di_->finalize();
  // Without the version flag, reading the module back (the emulator
  // parses the optimised text) silently drops all debug locations.
  m_.addModuleFlag(llvm::Module::Warning, "Debug Info Version", llvm::DEBUG_METADATA_VERSION);
  llvm::NamedMDNode* table = m_.getOrInsertNamedMetadata("tessera.ops");
  for (llvm::MDNode* n : tagTable_) table->addOperand(n);
}

}  // namespace tessera::codegen::gpu_lower
