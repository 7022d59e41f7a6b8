// Host evaluation of the vector math emitters (f32 and f64), for accuracy
// tests: the
// emitted IR goes through the same -O3 pipeline and host code generation as
// a CPU kernel, so what is measured is what kernels get.
#include <memory>
#include <optional>
#include <type_traits>
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

constexpr const char* kEntry = "tessera_math_eval";

/// The op an evaluation name stands for: a transcendental op of Ops.def
/// (every one has a VectorMath emitter), with its arity.
ir::OpCode lookupOp(const std::string& fn, unsigned arity, const char* api) {
  std::optional<ir::OpCode> op = ir::parseOpName(fn);
  if (!op || !ir::isTranscendental(*op) || (*op == ir::OpCode::Pow) != (arity == 2))
    throw CompileError(std::string(api) + ": unknown math function '" + fn + "' (expected " +
                       (arity == 2 ? "pow" : "exp, exp2, log, log2, tanh, erf, sin, cos, sigmoid, log1p or expm1") +
                       ")");
  return *op;
}

/// void tessera_math_eval(ptr out, ptr in0 [, ptr in1], i64 n): for i in
/// [0, n) step W, out[i..i+W) = op(in0[i..i+W) [, in1[i..i+W)]). n is a
/// positive multiple of W.
std::unique_ptr<llvm::Module> buildModule(llvm::LLVMContext& ctx, ir::OpCode op, unsigned arity, bool f64,
                                          unsigned width) {
  auto m = std::make_unique<llvm::Module>("tessera_math_eval", ctx);
  llvm::IRBuilder<> b(ctx);
  llvm::Type* ptrTy = b.getPtrTy();
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Type* et = f64 ? b.getDoubleTy() : b.getFloatTy();
  llvm::Type* vty = width == 1 ? et : static_cast<llvm::Type*>(llvm::FixedVectorType::get(et, width));
  std::vector<llvm::Type*> params(1 + arity, ptrTy);
  params.push_back(i64);
  auto* fnTy = llvm::FunctionType::get(b.getVoidTy(), params, false);
  auto* f = llvm::Function::Create(fnTy, llvm::Function::ExternalLinkage, kEntry, m.get());
  llvm::Value* out = f->getArg(0);
  llvm::Value* n = f->getArg(1 + arity);

  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* loop = llvm::BasicBlock::Create(ctx, "loop", f);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", f);
  b.SetInsertPoint(entry);
  b.CreateBr(loop);

  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(b.getInt64(0), entry);
  const llvm::Align align(f64 ? 8 : 4);
  std::vector<llvm::Value*> args;
  for (unsigned k = 0; k < arity; ++k)
    args.push_back(b.CreateAlignedLoad(vty, b.CreateGEP(et, f->getArg(1 + k), i), align));
  llvm::Value* r = emitVectorMath(b, op, args);
  TS_ASSERT(r->getType() == vty, "math emitter changed the value type");
  b.CreateAlignedStore(r, b.CreateGEP(et, out, i), align);
  llvm::Value* next = b.CreateAdd(i, b.getInt64(width));
  // sin and cos may have split the loop body: the back edge leaves from
  // wherever the emitter left the builder.
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpULT(next, n), loop, exit);

  b.SetInsertPoint(exit);
  b.CreateRetVoid();

  std::string msg;
  llvm::raw_string_ostream os(msg);
  TS_ASSERT(!llvm::verifyModule(*m, &os), "math evaluation module is invalid: " + os.str());
  return m;
}

template <typename T>
TESSERA_CALLS_JIT_CODE std::vector<T> evaluate(const char* api, const std::string& fn,
                                               const std::vector<const std::vector<T>*>& ins, unsigned vectorWidth,
                                               const std::string& cpu) {
  const unsigned arity = static_cast<unsigned>(ins.size());
  ir::OpCode op = lookupOp(fn, arity, api);
  if (vectorWidth == 0 || vectorWidth > 1024)
    throw CompileError(std::string(api) + ": vector width " + std::to_string(vectorWidth) +
                       " is out of range (1..1024)");
  for (const auto* in : ins)
    if (in->size() != ins[0]->size()) throw CompileError(std::string(api) + ": the operands differ in length");
  if (ins[0]->empty()) return {};
  initLLVM();

  CpuTargetInfo t = selectCpuTarget(cpu);
  if (!t.notRunnable.empty()) throw CompileError(std::string(api) + ": cpu " + cpu + ": " + t.notRunnable);
  std::unique_ptr<llvm::TargetMachine> tm = cpu::createTargetMachine(t, 3);

  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> m = buildModule(*ctx, op, arity, std::is_same_v<T, double>, vectorWidth);
  m->setTargetTriple(tm->getTargetTriple());
  m->setDataLayout(tm->createDataLayout());
  runDefaultPipeline(*m, *tm, 3);
  cpu::JitResult jit = cpu::jitObject(cpu::emitObject(*m, *tm), kEntry);

  // Pad to whole vectors; the padding is evaluated and dropped.
  const size_t size = ins[0]->size();
  const size_t padded = (size + vectorWidth - 1) / vectorWidth * vectorWidth;
  std::vector<std::vector<T>> src;
  for (const auto* in : ins) {
    src.push_back(*in);
    src.back().resize(padded, T(1));
  }
  std::vector<T> dst(padded);
  if (arity == 1)
    jit.entry.toPtr<void (*)(T*, const T*, int64_t)>()(dst.data(), src[0].data(), static_cast<int64_t>(padded));
  else
    jit.entry.toPtr<void (*)(T*, const T*, const T*, int64_t)>()(dst.data(), src[0].data(), src[1].data(),
                                                                 static_cast<int64_t>(padded));
  dst.resize(size);
  return dst;
}

}  // namespace

std::vector<float> evalUnaryF32(const std::string& fn, const std::vector<float>& in, unsigned vectorWidth,
                                const std::string& cpu) {
  return evaluate<float>("evalUnaryF32", fn, {&in}, vectorWidth, cpu);
}
std::vector<double> evalUnaryF64(const std::string& fn, const std::vector<double>& in, unsigned vectorWidth,
                                 const std::string& cpu) {
  return evaluate<double>("evalUnaryF64", fn, {&in}, vectorWidth, cpu);
}
std::vector<float> evalBinaryF32(const std::string& fn, const std::vector<float>& x, const std::vector<float>& y,
                                 unsigned vectorWidth, const std::string& cpu) {
  return evaluate<float>("evalBinaryF32", fn, {&x, &y}, vectorWidth, cpu);
}
std::vector<double> evalBinaryF64(const std::string& fn, const std::vector<double>& x, const std::vector<double>& y,
                                  unsigned vectorWidth, const std::string& cpu) {
  return evaluate<double>("evalBinaryF64", fn, {&x, &y}, vectorWidth, cpu);
}

}  // namespace tessera::codegen::testing
