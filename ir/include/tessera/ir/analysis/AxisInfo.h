// Axis info: a forward analysis over integer and pointer values (Triton
// style), telling the backends which tiles of offsets/pointers are runs of
// consecutive elements, so loads and stores can become vector accesses.
//
// For every dimension d of a tile value:
//   contiguity[d]   elements come in runs of this length, each run starting
//                   at an index multiple of it, whose values increase by 1
//                   (pointers: by one element) along d;
//   constancy[d]    runs of this length, aligned likewise, hold one value;
//   divisibility[d] the first element of each contiguity run is a multiple
//                   of it (pointers: in bytes).
// Scalars are described as rank-1 with one entry. Unknown values get 1s.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "tessera/ir/IR.h"

namespace tessera::ir {

struct AxisInfo {
  std::vector<int64_t> contiguity, divisibility, constancy;
  static AxisInfo unknown(int rank);
};

class AxisAnalysis {
 public:
  explicit AxisAnalysis(const ir::Function& f);
  /// The info of `v` (unknown if v is neither integer nor pointer-like).
  AxisInfo get(const ir::Value* v) const;
  /// True if, split into aligned chunks of `chunk` elements in row-major
  /// order, every chunk of `v` is a run of consecutive values along the last
  /// dimension (so one vector access from the chunk's first pointer covers it).
  bool contiguousChunks(const ir::Value* v, int64_t chunk) const;

 private:
  void visit(const ir::Op& op);
  std::unordered_map<const ir::Value*, AxisInfo> info_;
};

}  // namespace tessera::ir
