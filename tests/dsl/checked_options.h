// The launch options of the checked-launch tests (CPU and emulated GPUs).
#pragma once

#include "tessera/tessera.h"

namespace tessera::testing {

/// A checked launch on one worker thread: with several, the access
/// reported is the first one detected among the violating programs, which
/// depends on scheduling.
inline LaunchOptions checkedLaunch() {
  LaunchOptions o;
  o.checkBounds = true;
  o.threads = 1;
  return o;
}

}  // namespace tessera::testing
