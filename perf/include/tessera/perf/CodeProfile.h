// What a GPU kernel's listing says about its cost: the instruction mix of
// the whole kernel and of its main loop, by the classes of
// InstrClasses.def. Read from SASS (nvdisasm), PTX or AMDGCN assembly; the
// code-quality benchmark (bench/gpu_static_bench.cpp) and the performance
// model (GpuModel.h) both count here, so they agree on what "the main loop"
// is.
//
// The main loop of a listing is its longest loop: a backward branch (a
// branch to a label at or above it) spanning at least two instructions; the
// range [label, branch] counts. Where some loop issues matrix instructions,
// the longest of those (a warp-specialised kernel's producer loop, its
// copies only, may be longer: it is counted apart). Compilers add short cycles around a source
// loop: the AMDGPU backend places a loop's exit block above the header, so
// the exit test is a backward branch too; an innermost-loop rule would
// count those. SASS ends in a one-instruction `BRA` to itself after EXIT,
// which the two-instruction minimum excludes; a range holding an
// unpredicated end of the program (EXIT, ret, s_endpgm) is no loop either
// (an exit block placed above the code that branches to it). Counted are
// instructions (SASS: the /*addr*/ lines; PTX: statements ending in ';'
// that are not directives; AMDGCN: lines of the kernel's text that are not
// labels, directives or comments), NOPs not included (padding).
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tessera::perf {

enum class Listing : uint8_t { SASS, PTX, AMDGCN };
const char* name(Listing l);  // "sass", "ptx", "amdgcn"

enum class InstrClass : uint8_t {
#define TS_INSTR_CLASS(id, name, sass, ptx, amdgcn) id,
#include "tessera/perf/InstrClasses.def"
};
constexpr size_t kNumInstrClasses = 0
#define TS_INSTR_CLASS(id, name, sass, ptx, amdgcn) +1
#include "tessera/perf/InstrClasses.def"
    ;
const char* name(InstrClass c);  // "mma", "global load", ...

/// Instructions by class.
struct InstrMix {
  std::array<int, kNumInstrClasses> counts{};
  int total() const;
  int operator[](InstrClass c) const { return counts[static_cast<size_t>(c)]; }
  int& operator[](InstrClass c) { return counts[static_cast<size_t>(c)]; }
  /// "12 mma, 4 shared load, ...": the non-zero classes.
  std::string str() const;
};

struct CodeProfile {
  Listing listing = Listing::PTX;
  InstrMix all;   // the whole kernel
  InstrMix loop;  // its main loop (empty when it has none)
  bool hasLoop = false;
  /// Instructions of the main loop that only one warp runs: those a
  /// forward branch inside the loop skips over where the skipped code
  /// issues an async copy (TMA copies issued by one elected lane of one
  /// warp; the other warps branch around them). The loop minus these is
  /// what every other warp issues per iteration.
  int loopIssueOnly = 0;
  InstrMix loopIssue;  // those instructions by class
  /// A warp-specialised kernel's producer loop: outside the main loop (the
  /// longest loop with matrix instructions), the longest loop that issues
  /// async copies and no matrix instruction; what the producer warp runs
  /// per iteration while the others run the main loop.
  bool hasProducerLoop = false;
  InstrMix producerLoop;
  /// Instructions of the main loop, -1 without one (the benchmark's column).
  int loopInstructions() const { return hasLoop ? loop.total() : -1; }
};

/// Reads a listing. AMDGCN text is the assembly of one kernel (from its
/// symbol's label to .Lfunc_end); SASS and PTX, the kernel's listing.
CodeProfile profileListing(const std::string& text, Listing kind);

}  // namespace tessera::perf
