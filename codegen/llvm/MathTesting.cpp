// Host evaluation of the vector math emitters, for accuracy tests: the
// emitted IR goes through the same -O3 pipeline and host code generation as
// a CPU kernel, so what is measured is what kernels get.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/llvm/Jit.h"
#include "codegen/llvm/LLVMSupport.h"
#include "codegen/llvm/VectorMath.h"
#include "tessera/codegen/Testing.h"
#include "codegen/llvm/HostIsa.h"
#include "tessera/support/Error.h"
#include "tessera/support/Sanitizers.h"

namespace tessera::codegen::testing {
namespace {

using Emitter = llvm::Value* (*)(llvm::IRBuilderBase&, llvm::Value*);

Emitter lookupEmitter(const std::string& fn) {
  if (fn == "exp") return emitExpF32;
  if (fn == "exp2") return emitExp2F32;
  if (fn == "log") return emitLogF32;
  if (fn == "log2") return emitLog2F32;
  if (fn == "tanh") return emitTanhF32;
  if (fn == "erf") return emitErfF32;
  return nullptr;
}

constexpr const char* kEntry = "tessera_math_eval";

/// void tessera_math_eval(ptr in, ptr out, i64 n): for i in [0, n) step W,
/// out[i..i+W) = fn(in[i..i+W)). n is a positive multiple of W.
std::unique_ptr<llvm::Module> buildModule(llvm::LLVMContext& ctx, Emitter emit, unsigned width) {
  auto m = std::make_unique<llvm::Module>("tessera_math_eval", ctx);
  llvm::IRBuilder<> b(ctx);
  llvm::Type* ptrTy = b.getPtrTy();
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Type* vty =
      width == 1 ? b.getFloatTy() : static_cast<llvm::Type*>(llvm::FixedVectorType::get(b.getFloatTy(), width));
  auto* fnTy = llvm::FunctionType::get(b.getVoidTy(), {ptrTy, ptrTy, i64}, false);
  auto* f = llvm::Function::Create(fnTy, llvm::Function::ExternalLinkage, kEntry, m.get());
  llvm::Value* in = f->getArg(0);
  llvm::Value* out = f->getArg(1);
  llvm::Value* n = f->getArg(2);

  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* loop = llvm::BasicBlock::Create(ctx, "loop", f);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", f);
  b.SetInsertPoint(entry);
  b.CreateBr(loop);

  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(b.getInt64(0), entry);
  llvm::Value* v = b.CreateAlignedLoad(vty, b.CreateGEP(b.getFloatTy(), in, i), llvm::Align(4));
  llvm::Value* r = emit(b, v);
  TS_ASSERT(r->getType() == vty, "math emitter changed the value type");
  b.CreateAlignedStore(r, b.CreateGEP(b.getFloatTy(), out, i), llvm::Align(4));
  llvm::Value* next = b.CreateAdd(i, b.getInt64(width));
  i->addIncoming(next, loop);
  b.CreateCondBr(b.CreateICmpULT(next, n), loop, exit);

  b.SetInsertPoint(exit);
  b.CreateRetVoid();

  std::string msg;
  llvm::raw_string_ostream os(msg);
  TS_ASSERT(!llvm::verifyModule(*m, &os), "math evaluation module is invalid: " + os.str());
  return m;
}

void optimize(llvm::Module& m, llvm::TargetMachine& tm) { runDefaultPipeline(m, tm, 3); }

}  // namespace

TESSERA_CALLS_JIT_CODE std::vector<float> evalUnaryF32(const std::string& fn, const std::vector<float>& in,
                                                       unsigned vectorWidth, const std::string& cpu) {
  Emitter emit = lookupEmitter(fn);
  if (!emit)
    throw CompileError("evalUnaryF32: unknown math function '" + fn + "' (expected exp, exp2, log, log2, tanh or erf)");
  if (vectorWidth == 0 || vectorWidth > 1024)
    throw CompileError("evalUnaryF32: vector width " + std::to_string(vectorWidth) + " is out of range (1..1024)");
  if (in.empty()) return {};
  initLLVM();

  CpuTargetInfo t = selectCpuTarget(cpu);
  if (!t.notRunnable.empty()) throw CompileError("evalUnaryF32: cpu " + cpu + ": " + t.notRunnable);
  std::unique_ptr<llvm::TargetMachine> tm = cpu::createTargetMachine(t, 3);

  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> m = buildModule(*ctx, emit, vectorWidth);
  m->setTargetTriple(tm->getTargetTriple());
  m->setDataLayout(tm->createDataLayout());
  optimize(*m, *tm);
  cpu::JitResult jit = cpu::jitObject(cpu::emitObject(*m, *tm), kEntry);
  auto* run = jit.entry.toPtr<void (*)(const float*, float*, int64_t)>();

  // Pad to whole vectors; the padding is evaluated and dropped.
  const size_t padded = (in.size() + vectorWidth - 1) / vectorWidth * vectorWidth;
  std::vector<float> src(in), dst(padded);
  src.resize(padded, 1.0f);
  run(src.data(), dst.data(), static_cast<int64_t>(padded));
  dst.resize(in.size());
  return dst;
}

}  // namespace tessera::codegen::testing
