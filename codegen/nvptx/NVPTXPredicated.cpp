#include "codegen/nvptx/NVPTXPredicated.h"

#include <array>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Module.h>

#include "tessera/support/Error.h"

namespace tessera::codegen::nvptx {

namespace {

// Every form there is: (store, words, wordBits).
constexpr std::array<PredicatedAccess, 10> kForms = {{
    {false, 1, 8},
    {false, 1, 16},
    {false, 1, 32},
    {false, 2, 32},
    {false, 4, 32},
    {true, 1, 8},
    {true, 1, 16},
    {true, 1, 32},
    {true, 2, 32},
    {true, 4, 32},
}};

std::string op(unsigned i) { return "$" + std::to_string(i); }

// The register class (constraint letter) and the PTX type of a form.
const char* regClass(const PredicatedAccess& a) { return a.wordBits == 32 ? "r" : "h"; }
std::string ptxType(const PredicatedAccess& a) {
  std::string v = a.words > 1 ? ".v" + std::to_string(a.words) : "";
  return v + (a.wordBits == 8 ? ".u8" : a.wordBits == 16 ? ".b16" : ".b32");
}

// The PredicatedAccess that moves a value of `ty`, if any.
std::optional<PredicatedAccess> formOf(llvm::Type* ty, const llvm::DataLayout& dl, bool store) {
  llvm::TypeSize ts = dl.getTypeSizeInBits(ty);
  if (ts.isScalable()) return std::nullopt;
  // i1 and other odd widths have no memory form here (the lowering stores i1 as i8).
  if (dl.getTypeStoreSizeInBits(ty) != ts) return std::nullopt;
  switch (ts.getFixedValue()) {
    case 8: return PredicatedAccess{store, 1, 8};
    case 16: return PredicatedAccess{store, 1, 16};
    case 32: return PredicatedAccess{store, 1, 32};
    case 64: return PredicatedAccess{store, 2, 32};
    case 128: return PredicatedAccess{store, 4, 32};
    default: return std::nullopt;
  }
}

llvm::Type* wordTy(llvm::LLVMContext& c, const PredicatedAccess& a) {
  return a.wordBits == 32 ? llvm::Type::getInt32Ty(c) : llvm::Type::getInt16Ty(c);
}

// `v` (of a type formOf accepts) as the form's registers.
std::vector<llvm::Value*> toWords(llvm::IRBuilderBase& b, llvm::Value* v, const PredicatedAccess& a) {
  const llvm::DataLayout& dl = b.GetInsertBlock()->getModule()->getDataLayout();
  llvm::Type* t = v->getType();
  if (t->isPtrOrPtrVectorTy()) {
    llvm::Type* it = dl.getIntPtrType(t);
    v = b.CreatePtrToInt(v, it);
  }
  const unsigned bits = a.bytes() * 8;
  llvm::Value* whole = b.CreateBitCast(v, b.getIntNTy(bits));
  if (a.wordBits == 8) return {b.CreateZExt(whole, b.getInt16Ty())};
  if (a.words == 1) return {whole};
  llvm::Value* vec = b.CreateBitCast(whole, llvm::FixedVectorType::get(b.getInt32Ty(), a.words));
  std::vector<llvm::Value*> r;
  for (unsigned k = 0; k < a.words; ++k) r.push_back(b.CreateExtractElement(vec, k));
  return r;
}

// The inverse of toWords.
llvm::Value* fromWords(llvm::IRBuilderBase& b, const std::vector<llvm::Value*>& w, llvm::Type* t,
                       const PredicatedAccess& a) {
  const llvm::DataLayout& dl = b.GetInsertBlock()->getModule()->getDataLayout();
  const unsigned bits = a.bytes() * 8;
  llvm::Value* whole;
  if (a.wordBits == 8) {
    whole = b.CreateTrunc(w[0], b.getInt8Ty());
  } else if (a.words == 1) {
    whole = w[0];
  } else {
    llvm::Value* vec = llvm::PoisonValue::get(llvm::FixedVectorType::get(b.getInt32Ty(), a.words));
    for (unsigned k = 0; k < a.words; ++k) vec = b.CreateInsertElement(vec, w[k], k);
    whole = b.CreateBitCast(vec, b.getIntNTy(bits));
  }
  if (t->isPtrOrPtrVectorTy()) return b.CreateIntToPtr(b.CreateBitCast(whole, dl.getIntPtrType(t)), t);
  return b.CreateBitCast(whole, t);
}

}  // namespace

PredicatedAsm predicatedAsm(const PredicatedAccess& a) {
  const unsigned n = a.words;
  std::string regs;
  for (unsigned k = 0; k < n; ++k) regs += (k ? ", " : "") + op(k);
  if (n > 1) regs = "{" + regs + "}";
  const std::string addr = "[" + op(n) + "]", pred = "@" + op(n + 1);
  const std::string rc = regClass(a);
  PredicatedAsm r;
  if (a.store) {
    r.text = pred + " st.global" + ptxType(a) + " " + addr + ", " + regs + ";";
    for (unsigned k = 0; k < n; ++k) r.constraints += rc + ",";
    r.constraints += "l,b";
    return r;
  }
  const std::string mov = a.wordBits == 32 ? "mov.b32 " : "mov.b16 ";
  for (unsigned k = 0; k < n; ++k) r.text += mov + op(k) + ", " + op(n + 2 + k) + ";\n\t";
  r.text += pred + " ld.global" + ptxType(a) + " " + regs + ", " + addr + ";";
  // Early-clobber outputs: each is written (by its mov) before the address,
  // predicate and later `other` inputs are read.
  for (unsigned k = 0; k < n; ++k) r.constraints += "=&" + rc + ",";
  r.constraints += "l,b";
  for (unsigned k = 0; k < n; ++k) r.constraints += "," + rc;
  return r;
}

std::optional<PredicatedAccess> matchPredicatedAccess(std::string_view text, std::string_view constraints) {
  for (const PredicatedAccess& a : kForms) {
    PredicatedAsm f = predicatedAsm(a);
    if (text == f.text && constraints == f.constraints) return a;
  }
  return std::nullopt;
}

bool hasPredicatedForm(llvm::Type* ty, const llvm::DataLayout& dl) { return formOf(ty, dl, false).has_value(); }

llvm::Value* emitPredicatedLoad(llvm::IRBuilderBase& b, llvm::Type* ty, llvm::Value* ptr, llvm::Value* pred,
                                llvm::Value* other) {
  const llvm::DataLayout& dl = b.GetInsertBlock()->getModule()->getDataLayout();
  std::optional<PredicatedAccess> a = formOf(ty, dl, false);
  TS_ASSERT(a, "predicated load of an unsupported type");
  TS_ASSERT(other->getType() == ty, "predicated load: `other` of another type");
  llvm::LLVMContext& c = b.getContext();
  llvm::Type* w = wordTy(c, *a);
  std::vector<llvm::Type*> outs(a->words, w);
  llvm::Type* ret = a->words == 1 ? w : static_cast<llvm::Type*>(llvm::StructType::get(c, outs));
  std::vector<llvm::Type*> ins = {ptr->getType(), b.getInt1Ty()};
  std::vector<llvm::Value*> args = {ptr, pred};
  for (llvm::Value* o : toWords(b, other, *a)) {
    ins.push_back(w);
    args.push_back(o);
  }
  PredicatedAsm f = predicatedAsm(*a);
  auto* fty = llvm::FunctionType::get(ret, ins, false);
  llvm::CallInst* call =
      b.CreateCall(fty, llvm::InlineAsm::get(fty, f.text, f.constraints, /*sideEffects=*/false), args);
  // Reads memory through its address operand only: LLVM may delete an
  // unused one and order it against unrelated stores, never across a
  // barrier (which may write anything).
  call->setDoesNotThrow();
  call->addFnAttr(llvm::Attribute::WillReturn);
  call->setMemoryEffects(llvm::MemoryEffects::argMemOnly(llvm::ModRefInfo::Ref));
  std::vector<llvm::Value*> words;
  if (a->words == 1)
    words.push_back(call);
  else
    for (unsigned k = 0; k < a->words; ++k) words.push_back(b.CreateExtractValue(call, k));
  return fromWords(b, words, ty, *a);
}

void emitPredicatedStore(llvm::IRBuilderBase& b, llvm::Value* val, llvm::Value* ptr, llvm::Value* pred) {
  const llvm::DataLayout& dl = b.GetInsertBlock()->getModule()->getDataLayout();
  std::optional<PredicatedAccess> a = formOf(val->getType(), dl, true);
  TS_ASSERT(a, "predicated store of an unsupported type");
  llvm::LLVMContext& c = b.getContext();
  std::vector<llvm::Type*> ins;
  std::vector<llvm::Value*> args;
  for (llvm::Value* x : toWords(b, val, *a)) {
    ins.push_back(wordTy(c, *a));
    args.push_back(x);
  }
  ins.push_back(ptr->getType());
  ins.push_back(b.getInt1Ty());
  args.push_back(ptr);
  args.push_back(pred);
  PredicatedAsm f = predicatedAsm(*a);
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), ins, false);
  llvm::CallInst* call =
      b.CreateCall(fty, llvm::InlineAsm::get(fty, f.text, f.constraints, /*sideEffects=*/false), args);
  call->setDoesNotThrow();
  call->addFnAttr(llvm::Attribute::WillReturn);
  call->setMemoryEffects(llvm::MemoryEffects::argMemOnly(llvm::ModRefInfo::Mod));
}

PredicatedAsm cpAsyncIgnoreSrcAsm(unsigned bytes) {
  TS_ASSERT(bytes == 4 || bytes == 8 || bytes == 16, "cp.async of 4, 8 or 16 bytes");
  return {std::string("cp.async.") + (bytes == 16 ? "cg" : "ca") + ".shared.global [$0], [$1], " +
              std::to_string(bytes) + ", $2;",
          "l,l,b,~{memory}"};
}

unsigned matchCpAsyncIgnoreSrc(std::string_view text, std::string_view constraints) {
  for (unsigned bytes : {4u, 8u, 16u}) {
    PredicatedAsm f = cpAsyncIgnoreSrcAsm(bytes);
    if (text == f.text && constraints == f.constraints) return bytes;
  }
  return 0;
}

void emitCpAsyncIgnoreSrc(llvm::IRBuilderBase& b, llvm::Value* dst, llvm::Value* src, unsigned bytes,
                          llvm::Value* ignore) {
  PredicatedAsm a = cpAsyncIgnoreSrcAsm(bytes);
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {dst->getType(), src->getType(), b.getInt1Ty()}, false);
  b.CreateCall(fty, llvm::InlineAsm::get(fty, a.text, a.constraints, /*hasSideEffects=*/true), {dst, src, ignore});
}

}  // namespace tessera::codegen::nvptx
