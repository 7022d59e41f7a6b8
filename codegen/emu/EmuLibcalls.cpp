// Device math libraries (CUDA libdevice `__nv_*`, ROCm OCML `__ocml_*`) ->
// the host's libm, and the table of host library functions the emulator JIT
// binds by address.
#include <cmath>
#include <cstring>
#include <map>
#include <math.h>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>

#include "codegen/emu/EmuPasses.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::emu {

namespace {

// Every libm function a device library call may map to, float and double,
// plus what LLVM's x86 code generator calls for intrinsics it expands.
// clang-format off
#define TS_EMU_LIBM(X)                                                                                      \
  X(exp) X(exp2) X(exp10) X(expm1) X(log) X(log2) X(log10) X(log1p) X(sin) X(cos) X(tan) X(asin) X(acos)     \
  X(atan) X(sinh) X(cosh) X(tanh) X(asinh) X(acosh) X(atanh) X(sqrt) X(cbrt) X(fabs) X(floor) X(ceil)        \
  X(trunc) X(round) X(rint) X(nearbyint) X(erf) X(erfc) X(tgamma) X(lgamma)
#define TS_EMU_LIBM2(X) X(pow) X(atan2) X(fmod) X(fmin) X(fmax) X(hypot) X(copysign) X(remainder) X(fdim)
// clang-format on

// f32 -> bf16 with round-to-nearest-even (NaNs stay quiet NaNs), which the
// x86 code generator calls for bf16 values it keeps in f32 registers. GCC 12's
// libgcc has no __truncsfbf2. The x86-64 ABI returns a bf16 in the low 16
// bits of xmm0, as a float return does with those bits.
float truncsfbf2(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  uint32_t r = (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  float out;
  std::memcpy(&out, &r, 4);
  return out;
}
float truncdfbf2(double x) {
  // Through f32 would round twice; round the double directly instead.
  if (std::isnan(x)) return truncsfbf2(static_cast<float>(x));
  float f = static_cast<float>(x);  // nearest f32
  // Round to odd in f32 (truncate toward zero, set the last bit when
  // inexact): the second rounding to bf16 is then the correct one.
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (static_cast<double>(f) != x) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(x)) u -= 1;
    u |= 1u;
  }
  std::memcpy(&f, &u, 4);
  return truncsfbf2(f);
}

const std::map<std::string, void*>& libTable() {
  static const std::map<std::string, void*> table = [] {
    std::map<std::string, void*> t;
#define TS_ONE(fn)                                                          \
  t[#fn] = reinterpret_cast<void*>(static_cast<double (*)(double)>(&::fn)); \
  t[#fn "f"] = reinterpret_cast<void*>(static_cast<float (*)(float)>(&::fn##f));
#define TS_TWO(fn)                                                                  \
  t[#fn] = reinterpret_cast<void*>(static_cast<double (*)(double, double)>(&::fn)); \
  t[#fn "f"] = reinterpret_cast<void*>(static_cast<float (*)(float, float)>(&::fn##f));
    TS_EMU_LIBM(TS_ONE)
    TS_EMU_LIBM2(TS_TWO)
#undef TS_ONE
#undef TS_TWO
    t["fma"] = reinterpret_cast<void*>(static_cast<double (*)(double, double, double)>(&::fma));
    t["fmaf"] = reinterpret_cast<void*>(static_cast<float (*)(float, float, float)>(&::fmaf));
    t["ldexp"] = reinterpret_cast<void*>(static_cast<double (*)(double, int)>(&::ldexp));
    t["ldexpf"] = reinterpret_cast<void*>(static_cast<float (*)(float, int)>(&::ldexpf));
    // The x86 backend merges sin and cos of one value into sincos.
    t["sincos"] = reinterpret_cast<void*>(static_cast<void (*)(double, double*, double*)>(&::sincos));
    t["sincosf"] = reinterpret_cast<void*>(static_cast<void (*)(float, float*, float*)>(&::sincosf));
    t["__truncsfbf2"] = reinterpret_cast<void*>(&truncsfbf2);
    t["__truncdfbf2"] = reinterpret_cast<void*>(&truncdfbf2);
    t["memcpy"] = reinterpret_cast<void*>(&::memcpy);
    t["memmove"] = reinterpret_cast<void*>(&::memmove);
    t["memset"] = reinterpret_cast<void*>(&::memset);
    return t;
  }();
  return table;
}

// Device-library functions computed inline rather than by libm.
llvm::Value* inlineMath(llvm::IRBuilder<>& b, const std::string& base, llvm::CallInst& c) {
  llvm::Value* x = c.arg_size() > 0 ? c.getArgOperand(0) : nullptr;
  if (base == "rsqrt")
    return b.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0), b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
  if (base == "rcp") return b.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0), x);
  if (base == "saturate") {
    llvm::Value* lo = b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, x, llvm::ConstantFP::get(x->getType(), 0.0));
    return b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, lo, llvm::ConstantFP::get(x->getType(), 1.0));
  }
  return nullptr;
}

}  // namespace

const std::vector<std::pair<std::string, void*>>& hostLibSymbols() {
  static const std::vector<std::pair<std::string, void*>> v(libTable().begin(), libTable().end());
  return v;
}

void rewriteLibcalls(EmuModule& em) {
  std::vector<llvm::Function*> fns;
  for (llvm::Function& f : em.m)
    if (f.getName().starts_with("__nv_") || f.getName().starts_with("__ocml_")) fns.push_back(&f);
  for (llvm::Function* f : fns) {
    std::string name = f->getName().str();
    // `base` is the libm name without precision suffix; `isFloat` selects
    // expf over exp.
    std::string base;
    bool isFloat = false;
    if (name.rfind("__nv_", 0) == 0) {
      base = name.substr(5);
      if (base.rfind("fast_", 0) == 0) base = base.substr(5);  // __nv_fast_expf: approximate, computed exactly
      isFloat = f->getReturnType()->isFloatTy();
      if (isFloat && !base.empty() && base.back() == 'f') base.pop_back();
    } else {
      base = name.substr(7);
      if (base.rfind("native_", 0) == 0) base = base.substr(7);
      size_t us = base.rfind('_');
      std::string suffix = us == std::string::npos ? "" : base.substr(us + 1);
      if (suffix != "f32" && suffix != "f64")
        throw CompileError("the emulator has no host equivalent of " + name + " (only f32/f64 OCML functions)");
      base = base.substr(0, us);
      isFloat = suffix == "f32";
    }
    llvm::Type* rt = f->getReturnType();
    bool typeOk = rt->isFloatTy() == isFloat && (rt->isFloatTy() || rt->isDoubleTy());
    for (llvm::Type* p : f->getFunctionType()->params())
      typeOk = typeOk && (p->isFloatingPointTy() ? p == rt : p->isIntegerTy(32) && base == "ldexp");
    if (!typeOk) throw CompileError("the emulator has no host equivalent of " + name + " (unexpected signature)");

    std::vector<llvm::CallInst*> calls;
    for (llvm::User* u : f->users()) {
      auto* c = llvm::dyn_cast<llvm::CallInst>(u);
      if (!c || c->getCalledFunction() != f)
        throw CompileError("device math function " + name + " is used other than by a direct call");
      calls.push_back(c);
    }
    std::string host = base + (isFloat ? "f" : "");
    if (!calls.empty()) {
      bool inl = base == "rsqrt" || base == "rcp" || base == "saturate";
      if (!inl && !libTable().count(host))
        throw CompileError("the emulator has no host equivalent of " + name + " (no libm function " + host + ")");
      llvm::FunctionCallee hostFn;
      if (!inl) hostFn = em.m.getOrInsertFunction(host, f->getFunctionType());
      for (llvm::CallInst* c : calls) {
        llvm::IRBuilder<> b(c);
        llvm::Value* r =
            inl ? inlineMath(b, base, *c) : b.CreateCall(hostFn, llvm::SmallVector<llvm::Value*>(c->args()));
        c->replaceAllUsesWith(r);
        c->eraseFromParent();
      }
    }
    f->eraseFromParent();
  }
}

namespace {

// The mnemonics of a PTX inline-asm text, in order ("mov.b64", "mul.lo.u32",
// ...), ignoring the register declarations and braces.
std::vector<std::string> mnemonics(const std::string& text) {
  std::vector<std::string> r;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find(';', i);
    if (end == std::string::npos) end = text.size();
    std::string stmt = text.substr(i, end - i);
    i = end + 1;
    size_t b = stmt.find_first_not_of(" \t\n{}");
    if (b == std::string::npos) continue;
    size_t e = stmt.find_first_of(" \t\n", b);
    std::string m = stmt.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (m == ".reg") continue;
    r.push_back(m);
  }
  return r;
}

bool isSeq(const std::vector<std::string>& got, std::initializer_list<const char*> want) {
  if (got.size() != want.size()) return false;
  size_t k = 0;
  for (const char* w : want)
    if (got[k++] != w) return false;
  return true;
}

}  // namespace

void rewriteInlineAsm(EmuModule& em) {
  // libdevice's f64 sin/cos slow path (__internal_trig_reduction_slowpathd)
  // does 128-bit integer arithmetic in four PTX inline-asm blocks: a*b + c
  // (64 x 64 + 64 -> 128), a + b and a - b (128-bit), a*b (64 x 64 -> 128), each
  // returning {lo, hi}. They are recognised by their instruction sequence and
  // constraints and computed with i128; any other inline assembly is refused.
  std::vector<llvm::CallInst*> calls;
  for (llvm::Function& f : em.m)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb)
        if (auto* c = llvm::dyn_cast<llvm::CallInst>(&i); c && c->isInlineAsm()) calls.push_back(c);
  for (llvm::CallInst* c : calls) {
    auto* ia = llvm::cast<llvm::InlineAsm>(c->getCalledOperand());
    const std::string text = ia->getAsmString().str();
    std::vector<std::string> m = mnemonics(text);
    const std::string cons = ia->getConstraintString().str();
    llvm::IRBuilder<> b(c);
    llvm::Type* i64 = b.getInt64Ty();
    llvm::Type* i128 = b.getInt128Ty();
    auto wide = [&](unsigned lo, unsigned hi) {
      return b.CreateOr(b.CreateZExt(c->getArgOperand(lo), i128),
                        b.CreateShl(b.CreateZExt(c->getArgOperand(hi), i128), 64));
    };
    llvm::Value* r = nullptr;
    if (cons == "=l,=l,l,l,l" && isSeq(m, {"mov.b64", "mov.b64", "mov.b64", "mad.lo.cc.u32", "madc.hi.cc.u32",
                                           "madc.hi.u32", "mad.lo.cc.u32", "madc.hi.cc.u32", "madc.hi.u32",
                                           "mad.lo.cc.u32", "madc.lo.cc.u32", "addc.u32", "mov.b64", "mov.b64"}))
      r = b.CreateAdd(b.CreateMul(b.CreateZExt(c->getArgOperand(0), i128), b.CreateZExt(c->getArgOperand(1), i128)),
                      b.CreateZExt(c->getArgOperand(2), i128));
    else if (cons == "=l,=l,l,l,l,l" && isSeq(m, {"mov.b64", "mov.b64", "mov.b64", "mov.b64", "sub.cc.u32",
                                                  "subc.cc.u32", "subc.cc.u32", "subc.u32", "mov.b64", "mov.b64"}))
      r = b.CreateSub(wide(0, 1), wide(2, 3));
    else if (cons == "=l,=l,l,l,l,l" && isSeq(m, {"mov.b64", "mov.b64", "mov.b64", "mov.b64", "add.cc.u32",
                                                  "addc.cc.u32", "addc.cc.u32", "addc.u32", "mov.b64", "mov.b64"}))
      r = b.CreateAdd(wide(0, 1), wide(2, 3));
    else if (cons == "=l,=l,l,l" && isSeq(m, {"mov.b64", "mov.b64", "mul.lo.u32", "mul.hi.u32", "mad.lo.cc.u32",
                                              "madc.hi.u32", "mad.lo.cc.u32", "madc.hi.cc.u32", "madc.hi.u32",
                                              "mad.lo.cc.u32", "addc.u32", "mov.b64", "mov.b64"}))
      r = b.CreateMul(b.CreateZExt(c->getArgOperand(0), i128), b.CreateZExt(c->getArgOperand(1), i128));
    if (!r) throw CompileError("the emulator cannot run inline assembly (`" + text + "`, constraints " + cons + ")");
    llvm::Value* res = llvm::PoisonValue::get(c->getType());
    res = b.CreateInsertValue(res, b.CreateTrunc(r, i64), 0);
    res = b.CreateInsertValue(res, b.CreateTrunc(b.CreateLShr(r, 64), i64), 1);
    c->replaceAllUsesWith(res);
    c->eraseFromParent();
  }
}

}  // namespace tessera::codegen::emu
