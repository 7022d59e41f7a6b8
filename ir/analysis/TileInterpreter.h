// The interpreter of the tile coverage check (TileCoverage.cpp; not a
// public header): one program of a launch run on the kernel's integer
// scalars, recording what its output stores, counters and K loops do.
//
// It keeps the kernel's integer scalars (program_id, num_programs, the
// size arguments, loop induction variables, what they compute) and
// evaluates a tile only element by element, at the few elements the check
// reads (a store's first element, and its neighbours along each dimension
// for the strides), so a 128 x 128 tile costs what a scalar does. Loops
// and branches are run only where they hold an output store; the rest (a
// GEMM's K loop) cannot change which tile is stored and is skipped, its
// bounds recorded where it is a work unit's K loop.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/ir/IR.h"
#include "tessera/ir/analysis/PointerOrigin.h"

namespace tessera::ir::coverage {

/// Why an output cannot be analysed; thrown inside the interpreter.
struct NotAnalysable {
  const Op* op;
  std::string why;
};

/// `x` as a value of dtype `d`: wrapped to its width, sign-extended for the
/// signed dtypes, zero-extended for the unsigned ones and i1.
inline int64_t wrap(int64_t x, DType d) {
  const unsigned w = bitWidth(d);
  if (d == DType::I1) return x & 1;
  if (w >= 64) return x;
  const uint64_t mask = (uint64_t{1} << w) - 1, u = static_cast<uint64_t>(x) & mask;
  if (isUnsigned(d)) return static_cast<int64_t>(u);
  const uint64_t sign = uint64_t{1} << (w - 1);
  return static_cast<int64_t>((u ^ sign) - sign);
}

using Lane = std::vector<int64_t>;
using Val = std::optional<int64_t>;

/// One run of a K loop (a loop whose bounds the program computes, holding
/// no output store): the iterations [lo, hi) of one work unit.
struct KRange {
  const Op* loop;
  int64_t program, lo, hi;
};

/// One execution of an output store.
struct Exec {
  const Op* store;
  int64_t program;
  std::vector<int64_t> iters;  // iteration numbers of the enclosing loops
  int64_t origin;              // the first element's offset from the argument
  std::vector<int64_t> strides;
  bool on = true;         // false: the first element is masked off (named when a tile is missed)
  std::vector<KRange> k;  // the K loops this unit ran before its store
};

/// A counter: a global address that atomic adds of the constant 1 count
/// on (a K-split fix-up's ticket per tile), and the K loops of the units
/// that took a ticket on it.
struct Counter {
  int64_t value = 0;
  int64_t lastProgram = -1;  // the highest program that took a ticket
  std::vector<KRange> k;
};

class Interpreter {
 public:
  Interpreter(const Function& f, const std::set<const Op*>& stores, const std::set<const Op*>& holders,
              const std::set<const Op*>& kLoops, const PointerOrigins& origins)
      : f_(f), stores_(stores), holders_(holders), kLoops_(kLoops), origins_(origins) {}

  /// Starts a launch: counters back to 0. With `cancels`, each
  /// cancel_program cancels the lowest-numbered program not yet started
  /// (the programs run in order, so the next one), until none is left:
  /// the first program then takes every tile of a dynamic loop. Without,
  /// it returns -1, as where the target cannot cancel. Both are orders the
  /// launch may take.
  void launch(bool cancels = false) {
    counters_.clear();
    cancels_ = cancels;
    cancelled_.clear();
  }
  /// Whether program `p` was cancelled by an earlier one (it does not run).
  bool cancelled(int64_t p) const { return cancelled_.count(p) != 0; }
  /// A K loop whose bounds could not be computed (no K claim then), or null.
  const Op* kUnknown() const { return kUnknown_; }
  /// The counters of the launch so far, by (argument, offset).
  const std::map<std::pair<unsigned, int64_t>, Counter>& counters() const { return counters_; }

  /// Runs program `p` of `programs` with the integer arguments `args`
  /// (pointer arguments are 0: offsets are relative to them). Programs run
  /// one after another, which is one order the launch may take; the
  /// counters make every order give the same tiles (see atomic()).
  void run(int64_t p, int64_t programs, const std::vector<int64_t>& args, std::vector<Exec>& out) {
    env_.clear();
    pendingK_.clear();
    unitDone_ = false;
    pid_ = p;
    programs_ = programs;
    out_ = &out;
    steps_ = 0;
    for (unsigned i = 0; i < f_.numArgs(); ++i) env_[f_.arg(i)] = args[i];
    std::vector<int64_t> iters;
    block(f_.body(), iters);
  }

  /// The value of `v` at element `lane` (empty for a scalar).
  Val at(const Value* v, const Lane& lane) {
    if (!v->type().isTile()) {
      auto it = env_.find(v);
      if (it != env_.end()) return it->second;
      if (v->isBlockArg()) return std::nullopt;
    }
    const Op* d = v->definingOp();
    if (!d) return std::nullopt;
    return eval(*d, v, lane);
  }

 private:
  Val eval(const Op& op, const Value* v, const Lane& lane) {
    const DType dt = v->type().dtype();
    const bool ptr = v->type().isPointerLike();
    auto operand = [&](unsigned i) { return at(op.operand(i), lane); };
    switch (op.code()) {
      case OpCode::ProgramId: return op.intAttr("axis") == 0 ? pid_ : 0;
      case OpCode::NumPrograms: return op.intAttr("axis") == 0 ? programs_ : 1;
      case OpCode::Constant: {
        const auto& a = op.attrs().at("value");
        if (const int64_t* i = std::get_if<int64_t>(&a); i && isInteger(dt)) return wrap(*i, dt);
        return std::nullopt;
      }
      case OpCode::Arange: return op.intAttr("start") + lane.at(0);
      case OpCode::Splat: return at(op.operand(0), {});
      case OpCode::Broadcast: {
        const Shape& s = op.operand(0)->type().shape();
        Lane l(lane);
        for (size_t i = 0; i < s.size() && i < l.size(); ++i)
          if (s[i] == 1) l[i] = 0;
        return at(op.operand(0), l);
      }
      case OpCode::ExpandDims: {
        Lane l(lane);
        l.erase(l.begin() + op.intAttr("axis"));
        return at(op.operand(0), l);
      }
      case OpCode::Reshape: {
        // Row-major: the same linear element of the operand.
        const Shape& to = v->type().shape();
        const Shape& from = op.operand(0)->type().shape();
        int64_t linear = 0;
        for (size_t i = 0; i < to.size(); ++i) linear = linear * to[i] + lane[i];
        Lane l(from.size());
        for (size_t i = from.size(); i-- > 0;) {
          l[i] = linear % from[i];
          linear /= from[i];
        }
        return at(op.operand(0), l);
      }
      case OpCode::PtrAdd: {
        Val a = operand(0), b = operand(1);
        if (!a || !b) return std::nullopt;
        return *a + *b;
      }
      case OpCode::Cast: {
        const Type& from = op.operand(0)->type();
        if (!from.isIntLike() || !v->type().isIntLike()) return std::nullopt;
        Val a = operand(0);
        if (!a) return std::nullopt;
        return dt == DType::I1 ? int64_t(*a != 0) : wrap(*a, dt);
      }
      case OpCode::Select: {
        Val c = operand(0);
        if (!c) return std::nullopt;
        return operand(*c ? 1 : 2);
      }
      case OpCode::Cmp: {
        Val a = operand(0), b = operand(1);
        if (!a || !b || !op.operand(0)->type().isIntLike()) return std::nullopt;
        auto r = foldIntCmp(op.strAttr("pred"), *a, *b, op.operand(0)->type().dtype());
        if (!r) return std::nullopt;
        return int64_t(*r);
      }
      case OpCode::Neg:
      case OpCode::Not:
      case OpCode::Abs: {
        Val a = operand(0);
        if (!a || ptr || !isInteger(dt)) return std::nullopt;
        if (op.code() == OpCode::Neg) return wrap(-static_cast<uint64_t>(*a), dt);
        if (op.code() == OpCode::Not) return wrap(~*a, dt);
        return isUnsigned(dt) ? *a : wrap(*a < 0 ? -static_cast<uint64_t>(*a) : *a, dt);
      }
      default: break;
    }
    if (!isBinary(op.code()) || ptr || !isInteger(dt)) return std::nullopt;
    Val a = operand(0), b = operand(1);
    if (!a || !b) return std::nullopt;
    const int64_t x = *a, y = *b;
    const auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
    const bool u = isUnsigned(dt);
    switch (op.code()) {
      case OpCode::Add: return wrap(static_cast<int64_t>(ux + uy), dt);
      case OpCode::Sub: return wrap(static_cast<int64_t>(ux - uy), dt);
      case OpCode::Mul: return wrap(static_cast<int64_t>(ux * uy), dt);
      case OpCode::Div:
      case OpCode::Rem:
        // Division by zero and INT_MIN / -1 are unspecified (IR.h).
        if (y == 0 || (!u && y == -1 && x == wrap(int64_t{1} << (bitWidth(dt) - 1), dt))) return std::nullopt;
        if (op.code() == OpCode::Div) return wrap(u ? static_cast<int64_t>(ux / uy) : x / y, dt);
        return wrap(u ? static_cast<int64_t>(ux % uy) : x % y, dt);
      case OpCode::Min: return u ? static_cast<int64_t>(std::min(ux, uy)) : std::min(x, y);
      case OpCode::Max: return u ? static_cast<int64_t>(std::max(ux, uy)) : std::max(x, y);
      case OpCode::And: return x & y;
      case OpCode::Or: return x | y;
      case OpCode::Xor: return wrap(x ^ y, dt);
      case OpCode::Shl:
        if (y < 0 || uy >= bitWidth(dt)) return std::nullopt;
        return wrap(static_cast<int64_t>(ux << uy), dt);
      case OpCode::Shr:
        if (y < 0 || uy >= bitWidth(dt)) return std::nullopt;
        return u ? static_cast<int64_t>(ux >> uy) : x >> y;
      default: return std::nullopt;
    }
  }

  Val scalar(const Value* v, const Op& user, const char* what) {
    Val r = at(v, {});
    if (!r) throw NotAnalysable{&user, what};
    return r;
  }

  void block(const Block& b, std::vector<int64_t>& iters) {
    for (auto& o : b.ops()) {
      const Op& op = *o;
      if (++steps_ > kMaxSteps)
        throw NotAnalysable{&op, "a program runs more than " + std::to_string(kMaxSteps) + " ops"};
      switch (op.code()) {
        case OpCode::For: forLoop(op, iters); continue;
        case OpCode::If: branch(op, iters); continue;
        case OpCode::While: whileLoop(op, iters); continue;
        case OpCode::CancelProgram: env_[op.result()] = cancelNext(); continue;
        case OpCode::Store:
          if (stores_.count(&op)) store(op, iters);
          continue;
        case OpCode::AtomicRmw: atomic(op); continue;
        default: break;
      }
      if (op.numRegions() != 0) {
        if (holders_.count(&op)) throw NotAnalysable{&op, std::string("an output store is inside '") + op.name() + "'"};
        continue;
      }
      // Scalars are computed as their ops run (so a loop's iteration sees
      // its own values); tiles element by element when a store asks.
      for (auto& r : op.results())
        if (!r->type().isTile() && !r->type().isBuffer()) env_[r.get()] = eval(op, r.get(), {});
    }
  }

  void forLoop(const Op& op, std::vector<int64_t>& iters) {
    const Block& body = op.region(0).block();
    if (!holders_.count(&op)) {
      // A K loop is not run, only its range recorded for the unit.
      if (kLoops_.count(&op) && !unitDone_) {
        Val lo = at(op.operand(0), {}), hi = at(op.operand(1), {});
        if (lo && hi)
          pendingK_.push_back({&op, pid_, *lo, *hi});
        else if (!kUnknown_)
          kUnknown_ = &op;
      }
      for (auto& r : op.results()) env_.erase(r.get());
      return;
    }
    const int64_t lo = *scalar(op.operand(0), op, "its bounds depend on values the check cannot compute");
    const int64_t hi = *scalar(op.operand(1), op, "its bounds depend on values the check cannot compute");
    const int64_t step = *scalar(op.operand(2), op, "its bounds depend on values the check cannot compute");
    std::vector<Val> carried;
    for (unsigned i = 3; i < op.numOperands(); ++i) carried.push_back(at(op.operand(i), {}));
    iters.push_back(0);
    const DType ivType = body.arg(0)->type().dtype();
    for (int64_t iv = lo; step > 0 && iv < hi; iv = wrap(iv + step, ivType), ++iters.back()) {
      pendingK_.clear();  // each iteration of a loop over tiles is a unit of its own
      unitDone_ = false;
      env_[body.arg(0)] = iv;
      for (size_t i = 0; i < carried.size(); ++i) env_[body.arg(static_cast<unsigned>(i + 1))] = carried[i];
      block(body, iters);
      const Op* y = body.terminator();
      for (size_t i = 0; i < carried.size(); ++i) carried[i] = at(y->operand(static_cast<unsigned>(i)), {});
      if (iv + step <= iv) break;  // the iv would wrap: the loop ends
    }
    iters.pop_back();
    for (size_t i = 0; i < carried.size(); ++i) env_[op.result(static_cast<unsigned>(i))] = carried[i];
  }

  void whileLoop(const Op& op, std::vector<int64_t>& iters) {
    const Block& body = op.region(0).block();
    if (!holders_.count(&op)) {
      for (auto& r : op.results()) env_.erase(r.get());
      return;
    }
    std::vector<Val> carried;
    for (unsigned i = 0; i < op.numOperands(); ++i) carried.push_back(at(op.operand(i), {}));
    iters.push_back(0);
    for (;; ++iters.back()) {
      pendingK_.clear();  // each iteration of a loop over tiles is a unit of its own
      unitDone_ = false;
      for (size_t i = 0; i < carried.size(); ++i) env_[body.arg(static_cast<unsigned>(i))] = carried[i];
      block(body, iters);  // bounded: block() counts the program's steps
      const Op* y = body.terminator();
      for (size_t i = 0; i < carried.size(); ++i) carried[i] = at(y->operand(static_cast<unsigned>(i + 1)), {});
      Val c = at(y->operand(0), {});
      if (!c) throw NotAnalysable{&op, "whether the while loop goes on depends on values the check cannot compute"};
      if (*c == 0) break;
    }
    iters.pop_back();
    for (size_t i = 0; i < carried.size(); ++i) env_[op.result(static_cast<unsigned>(i))] = carried[i];
  }

  Val cancelNext() {
    if (!cancels_) return -1;
    for (int64_t q = pid_ + 1; q < programs_; ++q)
      if (cancelled_.insert(q).second) return q;
    return -1;
  }

  void branch(const Op& op, std::vector<int64_t>& iters) {
    Val c = at(op.operand(0), {});
    if (!c) {
      if (holders_.count(&op))
        throw NotAnalysable{&op, "an output store is under a condition the check cannot compute"};
      for (auto& r : op.results()) env_.erase(r.get());
      return;
    }
    const Block& b = op.region(*c ? 0 : 1).block();
    block(b, iters);
    const Op* y = b.terminator();
    for (unsigned i = 0; i < op.numResults(); ++i) env_[op.result(i)] = y ? at(y->operand(i), {}) : std::nullopt;
  }

  void store(const Op& op, const std::vector<int64_t>& iters) {
    const Value* ptr = op.operand(0);
    const Shape shape = op.operand(1)->type().shape();
    const Lane first(shape.size(), 0);
    bool on = true;
    if (op.numOperands() > 2) {
      Val m = at(op.operand(2), first);
      if (!m) throw NotAnalysable{&op, "its mask depends on values the check cannot compute"};
      on = *m != 0;
    }
    Val origin = at(ptr, first);
    if (!origin) {
      if (!on) return;  // writes nothing, wherever it points
      throw NotAnalysable{&op, "its addresses depend on values the check cannot compute"};
    }
    Exec e{&op, pid_, iters, *origin, {}, on, {}};
    for (size_t d = 0; d < shape.size(); ++d) {
      Lane l(first);
      l[d] = shape[d] > 1 ? 1 : 0;
      Val x = at(ptr, l);
      if (!x && !on) return;
      if (!x) throw NotAnalysable{&op, "its addresses depend on values the check cannot compute"};
      e.strides.push_back(*x - *origin);
    }
    if (on) {
      e.k = std::exchange(pendingK_, {});
      unitDone_ = true;
    }
    out_->push_back(std::move(e));
  }

  // A scalar atomic add of the constant 1 to one global address is a
  // counter: every order of the launch's programs gives its adds the old
  // values 0, 1, ..., n - 1 (each once), so how many units see a given
  // ticket, and which tiles they go on to store, is the same in every
  // order; only which program draws which ticket differs. Stores to a
  // counter are taken to follow its last add (the fix-up resets its flag
  // in the unit that drew the last ticket) and are not modelled. Other
  // atomics give a value the check cannot compute.
  void atomic(const Op& op) {
    const Value* r = op.result();
    env_.erase(r);
    if (r->type().isTile() || op.numOperands() > 2 || op.strAttr("kind") != "add") return;
    const Op* one = op.operand(1)->definingOp();
    const auto& from = origins_.of(op.operand(0));
    Val addr = at(op.operand(0), {});
    if (!one || one->code() != OpCode::Constant || at(op.operand(1), {}) != 1 || from.size() != 1 || !addr) return;
    Counter& c = counters_[{from[0], *addr}];
    env_[r] = wrap(c.value, r->type().dtype());
    c.value += 1;
    c.lastProgram = std::max(c.lastProgram, pid_);
    for (KRange& k : pendingK_) c.k.push_back(k);
    pendingK_.clear();
    unitDone_ = true;  // what follows the ticket (the sum of the partials) is not the unit's K
  }

  static constexpr int64_t kMaxSteps = 1'000'000;
  const Function& f_;
  const std::set<const Op*>& stores_;
  const std::set<const Op*>& holders_;
  const std::set<const Op*>& kLoops_;
  const PointerOrigins& origins_;
  std::map<std::pair<unsigned, int64_t>, Counter> counters_;
  std::vector<KRange> pendingK_;  // the K loops of the unit under way
  const Op* kUnknown_ = nullptr;
  bool unitDone_ = false;  // the unit took its ticket or stored its tile
  std::unordered_map<const Value*, Val> env_;
  bool cancels_ = false;
  std::set<int64_t> cancelled_;
  int64_t pid_ = 0, programs_ = 1;
  std::vector<Exec>* out_ = nullptr;
  int64_t steps_ = 0;
};

}  // namespace tessera::ir::coverage
