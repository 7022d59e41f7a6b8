// chooseShared: the choices that trade shared bytes for registers or
// instructions (SharedNeeds.h), weighed on the needs model, never by
// lowering the kernel to see. Every choice is kept only where it raises the
// occupancy the shared memory allows on a target where that occupancy is
// what the shared memory trades for (AMD's waves per SIMD), or where the
// plan would not fit at all (loop-invariant operands in registers).
#include "codegen/gpu/SharedNeeds.h"

#include <tuple>

#include "codegen/gpu/GpuTargetInfo.h"
#include "tessera/ir/IR.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

std::string SharedChoices::str() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : ", ") + std::string(name);
  };
  add(invariantsInRegisters, "invariant operands in registers");
  add(swizzle, "swizzled dot staging");
  add(fewerSlots, "S-1 slots");
  add(chunk, "conversions in row chunks");
  add(fragmentsFirst, "chained dots' fragments first");
  return s.empty() ? "none" : s;
}

bool SharedNeeds::wholeLoopAreas() const {
  for (auto& [key, a] : loopAreas)
    if (a.wholeLoop) return true;
  return false;
}

std::string SharedNeeds::differences(const SharedNeeds& o) const {
  auto num = [](uint64_t v) { return std::to_string(v); };
  for (auto& [op, bytes] : scratch) {
    auto it = o.scratch.find(op);
    if (it == o.scratch.end() || it->second != bytes)
      return "scratch of " + std::string(ir::opName(op->code())) + " at " + op->loc().str() + ": " + num(bytes) +
             " bytes against " + (it == o.scratch.end() ? std::string("none") : num(it->second));
  }
  for (auto& [op, bytes] : o.scratch)
    if (!scratch.count(op))
      return "scratch of " + std::string(ir::opName(op->code())) + " at " + op->loc().str() + ": none against " +
             num(bytes) + " bytes";
  if (loopAreas.size() != o.loopAreas.size())
    return num(loopAreas.size()) + " loop areas against " + num(o.loopAreas.size());
  for (size_t i = 0; i < loopAreas.size(); ++i) {
    const auto& [k, a] = loopAreas[i];
    const auto& [ok, b] = o.loopAreas[i];
    if (k != ok || a.loop != b.loop || a.bytes != b.bytes || a.what != b.what || a.wholeLoop != b.wholeLoop)
      return "loop area " + num(i) + " (" + a.what + ", " + num(a.bytes) + " bytes" +
             (a.wholeLoop ? "" : ", not the whole loop") + ") against (" + b.what + ", " + num(b.bytes) + " bytes" +
             (b.wholeLoop ? "" : ", not the whole loop") + ")";
  }
  if (storage != o.storage) return "buffer storage bytes";
  if (fewerStorage != o.fewerStorage) return "buffer storage bytes with fewer slots";
  if (aligns != o.aligns) return "area alignments";
  if (tmaBarrierBytes != o.tmaBarrierBytes)
    return "transaction barriers " + num(tmaBarrierBytes) + " bytes against " + num(o.tmaBarrierBytes);
  if (threads != o.threads) return "threads " + num(threads) + " against " + num(o.threads);
  if (swizzleCandidates != o.swizzleCandidates || fewerCandidates != o.fewerCandidates ||
      chunkCandidates != o.chunkCandidates || fragmentsCandidates != o.fragmentsCandidates)
    return "candidates (swizzle " + num(swizzleCandidates) + "/" + num(o.swizzleCandidates) + ", fewer slots " +
           num(fewerCandidates) + "/" + num(o.fewerCandidates) + ", chunks " + num(chunkCandidates) + "/" +
           num(o.chunkCandidates) + ", fragments first " + num(fragmentsCandidates) + "/" + num(o.fragmentsCandidates) +
           ")";
  return "";
}

SharedChoice chooseShared(const ir::Function& f, const GpuTargetInfo& t, const SharedChoices& start,
                          const std::function<SharedNeeds(const SharedChoices&)>& model) {
  const GpuOptions& o = t.options();
  SharedChoices c = start;
  SharedNeeds n = model(c);
  SharedChoice out;
  // Loop-invariant dot operands are kept in shared memory across their loop
  // where the target's registers are scarce (Lower::planDotOperands); when
  // that does not fit the shared memory, their fragments go to registers.
  if (!c.invariantsInRegisters && n.wholeLoopAreas() && n.planBytes(f) > t.maxSharedBytes()) {
    c.invariantsInRegisters = true;
    n = model(c);
  }
  // Kept only where the shared memory is what limits the occupancy and the
  // choice raises it: a swizzled read costs address registers, which buy
  // nothing when the waves are limited elsewhere (a 64x64 i8 tile under
  // its 16 KB epilogue conversion: the same bytes, 60 VGPRs against 48;
  // moe_grouped_gemm_swiglu on gfx942: 20736 -> 18432 bytes, 3 waves
  // either way).
  const GpuArch* arch = (n.swizzleCandidates || n.fewerCandidates || n.chunkCandidates) && t.tradesSharedForOccupancy()
                            ? &t.row()
                            : nullptr;
  auto wavesOf = [&](const GpuArch& a, uint64_t bytes) {
    return occupancy(a, 1, static_cast<int64_t>(bytes), static_cast<int>(n.threads)).value;
  };
  auto ldsWaves = [&](uint64_t bytes) { return wavesOf(*arch, bytes); };
  auto planBytes = [&] { return ir::SharedPlan(f, n.scratch, n.storage, n.loopAreas, n.aligns).totalBytes(); };
  // Fewer slots first: only the staged buffers' sizes change. The swizzle
  // is then tried against the smaller plan, and with the fewer slots even
  // where they alone gained nothing: the two together may (a 128x128
  // tile's two padded slots 36864 bytes, swizzled 32768).
  auto chooseStaging = [&] {
    const uint64_t all = planBytes();
    const bool limited = ldsWaves(all) < ldsWaves(0);
    if (limited && n.fewerCandidates &&
        ldsWaves(ir::SharedPlan(f, n.scratch, n.fewerStorage, n.loopAreas, n.aligns).totalBytes()) > ldsWaves(all)) {
      c.fewerSlots = true;
      n.storage = n.fewerStorage;
    }
    const uint64_t base = planBytes();
    if (n.swizzleCandidates && ldsWaves(base) < ldsWaves(0)) {
      auto keep = std::make_tuple(c, n);
      c.swizzle = true;
      c.fewerSlots = c.fewerSlots || n.fewerCandidates;
      n = model(c);
      if (ldsWaves(planBytes()) <= ldsWaves(base)) std::tie(c, n) = std::move(keep);
    }
  };
  // Chunked conversions last, as a whole second choice: a 128x128 f32
  // epilogue conversion (65536 bytes) hides what the staging choices would
  // gain until it shrinks (gfx1100 128x128x32: 65536 bytes whatever the
  // slots; chunked, two swizzled slots bring it to 32768).
  if (arch) {
    chooseStaging();
    const int64_t waves = ldsWaves(planBytes());
    if (n.chunkCandidates && waves < ldsWaves(0)) {
      auto keep = std::make_tuple(c, n);
      c.chunk = true;
      c.swizzle = c.fewerSlots = false;
      n = model(c);
      chooseStaging();
      if (ldsWaves(planBytes()) <= waves) std::tie(c, n) = std::move(keep);
    }
  }
  // Loop-invariant dot operands in registers (Hoisted::inRegisters) also
  // where the LDS limits the waves and freeing their loop areas raises
  // them: the targets with 256 VGPRs per lane (gfx1100) keep them in LDS
  // otherwise. Whether the fragments' registers then cost the waves back,
  // or spill, only the code generator tells: compileGpu compiles again
  // without them unless the code's occupancy beats the waves the LDS
  // allowed before (GpuLoweringResult::ldsWavesWithoutInvariants,
  // GpuOptions::invariantsForLds). Flash attention's Q on gfx1100, 64x64
  // d64: 27648 -> 18432 bytes, 4 -> 6 waves, 143 -> 202 VGPRs.
  if (!c.invariantsInRegisters && o.invariantsForLds && n.wholeLoopAreas() && t.tradesSharedForOccupancy()) {
    const GpuArch& model128 = t.row();
    // Tried only where the LDS allows fewer waves than 128 VGPRs would
    // (10 on gfx1100): a loop holding a dot's fragments and accumulators
    // rarely fits below that, so above it the registers set the waves and
    // the choice would only cost the second compile (the flash_attention
    // example on gfx1100: 12288 bytes and 10 waves either way). And only
    // for one invariant operand: the fragments of several stay live
    // through the whole loop together (the attention backward examples
    // hold four, K, V and their transposes: 6 -> 14 waves by the LDS, 6 by
    // the VGPRs before and no more after, for twice the compile time).
    int wholeLoop = 0;
    for (auto& [key, a] : n.loopAreas) wholeLoop += a.wholeLoop ? 1 : 0;
    const int64_t waves = wavesOf(model128, planBytes());
    if (wholeLoop == 1 && waves < wavesOf(model128, 0) &&
        waves < occupancy(model128, 128, 0, static_cast<int>(n.threads)).value) {
      auto keep = std::make_tuple(c, n);
      c.invariantsInRegisters = true;
      n = model(c);
      out.invariantsForLds = wavesOf(model128, planBytes()) > waves;
      out.ldsWavesWithoutInvariants = waves;
      if (!out.invariantsForLds) std::tie(c, n) = std::move(keep);
    }
  }
  // A chained dot's staged A (flash attention's P = softmax(S), whose
  // accumulator layout is not the MFMA / WMMA A fragments' as it is
  // mma.sync's) read into its fragments before its B (V) is staged over
  // it: the dot's area holds max(A, B) bytes instead of A + B, for the A
  // fragments of all K in registers at once instead of one k-step's
  // (Lower::emitTensorCoreDot). Tried, as the invariants above, only where
  // the LDS allows fewer waves than 128 VGPRs would; kept where the plan's
  // waves rise. The fragments of all K cost registers (a few, or a spill:
  // attention 128x64 d64 w4 on gfx1100) and loop instructions, or save
  // some, so compileGpu weighs the code (GpuOptions::fragmentsForLds).
  // Attention 64x64 d64 w4: gfx942 17408 -> 8704 bytes, 3 -> 4 waves;
  // gfx1100 18432 -> 16384, 6 -> 7. Only for one such dot, where the waves
  // rarely fall back to the registers': the attention backward examples
  // have three, and on gfx1100 the causal one keeps 6 waves with them (230
  // VGPRs) and a loop 18 instructions longer, which compileGpu's tie rule
  // would keep.
  if (o.fragmentsForLds && n.fragmentsCandidates == 1 && t.tradesSharedForOccupancy()) {
    const GpuArch& model128 = t.row();
    const int64_t waves = wavesOf(model128, planBytes());
    if (waves < occupancy(model128, 128, 0, static_cast<int>(n.threads)).value) {
      auto keep = std::make_tuple(c, n);
      c.fragmentsFirst = true;
      n = model(c);
      out.fragmentsForLds = wavesOf(model128, planBytes()) > waves;
      // With the conversions in row chunks too, where the epilogue's
      // conversion of the f32 output is then what sizes the plan (attention
      // 128x64 d64 w8 on gfx1100, Q in registers: 32768 bytes either way,
      // 18432 with both; 7 -> 8 waves, 212 -> 188 VGPRs).
      if (!out.fragmentsForLds && !c.chunk && n.chunkCandidates) {
        c.chunk = true;
        n = model(c);
        out.fragmentsForLds = wavesOf(model128, planBytes()) > waves;
        c.chunk = out.fragmentsForLds;
      }
      out.ldsWavesWithoutFragments = waves;
      if (!out.fragmentsForLds) std::tie(c, n) = std::move(keep);
    }
  }
  out.choices = c;
  return out;
}

}  // namespace tessera::codegen
