// The scopes of a kernel's probes (IR.h, "Profiling"), numbered once for
// every target's profiled lowering: a record's scope index means the same
// scope on the CPU, the GPUs and the emulator.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/ir/IR.h"

namespace tessera::ir {

struct ProbeScopes {
  /// "name @ file:line", by scope index: one scope per name and location
  /// (a scope's begin and end share it), in program order.
  std::vector<std::string> names;
  /// Each probe's scope index.
  std::unordered_map<const Op*, uint32_t> of;
  explicit ProbeScopes(const Function& f);
  /// A probe's record (tessera/support/Profile.h): index << 1 | end.
  uint32_t event(const Op& probe) const;
};

}  // namespace tessera::ir
