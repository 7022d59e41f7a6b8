// Planning before emission: which shared buffers are stored in a dot's
// staging layout and read by it directly (planDirectDots), and which tiles
// are never emitted where they are defined (planElision).

#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

namespace {
/// Ops whose result recompute() re-emits in any layout from their operands.
bool rederivable(const ir::Op& op) {
  switch (op.code()) {
    case OpCode::Constant:
    case OpCode::Splat:
    case OpCode::Arange:
    case OpCode::Broadcast:
    case OpCode::ExpandDims: return true;
    case OpCode::Reshape:
    case OpCode::Transpose: return false;
    default: return ir::isElementwise(op.code());
  }
}
}  // namespace

/// The pipelined GEMM reads each operand tile from a shared slot with a
/// local_load and hands it to a tensor-core dot, which would write it back
/// to shared memory (its staging buffer, in the swizzled layout ldmatrix
/// reads without bank conflicts) and read it again: two round trips through
/// shared memory and a barrier per iteration for data already there. On
/// NVPTX the staging layout of both operands is a row-major matrix with its
/// 16-byte chunks XOR-swizzled (GpuDot.h), which is a permutation of whole
/// chunks of a row-major slot of the same shape. So a shared buffer whose
/// every access is a copy / local_store / local_load (all of which go
/// through bufIndex) can simply be *stored* in that layout, and a dot
/// operand that is a local_load of it reads its fragments straight from the
/// slot (ldmatrix on the slot's address), reading at the dot instead of at
/// the local_load. AMDGPU likewise with its staging layouts: an A slot with
/// rows padded by 4 elements, a B slot stored transposed (N x K, padded), so
/// a slot takes rows * (cols + 4) elements (bufferStorageBytes gives the
/// planner the buffer's size). That move is sound when no op between the two (same
/// block) may write shared memory or order it (copies, stores to buffers,
/// barriers, async groups, control flow): the verified schedule's barriers
/// then order the dot's reads exactly as they ordered the local_load's.
/// The shared-memory planner keeps the buffer live up to such a dot.
void Lower::planDirectDots() {
  storage_.clear();
  directOperands_.clear();
  auto& body = const_cast<ir::Function&>(f_).body();
  std::vector<std::pair<const ir::Op*, unsigned>> cands;
  std::map<const ir::Value*, std::optional<Storage>> roots;  // nullopt: conflicting layouts
  auto same = [](const Storage& x, const Storage& y) {
    return x.transposed == y.transposed && x.st.rows == y.st.rows && x.st.cols == y.st.cols &&
           x.st.stride == y.st.stride && x.st.swizzle == y.st.swizzle;
  };
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != OpCode::Dot || !la_.has(op.result())) return;
    const ir::Layout& dl = la_.get(op.result());
    if (dl.parent.mma == ir::MmaKind::None) return;
    const ir::Value* av = op.operand(0);
    TensorCoreDotPlan plan =
        planTensorCoreDot(t_.tensorCore(av->type().dtype(), op.operand(2)->type().dtype()), av->type().dtype(),
                          av->type().shape()[0], op.operand(1)->type().shape()[1], av->type().shape()[1], dl.parent);
    for (unsigned i = 0; i < 2; ++i) {
      const ir::Value* v = op.operand(i);
      const ir::Op* ld = v->definingOp();
      if (!ld || ld->code() != OpCode::LocalLoad || ld->parent() != op.parent()) continue;
      const ir::Value* root = rootBuffer(ld->operand(0));
      const ir::Type& rt = root->type();
      if (!root->definingOp() || root->definingOp()->code() != OpCode::Alloc || rt.space() != ir::MemSpace::Shared)
        continue;
      if (rt.dtype() != DType::F16 && rt.dtype() != DType::BF16) continue;
      Storage sg{i == 0 ? plan.a : plan.b, i == 1 && plan.bTransposed};
      if (sg.st.swizzle) {  // stagingIndex's precondition
        const int64_t chunks = sg.st.cols / 8;
        if (sg.st.cols % 8 != 0 || chunks < 1 || (chunks & (chunks - 1)) != 0 || sg.st.stride != sg.st.cols) continue;
      }
      // Nothing between the read as written and the dot may touch shared
      // memory's order.
      bool clear = true, seen = false;
      for (auto& o : op.parent()->ops()) {
        if (o.get() == ld) {
          seen = true;
          continue;
        }
        if (o.get() == &op) break;
        if (!seen) continue;
        switch (o->code()) {
          case OpCode::Copy:
          case OpCode::LocalStore:
          case OpCode::Barrier:
          case OpCode::AsyncCommit:
          case OpCode::AsyncWait:
          case OpCode::For:
          case OpCode::If:
          case OpCode::Return: clear = false; break;
          default: break;
        }
      }
      if (!clear || !seen) continue;
      cands.emplace_back(&op, i);
      auto [it, fresh] = roots.try_emplace(root, sg);
      if (!fresh && it->second && !same(*it->second, sg)) it->second.reset();  // e.g. used as A and as B on AMDGPU
    }
  });
  // Every access of a staged buffer must go through bufIndex, and every view
  // of it must be a slot of the buffer itself (the slot stride is the
  // storage's, see BufferSlot).
  for (auto& [root, sg] : roots) {
    if (!sg) continue;
    bool ok = true;
    ir::walk(body, [&](ir::Op& op) {
      for (unsigned i = 0; i < op.numOperands(); ++i) {
        const ir::Value* v = op.operand(i);
        if (rootBuffer(v) != root) continue;
        bool view = v != root;
        if (view && v->definingOp()->operand(0) != root) ok = false;
        bool fine = (op.code() == OpCode::BufferSlot && i == 0 && !view) || op.code() == OpCode::LocalLoad ||
                    ((op.code() == OpCode::Copy || op.code() == OpCode::LocalStore) && i == 0);
        if (!fine) ok = false;
      }
    });
    if (ok) storage_[root] = *sg;
  }
  for (auto& [op, i] : cands)
    if (storage_.count(rootBuffer(op->operand(i)->definingOp()->operand(0)))) directOperands_.insert({op, i});
}

/// Pointer and mask tiles of async copies are re-derived by the copy in its
/// own layout (emitCopy). Emitting them where they are defined as well would
/// be dead code, and not free: an elementwise op whose operands come in
/// other layouts converts them through shared memory (stores, loads and
/// barriers, which no later pass removes). A tile is elided when every use
/// is the pointer or mask of such a copy or an operand of another elided
/// tile's definition; a value with any other consumer (e.g. the epilogue's
/// store) is emitted as usual, and the copies reuse it when its layout fits.
void Lower::planElision() {
  elided_.clear();
  std::unordered_map<const ir::Value*, std::vector<std::pair<const ir::Op*, unsigned>>> uses;
  std::vector<const ir::Op*> defs;
  auto& body = const_cast<ir::Function&>(f_).body();
  ir::walk(body, [&](ir::Op& op) {
    for (unsigned i = 0; i < op.numOperands(); ++i) uses[op.operand(i)].emplace_back(&op, i);
    if (op.numResults() == 1 && op.result()->type().isTile() && rederivable(op)) defs.push_back(&op);
  });
  std::unordered_map<const ir::Op*, bool> asyncCopy;
  for (auto& [v, us] : uses)
    for (auto& [user, i] : us)
      if ((user->code() == OpCode::Copy || user->code() == OpCode::Store) && !asyncCopy.count(user))
        asyncCopy[user] = freeAccessLayout(*user).has_value();
  for (const ir::Op* d : defs)
    if (uses.count(d->result())) elided_.insert(d->result());
  // A local_load all of whose uses are dots reading the slot directly.
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != OpCode::LocalLoad || !uses.count(op.result())) return;
    for (auto& [user, i] : uses.at(op.result()))
      if (!directOperands_.count({user, i})) return;
    elidedLoads_.insert(op.result());
  });
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = elided_.begin(); it != elided_.end();) {
      bool ok = true;
      for (auto& [user, i] : uses.at(*it)) {
        bool copyOperand = (user->code() == OpCode::Copy && i >= 1 && asyncCopy.at(user)) ||
                           (user->code() == OpCode::Store && i != 1 && asyncCopy.at(user));
        bool feedsElided = user->numResults() == 1 && elided_.count(user->result()) != 0;
        if (!copyOperand && !feedsElided) ok = false;
      }
      if (ok) {
        ++it;
      } else {
        it = elided_.erase(it);
        changed = true;
      }
    }
  }
}

}  // namespace tessera::codegen::gpu_lower
