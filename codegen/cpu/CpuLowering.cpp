// Tile IR -> LLVM IR for the host CPU: the module (per-program body and
// program-loop entry) and the public entry, lowerToLLVM. The lowering
// itself is the Lowering class of CpuLowerImpl.h.
#include "codegen/cpu/CpuLowering.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <algorithm>
#include <map>

#include "codegen/cpu/CpuDot.h"
#include "codegen/cpu/CpuLowerImpl.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::cpu {

namespace {

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / double(1 << 20));
  return buf;
}

/// A ResourceError when the tiles one program keeps on the stack pass
/// kStackBudget: the largest ops' shares, each with the user's line.
void checkStack(const ir::Function& f, const std::vector<std::pair<uint64_t, const ir::Op*>>& use, uint64_t total) {
  if (total <= kStackBudget) return;
  std::map<const ir::Op*, uint64_t> perOp;
  for (const auto& [bytes, op] : use) perOp[op] += bytes;
  std::vector<std::pair<uint64_t, const ir::Op*>> largest;
  for (const auto& [op, bytes] : perOp) largest.emplace_back(bytes, op);
  std::sort(largest.begin(), largest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const ir::Op* first = largest.front().second;
  std::string where = first && first->loc().known() ? first->loc().str() : "@" + f.name();
  std::string items;
  for (size_t i = 0; i < largest.size() && i < 4; ++i) {
    const ir::Op* op = largest[i].second;
    items += "  " +
             (op ? std::string(op->name()) + (op->numResults() ? " " + op->result(0)->type().str() : std::string())
                 : std::string("the entry")) +
             (op && op->loc().known() ? " at " + op->loc().str() : std::string()) + ": " +
             std::to_string(largest[i].first) + " bytes\n";
  }
  throw ResourceError(where + ": error: one program of '" + f.name() + "' keeps " + std::to_string(total) + " bytes (" +
                      mib(total) + ") of tiles on the stack of the CPU thread that runs it, above the " +
                      mib(kStackBudget) + " a CPU program may use:\n" + items +
                      "  suggestion: smaller tiles (a smaller BLOCK), or split the work over more programs");
}

}  // namespace

namespace detail {

// ===================================================================== module

void Lowering::run(const std::string& entryName) {
  plan();
  llvm::Type* i32 = b_.getInt32Ty();
  std::vector<llvm::Type*> params;
  for (unsigned i = 0; i < fn_.numArgs(); ++i) params.push_back(elemTy(fn_.arg(i)->type()));
  for (int i = 0; i < 6; ++i) params.push_back(i32);
  if (checkedOps_) params.push_back(b_.getPtrTy());  // the BoundsCheckRecord
  if (probes_) params.push_back(b_.getPtrTy());      // the profile buffer
  auto* bodyTy = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  auto* body = llvm::Function::Create(bodyTy, llvm::Function::InternalLinkage, "program." + fn_.name(), mod_);
  auto* entryTy =
      llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy(), b_.getInt64Ty(), b_.getInt64Ty(), b_.getPtrTy()}, false);
  auto* entry = llvm::Function::Create(entryTy, llvm::Function::ExternalLinkage, entryName, mod_);
  for (llvm::Function* f : {body, entry}) {
    f->addFnAttr("target-cpu", tgt_.cpu);
    if (!tgt_.features.empty()) f->addFnAttr("target-features", tgt_.features);
    f->addFnAttr("prefer-vector-width", std::to_string(tgt_.vectorBits));
    f->addFnAttr("min-legal-vector-width", std::to_string(tgt_.vectorBits));
    f->addFnAttr(llvm::Attribute::NoUnwind);
  }
  body->addFnAttr(llvm::Attribute::AlwaysInline);

  // ---- the per-program body
  allocaBlock_ = llvm::BasicBlock::Create(ctx_, "allocas", body);
  auto* start = llvm::BasicBlock::Create(ctx_, "start", body);
  b_.SetInsertPoint(start);
  for (unsigned i = 0; i < fn_.numArgs(); ++i) {
    body->getArg(i)->setName(fn_.arg(i)->nameHint);
    scalars_[fn_.arg(i)] = body->getArg(i);
  }
  for (int i = 0; i < 3; ++i) {
    pid_[i] = body->getArg(fn_.numArgs() + i);
    grid_[i] = body->getArg(fn_.numArgs() + 3 + i);
  }
  if (checkedOps_) {
    record_ = body->getArg(fn_.numArgs() + 6);
    llvm::Value* extents = b_.CreateLoad(b_.getPtrTy(), record_);  // BoundsCheckRecord::kExtents == 0
    argBase_.assign(fn_.numArgs(), nullptr);
    argExtent_.assign(fn_.numArgs(), nullptr);
    for (unsigned i = 0; i < fn_.numArgs(); ++i) {
      if (!fn_.arg(i)->type().isPointer()) continue;
      argBase_[i] = b_.CreatePtrToInt(body->getArg(i), b_.getInt64Ty());
      argExtent_[i] = b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), extents, i));
    }
  }
  if (probes_) initProfile(body->getArg(fn_.numArgs() + 6 + (checkedOps_ ? 1 : 0)));
  emitBlock(fn_.body());
  TS_ASSERT(b_.GetInsertBlock() == nullptr, "kernel body does not end in return");
  llvm::IRBuilder<>(allocaBlock_).CreateBr(start);

  // ---- the entry: for id in [begin, end): body(args..., pid(id), grid)
  auto* e0 = llvm::BasicBlock::Create(ctx_, "entry", entry);
  auto* loop = llvm::BasicBlock::Create(ctx_, "programs", entry);
  auto* done = llvm::BasicBlock::Create(ctx_, "done", entry);
  b_.SetInsertPoint(e0);
  llvm::Value* args = entry->getArg(0);
  llvm::Value* begin = entry->getArg(1);
  llvm::Value* end = entry->getArg(2);
  llvm::Value* gridP = entry->getArg(3);
  std::vector<llvm::Value*> callArgs;
  for (unsigned i = 0; i < fn_.numArgs(); ++i) {
    const ir::Type& t = fn_.arg(i)->type();
    if (!t.isScalar() && !t.isPointer())
      throw CompileError("kernel argument " + std::to_string(i) + " of @" + fn_.name() + " has type " + t.str() +
                         "; kernel arguments must be scalars or pointers");
    llvm::Value* slot = b_.CreateLoad(b_.getPtrTy(), b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), args, i));
    llvm::Value* v = b_.CreateLoad(t.isPointer() ? b_.getPtrTy() : memTy(t.dtype()), slot);
    if (t.isScalar() && t.dtype() == DType::I1) v = b_.CreateICmpNE(v, b_.getInt8(0));
    callArgs.push_back(v);
  }
  llvm::Value* g[3];
  for (int i = 0; i < 3; ++i) g[i] = b_.CreateLoad(i32, b_.CreateConstInBoundsGEP1_64(i32, gridP, i));
  llvm::Value* gx = b_.CreateZExt(g[0], b_.getInt64Ty());
  llvm::Value* gxy = b_.CreateMul(gx, b_.CreateZExt(g[1], b_.getInt64Ty()));
  b_.CreateCondBr(b_.CreateICmpSLT(begin, end), loop, done);
  b_.SetInsertPoint(loop);
  llvm::PHINode* id = b_.CreatePHI(b_.getInt64Ty(), 2, "id");
  id->addIncoming(begin, e0);
  llvm::Value* px = b_.CreateURem(id, gx);
  llvm::Value* py = b_.CreateURem(b_.CreateUDiv(id, gx), b_.CreateZExt(g[1], b_.getInt64Ty()));
  llvm::Value* pz = b_.CreateUDiv(id, gxy);
  std::vector<llvm::Value*> full = callArgs;
  for (llvm::Value* p : {px, py, pz}) full.push_back(b_.CreateTrunc(p, i32));
  for (int i = 0; i < 3; ++i) full.push_back(g[i]);
  // Hidden entries of `args` after the arguments: the record, the buffer.
  unsigned hidden = fn_.numArgs();
  if (checkedOps_)
    full.push_back(b_.CreateLoad(b_.getPtrTy(), b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), args, hidden++)));
  if (probes_) full.push_back(b_.CreateLoad(b_.getPtrTy(), b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), args, hidden)));
  b_.CreateCall(body, full);
  llvm::Value* next = b_.CreateAdd(id, b_.getInt64(1));
  id->addIncoming(next, loop);
  b_.CreateCondBr(b_.CreateICmpSLT(next, end), loop, done);
  b_.SetInsertPoint(done);
  // Streaming stores are weakly ordered (they bypass the store buffer's
  // ordering): an sfence makes them globally visible before the launch
  // reports completion to another thread through ordinary synchronisation.
  if (usedStreaming_) {
    if (llvm::Triple(tgt_.triple).isX86())
      b_.CreateCall(llvm::Intrinsic::getOrInsertDeclaration(&mod_, llvm::Intrinsic::x86_sse_sfence));
    else
      b_.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
  }
  b_.CreateRetVoid();
}

}  // namespace detail

std::unique_ptr<llvm::Module> lowerToLLVM(const ir::Function& f, llvm::LLVMContext& ctx, const CpuTargetInfo& target,
                                          const llvm::DataLayout& layout, const std::string& entryName,
                                          std::vector<std::string>* checkedOps, uint64_t* stackBytes,
                                          std::vector<std::string>* profileScopes) {
  auto m = std::make_unique<llvm::Module>(f.name(), ctx);
  m->setTargetTriple(llvm::Triple(target.triple));
  m->setDataLayout(layout);
  detail::Lowering l(f, ctx, *m, target, checkedOps, profileScopes != nullptr);
  l.run(entryName);
  if (profileScopes) *profileScopes = l.profileScopes();
  uint64_t total = 0;
  for (const auto& [bytes, op] : l.stackUse()) total += bytes;
  checkStack(f, l.stackUse(), total);
  if (stackBytes) *stackBytes = total;
  legalizeBf16MaskedMemory(*m);  // CpuDot.h: x86 has no bf16 masked moves
  return m;
}

}  // namespace tessera::codegen::cpu
