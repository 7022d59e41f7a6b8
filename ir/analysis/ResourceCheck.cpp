#include "tessera/ir/analysis/ResourceCheck.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "../lib/PrinterDetail.h"
#include "tessera/support/Error.h"
#include "tessera/support/Targets.h"

namespace tessera::ir {
namespace {

struct SharedBuf {
  const Op* alloc;
  Shape shape;
  DType dtype;
  int64_t bytes;
  bool staged;  // leading dim = the stages of a pipelined loop that slots it
};

int64_t bytesOf(const Shape& s, DType d) {
  int64_t n = byteSize(d);
  for (int64_t x : s) n *= x;
  return n;
}

std::string kib(int64_t bytes) {
  char buf[64];
  if (bytes % 1024 == 0)
    std::snprintf(buf, sizeof buf, "%lld KiB", static_cast<long long>(bytes / 1024));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  return buf;
}

/// The number of stages of the pipelined loops of `f` (0 if none; the
/// largest if several).
int64_t pipelineStages(const Function& f) {
  int64_t s = 0;
  walk(const_cast<Block&>(f.body()), [&](Op& op) {
    if (op.code() != OpCode::For) return;
    for (const char* k : {"stages", "pipelined"}) {
      auto it = op.attrs().find(k);
      if (it != op.attrs().end() && std::holds_alternative<int64_t>(it->second))
        s = std::max(s, std::get<int64_t>(it->second));
    }
  });
  return s;
}

std::vector<SharedBuf> sharedBuffers(const Function& f) {
  const int64_t stages = pipelineStages(f);
  std::vector<const Value*> slotted;
  walk(const_cast<Block&>(f.body()), [&](Op& op) {
    if (op.code() == OpCode::BufferSlot) slotted.push_back(op.operand(0));
  });
  std::vector<SharedBuf> out;
  walk(const_cast<Block&>(f.body()), [&](Op& op) {
    if (op.code() != OpCode::Alloc || op.numResults() != 1) return;
    const Type& t = op.result()->type();
    if (!t.isBuffer() || t.space() != MemSpace::Shared) return;
    bool staged = stages > 1 && t.rank() >= 2 && t.shape()[0] == stages &&
                  std::find(slotted.begin(), slotted.end(), op.result()) != slotted.end();
    out.push_back({&op, t.shape(), t.dtype(), bytesOf(t.shape(), t.dtype()), staged});
  });
  return out;
}

}  // namespace

int64_t sharedMemoryBytes(const Function& f) {
  int64_t total = 0;
  for (const SharedBuf& b : sharedBuffers(f)) total += b.bytes;
  return total;
}

void checkSharedMemory(const Function& f, int64_t limitBytes, const std::string& targetName) {
  std::vector<SharedBuf> bufs = sharedBuffers(f);
  int64_t total = 0;
  for (const SharedBuf& b : bufs) total += b.bytes;
  if (total <= limitBytes) return;

  detail::ValueNames names(f);
  std::string where = f.loc().known() ? f.loc().str() : f.name();
  std::string msg = where + ": error: kernel @" + f.name() + " needs " + kib(total) + " (" + std::to_string(total) +
                    " bytes) of shared memory per program but " + targetName + " allows " + kib(limitBytes) + " (" +
                    std::to_string(limitBytes) + " bytes):\n";
  for (const SharedBuf& b : bufs) {
    msg += "  " + names.name(b.alloc->result()) + ": " + shapeStr(b.shape) + " x " + name(b.dtype) + " = " +
           std::to_string(b.bytes) + " bytes (" + kib(b.bytes) + ")";
    if (b.staged) msg += ", " + std::to_string(b.shape[0]) + " pipeline slots";
    if (b.alloc->loc().known()) msg += ", allocated at " + b.alloc->loc().str();
    msg += "\n";
  }

  // Suggestion 1: fewer stages, when staged buffers are what grows.
  const int64_t stages = pipelineStages(f);
  int64_t perStage = 0, fixed = 0;
  for (const SharedBuf& b : bufs) (b.staged ? perStage : fixed) += b.staged ? b.bytes / b.shape[0] : b.bytes;
  std::string suggestion;
  if (perStage > 0) {
    for (int64_t s = stages - 1; s >= 1; --s) {
      int64_t t = fixed + perStage * s;
      if (t <= limitBytes) {
        suggestion = "with stages = " + std::to_string(s) + " instead of " + std::to_string(stages) +
                     " the shared buffers take " + kib(t) + ", which fits";
        break;
      }
    }
  }
  // Suggestion 2: smaller tiles. Halve the last dimension of the largest
  // buffer (for a matmul mainloop that is BLOCK_K of the A tile, or BLOCK_N
  // of the B tile) until the total fits; report the shapes that result.
  if (suggestion.empty()) {
    std::vector<Shape> shapes;
    for (const SharedBuf& b : bufs) shapes.push_back(b.shape);
    int64_t t = total;
    std::vector<bool> changed(bufs.size(), false);
    for (int round = 0; round < 64 && t > limitBytes; ++round) {
      size_t best = bufs.size();
      int64_t bestBytes = 0;
      for (size_t i = 0; i < bufs.size(); ++i) {
        int64_t by = bytesOf(shapes[i], bufs[i].dtype);
        if (shapes[i].back() % 2 == 0 && by > bestBytes) {
          best = i;
          bestBytes = by;
        }
      }
      if (best == bufs.size()) break;
      shapes[best].back() /= 2;
      changed[best] = true;
      t -= bestBytes / 2;
    }
    if (t <= limitBytes) {
      suggestion = "halve the tile sizes that shape the largest buffers, e.g. ";
      bool first = true;
      for (size_t i = 0; i < bufs.size(); ++i) {
        if (!changed[i]) continue;
        suggestion += std::string(first ? "" : ", ") + names.name(bufs[i].alloc->result()) + " " +
                      shapeStr(bufs[i].shape) + " -> " + shapeStr(shapes[i]);
        first = false;
      }
      suggestion += " (" + kib(t) + " in total)";
      if (perStage > 0 && stages > 1) suggestion += ", or combine smaller tiles with fewer stages";
    } else {
      suggestion = "the buffers must shrink below " + kib(limitBytes) + "; use smaller tiles or fewer buffers";
    }
  }
  msg += "  total " + kib(total) + " > limit " + kib(limitBytes) + " on " + targetName + "; suggestion: " + suggestion;
  throw ResourceError(msg);
}

std::optional<int64_t> sharedMemoryLimit(const std::string& arch) {
  // Maximum shared memory one block / workgroup may use (opt-in maximum on
  // NVIDIA, which the backend requests at launch): Targets.def.
  for (const GpuArch& a : gpuArchs())
    if (arch == a.arch) return a.maxSharedBytes;
  return std::nullopt;
}

}  // namespace tessera::ir
