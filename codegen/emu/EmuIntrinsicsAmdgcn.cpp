// AMD's intrinsics (llvm.amdgcn.*) on the SIMT machine (EmuIntrinsics.h):
// work-item and workgroup ids, barriers and scheduling hints, the lane
// exchanges (ds_bpermute, DPP, swizzles, readlane, ballot, mbcnt), MFMA and
// WMMA, the implicit kernel arguments and dispatch packet, and the float
// helpers of the AMDGPU pipeline, each mapped to a machine hook or host IR
// with its exact semantics, or rejected with a CompileError naming it.
#include <numbers>

#include <llvm/ADT/StringSwitch.h>

#include "codegen/emu/EmuIntrinsics.h"
#include "tessera/support/EmuAbi.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::emu::intrinsics {

Value* Lowerer::amdgcn(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t) {
  const std::string& k = t[0];
  auto arg = [&](unsigned i) { return c.getArgOperand(i); };
  std::string name;
  for (size_t i = 0; i < t.size(); ++i) name += (i ? "." : "") + t[i];
  if (k == "workitem" && t.size() == 3 && t[1] == "id") return dimHook(b, "thread_id", t[2], c);
  if (k == "workgroup" && t.size() == 3 && t[1] == "id") return dimHook(b, "block_id", t[2], c);
  if (name == "wavefrontsize") return b.getInt32(em.warpSize);
  // A profiled kernel's clock and CU (its hardware-id read): the machine's
  // (Profile.h). No other s_getreg is emitted.
  auto* msg = name.rfind("s.sendmsg.rtn", 0) == 0 ? llvm::dyn_cast<llvm::ConstantInt>(arg(0)) : nullptr;
  if (name == "s.memrealtime" || (msg && msg->getZExtValue() == 0x83))  // MSG_RTN_GET_REALTIME
    return callHook(b, "tessera_emu_clock");
  if (name == "s.getreg") return callHook(b, "tessera_emu_unit");
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
  if (k == "mfma" && t.size() >= 5 && t[1] == "scale" && t[2] == "f32" && t[4] == "f8f6f4" &&
      (t[3] == "16x16x128" || t[3] == "32x32x64")) {
    // CDNA4's f8f6f4 forms: (A, B, C, cbsz, blgp, op_sel A, scale A, op_sel
    // B, scale B). cbsz / blgp give A's / B's format: fp8 (0, e4m3) and bf8
    // (1, e5m2) in eight registers, fp4 (4, e2m1) in four are modelled; fp6
    // (2, 3) is not. Zero op_sel and constant zero scales are what LLVM
    // selects as the unscaled instruction; anything else is the scaled one
    // (v_mfma_ld_scale_b32 before it), its scale words after each operand.
    if (em.row && em.row->f8f6f4MfmaK == 0)
      unsupported(c, std::string("the f8f6f4 MFMAs are CDNA4's, not ") + em.row->arch + "'s");
    auto cst = [&](unsigned i) -> int64_t {
      auto* ci = llvm::dyn_cast<llvm::ConstantInt>(arg(i));
      return ci ? ci->getSExtValue() : -1;
    };
    auto regs = [&](unsigned i) -> int64_t {
      auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(arg(i)->getType());
      return vt && vt->getElementType()->isIntegerTy(32) ? vt->getNumElements() : -1;
    };
    auto format = [&](unsigned i, unsigned operand) -> int32_t {
      const int64_t f = cst(i), want = f == TESSERA_EMU_MXF_E2M1 ? 4 : 8;
      if (c.arg_size() != 9 || (f != TESSERA_EMU_MXF_E4M3 && f != TESSERA_EMU_MXF_E5M2 && f != TESSERA_EMU_MXF_E2M1) ||
          regs(operand) != want)
        unsupported(c,
                    "only the fp8, bf8 (cbsz / blgp 0, 1; eight registers) and fp4 (4; four registers) operand "
                    "formats are modelled");
      return static_cast<int32_t>(f);
    };
    const int32_t fa = format(3, 0), fb = format(4, 1);
    const bool scaled = cst(5) != 0 || cst(6) != 0 || cst(7) != 0 || cst(8) != 0;
    if (scaled && (cst(5) < 0 || cst(5) > 3 || cst(7) < 0 || cst(7) > 3))
      unsupported(c, "an op_sel of a scale that is not a constant 0-3");
    const int32_t mode =
        (t[3] == "16x16x128" ? TESSERA_EMU_MFMA_16X16X128_F8F6F4 : TESSERA_EMU_MFMA_32X32X64_F8F6F4) | fa << 16 |
        fb << 19 |
        (scaled ? TESSERA_EMU_MFMA_SCALED | static_cast<int32_t>(cst(5)) << 8 | static_cast<int32_t>(cst(7)) << 10 : 0);
    if (scaled) return matrixCall(b, c, "tessera_emu_mfma", mode, {0, 6}, {1, 8}, {2});
    return matrixCall(b, c, "tessera_emu_mfma", mode, {0}, {1}, {2});
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
                       .Case("mfma.f32.32x32x16.f16", TESSERA_EMU_MFMA_32X32X16_F16)
                       .Case("mfma.f32.32x32x16.bf16", TESSERA_EMU_MFMA_32X32X16_BF16)
                       .Case("mfma.f32.16x16x32.f16", TESSERA_EMU_MFMA_16X16X32_F16)
                       .Case("mfma.f32.16x16x32.bf16", TESSERA_EMU_MFMA_16X16X32_BF16)
                       .Default(-1);
    if (mode < 0)
      unsupported(c,
                  "only the f32 32x32x8 / 16x16x16 f16 and bf16_1k, 32x32x16 / 16x16x32 f16 and bf16, the i32 "
                  "16x16x16 / 16x16x32 i8 and the f32 16x16x32 fp8/bf8 forms are modelled");
    for (unsigned i = 3; i < 6; ++i) {
      auto* ci = llvm::dyn_cast<llvm::ConstantInt>(arg(i));
      if (!ci || !ci->isZero()) unsupported(c, "cbsz / abid / blgp broadcasts are not modelled");
    }
    if (mode >= TESSERA_EMU_MFMA_16X16X32_FP8_FP8 && mode <= TESSERA_EMU_MFMA_16X16X32_BF8_BF8) {
      // The same instructions read gfx942's FNUZ formats and gfx950's OCP
      // ones (Targets.def's fp8Mfma column).
      if (!em.row)
        unsupported(c, "the fp8 MFMAs read the FNUZ or the OCP formats by architecture, and this module names none");
      const bool aBf8 = mode >= TESSERA_EMU_MFMA_16X16X32_BF8_FP8,
                 bBf8 = mode == TESSERA_EMU_MFMA_16X16X32_FP8_BF8 || mode == TESSERA_EMU_MFMA_16X16X32_BF8_BF8;
      switch (em.row->fp8Mfma) {
        case GpuArch::Fp8Mfma::Fnuz: break;
        case GpuArch::Fp8Mfma::Ocp:
          mode = TESSERA_EMU_MFMA_16X16X32_OCP_F8 | (aBf8 ? TESSERA_EMU_MFMA_A_BF8 : 0) |
                 (bBf8 ? TESSERA_EMU_MFMA_B_BF8 : 0);
          break;
        case GpuArch::Fp8Mfma::None: unsupported(c, std::string(em.row->arch) + " has no fp8 MFMA");
      }
    }
    return matrixCall(b, c, "tessera_emu_mfma", mode, {0}, {1}, {2});
  }
  // WMMA 16x16x16: RDNA3 and RDNA4 share the intrinsics' names; RDNA4's
  // operands are half as wide (8 elements per lane, 128 bits of f16/bf16
  // or 64 of 8-bit codes), which selects its layouts.
  auto gfx12 = [&](unsigned opArg, uint64_t bits) {
    return arg(opArg)->getType()->getPrimitiveSizeInBits().getFixedValue() == bits ? TESSERA_EMU_WMMA_GFX12 : 0;
  };
  if (k == "wmma" && t.size() >= 4 && t[1] == "f32" && t[2] == "16x16x16" && (t[3] == "f16" || t[3] == "bf16")) {
    if (c.arg_size() != 3) unsupported(c);
    return matrixCall(b, c, "tessera_emu_wmma",
                      (t[3] == "f16" ? TESSERA_EMU_WMMA_16X16X16_F16 : TESSERA_EMU_WMMA_16X16X16_BF16) | gfx12(0, 128),
                      {0}, {1}, {2});
  }
  if (k == "wmma" && t.size() >= 5 && t[1] == "f32" && t[2] == "16x16x16" && (t[3] == "fp8" || t[3] == "bf8") &&
      (t[4] == "fp8" || t[4] == "bf8")) {
    // RDNA4 only: (A, B, C), fp8 = e4m3, bf8 = e5m2.
    if (c.arg_size() != 3 || !gfx12(0, 64)) unsupported(c);
    const int32_t mode = TESSERA_EMU_WMMA_16X16X16_FP8_FP8 + (t[3] == "bf8" ? 2 : 0) + (t[4] == "bf8" ? 1 : 0);
    return matrixCall(b, c, "tessera_emu_wmma", mode | TESSERA_EMU_WMMA_GFX12, {0}, {1}, {2});
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
                   (sb->isOne() ? TESSERA_EMU_WMMA_B_SIGNED : 0) | gfx12(1, 64);
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

// The hidden kernel arguments of code object v5 (implicitarg.ptr) and the
// HSA dispatch packet (dispatch.ptr), materialised per call frame from the
// machine's hooks. Building the real structures instead of matching load
// offsets keeps any access pattern the optimiser forms correct; SROA/GVN
// forward the stores to the loads, so the buffers mostly vanish.
Value* Lowerer::frameBuffer(llvm::Function* f, unsigned bytes, const char* name, IRBuilder<>& b) {
  const llvm::DataLayout& dl = em.m.getDataLayout();
  b.SetInsertPoint(&*f->getEntryBlock().getFirstInsertionPt());
  llvm::Type* ty = llvm::ArrayType::get(b.getInt8Ty(), bytes);
  llvm::AllocaInst* a = b.CreateAlloca(ty, dl.getAllocaAddrSpace(), nullptr, name);
  a->setAlignment(llvm::Align(8));
  b.CreateMemSet(a, b.getInt8(0), bytes, llvm::MaybeAlign(8));
  return a;
}

void Lowerer::put(IRBuilder<>& b, Value* buf, unsigned off, Value* v) {
  b.CreateAlignedStore(v, b.CreateConstInBoundsGEP1_32(b.getInt8Ty(), buf, off), llvm::Align(2));
}

Value* Lowerer::implicitArgs(llvm::Function* f) {
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
    put(b, buf, 12 + 2 * d, b.CreateTrunc(callHook(b, std::string("tessera_emu_block_dim_") + xyz[d]), b.getInt16Ty()));
  }
  put(b, buf, 64, b.getInt16(3));  // hidden_grid_dims
  return slot = buf;
}

Value* Lowerer::dispatchPacket(llvm::Function* f) {
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

}  // namespace tessera::codegen::emu::intrinsics
