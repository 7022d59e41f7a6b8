// NVIDIA's intrinsics (llvm.nvvm.*) on the SIMT machine (EmuIntrinsics.h):
// special registers, bar.sync and named barriers, the cluster registers,
// barrier and mapa, warp shuffles and votes,
// ldmatrix and mma.sync, cp.async, the wgmma groups' commit and wait,
// fences, and the float intrinsics of libdevice and the approximate math,
// each mapped to a machine hook or host IR with its exact semantics, or
// rejected with a CompileError naming it.
#include <llvm/ADT/StringSwitch.h>

#include "codegen/emu/EmuIntrinsics.h"
#include "tessera/support/EmuAbi.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::emu::intrinsics {

Value* Lowerer::nvvm(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t) {
  const std::string& k = t[0];
  if (k == "read" && t.size() >= 4 && t[1] == "ptx" && t[2] == "sreg") {
    const std::string& r = t[3];
    std::string axis = t.size() > 4 ? t[4] : "";
    if (r == "tid") return dimHook(b, "thread_id", axis, c);
    if (r == "ctaid") return dimHook(b, "block_id", axis, c);
    if (r == "ntid") return dimHook(b, "block_dim", axis, c);
    if (r == "nctaid") return dimHook(b, "grid_dim", axis, c);
    if (r == "clusterid") return dimHook(b, "cluster_id", axis, c);
    if (r == "nclusterid") return dimHook(b, "cluster_nid", axis, c);
    if (r == "cluster" && t.size() >= 5) {
      const std::string& what = t[4];
      if (what == "ctarank" && t.size() == 5) return callHook(b, "tessera_emu_cluster_ctarank");
      if (what == "nctarank" && t.size() == 5) return callHook(b, "tessera_emu_cluster_nctarank");
      std::string clusterAxis = t.size() == 6 ? t[5] : "";
      if (what == "ctaid") return dimHook(b, "cluster_ctaid", clusterAxis, c);
      if (what == "nctaid") return dimHook(b, "cluster_nctaid", clusterAxis, c);
    }
    if (r == "laneid") return laneId(b);
    if (r == "warpsize") return b.getInt32(em.warpSize);
    // A profiled kernel's clock and SM: the machine's (Profile.h).
    if (r == "globaltimer") return callHook(b, "tessera_emu_clock");
    if (r == "smid") return callHook(b, "tessera_emu_unit");
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
  // barrier.cluster.{arrive[.relaxed],wait}[.aligned]: the machine's
  // cluster barrier (.aligned only promises convergence).
  if (k == "barrier" && t.size() >= 3 && t[1] == "cluster") {
    const int32_t site = em.opId(c);
    if (t[2] == "arrive") {
      callHook(b, "tessera_emu_cluster_arrive", {b.getInt32(site), b.getInt32(has(t, "relaxed") ? 1 : 0)});
      return nullptr;
    }
    if (t[2] == "wait") {
      callHook(b, "tessera_emu_cluster_wait", {b.getInt32(site)});
      return nullptr;
    }
  }
  if (k == "barrier")
    unsupported(c,
                "only bar.sync (for the whole block or with a thread count) and barrier.cluster arrive/wait are "
                "modelled; not bar.arrive or bar.red");
  if (k == "is_explicit_cluster") return b.CreateICmpNE(callHook(b, "tessera_emu_cluster_explicit"), b.getInt32(0));
  // mapa[.shared.cluster] p, rank: the same offset in block `rank`'s shared
  // memory, as a shared::cluster (or generic) address.
  if (k == "mapa" && (t.size() == 1 || (t.size() == 3 && t[1] == "shared" && t[2] == "cluster"))) {
    Value* p = b.CreateAddrSpaceCast(c.getArgOperand(0), em.flatPtr());
    Value* r = callHook(b, "tessera_emu_mapa", {p, c.getArgOperand(1), b.getInt32(em.opId(c))});
    return b.CreateAddrSpaceCast(r, c.getType());
  }
  // Cluster launch control: the request is the machine's; the response is
  // its encoding (EmuAbi.h, TESSERA_EMU_CLC_CANCELLED), decoded here.
  if (k == "clusterlaunchcontrol" && t.size() >= 3) {
    if (t[1] == "try_cancel") {
      if (has(t, "multicast")) unsupported(c, "only the request of one block (no .multicast::cluster::all)");
      callHook(b, "tessera_emu_clc_try_cancel",
               {b.CreateAddrSpaceCast(c.getArgOperand(0), em.flatPtr()),
                b.CreateAddrSpaceCast(c.getArgOperand(1), em.flatPtr()), b.getInt32(em.opId(c))});
      return nullptr;
    }
    Value* r = c.getArgOperand(0);
    auto word = [&](unsigned i) { return b.CreateTrunc(b.CreateLShr(r, 32 * i), b.getInt32Ty()); };
    if (t[1] == "query_cancel" && t[2] == "is_canceled")
      return b.CreateICmpEQ(word(3), b.getInt32(TESSERA_EMU_CLC_CANCELLED));
    if (t[1] == "query_cancel" && t[2] == "get_first_ctaid" && t.size() == 4) {
      const unsigned axis = t[3] == "x" ? 0 : t[3] == "y" ? 1 : 2;
      return word(axis);
    }
    unsupported(c, "not a cluster launch control request or query the machine models");
  }
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
    // The block-scaled forms (sm_120a): the element formats and the
    // selectors in the mode (EmuAbi.h), which PTX takes as immediates.
    const std::string scaled = "block.scale.m16n8k32.row.col.mxf8f6f4.scale.1x.f32.";
    const std::string mxf4 = "block.scale.m16n8k64.row.col.mxf4.scale.2x.f32.e2m1.e2m1.f32.ue8m0";
    const std::string nvf4 = "block.scale.m16n8k64.row.col.mxf4nvf4.scale.4x.f32.e2m1.e2m1.f32.ue4m3";
    if (((rest.starts_with(scaled) && rest.ends_with(".f32.ue8m0")) || rest == mxf4 || rest == nvf4) &&
        c.arg_size() == 16) {
      auto fmt = [](llvm::StringRef n) {
        return llvm::StringSwitch<int32_t>(n)
            .Case("e4m3", TESSERA_EMU_MXF_E4M3)
            .Case("e5m2", TESSERA_EMU_MXF_E5M2)
            .Case("e2m3", TESSERA_EMU_MXF_E2M3)
            .Case("e3m2", TESSERA_EMU_MXF_E3M2)
            .Case("e2m1", TESSERA_EMU_MXF_E2M1)
            .Default(-1);
      };
      auto sel = [&](unsigned i, uint64_t max) -> int32_t {
        auto* k = llvm::dyn_cast<llvm::ConstantInt>(c.getArgOperand(i));
        if (!k || k->getZExtValue() > max)
          unsupported(c,
                      "a block-scale selector that is not a constant in range (byte-id 0-3, thread-id-a 0-1, "
                      "thread-id-b 0-3)");
        return static_cast<int32_t>(k->getZExtValue());
      };
      // t: mma block scale m16n8k32 row col mxf8f6f4 scale 1x f32 <a> <b> f32 ue8m0
      const int32_t fa = fmt(t[t.size() - 4]), fb = fmt(t[t.size() - 3]);
      if (fa < 0 || fb < 0) unsupported(c, "an element format of kind::mxf8f6f4 that is not modelled");
      int32_t mode = TESSERA_EMU_MMA_BLOCK_SCALE | fa << 16 | fb << 19 | sel(11, 3) << 8 | sel(12, 1) << 10 |
                     sel(14, 3) << 12 | sel(15, 3) << 14 | (rest == mxf4 ? TESSERA_EMU_MMA_MXF4_K64 : 0) |
                     (rest == nvf4 ? TESSERA_EMU_MMA_NVF4_K64 : 0);
      if (rest == mxf4 && (sel(11, 3) % 2 != 0 || sel(14, 3) % 2 != 0))
        unsupported(c, "a scale_vec::2X byte-id other than 0 or 2");
      if (rest == nvf4 && (sel(11, 3) != 0 || sel(14, 3) != 0)) unsupported(c, "a scale_vec::4X byte-id other than 0");
      return matrixCall(b, c, "tessera_emu_mma_sync", mode, {0, 1, 2, 3, 10}, {4, 5, 13}, {6, 7, 8, 9});
    }
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
  if (k == "tcgen05") return tcgen05(b, c, t);
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
Value* Lowerer::cpAsync(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t) {
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
Value* Lowerer::nvvmMath(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t) {
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

}  // namespace tessera::codegen::emu::intrinsics
