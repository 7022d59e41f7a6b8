// Vendor intrinsics (llvm.nvvm.*, llvm.amdgcn.*) -> SIMT machine hooks or
// plain host IR. Every intrinsic of either namespace is either mapped here
// with its exact semantics or rejected with a CompileError naming it: an
// unknown intrinsic must never reach the host backend, which would reject it
// with a fatal error or, worse, give it some other meaning.
#include <functional>
#include <map>
#include <numbers>

#include <llvm/ADT/StringSwitch.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Intrinsics.h>

#include "codegen/emu/EmuPasses.h"
#include "tessera/support/EmuAbi.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::emu {

namespace {

using llvm::IRBuilder;
using llvm::Value;

std::vector<std::string> split(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef> parts;
  name.split(parts, '.');
  return {parts.begin(), parts.end()};
}

bool has(const std::vector<std::string>& t, const char* s) { return std::find(t.begin(), t.end(), s) != t.end(); }

[[noreturn]] void unsupported(const llvm::CallInst& c, const std::string& why = "") {
  throw CompileError("the emulator does not support the intrinsic " + c.getCalledFunction()->getName().str() +
                     (why.empty() ? "" : " (" + why + ")") + ", used by `" + describe(c) + "`");
}

class Lowerer {
 public:
  explicit Lowerer(EmuModule& e) : em(e) {}

  // Returns the replacement of the call's value (nullptr for void calls).
  Value* lower(llvm::CallInst& c) {
    llvm::StringRef name = c.getCalledFunction()->getName();
    IRBuilder<> b(&c);
    if (name.consume_front("llvm.nvvm.")) {
      if (em.amd) throw CompileError("NVVM intrinsic llvm.nvvm." + name.str() + " in an AMDGPU module");
      return nvvm(b, c, split(name));
    }
    name.consume_front("llvm.amdgcn.");
    if (!em.amd) throw CompileError("AMDGPU intrinsic llvm.amdgcn." + name.str() + " in an NVPTX module");
    return amdgcn(b, c, split(name));
  }

 private:
  EmuModule& em;
  std::map<llvm::Function*, Value*> implicitArgs_, dispatchPackets_;

  // A call of hook `name`, typed by its row of EmuHooks.def (a mismatch with
  // `args` is caught by the module verifier).
  Value* callHook(IRBuilder<>& b, llvm::StringRef name, llvm::ArrayRef<Value*> args = {}) {
    return b.CreateCall(em.hook(name), args);
  }
  Value* dimHook(IRBuilder<>& b, const char* what, const std::string& axis, const llvm::CallInst& c) {
    if (axis != "x" && axis != "y" && axis != "z") unsupported(c);
    return callHook(b, std::string("tessera_emu_") + what + "_" + axis);
  }
  Value* laneId(IRBuilder<>& b) { return callHook(b, "tessera_emu_lane_id"); }
  Value* barrier(IRBuilder<>& b, llvm::CallInst& c) {
    callHook(b, "tessera_emu_barrier", {b.getInt32(em.opId(c))});
    return nullptr;
  }
  Value* unary(IRBuilder<>& b, llvm::Intrinsic::ID id, Value* x) { return b.CreateUnaryIntrinsic(id, x); }
  Value* recip(IRBuilder<>& b, Value* x) { return b.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0), x); }

  // Bits of a value as i32 / i64 for the 32-bit lane-exchange hooks, and back.
  Value* toBits(IRBuilder<>& b, Value* v, unsigned bits) {
    if (v->getType()->isPointerTy()) return b.CreatePtrToInt(v, b.getIntNTy(bits));
    return b.CreateBitCast(v, b.getIntNTy(bits));
  }
  Value* fromBits(IRBuilder<>& b, Value* v, llvm::Type* t) {
    if (t->isPointerTy()) return b.CreateIntToPtr(v, t);
    return b.CreateBitCast(v, t);
  }
  // Applies a 32-bit lane exchange `op` to any value of at most 64 bits, as
  // the AMDGPU backend splits 64-bit readlane into two.
  Value* laneExchange(IRBuilder<>& b, const llvm::CallInst& c, Value* v, const std::function<Value*(Value*)>& op) {
    // Pointers too: the pipeline's instcombine folds a readfirstlane of
    // ptrtoint back into one of the pointer (AMDGPU buffer resources' bases).
    llvm::Type* t = v->getType();
    llvm::TypeSize ts = em.gpuDL.getTypeSizeInBits(t);
    if (ts.isScalable() || ts.getFixedValue() > 64 || ts.getFixedValue() == 0 || ts.getFixedValue() % 8)
      unsupported(c, "operand type");
    unsigned bits = ts.getFixedValue();
    Value* iv = toBits(b, v, bits);
    if (bits <= 32) {
      Value* r = op(b.CreateZExt(iv, em.i32()));
      return fromBits(b, b.CreateTrunc(r, b.getIntNTy(bits)), t);
    }
    Value* w = b.CreateZExt(iv, em.i64());
    Value* lo = op(b.CreateTrunc(w, em.i32()));
    Value* hi = op(b.CreateTrunc(b.CreateLShr(w, 32), em.i32()));
    Value* r = b.CreateOr(b.CreateZExt(lo, em.i64()), b.CreateShl(b.CreateZExt(hi, em.i64()), 32));
    return fromBits(b, b.CreateTrunc(r, b.getIntNTy(bits)), t);
  }

  // ---- NVIDIA -----------------------------------------------------------
  Value* nvvm(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t) {
    const std::string& k = t[0];
    if (k == "read" && t.size() >= 4 && t[1] == "ptx" && t[2] == "sreg") {
      const std::string& r = t[3];
      std::string axis = t.size() > 4 ? t[4] : "";
      if (r == "tid") return dimHook(b, "thread_id", axis, c);
      if (r == "ctaid") return dimHook(b, "block_id", axis, c);
      if (r == "ntid") return dimHook(b, "block_dim", axis, c);
      if (r == "nctaid") return dimHook(b, "grid_dim", axis, c);
      if (r == "laneid") return laneId(b);
      if (r == "warpsize") return b.getInt32(em.warpSize);
      if (r == "lanemask" && t.size() == 5) {
        Value* lane = b.CreateZExt(laneId(b), em.i64());
        Value* one = b.getInt64(1);
        Value* bit = b.CreateShl(one, lane);
        Value* lt = b.CreateSub(bit, one);
        Value* le = b.CreateSub(b.CreateShl(b.getInt64(2), lane), one);
        Value* m = axis == "eq"   ? bit
                   : axis == "lt" ? lt
                   : axis == "le" ? le
                   : axis == "gt" ? b.CreateNot(le)
                   : axis == "ge" ? b.CreateNot(lt)
                                  : nullptr;
        if (!m) unsupported(c);
        return b.CreateTrunc(m, em.i32());
      }
      unsupported(c, "special register not modelled");
    }
    if (k == "barrier0" || (k == "barrier" && t.size() == 2 && t[1] == "sync") ||
        (k == "barrier" && t.size() >= 4 && t[1] == "cta" && t[2] == "sync" && t.back() == "all"))
      return barrier(b, c);
    // barrier.cta.sync[.aligned].count id, count (bar.sync id, count): the
    // named barrier `id` completes once `count` threads have arrived; the
    // machine checks both operands (they need not be constants).
    if (k == "barrier" && t.size() >= 4 && t[1] == "cta" && t[2] == "sync" && t.back() == "count") {
      callHook(b, "tessera_emu_barrier_count", {b.getInt32(em.opId(c)), c.getArgOperand(0), c.getArgOperand(1)});
      return nullptr;
    }
    if (k == "barrier")
      unsupported(c,
                  "only bar.sync is modelled, for the whole block or with a thread count; not bar.arrive or bar.red");
    // setmaxnreg.{inc,dec}.sync.aligned.u32 N: only the register budget of
    // the warp changes, which the machine does not have. N is an immarg the
    // verifier of the input module has checked (a multiple of 8 in [24,
    // 256]); the inline assembly's is checked in EmuInlineAsm.cpp.
    if (k == "setmaxnreg" && t.size() == 5 && (t[1] == "inc" || t[1] == "dec")) return nullptr;
    if (k == "bar" && t.size() == 3 && t[1] == "warp" && t[2] == "sync") {
      callHook(b, "tessera_emu_syncwarp", {b.CreateZExt(c.getArgOperand(0), em.i64())});
      return nullptr;
    }
    if (k == "shfl") {
      if (t.size() != 4 || t[1] != "sync") unsupported(c, "only the .sync shuffles are modelled");
      int32_t mode = llvm::StringSwitch<int32_t>(t[2])
                         .Case("idx", TESSERA_EMU_SHFL_IDX)
                         .Case("up", TESSERA_EMU_SHFL_UP)
                         .Case("down", TESSERA_EMU_SHFL_DOWN)
                         .Case("bfly", TESSERA_EMU_SHFL_BFLY)
                         .Default(-1);
      bool pred = t[3].back() == 'p';
      if (mode < 0) unsupported(c);
      Value* v = c.getArgOperand(1);
      llvm::Type* vt = v->getType();
      std::vector<Value*> args = {b.getInt32(mode), b.CreateZExt(c.getArgOperand(0), em.i64()),
                                  b.CreateBitCast(v, em.i32()), c.getArgOperand(2), c.getArgOperand(3)};
      if (!pred) return b.CreateBitCast(callHook(b, "tessera_emu_shfl_sync", args), vt);
      Value* r = callHook(b, "tessera_emu_shfl_sync_pred", args);
      Value* d = b.CreateBitCast(b.CreateTrunc(r, em.i32()), vt);
      Value* p = b.CreateTrunc(b.CreateLShr(r, 32), b.getInt1Ty());
      Value* s = llvm::PoisonValue::get(c.getType());
      s = b.CreateInsertValue(s, d, 0);
      return b.CreateInsertValue(s, p, 1);
    }
    if (k == "vote") {
      if (t.size() != 3 || t[2] != "sync") unsupported(c, "only the .sync votes are modelled");
      Value* mask = b.CreateZExt(c.getArgOperand(0), em.i64());
      Value* pred = b.CreateZExt(c.getArgOperand(1), em.i32());
      if (t[1] == "ballot") return b.CreateTrunc(callHook(b, "tessera_emu_ballot_sync", {mask, pred}), em.i32());
      int32_t mode = llvm::StringSwitch<int32_t>(t[1])
                         .Case("all", TESSERA_EMU_VOTE_ALL)
                         .Case("any", TESSERA_EMU_VOTE_ANY)
                         .Case("uni", TESSERA_EMU_VOTE_UNI)
                         .Default(-1);
      if (mode < 0) unsupported(c);
      return b.CreateICmpNE(callHook(b, "tessera_emu_vote_sync", {b.getInt32(mode), mask, pred}), b.getInt32(0));
    }
    if (k == "ldmatrix") {
      // ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].b16.p<as>
      int count = has(t, "x1") ? 1 : has(t, "x2") ? 2 : has(t, "x4") ? 4 : 0;
      if (!has(t, "m8n8") || !has(t, "b16") || count == 0) unsupported(c, "only the m8n8 b16 forms are modelled");
      Value* p = c.getArgOperand(0);
      if (p->getType()->getPointerAddressSpace() != kSharedAS && p->getType()->getPointerAddressSpace() != kFlatAS)
        unsupported(c, "ldmatrix reads shared memory");
      int32_t mode = count | (has(t, "trans") ? TESSERA_EMU_LDMATRIX_TRANS : 0);
      MatrixScratch ms = matrixScratch(c.getFunction());
      b.SetInsertPoint(&c);
      Value* flat = b.CreateAddrSpaceCast(p, em.flatPtr());
      callHook(b, "tessera_emu_ldmatrix", {b.getInt32(mode), flat, b.getInt32(em.opId(c)), ms.d});
      return unpack(b, ms.d, c.getType());
    }
    if (k == "mma") {
      // mma.m16n8k16.row.col.f32.f32 (f16 inputs) / .bf16 (bf16 inputs),
      // f32 accumulator: a[4], b[2], c[4] -> {f32 x 4}; m16n8k32.row.col.s8
      // (s8 inputs, s32 accumulator, not .satfinite): i32 in the same places;
      // m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32: fp8 codes packed
      // as for s8, an f32 accumulator.
      std::string rest;
      for (size_t i = 1; i < t.size(); ++i) rest += (i > 1 ? "." : "") + t[i];
      int32_t mode = llvm::StringSwitch<int32_t>(rest)
                         .Case("m16n8k16.row.col.f32.f32", TESSERA_EMU_MMA_M16N8K16_F16)
                         .Case("m16n8k16.row.col.bf16", TESSERA_EMU_MMA_M16N8K16_BF16)
                         .Case("m16n8k32.row.col.s8", TESSERA_EMU_MMA_M16N8K32_S8)
                         .Case("m16n8k32.row.col.f32.e4m3.e4m3.f32", TESSERA_EMU_MMA_M16N8K32_E4M3_E4M3)
                         .Case("m16n8k32.row.col.f32.e4m3.e5m2.f32", TESSERA_EMU_MMA_M16N8K32_E4M3_E5M2)
                         .Case("m16n8k32.row.col.f32.e5m2.e4m3.f32", TESSERA_EMU_MMA_M16N8K32_E5M2_E4M3)
                         .Case("m16n8k32.row.col.f32.e5m2.e5m2.f32", TESSERA_EMU_MMA_M16N8K32_E5M2_E5M2)
                         .Default(-1);
      if (mode < 0 || c.arg_size() != 10)
        unsupported(c,
                    "only m16n8k16 row.col f16/bf16 with an f32 accumulator, m16n8k32 row.col s8 and m16n8k32 "
                    "row.col e4m3/e5m2 with an f32 accumulator are modelled");
      return matrixCall(b, c, "tessera_emu_mma_sync", mode, {0, 1, 2, 3}, {4, 5}, {6, 7, 8, 9});
    }
    if (k == "cp" && t.size() >= 3 && t[1] == "async") return cpAsync(b, c, t);
    if (k == "mulhi" && t.size() == 2) {  // mul.hi: the high half of the exact product
      const bool u = t[1] == "us" || t[1] == "ui" || t[1] == "ull";
      Value* x = c.getArgOperand(0);
      Value* y = c.getArgOperand(1);
      const unsigned w = x->getType()->getIntegerBitWidth();
      llvm::Type* wide = b.getIntNTy(2 * w);
      Value* p = b.CreateMul(u ? b.CreateZExt(x, wide) : b.CreateSExt(x, wide),
                             u ? b.CreateZExt(y, wide) : b.CreateSExt(y, wide));
      return b.CreateTrunc(b.CreateLShr(p, w), x->getType());
    }
    // The machine computes a wgmma when every lane of the warp has issued
    // it (EmuInlineAsm.cpp); its operand bytes stay in flight until a wait
    // retires its group (commit / wait: the hooks). The fence orders
    // registers, which the machine's values already are; nor does a fence
    // between the generic and async proxies order anything more, their
    // accesses all going to the one shared memory.
    if (k == "wgmma" && t.size() >= 2 && t[1] == "fence") return nullptr;
    if (k == "wgmma" && t.size() >= 2 && t[1] == "commit_group") {
      callHook(b, "tessera_emu_wgmma_commit");
      return nullptr;
    }
    if (k == "wgmma" && t.size() >= 2 && t[1] == "wait_group") {
      callHook(b, "tessera_emu_wgmma_wait", {b.CreateTrunc(c.getArgOperand(0), em.i32())});
      return nullptr;
    }
    if (k == "fence" && t.size() >= 3 && t[1] == "proxy" && t[2] == "async") return nullptr;
    if (k == "membar" || (k == "fence" && t.size() >= 2 && t[1] == "sc")) {
      b.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
      return nullptr;
    }
    return nvvmMath(b, c, t);
  }

  // cp.async (sm_80): the machine records each copy per thread and performs
  // it only when a wait retires its group (EmuIntrinsics maps, the machine
  // models; docs/emulator.md), so a missing or too-weak wait shows up as a
  // read of in-flight bytes or as copies pending at exit.
  //   cp.async.{ca,cg}.shared.global.{4,8,16}[.s](dst, src[, srcSize])
  //   cp.async.commit.group, cp.async.wait.group(N), cp.async.wait.all
  Value* cpAsync(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t) {
    std::string rest;
    for (size_t i = 2; i < t.size(); ++i) rest += (i > 2 ? "." : "") + t[i];
    if (rest == "commit.group") {
      callHook(b, "tessera_emu_cp_async_commit", {});
      return nullptr;
    }
    if (rest == "wait.group") {
      callHook(b, "tessera_emu_cp_async_wait", {c.getArgOperand(0)});
      return nullptr;
    }
    if (rest == "wait.all") {  // = commit_group; wait_group 0
      callHook(b, "tessera_emu_cp_async_commit", {});
      callHook(b, "tessera_emu_cp_async_wait", {b.getInt32(0)});
      return nullptr;
    }
    bool sized = t.back() == "s";
    size_t n = t.size() - (sized ? 1 : 0);
    if (n != 6 || (t[2] != "ca" && t[2] != "cg") || t[3] != "shared" || t[4] != "global")
      unsupported(c, "only cp.async.{ca,cg}.shared.global, commit_group, wait_group and wait_all are modelled");
    int32_t bytes = t[5] == "4" ? 4 : t[5] == "8" ? 8 : t[5] == "16" ? 16 : 0;
    if (bytes == 0 || (t[2] == "cg" && bytes != 16)) unsupported(c);
    Value* dst = b.CreateAddrSpaceCast(c.getArgOperand(0), em.flatPtr());
    Value* src = b.CreateAddrSpaceCast(c.getArgOperand(1), em.flatPtr());
    Value* srcBytes = sized ? c.getArgOperand(2) : b.getInt32(bytes);
    callHook(b, "tessera_emu_cp_async", {dst, src, b.getInt32(bytes), srcBytes, b.getInt32(em.opId(c))});
    return nullptr;
  }

  // NVVM float intrinsics. Approximate instructions (ex2.approx, ...) are
  // computed exactly; flush-to-zero (.ftz) is not modelled (the host keeps
  // denormals). Directed-rounding variants (.rz/.rm/.rp) are refused.
  Value* nvvmMath(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t) {
    const std::string& k = t[0];
    auto arg = [&](unsigned i) { return c.getArgOperand(i); };
    if (has(t, "rz") || has(t, "rm") || has(t, "rp")) unsupported(c, "directed rounding");
    if (k == "ex2" && has(t, "approx")) return unary(b, llvm::Intrinsic::exp2, arg(0));
    if (k == "lg2" && has(t, "approx")) return unary(b, llvm::Intrinsic::log2, arg(0));
    if (k == "sin" && has(t, "approx")) return unary(b, llvm::Intrinsic::sin, arg(0));
    if (k == "cos" && has(t, "approx")) return unary(b, llvm::Intrinsic::cos, arg(0));
    if (k == "tanh" && has(t, "approx")) return unary(b, llvm::Intrinsic::tanh, arg(0));
    if (k == "sqrt") return unary(b, llvm::Intrinsic::sqrt, arg(0));
    if (k == "rsqrt" && has(t, "approx")) return recip(b, unary(b, llvm::Intrinsic::sqrt, arg(0)));
    if (k == "rcp") return recip(b, arg(0));
    // libdevice's building blocks: the halves of a double, arithmetic with
    // an explicit (nearest) rounding, conversions rounding to nearest even.
    if (k == "d2i" && t.size() == 2 && (t[1] == "hi" || t[1] == "lo")) {
      Value* bits = b.CreateBitCast(arg(0), em.i64());
      if (t[1] == "hi") bits = b.CreateLShr(bits, 32);
      return b.CreateTrunc(bits, em.i32());
    }
    if (k == "lohi" && t.size() == 2 && t[1] == "i2d") {
      Value* bits = b.CreateOr(b.CreateZExt(arg(0), em.i64()), b.CreateShl(b.CreateZExt(arg(1), em.i64()), 32));
      return b.CreateBitCast(bits, b.getDoubleTy());
    }
    if (k == "add" && has(t, "rn")) return b.CreateFAdd(arg(0), arg(1));
    if (k == "mul" && has(t, "rn")) return b.CreateFMul(arg(0), arg(1));
    if ((k == "d2i" || k == "f2i" || k == "d2ll" || k == "f2ll") && has(t, "rn"))
      return b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {c.getType(), arg(0)->getType()},
                               {unary(b, llvm::Intrinsic::roundeven, arg(0))});
    if (k == "div" && (has(t, "rn") || has(t, "approx") || has(t, "full"))) return b.CreateFDiv(arg(0), arg(1));
    if (k == "fma" && has(t, "rn"))
      return b.CreateIntrinsic(llvm::Intrinsic::fma, {c.getType()}, {arg(0), arg(1), arg(2)});
    if (k == "fabs") return unary(b, llvm::Intrinsic::fabs, arg(0));
    if (k == "floor") return unary(b, llvm::Intrinsic::floor, arg(0));
    if (k == "ceil") return unary(b, llvm::Intrinsic::ceil, arg(0));
    if (k == "trunc") return unary(b, llvm::Intrinsic::trunc, arg(0));
    if (k == "round") return unary(b, llvm::Intrinsic::roundeven, arg(0));  // cvt.rni
    if ((k == "fmin" || k == "fmax") && !has(t, "xorsign")) {
      bool nan = has(t, "nan");  // .NaN: NaN propagates (IEEE-754 2019 minimum)
      llvm::Intrinsic::ID id = k == "fmin" ? (nan ? llvm::Intrinsic::minimum : llvm::Intrinsic::minnum)
                                           : (nan ? llvm::Intrinsic::maximum : llvm::Intrinsic::maxnum);
      return b.CreateBinaryIntrinsic(id, arg(0), arg(1));
    }
    if (k == "saturate") {  // clamp to [0, 1], NaN -> 0
      Value* lo = b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, arg(0), llvm::ConstantFP::get(c.getType(), 0.0));
      return b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, lo, llvm::ConstantFP::get(c.getType(), 1.0));
    }
    unsupported(c);
  }

  // ---- AMD --------------------------------------------------------------
  Value* amdgcn(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t) {
    const std::string& k = t[0];
    auto arg = [&](unsigned i) { return c.getArgOperand(i); };
    std::string name;
    for (size_t i = 0; i < t.size(); ++i) name += (i ? "." : "") + t[i];
    if (k == "workitem" && t.size() == 3 && t[1] == "id") return dimHook(b, "thread_id", t[2], c);
    if (k == "workgroup" && t.size() == 3 && t[1] == "id") return dimHook(b, "block_id", t[2], c);
    if (name == "wavefrontsize") return b.getInt32(em.warpSize);
    if (name == "s.barrier" || name == "s.barrier.signal") return barrier(b, c);
    // The split barrier of gfx12: the signal above is the whole barrier,
    // the wait that follows it has nothing left to do.
    if (name == "s.barrier.wait") return nullptr;
    // Scheduling hints and waits: no effect on a machine that runs one
    // thread at a time with sequentially consistent memory.
    if (name == "wave.barrier" || name == "sched.barrier" || name == "sched.group.barrier" || name == "s.waitcnt" ||
        name == "s.sleep" || name == "s.setprio" || name == "iglp.opt" || name == "s.nop")
      return nullptr;
    if (name == "ds.bpermute") return callHook(b, "tessera_emu_ds_bpermute", {arg(0), arg(1)});
    // Lane exchanges with a constant pattern: the source lane computed from
    // it, then ds_bpermute's exchange (every lane of the wave is live where
    // the lowering uses them). Only the forms the lowering emits.
    if (name.rfind("update.dpp", 0) == 0 || name == "ds.swizzle" || k == "permlanex16") {
      auto cst = [&](unsigned i) -> int64_t {
        auto* ci = llvm::dyn_cast<llvm::ConstantInt>(arg(i));
        if (!ci) unsupported(c);
        return ci->getSExtValue();
      };
      Value* lane = laneId(b);
      Value* src = nullptr;
      if (name.rfind("update.dpp", 0) == 0 && c.getType()->isIntegerTy(32) && cst(3) == 0xf && cst(4) == 0xf) {
        const int64_t ctrl = cst(2);
        if (ctrl <= 0xff) {  // quad_perm: lane (l & ~3) | sel[l & 3]
          Value* sh = b.CreateShl(b.CreateAnd(lane, b.getInt32(3)), b.getInt32(1));
          Value* sel = b.CreateAnd(b.CreateLShr(b.getInt32(static_cast<uint32_t>(ctrl)), sh), b.getInt32(3));
          src = b.CreateOr(b.CreateAnd(lane, b.getInt32(~3u)), sel);
        } else if (ctrl >= 0x160 && ctrl <= 0x16f) {  // row_xmask (gfx10+)
          src = b.CreateXor(lane, b.getInt32(static_cast<uint32_t>(ctrl & 0xf)));
        } else if (ctrl == 0x140 || ctrl == 0x141) {  // row_mirror / row_half_mirror: lane 15 - i / 7 - i
          src = b.CreateXor(lane, b.getInt32(ctrl == 0x140 ? 15 : 7));
        }
      } else if (name == "ds.swizzle") {
        const int64_t pat = cst(1);
        if ((pat & 0x8000) == 0) {  // bitmask mode within 32 lanes
          const uint32_t andM = pat & 0x1f, orM = (pat >> 5) & 0x1f, xorM = (pat >> 10) & 0x1f;
          Value* in32 = b.CreateAnd(lane, b.getInt32(31));
          Value* l = b.CreateXor(b.CreateOr(b.CreateAnd(in32, b.getInt32(andM)), b.getInt32(orM)), b.getInt32(xorM));
          src = b.CreateOr(b.CreateAnd(lane, b.getInt32(~31u)), l);
        }
      } else if (k == "permlanex16" && c.getType()->isIntegerTy(32)) {
        // Lane i reads lane sel[i % 16] of the other row of 16 in its 32.
        const uint64_t sel = (static_cast<uint64_t>(cst(3)) << 32) | static_cast<uint32_t>(cst(2));
        Value* nib = b.CreateTrunc(
            b.CreateAnd(
                b.CreateLShr(b.getInt64(sel),
                             b.CreateZExt(b.CreateShl(b.CreateAnd(lane, b.getInt32(15)), b.getInt32(2)), em.i64())),
                b.getInt64(15)),
            em.i32());
        Value* other = b.CreateXor(b.CreateAnd(lane, b.getInt32(~15u)), b.getInt32(16));
        src = b.CreateOr(other, nib);
      }
      if (!src) unsupported(c);
      Value* x = k == "permlanex16" || k == "update" ? arg(1) : arg(0);
      return callHook(b, "tessera_emu_ds_bpermute", {b.CreateShl(src, b.getInt32(2)), x});
    }
    if (k == "readfirstlane")
      return laneExchange(b, c, arg(0), [&](Value* v) { return callHook(b, "tessera_emu_readfirstlane", {v}); });
    if (k == "readlane") {
      Value* lane = arg(1);
      return laneExchange(b, c, arg(0), [&](Value* v) { return callHook(b, "tessera_emu_readlane", {v, lane}); });
    }
    if (k == "ballot") {
      Value* r = callHook(b, "tessera_emu_wave_ballot", {b.CreateZExt(arg(0), em.i32())});
      return b.CreateZExtOrTrunc(r, c.getType());
    }
    if (name == "mbcnt.lo" || name == "mbcnt.hi") {
      // Bits of lanes below this one: lanes 0..31 for mbcnt.lo, 32..63 for
      // mbcnt.hi (zero on wave32, where no lane is above 31).
      Value* lane = b.CreateZExt(laneId(b), em.i64());
      Value* below = b.CreateSub(b.CreateShl(b.getInt64(1), lane), b.getInt64(1));
      Value* half = name == "mbcnt.lo" ? below : b.CreateLShr(below, 32);
      Value* bits = b.CreateAnd(arg(0), b.CreateTrunc(half, em.i32()));
      return b.CreateAdd(arg(1), b.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, bits));
    }
    if (k == "mfma") {
      int32_t mode = llvm::StringSwitch<int32_t>(name)
                         .Case("mfma.f32.32x32x8f16", TESSERA_EMU_MFMA_32X32X8_F16)
                         .Case("mfma.f32.32x32x8bf16.1k", TESSERA_EMU_MFMA_32X32X8_BF16)
                         .Case("mfma.f32.16x16x16f16", TESSERA_EMU_MFMA_16X16X16_F16)
                         .Case("mfma.f32.16x16x16bf16.1k", TESSERA_EMU_MFMA_16X16X16_BF16)
                         .Case("mfma.i32.16x16x16i8", TESSERA_EMU_MFMA_16X16X16_I8)
                         .Case("mfma.i32.16x16x32.i8", TESSERA_EMU_MFMA_16X16X32_I8)
                         .Case("mfma.f32.16x16x32.fp8.fp8", TESSERA_EMU_MFMA_16X16X32_FP8_FP8)
                         .Case("mfma.f32.16x16x32.fp8.bf8", TESSERA_EMU_MFMA_16X16X32_FP8_BF8)
                         .Case("mfma.f32.16x16x32.bf8.fp8", TESSERA_EMU_MFMA_16X16X32_BF8_FP8)
                         .Case("mfma.f32.16x16x32.bf8.bf8", TESSERA_EMU_MFMA_16X16X32_BF8_BF8)
                         .Default(-1);
      if (mode < 0)
        unsupported(c,
                    "only the f32 32x32x8 / 16x16x16 f16 and bf16_1k, the i32 16x16x16 / 16x16x32 i8 and the f32 "
                    "16x16x32 fp8/bf8 forms are modelled");
      for (unsigned i = 3; i < 6; ++i) {
        auto* ci = llvm::dyn_cast<llvm::ConstantInt>(arg(i));
        if (!ci || !ci->isZero()) unsupported(c, "cbsz / abid / blgp broadcasts are not modelled");
      }
      return matrixCall(b, c, "tessera_emu_mfma", mode, {0}, {1}, {2});
    }
    if (k == "wmma" && t.size() >= 4 && t[1] == "f32" && t[2] == "16x16x16" && (t[3] == "f16" || t[3] == "bf16")) {
      if (c.arg_size() != 3) unsupported(c);
      return matrixCall(b, c, "tessera_emu_wmma",
                        t[3] == "f16" ? TESSERA_EMU_WMMA_16X16X16_F16 : TESSERA_EMU_WMMA_16X16X16_BF16, {0}, {1}, {2});
    }
    if (k == "wmma" && t.size() >= 4 && t[1] == "i32" && t[2] == "16x16x16" && t[3] == "iu8") {
      // (A_sign, A, B_sign, B, C, clamp): the signs become mode flags.
      if (c.arg_size() != 6) unsupported(c);
      auto* sa = llvm::dyn_cast<llvm::ConstantInt>(arg(0));
      auto* sb = llvm::dyn_cast<llvm::ConstantInt>(arg(2));
      auto* clamp = llvm::dyn_cast<llvm::ConstantInt>(arg(5));
      if (!sa || !sb || !clamp) unsupported(c);
      if (!clamp->isZero()) unsupported(c, "the clamp (saturating) form is not modelled");
      int32_t mode = TESSERA_EMU_WMMA_16X16X16_IU8 | (sa->isOne() ? TESSERA_EMU_WMMA_A_SIGNED : 0) |
                     (sb->isOne() ? TESSERA_EMU_WMMA_B_SIGNED : 0);
      return matrixCall(b, c, "tessera_emu_wmma", mode, {1}, {3}, {4});
    }
    if (name == "implicitarg.ptr") return b.CreateAddrSpaceCast(implicitArgs(c.getFunction()), c.getType());
    if (name == "dispatch.ptr") return b.CreateAddrSpaceCast(dispatchPacket(c.getFunction()), c.getType());
    // Float helpers the AMDGPU pipeline may form, and the hardware
    // approximations of Precision::Approximate (computed exactly here: the
    // machine models what an instruction means, not its last-ulp error).
    // Overloaded ones carry their type in the name (llvm.amdgcn.exp2.f32).
    std::string fn = name;
    for (const char* ty : {".f16", ".f32", ".f64"})
      if (fn.size() > 4 && fn.ends_with(ty)) fn.resize(fn.size() - 4);
    if (fn == "rcp" || fn == "rcp.legacy") return recip(b, arg(0));
    if (fn == "rsq") return recip(b, unary(b, llvm::Intrinsic::sqrt, arg(0)));
    if (fn == "sqrt") return unary(b, llvm::Intrinsic::sqrt, arg(0));
    if (fn == "exp2") return unary(b, llvm::Intrinsic::exp2, arg(0));
    if (fn == "log") return unary(b, llvm::Intrinsic::log2, arg(0));  // v_log_f32 is log2
    if (name == "sin" || name == "cos") {                             // input in revolutions
      Value* x = b.CreateFMul(arg(0), llvm::ConstantFP::get(c.getType(), 2 * std::numbers::pi));
      return unary(b, name == "sin" ? llvm::Intrinsic::sin : llvm::Intrinsic::cos, x);
    }
    if (name == "fmed3") {
      Value* lo = b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, arg(0), arg(1));
      Value* hi = b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, arg(0), arg(1));
      return b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, lo,
                                     b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, hi, arg(2)));
    }
    if (name == "ldexp")
      return b.CreateIntrinsic(llvm::Intrinsic::ldexp, {c.getType(), arg(1)->getType()}, {arg(0), arg(1)});
    if (name == "fdiv.fast") return b.CreateFDiv(arg(0), arg(1));
    unsupported(c);
  }

  // ---- matrix instructions ---------------------------------------------------
  // The hooks take pointers to the lane's fragment registers: one set of
  // four 64-byte buffers per function (calls are sequential in a thread),
  // in the GPU's private address space, passed as flat pointers.
  struct MatrixScratch {
    Value *a, *b, *c, *d;
  };
  std::map<llvm::Function*, MatrixScratch> matrixScratch_;
  MatrixScratch matrixScratch(llvm::Function* f) {
    auto it = matrixScratch_.find(f);
    if (it != matrixScratch_.end()) return it->second;
    IRBuilder<> b(em.ctx);
    b.SetInsertPoint(&*f->getEntryBlock().getFirstInsertionPt());
    const llvm::DataLayout& dl = em.m.getDataLayout();
    auto one = [&](const char* n) -> Value* {
      llvm::AllocaInst* a =
          b.CreateAlloca(llvm::ArrayType::get(b.getInt32Ty(), 16), dl.getAllocaAddrSpace(), nullptr, n);
      a->setAlignment(llvm::Align(16));
      return b.CreateAddrSpaceCast(a, em.flatPtr());
    };
    MatrixScratch ms{one("frag.a"), one("frag.b"), one("frag.c"), one("frag.d")};
    return matrixScratch_[f] = ms;
  }
  // Stores operands (scalars, vectors) consecutively into `buf`.
  void pack(IRBuilder<>& b, Value* buf, llvm::ArrayRef<Value*> vals) {
    uint64_t off = 0;
    for (Value* v : vals) {
      b.CreateAlignedStore(v, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), buf, off), llvm::Align(4));
      off += em.gpuDL.getTypeStoreSize(v->getType()).getFixedValue();
    }
    TS_ASSERT(off <= 64, "matrix fragment larger than its buffer");
  }
  // Reads a result of type `t` (a vector, or a struct of scalars) from `buf`.
  Value* unpack(IRBuilder<>& b, Value* buf, llvm::Type* t) {
    if (!t->isStructTy()) return b.CreateAlignedLoad(t, buf, llvm::Align(4));
    Value* r = llvm::PoisonValue::get(t);
    uint64_t off = 0;
    for (unsigned i = 0; i < t->getStructNumElements(); ++i) {
      llvm::Type* et = t->getStructElementType(i);
      r = b.CreateInsertValue(
          r, b.CreateAlignedLoad(et, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), buf, off), llvm::Align(4)), i);
      off += em.gpuDL.getTypeStoreSize(et).getFixedValue();
    }
    return r;
  }
  Value* matrixCall(IRBuilder<>& b, llvm::CallInst& c, const char* hook, int32_t mode, std::vector<unsigned> aIdx,
                    std::vector<unsigned> bIdx, std::vector<unsigned> cIdx) {
    MatrixScratch ms = matrixScratch(c.getFunction());
    b.SetInsertPoint(&c);
    auto args = [&](const std::vector<unsigned>& idx) {
      std::vector<Value*> v;
      for (unsigned i : idx) v.push_back(c.getArgOperand(i));
      return v;
    };
    pack(b, ms.a, args(aIdx));
    pack(b, ms.b, args(bIdx));
    pack(b, ms.c, args(cIdx));
    callHook(b, hook, {b.getInt32(mode), ms.a, ms.b, ms.c, ms.d});
    return unpack(b, ms.d, c.getType());
  }

  // The hidden kernel arguments of code object v5 (implicitarg.ptr) and the
  // HSA dispatch packet (dispatch.ptr), materialised per call frame from the
  // machine's hooks. Building the real structures instead of matching load
  // offsets keeps any access pattern the optimiser forms correct; SROA/GVN
  // forward the stores to the loads, so the buffers mostly vanish.
  Value* frameBuffer(llvm::Function* f, unsigned bytes, const char* name, IRBuilder<>& b) {
    const llvm::DataLayout& dl = em.m.getDataLayout();
    b.SetInsertPoint(&*f->getEntryBlock().getFirstInsertionPt());
    llvm::Type* ty = llvm::ArrayType::get(b.getInt8Ty(), bytes);
    llvm::AllocaInst* a = b.CreateAlloca(ty, dl.getAllocaAddrSpace(), nullptr, name);
    a->setAlignment(llvm::Align(8));
    b.CreateMemSet(a, b.getInt8(0), bytes, llvm::MaybeAlign(8));
    return a;
  }
  void put(IRBuilder<>& b, Value* buf, unsigned off, Value* v) {
    b.CreateAlignedStore(v, b.CreateConstInBoundsGEP1_32(b.getInt8Ty(), buf, off), llvm::Align(2));
  }
  Value* implicitArgs(llvm::Function* f) {
    Value*& slot = implicitArgs_[f];
    if (slot) return slot;
    IRBuilder<> b(em.ctx);
    Value* buf = frameBuffer(f, 256, "implicitargs", b);
    const char* xyz[] = {"x", "y", "z"};
    for (int d = 0; d < 3; ++d) {
      // hidden_block_count_{x,y,z}: u32 at 0/4/8; hidden_group_size: u16 at
      // 12/14/16; hidden_remainder: u16 at 18/20/22, zero since grids are
      // whole blocks.
      put(b, buf, 4 * d, callHook(b, std::string("tessera_emu_grid_dim_") + xyz[d]));
      put(b, buf, 12 + 2 * d,
          b.CreateTrunc(callHook(b, std::string("tessera_emu_block_dim_") + xyz[d]), b.getInt16Ty()));
    }
    put(b, buf, 64, b.getInt16(3));  // hidden_grid_dims
    return slot = buf;
  }
  Value* dispatchPacket(llvm::Function* f) {
    Value*& slot = dispatchPackets_[f];
    if (slot) return slot;
    IRBuilder<> b(em.ctx);
    Value* buf = frameBuffer(f, 64, "dispatch", b);
    const char* xyz[] = {"x", "y", "z"};
    put(b, buf, 2, b.getInt16(3));  // setup: dimensions
    for (int d = 0; d < 3; ++d) {
      // workgroup_size_{x,y,z}: u16 at 4/6/8; grid_size_{x,y,z} (in work
      // items): u32 at 12/16/20.
      Value* bd = callHook(b, std::string("tessera_emu_block_dim_") + xyz[d]);
      Value* gd = callHook(b, std::string("tessera_emu_grid_dim_") + xyz[d]);
      put(b, buf, 4 + 2 * d, b.CreateTrunc(bd, b.getInt16Ty()));
      put(b, buf, 12 + 4 * d, b.CreateMul(bd, gd));
    }
    return slot = buf;
  }
};

}  // namespace

void rewriteIntrinsics(EmuModule& em) {
  Lowerer low(em);
  std::vector<llvm::Function*> decls;
  for (llvm::Function& f : em.m)
    if (f.getName().starts_with("llvm.nvvm.") || f.getName().starts_with("llvm.amdgcn.")) decls.push_back(&f);
  for (llvm::Function* f : decls) {
    std::vector<llvm::CallInst*> calls;
    for (llvm::User* u : f->users()) {
      auto* c = llvm::dyn_cast<llvm::CallInst>(u);
      if (!c || c->getCalledFunction() != f)
        throw CompileError("intrinsic " + f->getName().str() + " is used other than by a direct call");
      calls.push_back(c);
    }
    for (llvm::CallInst* c : calls) {
      Value* r = low.lower(*c);
      if (!c->getType()->isVoidTy()) {
        TS_ASSERT(r && r->getType() == c->getType(), "intrinsic replacement has the wrong type");
        c->replaceAllUsesWith(r);
      }
      c->eraseFromParent();
    }
    f->eraseFromParent();
  }
}

}  // namespace tessera::codegen::emu
