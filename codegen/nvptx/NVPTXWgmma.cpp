#include "codegen/nvptx/NVPTXWgmma.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>

#include "tessera/support/Error.h"

namespace tessera::codegen::nvptx {

namespace {
std::string op(unsigned i) { return "$" + std::to_string(i); }

// "=c1,=c2,...,0,1,...": outputs of the classes given, each tied to an input.
std::string tiedConstraints(const std::vector<char>& classes) {
  std::string s;
  for (char c : classes) s += std::string(s.empty() ? "" : ",") + "=" + c;
  for (size_t i = 0; i < classes.size(); ++i) s += "," + std::to_string(i);
  return s;
}
std::vector<char> passClasses(unsigned nInts, unsigned nRegs) {
  std::vector<char> c(nRegs, 'f');
  for (unsigned i = 0; i < nInts && i < nRegs; ++i) c[i] = 'r';
  return c;
}
}  // namespace

unsigned swizzleBytes(WgmmaSwizzle s) {
  switch (s) {
    case WgmmaSwizzle::B128: return 128;
    case WgmmaSwizzle::B64: return 64;
    case WgmmaSwizzle::B32: return 32;
    case WgmmaSwizzle::None: break;
  }
  return 16;
}

uint64_t descriptorBits(WgmmaSwizzle s, uint64_t leadingBytes, uint64_t strideBytes) {
  TS_ASSERT(leadingBytes % 16 == 0 && strideBytes % 16 == 0 && leadingBytes < (16u << 14) && strideBytes < (16u << 14),
            "wgmma descriptor offsets must be multiples of 16 below 256 KiB");
  return ((leadingBytes >> 4) << 16) | ((strideBytes >> 4) << 32) | (uint64_t{static_cast<unsigned>(s)} << 62);
}

WgmmaAsm wgmmaAsm(const WgmmaForm& f) {
  TS_ASSERT(f.n >= 8 && f.n <= 256 && f.n % 8 == 0, "wgmma N must be a multiple of 8 from 8 to 256");
  TS_ASSERT((f.fp8A == WgmmaFp8::None) == (f.fp8B == WgmmaFp8::None) && (!f.isFp8() || (!f.transB && !f.aShared)),
            "fp8 wgmma: both formats, A from registers, B K-major");
  const unsigned h = static_cast<unsigned>(f.n / 2);
  auto fp8 = [](WgmmaFp8 x) { return x == WgmmaFp8::E4M3 ? "e4m3" : "e5m2"; };
  const std::string types = f.isFp8() ? std::string("k32.f32.") + fp8(f.fp8A) + "." + fp8(f.fp8B)
                                      : std::string("k16.f32.") + (f.bf16 ? "bf16.bf16" : "f16.f16");
  const unsigned bDesc = f.aShared ? 2 * h + 1 : 2 * h + 4, scale = bDesc + 1;
  WgmmaAsm a;
  a.text = "{\n.reg .pred p;\nsetp.ne.b32 p, " + op(scale) + ", 0;\nwgmma.mma_async.sync.aligned.m64n" +
           std::to_string(f.n) + types + " {";
  for (unsigned i = 0; i < h; ++i) a.text += (i ? ", " : "") + op(i);
  a.text += "}, ";
  if (f.aShared)
    a.text += op(2 * h);
  else
    a.text += "{" + op(2 * h) + ", " + op(2 * h + 1) + ", " + op(2 * h + 2) + ", " + op(2 * h + 3) + "}";
  a.text += ", " + op(bDesc) + ", p, 1, 1" +
            (f.isFp8() ? std::string() : std::string(", ") + (f.aShared ? "0, " : "") + (f.transB ? "1" : "0")) +
            ";\n}";
  a.constraints = tiedConstraints(std::vector<char>(h, 'f')) + (f.aShared ? ",l,l,r" : ",r,r,r,r,l,r");
  return a;
}

std::optional<WgmmaForm> matchWgmma(std::string_view text, std::string_view constraints) {
  if (text.find("k32.f32.e") != std::string_view::npos) {
    for (int n = 8; n <= 256; n += 8)
      for (WgmmaFp8 fa : {WgmmaFp8::E4M3, WgmmaFp8::E5M2})
        for (WgmmaFp8 fb : {WgmmaFp8::E4M3, WgmmaFp8::E5M2}) {
          WgmmaForm f{n, false, false, false, fa, fb};
          WgmmaAsm a = wgmmaAsm(f);
          if (text == a.text && constraints == a.constraints) return f;
        }
    return std::nullopt;
  }
  for (bool bf16 : {false, true})
    for (int n = 8; n <= 256; n += 8) {
      // Cheap filter before building the text.
      std::string key = "m64n" + std::to_string(n) + "k16.f32." + (bf16 ? "bf16" : "f16") + ".";
      if (text.find(key) == std::string_view::npos) continue;
      for (bool transB : {false, true})
        for (bool aShared : {false, true}) {
          WgmmaForm f{n, bf16, transB, aShared};
          WgmmaAsm a = wgmmaAsm(f);
          if (text == a.text && constraints == a.constraints) return f;
        }
    }
  return std::nullopt;
}

WgmmaAsm wgmmaFenceAsm(unsigned nInts, unsigned nRegs) {
  return {"wgmma.fence.sync.aligned;", tiedConstraints(passClasses(nInts, nRegs))};
}

WgmmaAsm wgmmaWaitAsm(unsigned pending, unsigned nInts, unsigned nRegs) {
  TS_ASSERT(pending <= 7, "wgmma.wait_group takes 0 to 7");
  return {"wgmma.wait_group.sync.aligned " + std::to_string(pending) + ";", tiedConstraints(passClasses(nInts, nRegs))};
}

int wgmmaWaitPending(std::string_view text) {
  const std::string_view head = "wgmma.wait_group.sync.aligned ";
  if (text.size() != head.size() + 2 || text.substr(0, head.size()) != head || text.back() != ';') return -1;
  const char n = text[head.size()];
  return n >= '0' && n <= '7' ? n - '0' : -1;
}

bool matchWgmmaPassThrough(std::string_view text, std::string_view constraints) {
  const bool fence = text == "wgmma.fence.sync.aligned;";
  if (!fence && wgmmaWaitPending(text) < 0) return false;
  // "=r|=f" outputs, then their indices as tied inputs, nothing else.
  std::vector<char> classes;
  size_t pos = 0;
  while (pos < constraints.size() && constraints[pos] == '=') {
    if (pos + 1 >= constraints.size() || (constraints[pos + 1] != 'r' && constraints[pos + 1] != 'f')) return false;
    classes.push_back(constraints[pos + 1]);
    pos += 3;  // "=x,"
  }
  return constraints == tiedConstraints(classes);  // none: a wait with no registers
}

std::vector<llvm::Value*> emitWgmma(llvm::IRBuilderBase& b, const WgmmaForm& f, const std::vector<llvm::Value*>& a,
                                    llvm::Value* desc, const std::vector<llvm::Value*>& acc) {
  const unsigned h = static_cast<unsigned>(f.n / 2);
  TS_ASSERT(a.size() == (f.aShared ? 1u : 4u) && acc.size() == h, "wgmma operand count");
  WgmmaAsm s = wgmmaAsm(f);
  std::vector<llvm::Type*> outs(h, b.getFloatTy());
  std::vector<llvm::Type*> ins(outs);
  std::vector<llvm::Value*> args(acc);
  for (llvm::Value* x : a) {
    ins.push_back(f.aShared ? b.getInt64Ty() : b.getInt32Ty());
    args.push_back(x);
  }
  ins.push_back(b.getInt64Ty());
  args.push_back(desc);
  ins.push_back(b.getInt32Ty());
  args.push_back(b.getInt32(1));
  auto* ret = llvm::StructType::get(b.getContext(), outs);
  auto* fty = llvm::FunctionType::get(ret, ins, false);
  // Side effects: it reads shared memory through the descriptor, which
  // LLVM cannot see, and must stay between its fence and its wait.
  llvm::Value* r = b.CreateCall(fty, llvm::InlineAsm::get(fty, s.text, s.constraints, /*hasSideEffects=*/true), args);
  std::vector<llvm::Value*> d;
  for (unsigned i = 0; i < h; ++i) d.push_back(b.CreateExtractValue(r, i));
  return d;
}

std::vector<llvm::Value*> emitWgmmaPassThrough(llvm::IRBuilderBase& b, int pending,
                                               const std::vector<llvm::Value*>& regs) {
  unsigned nInts = 0;
  while (nInts < regs.size() && regs[nInts]->getType()->isIntegerTy(32)) ++nInts;
  std::vector<llvm::Type*> tys;
  for (size_t i = 0; i < regs.size(); ++i) {
    TS_ASSERT(i < nInts ? regs[i]->getType()->isIntegerTy(32) : regs[i]->getType()->isFloatTy(),
              "wgmma pass-through: i32 registers first, then floats");
    tys.push_back(regs[i]->getType());
  }
  WgmmaAsm s = pending < 0 ? wgmmaFenceAsm(nInts, static_cast<unsigned>(regs.size()))
                           : wgmmaWaitAsm(static_cast<unsigned>(pending), nInts, static_cast<unsigned>(regs.size()));
  // One output is returned as itself, several as a struct, none as void.
  llvm::Type* ret = tys.empty() ? b.getVoidTy() : tys.size() == 1 ? tys[0] : llvm::StructType::get(b.getContext(), tys);
  auto* fty = llvm::FunctionType::get(ret, tys, false);
  llvm::Value* r = b.CreateCall(fty, llvm::InlineAsm::get(fty, s.text, s.constraints, /*hasSideEffects=*/true), regs);
  if (tys.empty()) return {};
  if (tys.size() == 1) return {r};
  std::vector<llvm::Value*> out;
  for (unsigned i = 0; i < regs.size(); ++i) out.push_back(b.CreateExtractValue(r, i));
  return out;
}

}  // namespace tessera::codegen::nvptx
