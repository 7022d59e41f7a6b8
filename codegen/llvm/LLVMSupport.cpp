#include "codegen/llvm/LLVMSupport.h"
#include "tessera/support/Environment.h"

#include <llvm/Passes/PassBuilder.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Support/raw_ostream.h>

#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/TargetSelect.h>

namespace tessera::codegen {

namespace {
// LLVM reports unrecoverable conditions (e.g. an instruction selection
// failure) through this hook and would otherwise abort the host process.
// Throwing keeps the process alive and reports a compiler bug; LLVM's
// frames are built with unwind tables on Linux, so the exception reaches
// compile(). Not every LLVM state is consistent afterwards, which is why
// this is reported as InternalError.
void fatalHandler(void*, const char* reason, bool) { throw InternalError(std::string("LLVM fatal error: ") + reason); }
}  // namespace

void initLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    llvm::install_fatal_error_handler(fatalHandler, nullptr);
  });
}

void StageTimer::mark(const char* stage) {
  auto now = std::chrono::steady_clock::now();
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s %.2f ms\n", stage, std::chrono::duration<double, std::milli>(now - last).count());
  log += buf;
  last = now;
}

std::string printModule(const llvm::Module& m) {
  // Buffered: raw_string_ostream is unbuffered by default, one string append
  // per token (3 ms for the 4000 lines of a lowered GEMM, 1.2 ms buffered).
  std::string s;
  {
    llvm::raw_string_ostream os(s);
    os.SetBufferSize(64 * 1024);
    m.print(os, nullptr);
  }  // flushes
  return s;
}

namespace {
/// The analysis managers a new-PM run needs, registered and cross-wired.
struct Analyses {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  explicit Analyses(llvm::PassBuilder& pb) {
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
  }
};
}  // namespace

void runDefaultPipeline(llvm::Module& m, llvm::TargetMachine& tm, int optLevel, std::optional<bool> vectorize) {
  llvm::PipelineTuningOptions pto;
  if (vectorize) pto.LoopVectorization = pto.SLPVectorization = *vectorize;
  llvm::PassBuilder pb(&tm, pto);
  Analyses a(pb);
  llvm::ModulePassManager mpm;
  switch (optLevel) {
    case 0: mpm = pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0); break;
    case 1: mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O1); break;
    case 2: mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2); break;
    default: mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3); break;
  }
  mpm.run(m, a.mam);
}

void runPipeline(llvm::Module& m, llvm::TargetMachine& tm, const char* pipeline) {
  llvm::PassBuilder pb(&tm);
  Analyses a(pb);
  llvm::ModulePassManager mpm;
  check<InternalError>(pb.parsePassPipeline(mpm, pipeline), std::string("parsing the pipeline ") + pipeline);
  mpm.run(m, a.mam);
}

std::string emitFile(const llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType kind) {
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(m);
  llvm::SmallString<0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, kind))
    throw InternalError("the " + tm.getTargetTriple().str() + " TargetMachine cannot emit " +
                        (kind == llvm::CodeGenFileType::ObjectFile ? "object files" : "assembly"));
  pm.run(*copy);
  return std::string(buf.str());
}

namespace {
// One kept code generator pipeline. The legacy pass manager re-initialises
// every pass per module (doInitialization / doFinalization: the machine-module
// info and its MCContext are reset, the AsmPrinter starts a new file and
// resets its streamer), which is how one pipeline serves many modules of a
// TargetMachine; the object streamer writes into `buf`, emptied per run.
// "gpu compile: a reused code generator pipeline gives the code of a fresh
// one" (tests/codegen/gpu/gpu_compile_latency_test.cpp) compares its output
// with a fresh pipeline's over every example, kernels interleaved.
struct KeptPipeline {
  llvm::SmallString<0> buf;
  llvm::raw_svector_ostream os{buf};
  llvm::legacy::PassManager pm;
};
}  // namespace

std::string emitFileReusingPipeline(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType kind) {
  const char* env = tessera::env::get(tessera::env::Var::FreshCodegen);  // read per call: the test switches it
  const bool fresh = env && *env && std::string(env) != "0";
  auto build = [&] {
    auto p = std::make_unique<KeptPipeline>();
    if (tm.addPassesToEmitFile(p->pm, p->os, nullptr, kind))
      throw InternalError("the " + tm.getTargetTriple().str() + " TargetMachine cannot emit " +
                          (kind == llvm::CodeGenFileType::ObjectFile ? "object files" : "assembly"));
    return p;
  };
  if (fresh) {
    auto p = build();
    p->pm.run(m);
    return std::string(p->buf.str());
  }
  // Per thread, as the TargetMachines: a pipeline runs one module at a time.
  // Declared after the first TargetMachine of the thread is created, so
  // destroyed before it.
  thread_local std::map<std::pair<const llvm::TargetMachine*, int>, std::unique_ptr<KeptPipeline>> kept;
  auto key = std::make_pair(&tm, static_cast<int>(kind));
  auto it = kept.find(key);
  if (it == kept.end()) it = kept.emplace(key, build()).first;
  KeptPipeline& p = *it->second;
  p.buf.clear();
  try {
    p.pm.run(m);
  } catch (...) {
    // A run cut short (an LLVM fatal error turned exception) leaves the
    // passes mid-module: never reused.
    kept.erase(key);
    throw;
  }
  std::string out(p.buf.str());
  p.buf.clear();
  return out;
}

}  // namespace tessera::codegen
