// DSL internals shared by dsl/lib's sources (not a public header): the state
// of a trace and the helpers that check operands, apply the type rules and
// build IR for more than one kind of op.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/dsl/DSL.h"
#include "tessera/ir/Builder.h"

namespace tessera {
namespace dsl {

/// The state of the innermost trace on this thread.
struct TraceState {
  uint64_t id = 0;
  std::string name;
  std::unique_ptr<ir::Function> fn;
  ir::Builder root;
  ir::Builder* builder = nullptr;  // where ops go now (a loop or branch body)
  // Blocks whose values are visible at the insertion point: the kernel body
  // and every enclosing for/if body. A value owned by any other block was
  // defined inside a body that has ended.
  std::vector<const ir::Block*> scopes;
  TraceState* prev = nullptr;  // a trace started while another one runs
  // ts::for_pipelined bodies being traced, innermost last.
  struct Pipe {
    const ir::Block* body;
    int64_t stages;
    SrcLoc loc;
  };
  std::vector<Pipe> pipes;
  // Buffers made multi-buffered by stage_copy -> the stage_copy's location.
  std::vector<std::pair<const ir::Value*, SrcLoc>> staged;
};

// ---- the active trace (Trace.cpp) ---------------------------------------------

std::string typeStr(const ir::Type& t);
/// The active trace, with the builder positioned at `loc`.
TraceState& at(const SrcLoc& loc);
/// Checks that `t` may be used at the current point of the current trace.
ir::Value* use(const Tensor& t, const SrcLoc& loc, const char* what = "operand");
Tensor wrap(ir::Value* v, bool readonly = false);

// ---- type rules (TypeRules.cpp) ------------------------------------------------

void checkShape(const ir::Shape& shape, const SrcLoc& loc, const char* what);
std::string shapeName(const ir::Shape& s);
/// numpy broadcasting of two shapes.
ir::Shape broadcastShapes(const ir::Shape& a, const ir::Shape& b, const SrcLoc& loc, const std::string& what);
/// Broadcasts `v` to `target` (splat for scalars, leading size-1 dims, then
/// stretching of size-1 dims).
ir::Value* broadcastValue(TraceState& s, ir::Value* v, const ir::Shape& target, const SrcLoc& loc,
                          const std::string& what);
/// A literal materialised as a constant of type `t` (scalar or tile).
ir::Value* literal(TraceState& s, const Operand& o, const ir::Type& t, const SrcLoc& loc, const std::string& what);
ir::Value* castTo(TraceState& s, ir::Value* v, DType d);
/// Two numeric operands (at least one a handle) promoted and broadcast to one
/// type. Returns the IR values.
std::pair<ir::Value*, ir::Value*> unify(TraceState& s, const Operand& a, const Operand& b, const SrcLoc& loc,
                                        const std::string& what);

// ---- pointers (Memory.cpp) -----------------------------------------------------

/// ptr +/- integer offsets.
Tensor pointerArith(TraceState& s, const Operand& p, const Operand& off, bool negate, const SrcLoc& loc,
                    const std::string& what);

}  // namespace dsl
}  // namespace tessera
