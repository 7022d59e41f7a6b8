// A profiled launch's result: the scopes each warp ran through, in time,
// as a Chrome / Perfetto trace and a summary table (docs/profiling.md).
//
// Pass a Profile through LaunchOptions::profile; the kernel must be a
// profiled compile (CompileOptions::profile; tessera::CompiledKernel does
// that itself for a profiled launch). The launch runs to completion (on a
// stream it waits for the stream) and fills the Profile from the buffer
// the kernel wrote (tessera/support/Profile.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::rt {

struct ProfileOptions {
  /// Records each warp keeps: a ring, so a longer run keeps its last ones
  /// (rounded up to a power of two).
  uint32_t recordsPerWarp = 2048;
  /// Programs recorded: those whose linear id (x fastest) is below this.
  uint32_t programs = 64;
};

/// One scope as one warp ran it: [begin, end) in nanoseconds from the
/// launch's first record (the emulator counts one per operation issued).
struct ProfileSlice {
  std::string scope;     // "mainloop @ gemm.cpp:42"
  uint32_t depth = 0;    // nesting within the warp (0: outermost)
  uint64_t program = 0;  // linear program id
  uint32_t warp = 0;     // within the program
  uint32_t unit = 0;     // SM / CU / core
  std::string role;      // "producer" / "consumer" where warp-specialised, else ""
  double begin = 0, end = 0;
};

struct Profile {
  ProfileOptions options;  // read by the launch
  // ---- filled by the launch
  std::string kernel, device;
  /// What the times count: "ns (%globaltimer)", "ns (s_memrealtime, 100 MHz)",
  /// "ns (time-stamp counter at X GHz)", "emulated operations".
  std::string clock;
  std::vector<ProfileSlice> slices;  // per warp in time order, warps in slot order
  uint64_t programs = 0;             // programs recorded
  uint32_t warpsPerProgram = 0;
  uint64_t overwritten = 0;  // records lost to a full ring
  uint64_t unmatched = 0;    // ends whose begin was overwritten, begins never ended

  /// The Chrome trace event format (JSON), which Perfetto and
  /// chrome://tracing open: a process per SM / CU / core, a thread per
  /// program and warp, a complete event per slice.
  std::string chromeTrace() const;
  /// Writes chromeTrace() to `path` (RuntimeError when it cannot).
  void writeChromeTrace(const std::string& path) const;
  /// Per role and scope: how often it ran, and its time per warp (the sum
  /// over its runs) as min / median / max over the warps that ran it.
  std::string summary() const;
};

}  // namespace tessera::rt
