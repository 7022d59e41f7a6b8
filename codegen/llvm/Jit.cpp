#include "codegen/llvm/Jit.h"

#include <atomic>
#include <map>
#include <mutex>

#include <llvm/ExecutionEngine/Orc/AbsoluteSymbols.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/SmallVectorMemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include "codegen/llvm/LLVMSupport.h"

namespace tessera::codegen::cpu {

namespace {
llvm::CodeGenOptLevel cgLevel(int optLevel) {
  switch (optLevel) {
    case 0: return llvm::CodeGenOptLevel::None;
    case 1: return llvm::CodeGenOptLevel::Less;
    case 2: return llvm::CodeGenOptLevel::Default;
    default: return llvm::CodeGenOptLevel::Aggressive;
  }
}

// One JIT for the process: creating an LLJIT costs milliseconds, a
// JITDylib per kernel almost nothing. Never destroyed, so artifacts that
// outlive static destruction can still release their dylibs safely. Every
// user hands it object code, so its own TargetMachine never generates code.
llvm::orc::LLJIT& sharedJit() {
  static llvm::orc::LLJIT* jit = [] {
    initLLVM();
    auto jtmb =
        check<InternalError>(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host for the JIT");
    // Kernels arrive as object files (code generation happens in the
    // compiling thread with its cached TargetMachine); the JIT only links.
    // Linking may happen from several threads at once, each in its own
    // JITDylib: the session serialises its shared state, and the default
    // in-place dispatcher links on the thread that asked. Not the
    // concurrent-compilation dispatcher: it starts a detached thread per
    // link whose last reference to the JITDylib can still be dropping when
    // the lookup has returned and the kernel is already being freed.
    auto j = check<InternalError>(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(),
                                  "creating the JIT");
    return j.release();
  }();
  return *jit;
}

struct JitOwner {
  llvm::orc::JITDylib* jd = nullptr;
  ~JitOwner() {
    if (!jd) return;
    // Frees the kernel's code; a failure here cannot be reported (this runs
    // in a destructor) and only leaks memory.
    llvm::consumeError(sharedJit().getExecutionSession().removeJITDylib(*jd));
  }
};
}  // namespace

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const CpuTargetInfo& t, int optLevel) {
  initLLVM();
  llvm::Triple triple(t.triple);
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) throw InternalError("no LLVM target for host triple " + t.triple + ": " + err);
  llvm::TargetOptions to;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, t.cpu, t.features, to, llvm::Reloc::PIC_, std::nullopt, cgLevel(optLevel)));
  if (!tm) throw InternalError("cannot create a TargetMachine for " + t.triple + " / " + t.cpu);
  return tm;
}

llvm::TargetMachine& cachedTargetMachine(const CpuTargetInfo& t, int optLevel) {
  // Creating a TargetMachine costs around a millisecond (subtarget tables,
  // feature parsing); a compile needs one for the data layout, the
  // optimisation pipeline and code generation. A TargetMachine must not
  // generate code for two modules at once, so each thread keeps its own.
  thread_local std::map<std::string, std::unique_ptr<llvm::TargetMachine>> cache;
  std::string key = t.triple + "|" + t.cpu + "|" + t.features + "|" + std::to_string(optLevel);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, createTargetMachine(t, optLevel)).first;
  return *it->second;
}

void optimizeModule(llvm::Module& m, llvm::TargetMachine& tm, int optLevel) {
  runDefaultPipeline(m, tm, optLevel, /*vectorize=*/optLevel >= 2);
}

void optimizeKernel(llvm::Module& m, llvm::TargetMachine& tm, int optLevel) {
  if (optLevel == 0) return optimizeModule(m, tm, 0);
  // The lowering emits vector code already: loop and SLP vectorisation have
  // nothing to do, and unrolling the chunk loops of 1024-element tiles makes
  // code generation several times slower without moving memory-bound
  // kernels any faster. What the lowered code needs: inline the program
  // body into the entry loop, promote the reduction accumulators to
  // registers, fold the index arithmetic, hoist splats and pointer bases out
  // of the chunk loops. This pipeline costs about 1 ms where the default O3
  // one costs 10-20 ms (plus more in codegen for the unrolled code).
  static const char* kPipeline =
      "always-inline,function(sroa,early-cse<memssa>,simplifycfg,loop-mssa(licm),"
      "instcombine<no-verify-fixpoint>,simplifycfg),globaldce";
  runPipeline(m, tm, kPipeline);
}

std::string emitAssembly(const llvm::Module& m, llvm::TargetMachine& tm) {
  return emitFile(m, tm, llvm::CodeGenFileType::AssemblyFile);
}

std::unique_ptr<llvm::MemoryBuffer> emitObject(llvm::Module& m, llvm::TargetMachine& tm) {
  return llvm::MemoryBuffer::getMemBufferCopy(emitFile(m, tm, llvm::CodeGenFileType::ObjectFile),
                                              m.getModuleIdentifier() + ".o");
}

std::unique_ptr<llvm::MemoryBuffer> emitObjectReusingPipeline(llvm::Module& m, llvm::TargetMachine& tm) {
  const std::string name = m.getModuleIdentifier() + ".o";
  return llvm::MemoryBuffer::getMemBufferCopy(emitFileReusingPipeline(m, tm, llvm::CodeGenFileType::ObjectFile), name);
}

JitResult jitObject(std::unique_ptr<llvm::MemoryBuffer> obj, const std::string& entryName,
                    const std::vector<std::pair<std::string, void*>>& symbols) {
  static std::atomic<uint64_t> counter{0};
  llvm::orc::LLJIT& jit = sharedJit();
  auto owner = std::make_shared<JitOwner>();
  std::string name = "tessera." + entryName + "." + std::to_string(counter++);
  owner->jd = &check<InternalError>(jit.createJITDylib(name), "creating a JITDylib");
  if (!symbols.empty()) {
    llvm::orc::SymbolMap syms;
    for (auto& [n, addr] : symbols)
      syms[jit.mangleAndIntern(n)] = {llvm::orc::ExecutorAddr::fromPtr(addr),
                                      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
    check<InternalError>(owner->jd->define(llvm::orc::absoluteSymbols(std::move(syms))),
                         "binding symbols of " + entryName);
  }
  check(jit.addObjectFile(*owner->jd, std::move(obj)), "adding kernel object to the JIT");
  auto addr = check(jit.lookup(*owner->jd, entryName), "linking " + entryName);
  JitResult r;
  r.entry = addr;
  r.owner = owner;
  return r;
}

}  // namespace tessera::codegen::cpu
