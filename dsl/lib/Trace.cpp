// Kernel tracing: the per-thread trace state, the checks every DSL call makes
// on its handles, control flow (for_range, for_pipelined, if_else) and the
// Trace behind ts::kernel.
//
// Tracing: every DSL call validates its operands (so user mistakes get a
// DslError at the user's line instead of a verifier message), sets the
// builder's location, and appends IR through ir::Builder.
#include "DslImpl.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "tessera/ir/Builder.h"
#include "tessera/ir/Verifier.h"

namespace tessera {
namespace dsl {

void fail(const SrcLoc& loc, const std::string& what) {
  throw DslError(fmt::format("{}:{}: error: {}", loc.file_name(), loc.line(), what));
}

namespace {

std::atomic<uint64_t> gNextTrace{1};

thread_local TraceState* tCurrent = nullptr;

}  // namespace

std::string typeStr(const ir::Type& t) { return t.str(); }

/// The active trace, with the builder positioned at `loc`.
TraceState& at(const SrcLoc& loc) {
  if (!tCurrent) fail(loc, "tessera DSL operation outside a ts::kernel() trace");
  ir::Location l;
  l.file = loc.file_name();
  l.line = loc.line();
  l.column = loc.column();
  tCurrent->builder->setLoc(std::move(l));
  return *tCurrent;
}

/// Checks that `t` may be used at the current point of the current trace.
ir::Value* use(const Tensor& t, const SrcLoc& loc, const char* what) {
  TraceState& s = at(loc);
  if (!t.valid()) fail(loc, fmt::format("{} is an empty handle (default-constructed ts::Tensor)", what));
  if (t.traceId() != s.id)
    fail(loc,
         fmt::format("{} belongs to another kernel trace; handles cannot cross kernels (tracing '{}')", what, s.name));
  const ir::Block* owner = t.raw()->ownerBlock();
  if (std::find(s.scopes.begin(), s.scopes.end(), owner) == s.scopes.end())
    fail(loc, fmt::format("{} was defined inside a for_range / if_else body and is used after that body ended; "
                          "carry it out as a loop value or an if_else result",
                          what));
  return t.raw();
}

Tensor wrap(ir::Value* v, bool readonly) { return Tensor(v, tCurrent->id, readonly); }

namespace {

/// Scalar integer loop bounds, all of one type (i64 if any bound is i64).
std::vector<ir::Value*> loopBounds(TraceState& s, const Operand* ops[3], const SrcLoc& loc) {
  static const char* names[] = {"lower bound", "upper bound", "step"};
  DType d = DType::I32;
  for (int i = 0; i < 3; ++i) {
    const Operand& o = *ops[i];
    if (o.isHandle()) {
      ir::Value* v = use(o.tensor(), loc, names[i]);
      if (!v->type().isScalar() || !isInteger(v->type().dtype()) || v->type().dtype() == DType::I1)
        fail(loc, fmt::format("for_range: the {} must be an integer scalar, got {}", names[i], typeStr(v->type())));
      // Unsigned bounds count in i64 (a u32 bound above INT32_MAX stays
      // positive; u64 ones above INT64_MAX are not supported).
      if (v->type().dtype() == DType::I64 || isUnsigned(v->type().dtype())) d = DType::I64;
    } else if (o.kind() != Operand::Kind::Int) {
      fail(loc, fmt::format("for_range: the {} must be an integer scalar, got {}", names[i], o.str()));
    } else if (o.intValue() < INT32_MIN || o.intValue() > INT32_MAX) {
      d = DType::I64;
    }
  }
  std::vector<ir::Value*> r;
  for (int i = 0; i < 3; ++i) {
    const Operand& o = *ops[i];
    if (o.isHandle())
      r.push_back(castTo(s, o.tensor().raw(), d));
    else
      r.push_back(s.builder->constant(ir::Type::scalar(d), o.intValue()));
  }
  return r;
}

/// Runs `fn` with ops going to `block` (a body being traced).
template <class F>
auto inBlock(TraceState& s, ir::Builder& b, F&& fn) {
  struct Restore {
    TraceState& s;
    ir::Builder* saved;
    ~Restore() {
      s.builder = saved;
      s.scopes.pop_back();
    }
  } restore{s, s.builder};
  s.builder = &b;
  s.scopes.push_back(b.block());
  return fn();
}

std::string typeList(const std::vector<ir::Value*>& vs) {
  std::string r = "(";
  for (size_t i = 0; i < vs.size(); ++i) {
    if (i) r += ", ";
    r += typeStr(vs[i]->type());
  }
  r += ")";
  return r;
}

}  // namespace

void checkScalar(const Tensor& t, DType d, const SrcLoc& loc) {
  if (!t.valid()) return;  // an empty handle, assigned later
  if (!t.raw()->type().isScalar() || t.raw()->type().dtype() != d)
    fail(loc, fmt::format("expected a scalar {}, got {}", name(d), typeStr(t.raw()->type())));
}

void checkPointer(const Tensor& t, DType d, const SrcLoc& loc) {
  if (!t.valid()) return;
  const ir::Type& ty = t.raw()->type();
  if (!ty.isPointer() || ty.dtype() != d)
    fail(loc, fmt::format("expected ptr<{}, global>, got {}", name(d), typeStr(ty)));
}

// ---- control flow ------------------------------------------------------------

namespace {
/// The loop's next carried values, out[first ..], each of its initial
/// value's type, appended to `ys` (the yield's operands).
void appendCarried(std::vector<ir::Value*>& ys, const std::vector<Tensor>& out, size_t first,
                   const std::vector<ir::Value*>& init, const char* fn, const SrcLoc& loc) {
  for (size_t i = 0; i < init.size(); ++i) {
    ir::Value* y = use(out[first + i], loc, "loop-carried value");
    if (y->type() != init[i]->type())
      fail(loc, fmt::format("{}: carried value #{} enters the loop as {} but the body returns {}", fn, i,
                            typeStr(init[i]->type()), typeStr(y->type())));
    ys.push_back(y);
  }
}
/// A loop's results as handles, read-only where their initial values were.
std::vector<Tensor> wrapResults(const std::vector<ir::Value*>& results, const std::vector<bool>& ro) {
  std::vector<Tensor> r;
  for (size_t i = 0; i < results.size(); ++i) r.push_back(wrap(results[i], ro[i]));
  return r;
}
}  // namespace

std::vector<Tensor> forImpl(const Operand& lo, const Operand& hi, const Operand& step, const std::vector<Tensor>& inits,
                            const BodyFn& body, const SrcLoc& loc) {
  TraceState& s = at(loc);
  if (s.scopes.size() > static_cast<size_t>(ir::kMaxRegionDepth))
    fail(loc, fmt::format("{}: loops and branches nested more than {} deep", "for_range", ir::kMaxRegionDepth));
  const Operand* bounds[3] = {&lo, &hi, &step};
  std::vector<ir::Value*> b = loopBounds(s, bounds, loc);
  std::vector<ir::Value*> init;
  std::vector<bool> ro;
  for (size_t i = 0; i < inits.size(); ++i) {
    ir::Value* v = use(inits[i], loc, "loop-carried initial value");
    if (v->type().isBuffer())
      fail(loc, fmt::format("for_range: carried value #{} is a buffer; buffers cannot be carried", i));
    init.push_back(v);
    ro.push_back(inits[i].readonly());
  }
  at(loc);  // the bounds may have moved the location
  auto results = s.builder->forLoop(
      b[0], b[1], b[2], init, [&](ir::Builder& inner, ir::Value* iv, std::vector<ir::Value*> carried) {
        return inBlock(s, inner, [&] {
          std::vector<Tensor> c;
          for (size_t i = 0; i < carried.size(); ++i) c.push_back(wrap(carried[i], ro[i]));
          std::vector<Tensor> out = body(wrap(iv), c);
          if (out.size() != init.size())
            fail(loc, fmt::format("for_range: the body returns {} value(s) but the loop carries {}", out.size(),
                                  init.size()));
          std::vector<ir::Value*> ys;
          appendCarried(ys, out, 0, init, "for_range", loc);
          at(loc);  // the yield takes the loop's location
          return ys;
        });
      });
  return wrapResults(results, ro);
}

Tensor scanImpl(const Tensor& x, int axis, const CombineFn& combine, const SrcLoc& loc) {
  TraceState& s = at(loc);
  ir::Value* v = use(x, loc, "scanned tile");
  const ir::Type& t = v->type();
  if (!t.isTile() || !t.isNumeric() || t.dtype() == DType::I1)
    fail(loc, fmt::format("scan: needs a tile of numbers (not i1), got {}", typeStr(t)));
  if (axis < -t.rank() || axis >= t.rank())
    fail(loc, fmt::format("scan: axis {} is out of range for a tile of rank {}", axis, t.rank()));
  int a = axis < 0 ? axis + t.rank() : axis;
  return wrap(s.builder->scan(v, a, [&](ir::Builder& inner, ir::Value* lhs, ir::Value* rhs) {
    return inBlock(s, inner, [&] {
      Tensor r = combine(wrap(lhs), wrap(rhs));
      ir::Value* y = use(r, loc, "the combine function's result");
      // The combine function runs on scalars, any number of times, in an
      // order of the backend's choosing: only pure scalar math may be in it.
      for (auto& op : inner.block()->ops()) {
        std::vector<const ir::Value*> vals(op->operands().begin(), op->operands().end());
        for (auto& res : op->results()) vals.push_back(res.get());
        for (const ir::Value* o : vals)
          if (!o->type().isScalar())
            fail(loc, fmt::format("associative_scan: the combine function may use only scalars (its arguments, "
                                  "constants, scalar kernel arguments), but it uses a {}",
                                  typeStr(o->type())));
        if (!ir::isElementwise(op->code()) && op->code() != ir::OpCode::Constant)
          fail(loc, fmt::format("associative_scan: the combine function may use only elementwise math on "
                                "scalars, but it has '{}'",
                                op->name()));
      }
      if (y->type() != t.element())
        fail(loc, fmt::format("associative_scan: the combine function returns {}, expected a scalar {} (x's dtype)",
                              typeStr(y->type()), name(t.dtype())));
      at(loc);  // the yield takes the scan's location
      return y;
    });
  }));
}

std::vector<Tensor> forPipelinedImpl(const Operand& lo, const Operand& hi, const Operand& step,
                                     const Pipeline& schedule, const std::vector<Tensor>& inits, const BodyFn& body,
                                     const SrcLoc& loc) {
  TraceState& s = at(loc);
  const int64_t stages = schedule.stages;
  if (stages < 1 || stages > ir::kMaxPipelineStages)
    fail(loc, fmt::format("for_pipelined: stages must be 1..{} (real schedules use 2-8), got {}",
                          ir::kMaxPipelineStages, stages));
  if (!s.pipes.empty())
    fail(loc, fmt::format("for_pipelined: a pipelined loop cannot be nested in the for_pipelined at {}:{} (it may be "
                          "nested in for_range and if_else)",
                          s.pipes.back().loc.file_name(), s.pipes.back().loc.line()));
  return forImpl(
      lo, hi, step, inits,
      [&](const Tensor& iv, const std::vector<Tensor>& carried) {
        TraceState& t = *tCurrent;
        ir::Block* blk = t.builder->block();
        blk->parentOp()->attrs()["stages"] = stages;
        if (schedule.warpSpecialize) blk->parentOp()->attrs()["specialize"] = int64_t{1};
        t.pipes.push_back({blk, stages, loc});
        struct Pop {
          TraceState& t;
          ~Pop() { t.pipes.pop_back(); }
        } pop{t};
        return body(iv, carried);
      },
      loc);
}

std::vector<Tensor> whileImpl(const std::vector<Tensor>& inits, const WhileBodyFn& body, const SrcLoc& loc) {
  TraceState& s = at(loc);
  if (s.scopes.size() > static_cast<size_t>(ir::kMaxRegionDepth))
    fail(loc, fmt::format("{}: loops and branches nested more than {} deep", "do_while", ir::kMaxRegionDepth));
  std::vector<ir::Value*> init;
  std::vector<bool> ro;
  for (size_t i = 0; i < inits.size(); ++i) {
    ir::Value* v = use(inits[i], loc, "loop-carried initial value");
    if (!v->type().isScalar())
      fail(loc, fmt::format("do_while: carried value #{} is {}; a do_while carries scalars only (carry tiles in "
                            "for_range)",
                            i, typeStr(v->type())));
    init.push_back(v);
    ro.push_back(inits[i].readonly());
  }
  at(loc);
  auto results = s.builder->whileLoop(init, [&](ir::Builder& inner, std::vector<ir::Value*> carried) {
    return inBlock(s, inner, [&] {
      std::vector<Tensor> c;
      for (size_t i = 0; i < carried.size(); ++i) c.push_back(wrap(carried[i], ro[i]));
      std::vector<Tensor> out = body(c);
      if (out.size() != init.size() + 1)
        fail(loc, fmt::format("do_while: the body returns {} value(s) but must return the condition and the {} "
                              "carried value(s)",
                              out.size(), init.size()));
      std::vector<ir::Value*> ys;
      ir::Value* cond = use(out[0], loc, "do_while condition");
      if (cond->type() != ir::Type::scalar(DType::I1))
        fail(loc, fmt::format("do_while: the condition must be a scalar i1 (a comparison of scalars), got {}",
                              typeStr(cond->type())));
      ys.push_back(cond);
      appendCarried(ys, out, 1, init, "do_while", loc);
      at(loc);  // the yield takes the loop's location
      return ys;
    });
  });
  return wrapResults(results, ro);
}

std::vector<Tensor> ifImpl(const Tensor& cond, const std::function<std::vector<Tensor>()>& thenBody,
                           const std::function<std::vector<Tensor>()>& elseBody, const SrcLoc& loc) {
  TraceState& s = at(loc);
  if (s.scopes.size() > static_cast<size_t>(ir::kMaxRegionDepth))
    fail(loc, fmt::format("{}: loops and branches nested more than {} deep", "if_else", ir::kMaxRegionDepth));
  ir::Value* c = use(cond, loc, "condition");
  if (!c->type().isScalar() || c->type().dtype() != DType::I1)
    fail(loc, fmt::format("if_else: the condition must be a scalar i1 (a comparison of scalars), got {}",
                          typeStr(c->type())));
  // Both branches are traced into scratch blocks first: the `if` op's result
  // types are only known once the branches have run.
  struct Branch {
    ir::Region region{nullptr};
    std::vector<ir::Value*> yields;
    std::vector<bool> ro;
  } br[2];
  for (int i = 0; i < 2; ++i) {
    const auto& fn = i == 0 ? thenBody : elseBody;
    if (!fn) continue;
    ir::Builder b(&br[i].region.block());
    inBlock(s, b, [&] {
      for (const Tensor& t : fn()) {
        br[i].yields.push_back(use(t, loc, "if_else result"));
        br[i].ro.push_back(t.readonly());
      }
      return 0;
    });
  }
  auto& ty = br[0].yields;
  auto& ey = br[1].yields;
  if (!elseBody && !ty.empty())
    fail(loc,
         fmt::format("if_else: the then-branch returns {} value(s) but there is no else-branch to match", ty.size()));
  bool match = ty.size() == ey.size();
  for (size_t i = 0; match && i < ty.size(); ++i) match = ty[i]->type() == ey[i]->type();
  if (!match)
    fail(loc,
         fmt::format("if_else: the branches return different types: then {} vs else {}", typeList(ty), typeList(ey)));
  std::vector<ir::Type> types;
  for (ir::Value* v : ty) types.push_back(v->type());
  auto moveInto = [](Branch& b) {
    return [&b](ir::Builder& inner) {
      for (auto& op : b.region.block().ops()) inner.block()->push(std::move(op));
      b.region.block().ops().clear();
      return b.yields;
    };
  };
  at(loc);
  auto results = s.builder->ifElse(c, types, moveInto(br[0]), moveInto(br[1]));
  std::vector<Tensor> r;
  for (size_t i = 0; i < results.size(); ++i) r.push_back(wrap(results[i], br[0].ro[i] || br[1].ro[i]));
  return r;
}

// ---- kernels -------------------------------------------------------------------

struct Trace::State {
  TraceState ts;
  std::vector<std::string> names;
  size_t numArgs = 0;
  SrcLoc loc;
};

Trace::Trace(const std::string& name, std::vector<std::string> argNames, size_t numArgs, const SrcLoc& loc)
    : s_(std::make_unique<State>()) {
  if (!argNames.empty() && argNames.size() != numArgs)
    fail(loc,
         fmt::format("kernel '{}': {} parameter name(s) given for {} parameter(s)", name, argNames.size(), numArgs));
  if (name.empty()) fail(loc, "kernel: the kernel name is empty");
  s_->names = std::move(argNames);
  s_->numArgs = numArgs;
  s_->loc = loc;
  TraceState& t = s_->ts;
  t.id = gNextTrace.fetch_add(1);
  t.name = name;
  ir::Location l;
  l.file = loc.file_name();
  l.line = loc.line();
  l.column = loc.column();
  t.fn = std::make_unique<ir::Function>(name, l);
  t.root.setInsertionPointToEnd(&t.fn->body());
  t.builder = &t.root;
  t.scopes.push_back(&t.fn->body());
  t.prev = tCurrent;
  tCurrent = &t;
}

Trace::~Trace() {
  if (tCurrent == &s_->ts) tCurrent = s_->ts.prev;
}

Tensor Trace::addArg(const ir::Type& t, bool readonly) {
  TraceState& ts = s_->ts;
  size_t i = ts.fn->numArgs();
  std::string n = i < s_->names.size() ? s_->names[i] : "arg" + std::to_string(i);
  return Tensor(ts.fn->addArgument(t, n), ts.id, readonly);
}

Kernel Trace::finish() {
  TraceState& ts = at(s_->loc);
  ts.builder->ret();
  // A VerifyError here means the DSL let a malformed kernel through; it names
  // the op and the user's line.
  ir::verify(*ts.fn);
  return Kernel(std::shared_ptr<const ir::Function>(std::move(ts.fn)));
}

}  // namespace dsl
}  // namespace tessera
