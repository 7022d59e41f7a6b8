// Work analysis: the floating-point operations and the global-memory bytes
// one launch of a kernel implies, from its tile IR and the launch (grid,
// integer arguments, buffer sizes). LLVM-free; the speed-of-light table,
// the benchmark harness's throughput and (later) the performance model and
// the autotuner all count work here, so they agree on it.
//
// Conventions (docs/sol.md states them for users):
//  * flops count every lane of every float tile op, masked or not: the
//    hardware computes masked-off lanes too. add, sub, mul, div, rem, min,
//    max, pow, sqrt, rsqrt, floor and the transcendentals (exp, exp2, log,
//    log2, tanh, erf) are 1 flop per element, fma 2; neg, abs, cmp, select
//    and cast are 0. A reduction of n elements into m is n - m flops. A dot
//    of (M x K) by (K x N) is 2 M N K flops, classed by its operand dtype
//    (tensor cores where the machine has them). Integer arithmetic (index
//    computations) is not counted. Transcendentals are also counted on their
//    own: a roofline cannot see that one exp costs tens of instructions.
//  * bytes are the compulsory traffic of global memory: per pointer
//    argument, the bytes its loads read (and its stores write), each
//    counted once -- the smaller of the bytes its tiles access over the
//    whole launch and the size of the buffer passed (when known). A buffer
//    both read and written counts both ways. Atomics read and write.
//    Shared and local memory are not counted. The bytes the tiles access
//    (re-reads included) are reported as well: their ratio to the
//    compulsory bytes is the reuse the caches must provide.
//  * loop trip counts come from the launch: `for` bounds that are
//    constants, integer arguments, program ids, grid sizes and integer
//    arithmetic of those are evaluated (per program when they depend on
//    the program id); what cannot be evaluated is counted once and named
//    in `notes`.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/ir/IR.h"

namespace tessera::ir {

/// What a launch passes: the grid and, per kernel argument (in order), the
/// value of an integer scalar or the bytes of memory a pointer may reach
/// (from the pointer to the end of its buffer). Unknown entries stay empty.
struct LaunchFacts {
  std::array<uint64_t, 3> grid{1, 1, 1};
  std::vector<std::optional<int64_t>> scalars;       // integer scalar arguments
  std::vector<std::optional<uint64_t>> bufferBytes;  // pointer arguments
};

/// The kind of unit a flop runs on: a dot (tensor cores / matrix units where
/// the machine has them) or elementwise / reduction math (vector units).
enum class FlopUnit : uint8_t { Vector, Dot };

struct WorkEstimate {
  /// Flops by (unit, dtype): for vector math the dtype of the values, for a
  /// dot its operand dtype (f16, bf16, f32, i8: "flops" of an i8 dot are
  /// integer operations, counted against the machine's int8 rate).
  struct Flops {
    FlopUnit unit = FlopUnit::Vector;
    DType dtype = DType::F32;
    double count = 0;
  };
  std::vector<Flops> flops;
  /// exp, exp2, log, log2, tanh, erf elements (already inside `flops`).
  double transcendentals = 0;

  /// Global-memory traffic of one pointer argument.
  struct ArgTraffic {
    unsigned arg = 0;                              // kernel argument index
    std::string name;                              // its name hint ("in", "out"), or "#i"
    double bytesRead = 0, bytesWritten = 0;        // compulsory (see above)
    double accessedRead = 0, accessedWritten = 0;  // every lane of every access
    bool boundedByBuffer = false;                  // the buffer's size lowered a count
  };
  std::vector<ArgTraffic> args;  // pointer arguments that are read or written, in order

  /// Assumptions the estimate had to make (loop bounds it could not
  /// evaluate, `if`s counted both ways, programs sampled), with the op's
  /// location; empty when the counts are exact under the conventions above.
  std::vector<std::string> notes;
  uint64_t programs = 1;  // grid size

  /// The loop that runs the most iterations over the launch (the main loop
  /// a performance model follows): its iterations summed over all
  /// programs, and its `stages` (1 for a loop that is not pipelined). No
  /// loop: 0 iterations. A loop whose trip count is unknown counts once
  /// per time it is reached, as its body does.
  struct HotLoop {
    double iterations = 0;
    int64_t stages = 1;
    std::string loc;  // the loop's source location, for reports
  };
  HotLoop hotLoop;

  double totalFlops() const;
  double flopsOf(FlopUnit unit, DType dtype) const;
  double bytesRead() const;
  double bytesWritten() const;
  double bytes() const { return bytesRead() + bytesWritten(); }
  double accessedBytes() const;
  /// Flops per compulsory byte (0 when no bytes move).
  double intensity() const { return bytes() > 0 ? totalFlops() / bytes() : 0; }
};

/// Counts the work of one launch of `f`. Never throws for a verified
/// function; facts with fewer entries than arguments are padded as unknown.
WorkEstimate estimateWork(const Function& f, const LaunchFacts& launch);

/// "f32", "f16 dot", ...: a flop class as tables print it.
std::string flopClassName(FlopUnit unit, DType dtype);

}  // namespace tessera::ir
