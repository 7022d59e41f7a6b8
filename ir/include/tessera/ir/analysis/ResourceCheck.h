// Target resource checks on the tile IR, parameterised by the target's
// limits so the codegen layer of each backend calls them with its numbers
// (docs/pipelining.md has the table of shared-memory limits).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tessera/ir/IR.h"

namespace tessera::ir {

/// Shared memory one program of `f` needs, in bytes: the sum of its shared
/// allocs (every alloc lives for the whole kernel; no reuse between buffers).
int64_t sharedMemoryBytes(const Function& f);

/// Throws ResourceError when the shared buffers of `f` exceed `limitBytes`.
/// The message lists every shared buffer (name, shape, dtype, bytes, the
/// user's file:line), the total against the limit of `targetName`, and a
/// suggestion computed from the numbers (fewer pipeline stages when the
/// buffers are staged, otherwise smaller tiles).
void checkSharedMemory(const Function& f, int64_t limitBytes, const std::string& targetName);

/// The per-program (per-block / per-workgroup) shared-memory limit of a GPU
/// architecture ("sm_90", "sm_80", "sm_86", "sm_89", "gfx90a", "gfx942",
/// "gfx950", "gfx1100"), or nullopt for an architecture not in the table.
std::optional<int64_t> sharedMemoryLimit(const std::string& arch);

}  // namespace tessera::ir
