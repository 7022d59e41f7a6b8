// What a kernel asks of shared memory, and the choices that change it.
//
// The GPU lowering addresses every shared area (an op's scratch, a loop
// area, a buffer, the transaction barriers) through a placeholder and
// records what each area needs; the plan (ir::SharedPlan) is made from
// those needs after the lowering, and the placeholders become offsets
// (Lower::placeAreas). A few choices trade shared bytes for something else
// (SharedChoices); their effect on the needs is evaluated by a model, not
// by lowering the kernel again: Lower::needs re-evaluates the recorded
// requests under other choices from the lowering's planning state alone.
// chooseShared (SharedChoice.cpp) weighs the choices on that model, and
// the kernel is lowered a second time only where the chosen code differs
// from the first one's. Each lowering's own record is checked against the
// model (an internal error where they differ), so the model cannot drift
// from the code it predicts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/ir/analysis/GpuSharedMemory.h"

namespace tessera::codegen {

class GpuTargetInfo;
struct GpuOptions;

/// The choices that change the code and what it asks of shared memory
/// (each explained where the lowering implements it).
struct SharedChoices {
  bool invariantsInRegisters = false;  // gpu_lower::Hoisted::inRegisters
  bool swizzle = false;                // Lower::dotPlan (AMD staging swizzled, not padded)
  bool fewerSlots = false;             // Lower::planFewerSlots
  bool chunk = false;                  // Lower::conversionChunks
  bool fragmentsFirst = false;         // Lower::dotArea (AMD chained dots)
  bool operator==(const SharedChoices&) const = default;
  std::string str() const;
};

/// What one lowering asks of shared memory (or what the model predicts it
/// would ask under some choices).
struct SharedNeeds {
  std::map<const ir::Op*, uint64_t> scratch;                    // per op, the largest request
  std::vector<std::pair<const void*, ir::LoopArea>> loopAreas;  // in the order first requested
  std::unordered_map<const ir::Value*, uint64_t> storage;       // buffers stored otherwise than their type
  std::unordered_map<const ir::Value*, uint64_t> fewerStorage;  // the same with fewer slots
  std::unordered_map<const void*, uint64_t> aligns;             // areas aligned beyond 16 bytes
  uint64_t tmaBarrierBytes = 0;
  unsigned threads = 0;
  bool swizzleCandidates = false, fewerCandidates = false, chunkCandidates = false;
  int fragmentsCandidates = 0;

  ir::SharedPlan plan(const ir::Function& f) const { return ir::SharedPlan(f, scratch, storage, loopAreas, aligns); }
  uint64_t planBytes(const ir::Function& f) const { return plan(f).totalBytes(); }
  /// Whether some loop area lives through its whole loop.
  bool wholeLoopAreas() const;
  /// Empty where `o` is the same, else the first difference, in words.
  std::string differences(const SharedNeeds& o) const;
};

/// One scratch request of an op, as the lowering made it, in the terms the
/// model re-evaluates under other choices.
struct ScratchRequest {
  enum class Kind {
    Fixed,       // the same whatever the choices
    Conversion,  // a layout conversion: `bytes` whole, `chunkedBytes` in row chunks
    DotStaging,  // a tensor-core dot's operand staging: Lower::dotArea
  };
  Kind kind = Kind::Fixed;
  uint64_t bytes = 0, chunkedBytes = 0, align = 16;
};

/// Every scratch request of a lowering, per op, and the order its loop
/// areas were first asked for.
struct ScratchRequests {
  std::map<const ir::Op*, std::vector<ScratchRequest>> byOp;
  std::vector<const void*> loopAreaOrder;
};

/// The choices of one kernel, and what chooseShared found on the way (for
/// compileGpu's weighing of the code, GpuLoweringResult).
struct SharedChoice {
  SharedChoices choices;
  bool invariantsForLds = false;
  int64_t ldsWavesWithoutInvariants = 0;
  bool fragmentsForLds = false;
  int64_t ldsWavesWithoutFragments = 0;
};

/// Weighs the choices on `model` (the needs under given choices), starting
/// from `start` (whose needs `model(start)` are the first lowering's).
SharedChoice chooseShared(const ir::Function& f, const GpuTargetInfo& t, const SharedChoices& start,
                          const std::function<SharedNeeds(const SharedChoices&)>& model);

}  // namespace tessera::codegen
