#include "tessera/ir/analysis/GpuSharedMemory.h"

#include <algorithm>
#include <functional>
#include <set>

#include "tessera/support/Error.h"

namespace tessera::ir {

uint64_t sharedElemBytes(DType dt) { return byteSize(dt); }

namespace {
uint64_t align16(uint64_t v) { return (v + 15) & ~uint64_t{15}; }
}  // namespace

SharedPlan::SharedPlan(const ir::Function& f, const std::map<const ir::Op*, uint64_t>& scratch,
                       const std::unordered_map<const ir::Value*, uint64_t>& bufferBytes,
                       const std::vector<std::pair<const void*, LoopArea>>& loopAreas,
                       const std::unordered_map<const void*, uint64_t>& aligns) {
  // Pre-order numbering; `last` = the highest number inside an op's subtree.
  std::unordered_map<const ir::Op*, int64_t> num, last;
  int64_t counter = 0;
  std::function<int64_t(const ir::Block&)> number = [&](const ir::Block& b) {
    int64_t hi = counter;
    for (auto& op : b.ops()) {
      num[op.get()] = counter++;
      int64_t l = num[op.get()];
      for (auto& r : op->regions()) l = std::max(l, number(r->block()));
      last[op.get()] = l;
      hi = std::max(hi, l);
    }
    return hi;
  };
  number(f.body());

  std::vector<std::pair<const void*, SharedArea>> items;
  auto& body = const_cast<ir::Function&>(f).body();
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != ir::OpCode::Alloc) return;
    const ir::Value* buf = op.result();
    SharedArea a;
    a.bytes = static_cast<uint64_t>(buf->type().numElements()) * sharedElemBytes(buf->type().dtype());
    if (auto it = bufferBytes.find(buf); it != bufferBytes.end()) a.bytes = it->second;
    a.what = "alloc " + buf->type().str() + " at " + op.loc().str();
    a.start = num.at(&op);
    a.end = a.start;
    a.userShared = buf->type().space() == ir::MemSpace::Shared;
    const ir::Block* home = op.parent();
    // A use of a slot view (buffer_slot, possibly of another view) is a use
    // of the buffer: the memory must live as long as any view of it.
    std::set<const ir::Value*> views{buf};
    bool remote = false;
    ir::walk(body, [&](ir::Op& user) {
      if (user.code() == ir::OpCode::BufferSlot && views.count(user.operand(0))) views.insert(user.result());
      remote |= user.code() == ir::OpCode::RemoteBuffer && views.count(user.operand(0));
    });
    int64_t lastAsyncCopy = -1;  // position (in `home`) of the last async copy into the buffer
    int64_t lastAsyncDot = -1;   // ... of the last async dot reading it
    ir::walk(body, [&](ir::Op& user) {
      for (const ir::Value* v : user.operands()) {
        // A tensor-core dot may read its operand from the slot a local_load
        // names, at the dot (LowerPlan.cpp, planDirectDots), B's also
        // through a transpose (ir::dotOperandLoad): a use too.
        if (user.code() == ir::OpCode::Dot && v->definingOp() && v->definingOp()->code() == ir::OpCode::LocalLoad)
          v = v->definingOp()->operand(0);
        else if (const ir::Op* ld = ir::dotOperandLoad(user, 1); ld && v == user.operand(1))
          v = ld->operand(0);
        if (!views.count(v)) continue;
        // Climb to the ancestor of the use that sits in the alloc's block.
        const ir::Op* anc = &user;
        while (anc->parent() != home) {
          const ir::Op* p = anc->parent() ? anc->parent()->parentOp() : nullptr;
          TS_ASSERT(p != nullptr, "use of a buffer outside the alloc's scope");
          anc = p;
        }
        a.end = std::max(a.end, last.at(anc));
        // A warp-specialised producer's copies (in its region) complete
        // before the consumer's waits for them, which are reads here.
        if (user.code() == ir::OpCode::Copy && v == user.operand(0) && user.hasAttr("async") &&
            user.intAttr("async") != 0 && anc->code() != ir::OpCode::WarpSpecialize)
          lastAsyncCopy = std::max(lastAsyncCopy, last.at(anc));
        if (user.code() == ir::OpCode::Dot && user.hasAttr("async") && user.intAttr("async") != 0)
          lastAsyncDot = std::max(lastAsyncDot, last.at(anc));
      }
    });
    // An async copy writes the buffer until the wait that retires it, which
    // may come after the buffer's last read (the schedule's trailing, fully
    // masked copies): the bytes stay the buffer's until the first
    // `async_wait {pending = 0}` of the alloc's block after the last copy
    // (the verifier requires one before `return`), else to the block's end.
    // Likewise an async dot reads it until the `dot_wait {pending = 0}`.
    auto liveUntilRetired = [&](int64_t lastAsync, ir::OpCode wait) {
      if (lastAsync < 0) return;
      int64_t until = -1;
      for (auto& o : home->ops()) {
        if (num.at(o.get()) <= lastAsync) continue;
        until = last.at(o.get());
        if (o->code() == wait && o->hasAttr("pending") && o->intAttr("pending") == 0) break;
      }
      a.end = std::max(a.end, until);
    };
    liveUntilRetired(lastAsyncCopy, ir::OpCode::AsyncWait);
    liveUntilRetired(lastAsyncDot, ir::OpCode::DotWait);
    // Another block of the cluster reaches a buffer with a remote view at
    // points of its own program, not of this block's: the bytes are the
    // buffer's for the whole kernel, in every block at the same offset.
    if (remote) {
      a.start = 0;
      a.end = counter;
    }
    items.emplace_back(buf, a);
  });
  for (auto& [op, bytes] : scratch) {
    if (bytes == 0) continue;
    SharedArea a;
    a.bytes = bytes;
    a.what = std::string("scratch of ") + op->name() + " at " + op->loc().str();
    a.start = a.end = num.at(op);
    items.emplace_back(op, a);
  }
  for (auto& [key, la] : loopAreas) {
    if (la.bytes == 0) continue;
    SharedArea a;
    a.bytes = la.bytes;
    a.what = la.what;
    a.start = num.at(la.loop);
    a.end = la.wholeLoop ? last.at(la.loop) : a.start;
    items.emplace_back(key, a);
  }
  std::stable_sort(items.begin(), items.end(), [](const auto& x, const auto& y) {
    return x.second.start != y.second.start ? x.second.start < y.second.start : x.second.bytes > y.second.bytes;
  });
  for (auto& [key, a] : items) {
    if (auto it = aligns.find(key); it != aligns.end()) {
      TS_ASSERT(it->second >= 16 && (it->second & (it->second - 1)) == 0, "shared area alignment");
      a.align = it->second;
    }
    auto up = [&](uint64_t v) { return (v + a.align - 1) & ~(a.align - 1); };
    // First fit among the candidate offsets 0 and the ends of the placed
    // areas whose live ranges overlap this one (rounded up to its alignment).
    std::vector<uint64_t> cands{0};
    for (auto& p : areas_)
      if (p.end >= a.start && p.start <= a.end) cands.push_back(up(align16(p.offset + p.bytes)));
    std::sort(cands.begin(), cands.end());
    for (uint64_t off : cands) {
      bool ok = true;
      for (auto& p : areas_)
        if (p.end >= a.start && p.start <= a.end && off < p.offset + p.bytes && p.offset < off + a.bytes) ok = false;
      if (ok) {
        a.offset = off;
        break;
      }
    }
    total_ = std::max(total_, align16(a.offset + a.bytes));
    index_[key] = areas_.size();
    areas_.push_back(a);
  }
}

uint64_t SharedPlan::bufferOffset(const ir::Value* v) const {
  auto it = index_.find(v);
  TS_ASSERT(it != index_.end(), "shared plan: unknown buffer");
  return areas_[it->second].offset;
}

uint64_t SharedPlan::scratchOffset(const ir::Op* op) const {
  auto it = index_.find(op);
  TS_ASSERT(it != index_.end(), std::string("shared plan: no scratch for ") + op->name());
  return areas_[it->second].offset;
}

uint64_t SharedPlan::loopAreaOffset(const void* key) const {
  auto it = index_.find(key);
  TS_ASSERT(it != index_.end(), "shared plan: unknown loop area");
  return areas_[it->second].offset;
}

uint64_t SharedPlan::userSharedBytes() const {
  uint64_t n = 0;
  for (auto& a : areas_)
    if (a.userShared) n += a.bytes;
  return n;
}

std::string SharedPlan::describe() const {
  std::string s;
  for (auto& a : areas_)
    s += "  " + std::to_string(a.bytes) + " bytes at offset " + std::to_string(a.offset) + ": " + a.what + "\n";
  return s;
}

}  // namespace tessera::ir
