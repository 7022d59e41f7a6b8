// What the DSL library's other files take from dsl/lib/Compile.cpp. Private.
#pragma once

#include <memory>

#include "tessera/Compile.h"

namespace tessera::detail {

/// The artifact compile(k, target, opts) makes or loads (from the
/// persistent cache: its code, no stages), without recompiling for stages.
std::shared_ptr<codegen::Artifact> compiledArtifact(const Kernel& k, const Target& target, const CompileOptions& opts);

}  // namespace tessera::detail
