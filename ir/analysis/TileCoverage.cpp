// Exactly-once output tiles (TileCoverage.h): the kernel's outputs, their
// tile shape and size arguments, the family of sizes and grids, and the
// comparison of what the interpreter (TileInterpreter.h) finds each
// program storing with the tile grid and the K ranges.
#include "tessera/ir/analysis/TileCoverage.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "../lib/PrinterDetail.h"
#include "TileInterpreter.h"
#include "tessera/ir/analysis/PointerOrigin.h"
#include "tessera/support/Error.h"

namespace tessera::ir {
namespace {

using namespace coverage;

// ---- static facts about the kernel ------------------------------------------

/// Visits every value `v` is computed from, itself included: through the
/// operands of defining ops, and from a loop's induction variable or
/// carried value to the loop's bounds and inits. `visit` returns true to
/// stop; the result says whether it did.
template <class Visit>
bool visitSources(const Value* v, Visit&& visit) {
  std::vector<const Value*> work{v};
  std::unordered_set<const Value*> seen;
  while (!work.empty()) {
    const Value* x = work.back();
    work.pop_back();
    if (!seen.insert(x).second) continue;
    if (visit(x)) return true;
    if (const Op* d = x->definingOp()) {
      for (const Value* o : d->operands()) work.push_back(o);
      continue;
    }
    const Op* owner = x->ownerBlock() ? x->ownerBlock()->parentOp() : nullptr;
    if (owner && owner->code() == OpCode::For)
      for (const Value* o : owner->operands()) work.push_back(o);
    if (owner && owner->code() == OpCode::While) {
      for (const Value* o : owner->operands()) work.push_back(o);
      for (const Value* o : owner->region(0).block().terminator()->operands()) work.push_back(o);
    }
  }
  return false;
}

/// Whether `v` is computed from an op of kind `code`.
bool dependsOn(const Value* v, OpCode code) {
  return visitSources(v, [&](const Value* x) { return x->definingOp() && x->definingOp()->code() == code; });
}

/// The kernel argument `v` is, through casts (nullopt: none).
std::optional<unsigned> argOf(const Function& f, const Value* v) {
  while (v->definingOp() && v->definingOp()->code() == OpCode::Cast) v = v->definingOp()->operand(0);
  for (unsigned i = 0; i < f.numArgs(); ++i)
    if (f.arg(i) == v) return i;
  return std::nullopt;
}

/// The scalar a tile splats (through broadcast and expand_dims), or null.
const Value* splatted(const Value* v) {
  while (const Op* d = v->definingOp()) {
    if (d->code() == OpCode::Splat) return d->operand(0);
    if (d->code() != OpCode::Broadcast && d->code() != OpCode::ExpandDims) return nullptr;
    v = d->operand(0);
  }
  return v->type().isTile() ? nullptr : v;
}

/// The dimensions along which `v` varies with an arange (in v's own axes).
std::set<int> varying(const Value* v) {
  const Op* d = v->definingOp();
  if (!d || !v->type().isTile()) return {};
  switch (d->code()) {
    case OpCode::Arange: return {0};
    case OpCode::Splat:
    case OpCode::Constant: return {};
    case OpCode::Broadcast: return varying(d->operand(0));
    case OpCode::ExpandDims: {
      std::set<int> out;
      const int axis = static_cast<int>(d->intAttr("axis"));
      for (int x : varying(d->operand(0))) out.insert(x < axis ? x : x + 1);
      return out;
    }
    default: {
      std::set<int> out;
      if (!isElementwise(d->code())) return {-1};
      for (const Value* o : d->operands())
        for (int x : varying(o)) out.insert(x);
      return out;
    }
  }
}

/// The size argument bounding each dimension of a store's mask: the `x <
/// M` compares under its ands, x varying along one dimension only.
void maskBounds(const Function& f, const Value* m, std::vector<int>& axes, std::map<int, unsigned>& bounds) {
  const Op* d = m->definingOp();
  if (!d) return;
  switch (d->code()) {
    case OpCode::And:
      maskBounds(f, d->operand(0), axes, bounds);
      maskBounds(f, d->operand(1), axes, bounds);
      return;
    case OpCode::Broadcast: maskBounds(f, d->operand(0), axes, bounds); return;
    case OpCode::ExpandDims: {
      std::vector<int> inner(axes);
      inner.erase(inner.begin() + d->intAttr("axis"));
      maskBounds(f, d->operand(0), inner, bounds);
      return;
    }
    case OpCode::Cmp: {
      const std::string& p = d->strAttr("pred");
      const Value* x = d->operand(0);
      const Value* bound = d->operand(1);
      if (p == "gt" || p == "ge")
        std::swap(x, bound);
      else if (p != "lt" && p != "le")
        return;
      const Value* s = splatted(bound);
      auto arg = s ? argOf(f, s) : std::nullopt;
      const std::set<int> dims = varying(x);
      if (arg && dims.size() == 1 && *dims.begin() >= 0 && *dims.begin() < static_cast<int>(axes.size()))
        bounds.emplace(axes[static_cast<size_t>(*dims.begin())], *arg);
      return;
    }
    default: return;
  }
}

// ---- the check ---------------------------------------------------------------

/// A tile stored twice or never, or K iterations run twice or never: the
/// op to blame and what is wrong.
struct Violation {
  const Op* op;
  std::string msg;
};

class Coverage {
 public:
  Coverage(const Function& f, const TileCoverageOptions& o) : f_(f), o_(o), names_(f), origins_(f) {}

  std::vector<TileCoverage> run() {
    std::map<unsigned, std::vector<const Op*>> outputs;
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      if (op.code() != OpCode::Store) return;
      const auto& from = origins_.of(op.operand(0));
      if (from.size() == 1 && f_.arg(from[0])->type().space() == MemSpace::Global) outputs[from[0]].push_back(&op);
    });
    std::vector<TileCoverage> out;
    for (auto& [arg, stores] : outputs) {
      TileCoverage c;
      c.output = names_.name(f_.arg(arg));
      try {
        c.text = output(arg, stores);
        c.kind = TileCoverage::Kind::Checked;
      } catch (const NotAnalysable& n) {
        c.text = "not analysable: " + std::string(n.op->name()) + " at " + where(*n.op) + ": " + n.why;
      }
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  std::string where(const Op& op) const { return op.loc().known() ? op.loc().str() : "@" + f_.name(); }

  /// Checks one output; returns what was checked.
  std::string output(unsigned arg, const std::vector<const Op*>& stores) {
    const Op& first = *stores.front();
    maxTile_ = {0, 0};
    const Shape tile = first.operand(1)->type().shape();
    for (const Op* s : stores) {
      if (!dependsOn(s->operand(0), OpCode::ProgramId) && !dependsOn(s->operand(0), OpCode::NumPrograms))
        throw NotAnalysable{s,
                            "its addresses depend on neither program_id nor num_programs: no tile is chosen "
                            "per program"};
      if (s->operand(1)->type().shape() != tile)
        throw NotAnalysable{s, "the stores of one output must store tiles of one shape"};
    }
    // Grid axes 1 and 2 hold one program in the model: a kernel that picks
    // tiles by them (a 2-D grid) would seem to miss every tile they pick.
    const Op* otherAxis = nullptr;
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      if (!otherAxis && (op.code() == OpCode::ProgramId || op.code() == OpCode::NumPrograms) && op.intAttr("axis") != 0)
        otherAxis = &op;
    });
    if (otherAxis)
      throw NotAnalysable{otherAxis, "the kernel reads grid axis " + std::to_string(otherAxis->intAttr("axis")) +
                                         "; only axis 0 hands out tiles in the model"};
    if (tile.empty() || tile.size() > 2)
      throw NotAnalysable{&first, "only tiles of rank 1 or 2 are named by their first element"};
    // M and N: the size arguments the masks compare the row and column
    // indices with (rank 1: N only).
    std::vector<std::optional<unsigned>> size(tile.size());
    for (const Op* s : stores) {
      if (s->numOperands() < 3) throw NotAnalysable{s, "an unmasked store has no size argument to bound its tiles"};
      std::vector<int> axes;
      for (int i = 0; i < static_cast<int>(tile.size()); ++i) axes.push_back(i);
      std::map<int, unsigned> b;
      maskBounds(f_, s->operand(2), axes, b);
      for (size_t d = 0; d < tile.size(); ++d) {
        auto it = b.find(static_cast<int>(d));
        if (it == b.end() || !f_.arg(it->second)->type().isScalar())
          throw NotAnalysable{
              s, "its mask does not compare dimension " + std::to_string(d) + "'s index with a size argument (x < M)"};
        if (size[d] && *size[d] != it->second)
          throw NotAnalysable{s, "the stores of one output must be bounded by the same size arguments"};
        size[d] = it->second;
      }
    }
    std::set<const Op*> storeSet(stores.begin(), stores.end()), holders;
    bool persistent = false, cancels = false;
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      cancels = cancels || op.code() == OpCode::CancelProgram;
      if (op.numRegions() == 0) return;
      bool holds = false;
      for (auto& r : op.regions()) walk(r->block(), [&](Op& in) { holds = holds || storeSet.count(&in); });
      if (!holds) return;
      holders.insert(&op);
      if (op.code() == OpCode::For)
        for (unsigned i = 0; i < 3; ++i) persistent = persistent || dependsOn(op.operand(i), OpCode::NumPrograms);
    });

    // The family of sizes: per dimension, c tiles exactly and one element
    // past c - 1 tiles.
    const int64_t tm = tile.size() == 2 ? tile[0] : 1, tn = tile.back();
    auto family = [&](int64_t t) {
      std::vector<int64_t> v;
      for (int64_t c = 1; c <= o_.maxTiles; ++c) {
        v.push_back(c * t);
        if (t > 1) v.push_back((c - 1) * t + 1);
      }
      std::sort(v.begin(), v.end());
      return v;
    };
    std::vector<int64_t> args(f_.numArgs(), 0);
    const int64_t other = kOtherSize * std::max(tm, tn) * o_.maxTiles;
    for (unsigned i = 0; i < f_.numArgs(); ++i)
      if (f_.arg(i)->type().isScalar() && isInteger(f_.arg(i)->type().dtype())) args[i] = other;
    const std::optional<unsigned> mArg = tile.size() == 2 ? size[0] : std::nullopt, nArg = size.back();
    const std::vector<int64_t> ms = mArg && *mArg != *nArg ? family(tm) : std::vector<int64_t>{0};

    // K loops: loops under a loop or branch over tiles, holding no output
    // store, whose bounds the program computes (a unit's share of K). The
    // arguments their bounds read, M and N aside (K), take a few values of
    // their own.
    std::set<const Op*> kLoops;
    std::set<unsigned> kArgs;
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      if (op.code() != OpCode::For || holders.count(&op)) return;
      bool under = false;
      for (const Op* up = op.parent()->parentOp(); up; up = up->parent()->parentOp())
        under = under || holders.count(up);
      bool perProgram = false;
      for (unsigned i = 0; i < 2; ++i)
        perProgram =
            perProgram || dependsOn(op.operand(i), OpCode::ProgramId) || dependsOn(op.operand(i), OpCode::NumPrograms);
      if (!under || !perProgram) return;
      kLoops.insert(&op);
      for (unsigned i = 0; i < 2; ++i) argsIn(op.operand(i), kArgs);
    });
    std::vector<int64_t> ks{other};
    std::vector<unsigned> kOnly;
    for (unsigned a : kArgs)
      if (a != *nArg && a != mArg.value_or(*nArg) && f_.arg(a)->type().isScalar() &&
          isInteger(f_.arg(a)->type().dtype()))
        kOnly.push_back(a);
    if (!kOnly.empty()) ks = {1, 13, other};

    Interpreter in(f_, storeSet, holders, kLoops, origins_);
    int64_t kUnits = 0;
    // Every sample runs before a violation is reported: a sample the model
    // does not fit (NotAnalysable) withdraws every claim, violations too.
    int64_t samples = 0;
    std::optional<Violation> violation;
    for (int64_t kv : ks)
      for (int64_t m : ms)
        for (int64_t n : family(tn)) {
          for (unsigned a : kOnly) args[a] = kv;
          if (mArg) args[*mArg] = m;
          args[*nArg] = n;
          const int64_t rows = mArg ? args[*mArg] : 1, cols = n;
          const int64_t gm = (rows + tm - 1) / tm, gn = (cols + tn - 1) / tn, count = gm * gn;
          std::set<int64_t> grids;
          if (persistent) {
            grids = {1, 2, 3, 5, std::max<int64_t>(count - 1, 1), count, count + 1};
          } else {
            const int64_t need = std::max(needed(in, args, count, first), count);
            grids = {need, need + 1, need + 3};
          }
          for (int64_t programs : grids)
            for (bool cancelling : {false, true}) {
              if (cancelling && !cancels) continue;
              std::vector<Exec> execs;
              in.launch(cancelling);
              for (int64_t p = 0; p < programs; ++p)
                if (!in.cancelled(p)) in.run(p, programs, args, execs);
              std::optional<Violation> v = compare(execs, tile, gm, gn, rows, cols, programs, mArg, *nArg);
              if (!v && !in.kUnknown())
                v = compareK(in, execs, tile, kUnits,
                             [&] { return sampleText(args, rows, cols, gm, gn, tile, programs, mArg, *nArg); });
              if (v && cancelling) v->msg += " (each cancel_program cancelling the next program not started)";
              if (v && !violation) violation = std::move(v);
              ++samples;
            }
        }
    if (violation) {
      // A dimension no program ever tiles past its first tile (a row
      // block spanning the whole width) is likely meant for one tile
      // only: the violation stands for the sizes it names, and says so.
      std::string hint;
      if (tile.size() == 2 && maxTile_.first == 0 && violation->msg.find("never stored") != std::string::npos)
        hint += "; no program stores a tile past tile row 0 at any size";
      if (maxTile_.second == 0 && violation->msg.find("never stored") != std::string::npos)
        hint += "; no program stores a tile past tile column 0 at any size";
      if (!hint.empty()) hint += " (if the kernel is meant for one tile there, those sizes are outside it)";
      throw fail(*violation->op, violation->msg + hint);
    }
    std::string sizes = mArg && *mArg != *nArg ? names_.name(f_.arg(*mArg)) + " and " + names_.name(f_.arg(*nArg))
                                               : names_.name(f_.arg(*nArg));
    std::string kText;
    if (in.kUnknown())
      kText = "; K ranges not checked: the bounds of the 'for' at " + where(*in.kUnknown()) +
              " depend on values the check cannot compute";
    else if (kUnits) {
      std::string names;
      for (unsigned a : kOnly) names += (names.empty() ? "" : ", ") + names_.name(f_.arg(a));
      kText = "; the K loops of each tile's work units cover one range from 0, each iteration once" +
              (names.empty() ? std::string(" (K held at ") + std::to_string(other) + ")"
                             : " (" + names + " = 1, 13, " + std::to_string(other) + ")");
    }
    return "every tile stored exactly once for " + std::to_string(samples) + " sizes and grids: " + sizes +
           " of 1 to " + std::to_string(o_.maxTiles) + " tiles of " + shapeStr(tile) + " (multiples and one past), " +
           (persistent ? "persistent: 1, 2, 3, 5, count-1, count, count+1 programs"
                       : "need, need+1, need+3 programs (need: count, or one past the last program with work "
                         "if more)") +
           (cancels ? ", each with cancel_program cancelling nothing and cancelling every program it can" : "") + kText;
  }

  /// The grid a kernel without a persistent loop needs beyond the count:
  /// one more than the last program that does any work (stores a tile,
  /// takes a ticket) on a grid of 16 x count + 16 programs (count x S for S
  /// splits of K).
  int64_t needed(Interpreter& in, const std::vector<int64_t>& args, int64_t count, const Op& store) const {
    const int64_t probe = 16 * count + 16;
    std::vector<Exec> execs;
    in.launch();
    for (int64_t p = 0; p < probe; ++p) in.run(p, probe, args, execs);
    int64_t last = -1;
    for (const Exec& e : execs)
      if (e.on) last = std::max(last, e.program);
    for (auto& [addr, c] : in.counters()) last = std::max(last, c.lastProgram);
    if (last + 1 == probe)
      throw NotAnalysable{&store, "every program of a grid of " + std::to_string(probe) +
                                      " does work: the grid the kernel needs cannot be found"};
    return std::max<int64_t>(last + 1, 1);
  }

  /// The kernel arguments `v` is computed from (through loop bounds).
  void argsIn(const Value* v, std::set<unsigned>& out) const {
    visitSources(v, [&](const Value* x) {
      for (unsigned i = 0; i < f_.numArgs(); ++i)
        if (f_.arg(i) == x) out.insert(i);
      return false;
    });
  }

  std::string sampleText(const std::vector<int64_t>& args, int64_t rows, int64_t cols, int64_t gm, int64_t gn,
                         const Shape& tile, int64_t programs, std::optional<unsigned> mArg, unsigned nArg) const {
    std::string s;
    if (tile.size() == 2 && mArg && *mArg != nArg)
      s += names_.name(f_.arg(*mArg)) + " = " + std::to_string(rows) + ", ";
    s += names_.name(f_.arg(nArg)) + " = " + std::to_string(cols);
    for (unsigned i = 0; i < f_.numArgs(); ++i)
      if (i != nArg && i != mArg.value_or(nArg) && f_.arg(i)->type().isScalar() && isInteger(f_.arg(i)->type().dtype()))
        s += ", " + names_.name(f_.arg(i)) + " = " + std::to_string(args[i]);
    return s + ", " + (tile.size() == 2 ? std::to_string(gm) + " x " : "") + std::to_string(gn) +
           (gm * gn == 1 ? " tile of " : " tiles of ") + shapeStr(tile) + ", " + std::to_string(programs) + " program" +
           (programs == 1 ? "" : "s");
  }

  /// Each tile's work units (the K loops before a ticket on its counter, or
  /// before its store where one unit does the tile) must cover one range
  /// [0, H) once, H the same for every tile.
  template <class Text>
  std::optional<Violation> compareK(const Interpreter& in, const std::vector<Exec>& execs, const Shape& tile,
                                    int64_t& units, Text text) {
    struct Unit {
      std::string name;
      std::vector<KRange> k;
    };
    std::vector<Unit> all;
    for (auto& [addr, c] : in.counters())
      if (!c.k.empty())
        all.push_back(
            {"the tile of counter " + names_.name(f_.arg(addr.first)) + "[" + std::to_string(addr.second) + "]", c.k});
    for (const Exec& e : execs)
      if (!e.k.empty()) all.push_back({"the tile " + execText(e) + " stores (" + shapeStr(tile) + ")", e.k});
    std::optional<int64_t> end;
    const KRange* endBy = nullptr;
    for (Unit& u : all) {
      units += static_cast<int64_t>(u.k.size());
      std::erase_if(u.k, [](const KRange& r) { return r.lo >= r.hi; });  // an empty share
      std::sort(u.k.begin(), u.k.end(), [](const KRange& a, const KRange& b) { return a.lo < b.lo; });
      auto range = [](const KRange& r) {
        return "[" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + ") by program " + std::to_string(r.program);
      };
      int64_t at = 0;
      const KRange* prev = nullptr;
      for (const KRange& r : u.k) {
        if (r.lo < at)
          return Violation{r.loop, "K iterations of " + u.name + " run twice: " + range(*prev) + " and " + range(r) +
                                       " (" + text() + ")"};
        if (r.lo > at)
          return Violation{r.loop, "K iterations [" + std::to_string(at) + ", " + std::to_string(r.lo) + ") of " +
                                       u.name + " never run: its units run " +
                                       (prev ? range(*prev) + " and " : std::string()) + range(r) + " (" + text() +
                                       ")"};
        at = r.hi;
        prev = &r;
      }
      if (!prev) continue;
      if (end && *end != at)
        return Violation{prev->loop, "the K iterations of " + u.name + " end at " + std::to_string(at) +
                                         ", those of another tile at " + std::to_string(*end) + " (by program " +
                                         std::to_string(endBy->program) + "; " + text() + ")"};
      end = at;
      endBy = prev;
    }
    return std::nullopt;
  }

  std::string execText(const Exec& e) const {
    std::string s = "program " + std::to_string(e.program);
    for (size_t i = 0; i < e.iters.size(); ++i) s += (i ? ", " : " (iteration ") + std::to_string(e.iters[i]);
    return e.iters.empty() ? s : s + ")";
  }

  /// The first tile of one sample stored twice or never; NotAnalysable
  /// where the stored tiles do not fit the model (TileCoverage.h).
  std::optional<Violation> compare(const std::vector<Exec>& execs, const Shape& tile, int64_t gm, int64_t gn,
                                   int64_t rows, int64_t cols, int64_t programs, std::optional<unsigned> mArg,
                                   unsigned nArg) {
    const bool two = tile.size() == 2;
    const int64_t tm = two ? tile[0] : 1, tn = tile.back();
    auto sizes = [&] {
      std::string s;
      if (two && mArg && *mArg != nArg) s += names_.name(f_.arg(*mArg)) + " = " + std::to_string(rows) + ", ";
      s += names_.name(f_.arg(nArg)) + " = " + std::to_string(cols);
      const int64_t count = gm * gn;
      return s + ", " + (two ? std::to_string(gm) + " x " + std::to_string(gn) : std::to_string(gn)) +
             (count == 1 ? " tile of " : " tiles of ") + shapeStr(tile) + ", " + std::to_string(programs) + " program" +
             (programs == 1 ? "" : "s");
    };
    auto name = [&](int64_t r, int64_t c) {
      return two ? "tile (" + std::to_string(r) + ", " + std::to_string(c) + ")" : "tile " + std::to_string(c);
    };
    std::map<std::pair<int64_t, int64_t>, const Exec*> seen;
    std::string off;  // executions whose store is masked off, for a missed tile
    std::optional<Violation> twice;
    for (const Exec& e : execs) {
      if (!e.on) {
        if (std::count(off.begin(), off.end(), ';') >= 3) continue;
        const int64_t ld = two ? e.strides[0] : 0;
        const bool named = e.origin >= 0 && (!two || ld > 0);
        off += "; " + execText(e) + " stores " +
               (named ? name(two ? e.origin / ld / tm : 0, (two ? e.origin % ld : e.origin) / tn) + ", " : "") +
               "masked off";
        continue;
      }
      int64_t row0 = 0, col0 = e.origin;
      if (e.strides.back() != 1 && tn > 1)
        throw NotAnalysable{e.store, "its tiles' last dimension is not contiguous in memory"};
      if (two) {
        const int64_t ld = e.strides[0];
        if (ld < cols || e.origin < 0)
          throw NotAnalysable{e.store, "its rows are not " + std::to_string(ld) + " >= N elements apart"};
        row0 = e.origin / ld;
        col0 = e.origin % ld;
      }
      // A first element the mask keeps is inside M x N; a tile off the
      // grid or outside it means the address is not the rows and columns
      // the mask bounds (a row of a softmax, say): another model.
      if (row0 % tm != 0 || col0 % tn != 0 || col0 < 0)
        throw NotAnalysable{e.store, execText(e) + " stores a tile at row " + std::to_string(row0) + ", column " +
                                         std::to_string(col0) + ", not on the grid of " + shapeStr(tile) + " tiles (" +
                                         sizes() + ")"};
      const int64_t r = row0 / tm, c = col0 / tn;
      if (r >= gm || c >= gn)
        throw NotAnalysable{
            e.store, execText(e) + " stores " + name(r, c) + ", outside the grid its mask bounds (" + sizes() + ")"};
      maxTile_ = {std::max(maxTile_.first, r), std::max(maxTile_.second, c)};
      auto [it, fresh] = seen.emplace(std::pair{r, c}, &e);
      if (!fresh && !twice)
        twice = Violation{e.store, name(r, c) + " is stored twice: by " + execText(*it->second) + " and by " +
                                       execText(e) + " (" + sizes() + ")"};
    }
    if (twice) return twice;
    for (int64_t r = 0; r < gm; ++r)
      for (int64_t c = 0; c < gn; ++c)
        if (!seen.count({r, c}))
          return Violation{execsStoreOr(execs),
                           name(r, c) + " is never stored: no program computes it (" + sizes() + ")" + off};
    return std::nullopt;
  }

  const Op* execsStoreOr(const std::vector<Exec>& execs) const {
    if (!execs.empty()) return execs.front().store;
    const Op* s = nullptr;
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      if (!s && op.code() == OpCode::Store) s = &op;
    });
    return s;
  }

  VerifyError fail(const Op& op, const std::string& msg) const {
    return VerifyError(where(op) + ": error: tile coverage: " + msg + "\n" + detail::opHeader(op, names_, true));
  }

  const Function& f_;
  const TileCoverageOptions& o_;
  detail::ValueNames names_;
  std::pair<int64_t, int64_t> maxTile_{0, 0};  // the largest tile row and column any sample stored
  PointerOrigins origins_;
};

}  // namespace

std::vector<TileCoverage> checkTileCoverage(const Function& f, const TileCoverageOptions& o) {
  if (o.maxTiles < 1) throw UsageError("tile coverage: the largest tile count must be at least 1");
  return Coverage(f, o).run();
}

}  // namespace tessera::ir
