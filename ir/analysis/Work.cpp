// Work analysis (Work.h): flops and global-memory bytes of one launch.
//
// Two parts. The pointer origins (PointerOrigin.h) tell, for every pointer
// value, which kernel arguments it may point into (through splat, ptr_add,
// broadcasts, selects, loop-carried and `if` values). A counting walk then visits the body with
// an environment of the integer scalars it can evaluate from the launch
// (constants, arguments, program ids, grid sizes, integer arithmetic), so
// that `for` bounds give trip counts and `if` conditions pick a branch;
// each op adds its flops and accessed bytes times the number of times it
// runs. The walk is first made once for all programs; if a loop bound or a
// condition depends on the program id, it is redone per program (every
// program of grids up to 65536, an even sample of larger ones).
#include "tessera/ir/analysis/Work.h"
#include "tessera/ir/ScaledDot.h"

#include "tessera/ir/analysis/PointerOrigin.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace tessera::ir {

double WorkEstimate::totalFlops() const {
  double s = 0;
  for (const Flops& f : flops) s += f.count;
  return s;
}

double WorkEstimate::flopsOf(FlopUnit unit, DType dtype) const {
  for (const Flops& f : flops)
    if (f.unit == unit && f.dtype == dtype) return f.count;
  return 0;
}

double WorkEstimate::bytesRead() const {
  double s = 0;
  for (const ArgTraffic& a : args) s += a.bytesRead;
  return s;
}

double WorkEstimate::bytesWritten() const {
  double s = 0;
  for (const ArgTraffic& a : args) s += a.bytesWritten;
  return s;
}

double WorkEstimate::accessedBytes() const {
  double s = 0;
  for (const ArgTraffic& a : args) s += a.accessedRead + a.accessedWritten;
  return s;
}

std::string flopClassName(FlopUnit unit, DType dtype) {
  return std::string(name(dtype)) + (unit == FlopUnit::Dot ? " dot" : "");
}

namespace {

/// An integer scalar as far as the launch determines it. `pid`: unknown
/// because it depends on the program id (known when counting per program);
/// `approx`: depends on a loop's induction variable taken at its middle
/// iteration.
struct SVal {
  bool known = false;
  int64_t v = 0;
  bool pid = false;
  bool approx = false;
};

SVal unknownOf(const SVal& a, const SVal& b = {}) {
  SVal r;
  r.pid = a.pid || b.pid;
  r.approx = a.approx || b.approx;
  return r;
}

/// Wraps `x` to the width of `d` as two's complement (the IR's integers wrap).
int64_t wrapTo(__int128 x, DType d) {
  unsigned bits = bitWidth(d);
  if (d == DType::I1) return (x & 1) != 0;
  if (bits >= 64) return static_cast<int64_t>(static_cast<uint64_t>(x));
  uint64_t mask = (uint64_t{1} << bits) - 1, u = static_cast<uint64_t>(x) & mask;
  if (u >> (bits - 1)) u |= ~mask;  // sign-extend
  return static_cast<int64_t>(u);
}

double elementsOf(const Type& t) { return t.isTile() ? static_cast<double>(t.numElements()) : 1.0; }

/// Flops per element of an elementwise op on floats (0 for ops that are not
/// arithmetic: neg, abs, cmp, select, cast, ptr_add).
double flopsPerElement(OpCode c) {
  switch (c) {
    case OpCode::Add:
    case OpCode::Sub:
    case OpCode::Mul:
    case OpCode::Div:
    case OpCode::Rem:
    case OpCode::Min:
    case OpCode::Max:
    case OpCode::Pow:
    case OpCode::Sqrt:
    case OpCode::Rsqrt:
    case OpCode::Floor: return 1;
    case OpCode::Fma: return 2;
    default: return isTranscendental(c) ? 1 : 0;
  }
}

constexpr uint64_t kPerProgramLimit = 65536;  // grids up to this size are counted program by program
constexpr uint64_t kSampledPrograms = 4096;   // larger ones: this many, evenly spaced
constexpr int64_t kExplicitTrips = 64;        // loops with control flow inside up to this: iteration by iteration
constexpr uint64_t kStepBudget = 20'000'000;  // op visits; beyond, no more explicit iteration
constexpr size_t kMaxNotes = 16;

class Counter {
 public:
  Counter(const Function& f, const LaunchFacts& l) : f_(f), l_(l) {
    l_.scalars.resize(f.numArgs());
    l_.bufferBytes.resize(f.numArgs());
  }

  WorkEstimate run() {
    const uint64_t programs = l_.grid[0] * l_.grid[1] * l_.grid[2];
    reset();
    {
      Env env;
      countBlock(f_.body(), env, static_cast<double>(programs));
    }
    if (needsPid_ && programs > 0) {
      reset();
      perProgram_ = true;
      uint64_t count = programs <= kPerProgramLimit ? programs : kSampledPrograms;
      double scale = static_cast<double>(programs) / static_cast<double>(count);
      if (count < programs)
        notes_.push_back("loop bounds depend on the program id: counted " + std::to_string(count) +
                         " evenly spaced programs of " + std::to_string(programs) + " and scaled");
      for (uint64_t i = 0; i < count; ++i) {
        uint64_t linear = count == programs ? i : (i * programs) / count;
        pid_[0] = static_cast<int64_t>(linear % l_.grid[0]);
        pid_[1] = static_cast<int64_t>((linear / l_.grid[0]) % l_.grid[1]);
        pid_[2] = static_cast<int64_t>(linear / (l_.grid[0] * l_.grid[1]));
        Env env;
        countBlock(f_.body(), env, scale);
      }
    }
    return result(programs);
  }

 private:
  using Env = std::unordered_map<const Value*, SVal>;

  void reset() {
    flops_.clear();
    transcendentals_ = 0;
    iterations_.clear();
    accRead_.assign(f_.numArgs(), 0);
    accWritten_.assign(f_.numArgs(), 0);
    notes_.clear();
    noted_.clear();
    needsPid_ = false;
    steps_ = 0;
  }

  // ---- pointer provenance: PointerOrigins -----------------------------------
  using ArgSet = std::vector<unsigned>;  // sorted kernel-argument indices
  const ArgSet& provOf(const Value* v) const { return origins_.of(v); }

  // ---- scalar evaluation ----------------------------------------------------
  SVal get(const Value* v, const Env& env) const {
    auto it = env.find(v);
    if (it != env.end()) return it->second;
    if (v->isBlockArg() && v->ownerBlock() == &f_.body()) {
      unsigned i = v->index();
      if (i < l_.scalars.size() && l_.scalars[i] && v->type().isScalar() && v->type().isIntLike())
        return {true, wrapTo(*l_.scalars[i], v->type().dtype())};
    }
    return {};
  }

  SVal evalScalar(const Op& op, const Env& env) const {
    const Type& t = op.result()->type();
    const DType d = t.dtype();
    auto in = [&](unsigned i) { return get(op.operand(i), env); };
    switch (op.code()) {
      case OpCode::ProgramId: {
        int64_t axis = op.intAttr("axis");
        if (perProgram_) return {true, pid_[static_cast<size_t>(axis)]};
        SVal r;
        r.pid = true;
        return r;
      }
      case OpCode::NumPrograms: return {true, static_cast<int64_t>(l_.grid[static_cast<size_t>(op.intAttr("axis"))])};
      case OpCode::Constant: {
        auto it = op.attrs().find("value");
        if (it != op.attrs().end() && std::holds_alternative<int64_t>(it->second))
          return {true, wrapTo(std::get<int64_t>(it->second), d)};
        return {};
      }
      case OpCode::Cast: {
        SVal a = in(0);
        if (!op.operand(0)->type().isIntLike() || !a.known) return unknownOf(a);
        a.v = d == DType::I1 ? (a.v != 0) : wrapTo(a.v, d);
        return a;
      }
      case OpCode::Neg:
      case OpCode::Abs:
      case OpCode::Not: {
        SVal a = in(0);
        if (!a.known) return unknownOf(a);
        __int128 x = a.v;
        a.v = wrapTo(op.code() == OpCode::Neg ? -x : op.code() == OpCode::Abs ? (x < 0 ? -x : x) : ~x, d);
        return a;
      }
      case OpCode::Select: {
        SVal c = in(0);
        if (!c.known) return unknownOf(c, unknownOf(in(1), in(2)));
        SVal r = in(c.v ? 1 : 2);
        r.approx = r.approx || c.approx;
        return r;
      }
      case OpCode::Cmp: {
        SVal a = in(0), b = in(1);
        if (!a.known || !b.known) return unknownOf(a, b);
        const std::string& p = op.strAttr("pred");
        bool r = p == "eq"   ? a.v == b.v
                 : p == "ne" ? a.v != b.v
                 : p == "lt" ? a.v < b.v
                 : p == "le" ? a.v <= b.v
                 : p == "gt" ? a.v > b.v
                             : a.v >= b.v;
        return {true, r, false, a.approx || b.approx};
      }
      default: break;
    }
    if (!isBinary(op.code())) return {};
    SVal a = in(0), b = in(1);
    if (!a.known || !b.known) return unknownOf(a, b);
    __int128 x = a.v, y = b.v, r = 0;
    switch (op.code()) {
      case OpCode::Add: r = x + y; break;
      case OpCode::Sub: r = x - y; break;
      case OpCode::Mul: r = x * y; break;
      case OpCode::Div:
      case OpCode::Rem:
        if (y == 0) return {};  // unspecified in the IR
        r = op.code() == OpCode::Div ? x / y : x % y;
        break;
      case OpCode::Min: r = std::min(x, y); break;
      case OpCode::Max: r = std::max(x, y); break;
      case OpCode::And: r = x & y; break;
      case OpCode::Or: r = x | y; break;
      case OpCode::Xor: r = x ^ y; break;
      case OpCode::Shl:
      case OpCode::Shr:
        if (y < 0 || y >= bitWidth(d)) return {};
        r = op.code() == OpCode::Shl ? x << static_cast<int>(y) : x >> static_cast<int>(y);
        break;
      default: return {};
    }
    return {true, wrapTo(r, d), false, a.approx || b.approx};
  }

  // ---- counting -------------------------------------------------------------
  void note(const Op& op, const std::string& what) {
    std::string n = (op.loc().known() ? op.loc().str() + ": " : std::string()) + op.name() + ": " + what;
    if (notes_.size() < kMaxNotes && noted_.insert(n).second) notes_.push_back(n);
  }

  /// A control decision needs `v`: true when it is usable. An unknown that
  /// the program id would settle asks for the per-program pass instead.
  bool decide(const Op& op, const SVal& v, const char* what) {
    if (v.known) {
      if (v.approx)
        note(op, std::string(what) +
                     " depends on an enclosing loop's induction variable: evaluated at that loop's "
                     "middle iteration");
      return true;
    }
    if (v.pid && !perProgram_) needsPid_ = true;
    return false;
  }

  void addFlops(FlopUnit unit, DType d, double n) {
    if (n > 0) flops_[{static_cast<int>(unit), static_cast<int>(d)}] += n;
  }

  void access(const Op& op, const Value* ptr, double mult, bool read, bool write) {
    const Type& t = ptr->type();
    if (t.space() != MemSpace::Global) return;
    double bytes = elementsOf(t) * byteSize(t.dtype()) * mult;
    const ArgSet& args = provOf(ptr);
    if (args.empty()) {
      note(op, "pointer of unknown origin: its bytes are not counted");
      return;
    }
    if (args.size() > 1) note(op, "pointer may come from several arguments: counted against each");
    for (unsigned a : args) {
      if (read) accRead_[a] += bytes;
      if (write) accWritten_[a] += bytes;
    }
  }

  static bool hasControlFlow(const Block& b) {
    for (const auto& op : b.ops())
      if (op->code() == OpCode::For || op->code() == OpCode::If || op->code() == OpCode::While) return true;
    return false;
  }

  void countBlock(const Block& b, Env& env, double mult) {
    for (const auto& up : b.ops()) {
      const Op& op = *up;
      ++steps_;
      if (op.numResults() == 1 && op.result()->type().isScalar() && op.result()->type().isIntLike())
        env[op.result()] = evalScalar(op, env);
      const OpCode c = op.code();
      if (isElementwise(c) && op.numResults() == 1 && op.result()->type().isFloatLike()) {
        double n = elementsOf(op.result()->type());
        addFlops(FlopUnit::Vector, op.result()->type().dtype(), flopsPerElement(c) * n * mult);
        if (isTranscendental(c)) transcendentals_ += n * mult;
        continue;
      }
      switch (c) {
        case OpCode::Reduce: {
          const Type& in = op.operand(0)->type();
          if (in.isFloatLike())
            addFlops(FlopUnit::Vector, in.dtype(), (elementsOf(in) - elementsOf(op.result()->type())) * mult);
          break;
        }
        case OpCode::Dot: {
          const Type& a = op.operand(0)->type();
          const Type& bt = op.operand(1)->type();
          if (a.rank() == 2 && bt.rank() == 2)
            addFlops(FlopUnit::Dot, a.dtype(),
                     2.0 * static_cast<double>(a.shape()[0]) * static_cast<double>(bt.shape()[1]) *
                         static_cast<double>(a.shape()[1]) * mult);
          break;
        }
        case OpCode::DotScaled: {
          // Counted as the bf16 dot it runs as where it is decomposed; its
          // decoding (a few integer ops per element) is not counted.
          const ScaledFormatInfo* fa = findScaledFormat(op.strAttr("a_format"));
          const Type& a = op.operand(0)->type();
          const Type& acc = op.operand(4)->type();
          if (fa && a.rank() == 2 && acc.rank() == 2)
            addFlops(FlopUnit::Dot, DType::BF16,
                     2.0 * static_cast<double>(acc.shape()[0]) * static_cast<double>(acc.shape()[1]) *
                         static_cast<double>(a.shape()[1] * (fa->packed ? 2 : 1)) * mult);
          break;
        }
        // Data movement within the program's tiles (registers / shared
        // memory): no flops and no global-memory traffic.
        case OpCode::Gather:
        case OpCode::Join:
        case OpCode::Split: break;
        case OpCode::Load: access(op, op.operand(0), mult, true, false); break;
        case OpCode::Store: access(op, op.operand(0), mult, false, true); break;
        case OpCode::AtomicRmw:
        case OpCode::AtomicCas: access(op, op.operand(0), mult, true, true); break;
        case OpCode::Copy: access(op, op.operand(1), mult, true, false); break;
        case OpCode::For: countFor(op, env, mult); break;
        case OpCode::If: countIf(op, env, mult); break;
        case OpCode::While: countWhile(op, env, mult); break;
        default: break;
      }
    }
  }

  void countFor(const Op& op, Env& env, double mult) {
    if (seenLoops_.insert(&op).second) loopOrder_.push_back(&op);
    const Block& body = op.region(0).block();
    SVal lo = get(op.operand(0), env), hi = get(op.operand(1), env), step = get(op.operand(2), env);
    for (unsigned i = 1; i < body.numArgs(); ++i) env[body.arg(i)] = SVal{};  // carried: changes every iteration
    SVal all = lo;
    if (!lo.known || !hi.known || !step.known) {
      all = unknownOf(lo, unknownOf(hi, step));
    } else {
      all.approx = lo.approx || hi.approx || step.approx;
    }
    if (!decide(op, all, "the trip count")) {
      if (!(all.pid && !perProgram_)) note(op, "trip count unknown from the launch: the body is counted once");
      env[body.arg(0)] = SVal{};
      iterations_[&op] += mult;
      countBlock(body, env, mult);
      return;
    }
    if (step.v <= 0 || hi.v <= lo.v) return;  // runs zero times
    const __int128 trips128 = (static_cast<__int128>(hi.v) - lo.v + step.v - 1) / step.v;
    const int64_t trips = static_cast<int64_t>(trips128);
    iterations_[&op] += mult * static_cast<double>(trips);
    if (trips <= kExplicitTrips && hasControlFlow(body) && steps_ < kStepBudget) {
      for (int64_t i = 0; i < trips; ++i) {
        env[body.arg(0)] = SVal{true, lo.v + i * step.v, false, all.approx};
        countBlock(body, env, mult);
      }
      return;
    }
    // The induction variable at the middle iteration: exact for nested work
    // that grows linearly with it (triangular loops), named when used.
    SVal iv{true, lo.v + ((trips - 1) / 2) * step.v, false, all.approx || trips > 1};
    env[body.arg(0)] = iv;
    countBlock(body, env, mult * static_cast<double>(trips));
  }

  // A while loop's trip count is found as it runs (a tile queue): one
  // iteration is counted, the program's own work where nothing is
  // cancelled for it.
  void countWhile(const Op& op, Env& env, double mult) {
    const Block& body = op.region(0).block();
    for (unsigned i = 0; i < body.numArgs(); ++i) env[body.arg(i)] = SVal{};
    note(op, "a while loop's trip count is found as it runs: the body is counted once");
    iterations_[&op] += mult;
    countBlock(body, env, mult);
  }

  void countIf(const Op& op, Env& env, double mult) {
    SVal c = get(op.operand(0), env);
    if (decide(op, c, "the condition")) {
      countBlock(op.region(c.v ? 0 : 1).block(), env, mult);
      return;
    }
    if (!(c.pid && !perProgram_)) note(op, "condition unknown from the launch: both branches counted (an upper bound)");
    countBlock(op.region(0).block(), env, mult);
    countBlock(op.region(1).block(), env, mult);
  }

  WorkEstimate result(uint64_t programs) const {
    WorkEstimate w;
    w.programs = programs;
    for (const auto& [key, n] : flops_)
      w.flops.push_back({static_cast<FlopUnit>(key.first), static_cast<DType>(key.second), n});
    w.transcendentals = transcendentals_;
    for (unsigned i = 0; i < f_.numArgs(); ++i) {
      if (accRead_[i] == 0 && accWritten_[i] == 0) continue;
      WorkEstimate::ArgTraffic t;
      t.arg = i;
      t.name = f_.arg(i)->nameHint.empty() ? "#" + std::to_string(i) : f_.arg(i)->nameHint;
      t.accessedRead = accRead_[i];
      t.accessedWritten = accWritten_[i];
      t.bytesRead = accRead_[i];
      t.bytesWritten = accWritten_[i];
      if (l_.bufferBytes[i]) {
        double cap = static_cast<double>(*l_.bufferBytes[i]);
        if (t.bytesRead > cap) t.bytesRead = cap, t.boundedByBuffer = true;
        if (t.bytesWritten > cap) t.bytesWritten = cap, t.boundedByBuffer = true;
      }
      w.args.push_back(std::move(t));
    }
    w.notes = notes_;
    // Ties go to the loop first in the body (op order is stable; pointers are not).
    for (const Op* loop : loopOrder_) {
      auto it = iterations_.find(loop);
      if (it == iterations_.end() || it->second <= w.hotLoop.iterations) continue;
      w.hotLoop.iterations = it->second;
      w.hotLoop.stages = loop->hasAttr("stages") ? loop->intAttr("stages") : 1;
      w.hotLoop.loc = loop->loc().str();
    }
    return w;
  }

  const Function& f_;
  LaunchFacts l_;
  PointerOrigins origins_{f_};
  bool perProgram_ = false;
  std::array<int64_t, 3> pid_{0, 0, 0};
  bool needsPid_ = false;
  uint64_t steps_ = 0;
  std::map<std::pair<int, int>, double> flops_;
  std::unordered_map<const Op*, double> iterations_;  // per loop op: iterations over the launch
  std::vector<const Op*> loopOrder_;                  // every loop op, in body order
  std::unordered_set<const Op*> seenLoops_;
  double transcendentals_ = 0;
  std::vector<double> accRead_, accWritten_;
  std::vector<std::string> notes_;
  std::set<std::string> noted_;
};

}  // namespace

WorkEstimate estimateWork(const Function& f, const LaunchFacts& launch) { return Counter(f, launch).run(); }

}  // namespace tessera::ir
