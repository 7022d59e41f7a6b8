// The emulator compile: GPU module text -> rewritten host module -> the
// thread entry -> verify -> optimise -> ORC JIT with the hooks bound by
// address.
#include "codegen/emu/EmuCompile.h"

#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/llvm/Jit.h"
#include "codegen/emu/EmuPasses.h"
#include "codegen/llvm/HostIsa.h"
#include "codegen/llvm/LLVMSupport.h"
#include "tessera/support/Error.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

namespace {

constexpr const char* kEntryName = "tessera_emu_thread_entry";

void verifyOrThrow(const llvm::Module& m, const std::string& stage) {
  std::string msg;
  llvm::raw_string_ostream os(msg);
  if (llvm::verifyModule(m, &os))
    throw InternalError("emulator rewrite (" + stage + ") produced invalid LLVM IR:\n" + msg);
}

llvm::Function* findKernel(llvm::Module& m, bool amd) {
  llvm::Function* kernel = nullptr;
  auto take = [&](llvm::Function* f) {
    if (!f || f->isDeclaration() || f == kernel) return;
    if (kernel)
      throw CompileError("the GPU module defines more than one kernel (@" + kernel->getName().str() + ", @" +
                         f->getName().str() + "); the emulator runs one");
    kernel = f;
  };
  for (llvm::Function& f : m)
    if (f.getCallingConv() == (amd ? llvm::CallingConv::AMDGPU_KERNEL : llvm::CallingConv::PTX_Kernel)) take(&f);
  // Older NVVM IR marks kernels in !nvvm.annotations instead.
  if (llvm::NamedMDNode* ann = m.getNamedMetadata("nvvm.annotations"))
    for (llvm::MDNode* n : ann->operands()) {
      if (n->getNumOperands() < 2) continue;
      auto* kind = llvm::dyn_cast<llvm::MDString>(n->getOperand(1));
      if (!kind || kind->getString() != "kernel") continue;
      if (auto* v = llvm::dyn_cast_or_null<llvm::ValueAsMetadata>(n->getOperand(0).get()))
        take(llvm::dyn_cast<llvm::Function>(v->getValue()));
    }
  if (!kernel)
    throw CompileError(std::string("the GPU module defines no kernel (no function with the ") +
                       (amd ? "amdgpu_kernel" : "ptx_kernel") + " calling convention)");
  if (!kernel->getReturnType()->isVoidTy())
    throw CompileError("kernel @" + kernel->getName().str() + " does not return void");
  return kernel;
}

// void tessera_emu_thread_entry(void* const* args): args[i] points at the
// kernel's i-th parameter (CUDA kernelParams), or is the by-reference
// aggregate itself for byval/byref parameters.
void buildThreadEntry(llvm::Module& m, llvm::Function* kernel) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::PointerType* ptr = llvm::PointerType::get(ctx, 0);
  auto* fty = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false);
  auto* entry = llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, kEntryName, &m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", entry));
  std::vector<llvm::Value*> args;
  for (llvm::Argument& a : kernel->args()) {
    llvm::Value* slot = b.CreateConstInBoundsGEP1_64(ptr, entry->getArg(0), a.getArgNo());
    llvm::Value* p = b.CreateAlignedLoad(ptr, slot, llvm::Align(8), "arg" + std::to_string(a.getArgNo()) + ".ptr");
    if (a.hasByValAttr() || a.hasByRefAttr())
      args.push_back(p);
    else
      args.push_back(b.CreateAlignedLoad(a.getType(), p, llvm::Align(1), a.getName()));
  }
  // The call carries the kernel's parameter attributes: a byval
  // parameter's alignment (a tensor map's 64) decides where the caller
  // places its copy on the stack, which must be where the kernel reads it
  // (without it, a tensor map behind six register arguments was copied 8
  // bytes into the stack and read 64 bytes in).
  llvm::CallInst* call = b.CreateCall(kernel, args);
  const llvm::AttributeList attrs = kernel->getAttributes();
  std::vector<llvm::AttributeSet> params;
  for (unsigned i = 0; i < kernel->arg_size(); ++i) params.push_back(attrs.getParamAttrs(i));
  call->setAttributes(llvm::AttributeList::get(ctx, llvm::AttributeSet(), llvm::AttributeSet(), params));
  b.CreateRetVoid();
  // The kernel body is inlined into the entry: one call per GPU thread.
  kernel->setLinkage(llvm::GlobalValue::InternalLinkage);
}

// Both entry points: `row` (null for a hand-written module) is the
// architecture the instruction rewrite may need.
EmuKernel compile(std::unique_ptr<llvm::Module> mod, std::unique_ptr<llvm::LLVMContext> ctx, bool amd,
                  unsigned warpSize, const GpuArch* row, const std::vector<std::pair<std::string, void*>>& hooks,
                  std::vector<std::string> firstOpNames) {
  // The module dies before its context, whichever way this returns.
  struct Guard {
    std::unique_ptr<llvm::Module>& m;
    ~Guard() { m.reset(); }
  } guard{mod};
  if (amd ? (warpSize != 32 && warpSize != 64) : warpSize != 32)
    throw CompileError("warp size " + std::to_string(warpSize) + " is not valid for " + (amd ? "AMDGPU" : "NVPTX"));
  initLLVM();
  const llvm::Triple& triple = mod->getTargetTriple();
  if (amd ? triple.getArch() != llvm::Triple::amdgcn : triple.getArch() != llvm::Triple::nvptx64)
    throw CompileError("the GPU module targets '" + triple.str() + "', expected " +
                       (amd ? "amdgcn-amd-amdhsa" : "nvptx64-nvidia-cuda"));
  if (amd)
    if (auto* v = llvm::mdconst::extract_or_null<llvm::ConstantInt>(mod->getModuleFlag("amdhsa_code_object_version")))
      if (v->getZExtValue() < 500)
        throw CompileError("AMDGPU code object version " + std::to_string(v->getZExtValue() / 100) +
                           " is not supported by the emulator (hidden kernel arguments of v5 and later)");
  verifyOrThrow(*mod, "input");

  emu::EmuModule em(*mod, amd, warpSize);
  em.row = row;
  em.opNames = std::move(firstOpNames);
  em.kernel = findKernel(*mod, amd);
  em.kernelName = em.kernel->getName().str();
  uint32_t cluster[3] = {1, 1, 1};
  if (llvm::Attribute a = em.kernel->getFnAttribute("nvvm.cluster_dim"); a.isStringAttribute()) {
    llvm::SmallVector<llvm::StringRef, 3> dims;
    a.getValueAsString().split(dims, ',');
    if (dims.size() != 3) throw CompileError("nvvm.cluster_dim \"" + a.getValueAsString().str() + "\" is not x,y,z");
    for (int d = 0; d < 3; ++d)
      if (dims[d].trim().getAsInteger(10, cluster[d]))
        throw CompileError("nvvm.cluster_dim \"" + a.getValueAsString().str() + "\" is not x,y,z");
  }
  // Metadata and globals that only matter to the GPU toolchain; they also
  // reference the kernel and shared variables about to be replaced.
  for (const char* md : {"nvvm.annotations", "nvvmir.version"})
    if (llvm::NamedMDNode* n = mod->getNamedMetadata(md)) mod->eraseNamedMetadata(n);
  for (const char* g : {"llvm.used", "llvm.compiler.used"})
    if (llvm::GlobalVariable* gv = mod->getGlobalVariable(g)) gv->eraseFromParent();

  emu::rewritePredicatedAccesses(em);
  emu::rewriteBufferAccesses(em);
  emu::rewriteWarpgroupMma(em);
  emu::rewriteTma(em);
  emu::rewriteRereads(em);
  emu::instrumentMemory(em);
  emu::rewriteIntrinsics(em);
  emu::rewriteLibcalls(em);
  emu::rewriteInlineAsm(em);
  emu::lowerSharedMemory(em);
  verifyOrThrow(*mod, "hooks");

  CpuTargetInfo host = selectCpuTarget("");
  // The thread's TargetMachine and its kept code generator pipeline, as a
  // CPU compile's: building them was a millisecond or two of every
  // emulated compile.
  llvm::TargetMachine* tm = &cpu::cachedTargetMachine(host, 2);
  emu::flattenAddressSpaces(em, tm->createDataLayout(), host.triple);
  buildThreadEntry(*mod, em.kernel);
  verifyOrThrow(*mod, "host module");

  for (llvm::Function& f : *mod)
    if (f.isDeclaration() && f.getName().starts_with("tessera_emu_")) {
      bool found = false;
      for (auto& [n, addr] : hooks) found |= n == f.getName() && addr;
      if (!found) throw CompileError("hook " + f.getName().str() + " is missing from the emulator's hook table");
    }

  cpu::optimizeModule(*mod, *tm, 2);
  EmuKernel k;
  k.hostIR = printModule(*mod);
  k.opNames = std::move(em.opNames);
  k.warpSize = warpSize;
  k.amd = amd;
  k.kernelName = em.kernelName;
  k.staticSharedBytes = em.staticSharedBytes;
  k.dynamicSharedOffset = em.dynamicSharedOffset;
  std::copy(cluster, cluster + 3, k.cluster);
  k.uncheckedAccesses = em.uncheckedAccesses;

  // Code generation for the host, linked into the process's JIT with the
  // hooks and libm bound by address (the executable need not export them).
  std::vector<std::pair<std::string, void*>> symbols = emu::hostLibSymbols();
  symbols.insert(symbols.end(), hooks.begin(), hooks.end());
  cpu::JitResult jit = cpu::jitObject(cpu::emitObjectReusingPipeline(*mod, *tm), kEntryName, symbols);
  k.threadFn = jit.entry.toPtr<void (*)(void* const*)>();
  k.owner = jit.owner;
  return k;
}

}  // namespace

EmuKernel compileForEmulator(const std::string& gpuModuleText, bool amd, unsigned warpSize,
                             const std::vector<std::pair<std::string, void*>>& hooks, const GpuArch* row) {
  TS_ASSERT(!row || (row->vendor == GpuArch::Vendor::AMD) == amd, "emulator compile: the row's vendor");
  initLLVM();
  auto ctx = std::make_unique<llvm::LLVMContext>();
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> mod = llvm::parseAssemblyString(gpuModuleText, diag, *ctx);
  if (!mod) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    diag.print("gpu-module", os, false);
    throw CompileError("cannot parse the GPU module: " + msg);
  }
  return compile(std::move(mod), std::move(ctx), amd, warpSize, row, hooks, {});
}

EmuKernel compileForEmulator(std::unique_ptr<llvm::Module> gpuModule, std::unique_ptr<llvm::LLVMContext> ctx,
                             const GpuArch& row, const std::vector<std::pair<std::string, void*>>& hooks,
                             std::vector<std::string> firstOpNames) {
  return compile(std::move(gpuModule), std::move(ctx), row.vendor == GpuArch::Vendor::AMD, row.warpSize, &row, hooks,
                 std::move(firstOpNames));
}

}  // namespace tessera::codegen
