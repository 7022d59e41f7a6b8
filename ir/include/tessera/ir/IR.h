// The Tessera tile IR: a closed set of operations on SSA values whose types
// are scalars, pointers, tiles (static-shape tensors held in registers) and
// buffers (tiles placed in shared or local memory).
//
// ============================== SEMANTICS ==================================
// This block is the single definition of what a kernel means; every backend
// (CPU, NVPTX, AMDGPU, the SIMT emulator) implements exactly this.
//
// Execution. A kernel is launched on a grid of up to 3 axes. Each grid point
// is a *program*; `program_id(axis)` and `num_programs(axis)` are i32. Programs
// run concurrently in an unspecified order; nothing orders the memory effects
// of two programs except atomics. Within a program, ops take effect in
// program order (a backend may spread one program over many GPU threads; it
// must still honour this order, inserting barriers where needed).
//
// Tiles. A tile is a value: ops on tiles act elementwise unless stated. Binary
// ops require operands of identical type; broadcasting is explicit in the IR
// (`splat`, `broadcast`, `expand_dims`) and implicit only in the DSL. Tiles
// are rank 1..4; element order for reshape is row-major.
//
// Integers are two's complement. i8..i64 are signed: comparisons, min/max,
// division, remainder, right shift (arithmetic) and widening casts
// (sign-extension) treat them as signed. u8..u64 are unsigned: the same ops
// treat them as unsigned (right shift is logical, widening zero-extends,
// abs is the identity); a cast widens by the source's signedness and
// narrows by truncation, so i8 -1 -> u32 is 0xffffffff. add/sub/mul/neg
// wrap modulo 2^n for both. div/rem truncate toward zero; division by zero
// and (signed) INT_MIN / -1 give an unspecified value (never a trap).
// Shifts by an amount >= the bit width give an unspecified value.
// `mulhi(a, b)` is the high n bits of the exact 2n-bit product of two n-bit
// integers (not i1), signed for i8..i64 and unsigned for u8..u64: (a * b)
// >> n computed without overflow, so mulhi(u32 0xffffffff, 2) = 1 and
// mulhi(i32 -1, 2) = -1 (0xffffffff); `mul` gives the low half. Integer
// constants of u8..u32 hold their value, of u64 its bit pattern as an
// int64. Float -> unsigned casts saturate to [0, 2^n - 1] (NaN -> 0),
// unsigned -> float rounds to nearest. i1 is a boolean: casts from i1 give
// 0 or 1; casts to i1 test != 0.
//
// Floats follow IEEE 754 with round-to-nearest-even; no fast-math is assumed,
// except that `reduce` may reassociate (its result may differ from a
// sequential sum by reassociation rounding only). min/max return NaN if
// either operand is NaN, and order -0 below +0. floor, ceil, trunc and round
// are exact: the integral value toward -inf, toward +inf, toward zero, and
// nearest with ties to even (round(2.5) = 2, round(-0.5) = -0); they keep
// the sign of a zero result and return inf and NaN unchanged.
// The transcendental functions exp, exp2, log, log2, tanh, erf, sin, cos,
// sigmoid (1 / (1 + e^-x)), log1p (ln(1 + x)), expm1 (e^x - 1) and pow are
// computed, on f32 and f64, within the errors docs/math.md states per target
// (a few ulp, for every argument: sin and cos reduce arguments of any
// magnitude exactly), keep the sign of a zero argument where f(0) = 0 (sin,
// tanh, erf, log1p, expm1: f(-0) = -0), and give the special values
// of C's <math.h> (C Annex F): sin(+-inf) = cos(+-inf) = NaN, log1p(-1) = -inf,
// log1p(x < -1) = NaN, expm1(-inf) = -1, sigmoid(+inf) = 1, sigmoid(-inf) = 0;
// pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN, pow(-1, +-inf) = 1, a
// negative base with a non-integer exponent is NaN and with an odd integer
// exponent keeps its sign, pow(+-0, y < 0) is inf (signed for odd y), and
// otherwise NaN in gives NaN out. Denormal arguments and results are not
// flushed. Precision::Approximate may compute some f32 functions with the
// GPU's hardware approximations instead, with the errors docs/math.md states.
// f16/bf16 math is computed in f32 and rounded. Float -> int casts saturate
// to the integer range and map NaN to 0; int -> float rounds to nearest.
// `bitcast` reinterprets each element's bits as another dtype of the same
// width (f32 <-> i32 <-> u32, f64 <-> i64 <-> u64, f16 / bf16 <-> i16; not
// i1; fp8 <-> i8 / u8): no
// conversion, NaN payloads and signed zeros included, IEEE's encodings.
// The 8-bit floats f8e4m3, f8e5m2 (OCP) and f8e4m3fnuz, f8e5m2fnuz (AMD's)
// are storage types (DTypes.def): they are loaded, stored, moved (splat,
// broadcast, reshape, transpose, gather, join, split, select, buffers,
// copies), cast and bitcast, and are dot operands (two fp8 operands may
// differ in format; the accumulator is f32); every other op rejects them.
// A cast from fp8 is exact; a cast to fp8 rounds once to nearest even from
// the source's value, saturates beyond the largest finite value (infinities
// included: +-448 for e4m3, +-240 e4m3fnuz, +-57344 e5m2/e5m2fnuz), maps NaN
// to the format's canonical NaN (0x7F, 0x7E, 0x80) and keeps -0 except in
// the FNUZ formats (support/Fp8.h, the host definition every backend
// matches bit for bit).
//
// Memory. A pointer carries a memory space: global (visible to all programs,
// passed as kernel arguments), shared (one instance per program, visible to
// all threads of that program), local (private to a program). `ptr_add`
// offsets by *elements*, not bytes. `load(ptr, mask, other)` reads only the
// lanes whose mask is true and yields `other` (default 0) elsewhere; masked-off
// lanes never touch memory, so their pointers may be out of bounds. `store`
// writes only masked-on lanes; if two lanes of one store write one address,
// one of the values wins. Unmasked out-of-bounds accesses are undefined
// behaviour (the emulator reports them).
//
// Atomics. `atomic_rmw(ptr, value [, mask]) {kind, order, scope}` and
// `atomic_cas(ptr, cmp, value [, mask]) {order, scope}` act on global
// memory only, element by element (each masked-on element is one atomic
// read-modify-write; the elements of one tile are unordered among
// themselves), and return the old values (0 in masked-off lanes). Kinds
// (Atomics.def): add (integers wrap; floats round as `add`), min and max
// (as the `min`/`max` ops: signedness by dtype, NaN-propagating, -0 < +0),
// and, or, xor (integers only), xchg (stores `value`). atomic_cas stores
// `value` where the old value equals `cmp` -- for floats, where their bits
// are equal (so -0 and +0 differ and a NaN matches its own bit pattern).
// Not defined on i1. `fence() {order, scope}` has no data.
// Orders: relaxed (atomicity only), acquire (no later access of the
// program is performed before it), release (no earlier access of the
// program is performed after it), acq_rel (both); a fence is acquire,
// release or acq_rel. "Access of the program" means of the whole program
// however many threads a backend spreads it over. Scopes name the programs
// the ordering is guaranteed to: program (only this program: e.g. its own
// shared memory), device (every program of the launch), system (also the
// host and other devices, through memory they share). A release by one
// program that an acquire of another reads from (same or wider scope
// covering both) makes the first program's earlier writes visible to the
// second's later reads. A backend may implement a stronger order or a wider
// scope than asked.
//
// Multi-buffered shared memory and asynchronous copies (software pipelining;
// docs/pipelining.md has the full design).
//  * `buffer_slot(b, i)` on b : buffer<space, S x d1 x ... x dtype> is a view
//    (no copy, no effect) of slot i, a buffer<space, d1 x ... x dtype>;
//    accesses through the view are accesses of b. i is an integer scalar;
//    i must be in [0, S), otherwise the view is unspecified (the verifier
//    rejects a constant index out of range).
//  * `copy` without `async` (or with async = 0) is an ordinary program-order
//    write of the destination, like a load followed by local_store: the
//    backend orders it against earlier and later accesses itself.
//  * `copy {async = 1}` (global -> shared only) *issues* the copy: the reads
//    of global memory and the writes of the destination happen at some
//    unspecified time between the copy and the async_wait that retires its
//    group. It joins the current (open) group of the program. The backend
//    orders it against NOTHING else: the program must order it explicitly.
//    Masked-off lanes do not touch global memory and write 0 to the slot.
//  * `async_commit()` closes the open group (possibly empty); groups retire
//    in commit order.
//  * `async_wait() {pending = N}` blocks until at most N committed groups
//    are still in flight; every copy of an older group has then completed
//    for the thread(s) that issued it. Copies in the open group are not
//    covered by any wait.
//  * Visibility rule: data written by an async copy may be read (local_load,
//    or a sync write/read of the same slot) only after an async_wait that
//    retires its group AND a later `barrier` (the wait makes the data complete
//    for the issuing threads, the barrier makes it visible to all threads of
//    the program).
//  * Reuse rule (write-after-read): an async copy into a slot may be issued
//    only if a `barrier` separates it from every earlier read of that slot,
//    and only after the previous async copy into that slot has been retired
//    by an async_wait (two in-flight copies into one slot complete in an
//    unspecified order).
//  * No async copy may still be in flight when the kernel returns.
//  Verified kernels obey these rules: the verifier proves them statically
//  (ir/lib/PipelineVerifier.cpp) wherever async copies occur, which is only
//  in the kernel body and directly in a `for {pipelined = S}` loop at the top
//  level of the kernel.
//
// Asynchronous dots (matrix instructions that run behind the program, e.g.
// Hopper's wgmma; the `async-dots` pass creates them, docs/pipelining.md).
//  * `dot {async = 1}` *issues* the dot: it may read its operands' shared
//    slots (the local_loads that feed it, B's also through a transpose:
//    dotOperandLoad) and compute its result at any time
//    until a `dot_wait` retires it. Each async dot is a group of its own;
//    groups retire in issue order. A backend may complete it at once.
//  * `dot_wait(x...) {pending = N}` blocks until at most N async dots are
//    still in flight, and returns its operands: with operands, N must be 0
//    and the results are the completed values.
//  * Result rule: the result of an async dot (directly, or carried by a loop
//    from its yield) may be used only as the accumulator of another async
//    dot, by a yield, or by a dot_wait; everything else uses the dot_wait's
//    result.
//  * Reuse rule: a slot read by an async dot counts as read until a dot_wait
//    retires the dot; the write-after-read rule above applies from there
//    (a barrier after the dot_wait, then the copy).
//  * No async dot may still be in flight when the kernel returns.
//
// Pipelined loops. `for {stages = S}` (S >= 1) is a loop *as written*: a
// one-stage program whose staged copies (non-async `copy` into
// `buffer_slot(b, i)` of a shared buffer with S slots defined before the
// loop) write and read their data in the same iteration; it means exactly
// the plain loop. The `pipeline` pass rewrites it into the explicit schedule:
// a `for {pipelined = S}` loop over the iteration number k = 0, 1, ..., n-1
// (lo = 0, step = 1) preceded by a prologue of async copies for iterations
// 0..S-2 and followed by `async_wait {pending = 0}`; ops of the schedule
// carry `stage = d`: they belong to iteration k + d (k = 0 in the prologue).
//
// Warp-specialised pipelines (the `warp-specialize` pass creates them for
// `for {stages = S, specialize = 1}` on targets that have them; docs/pipelining.md).
//  * `warp_specialize() {warps = W}` starts its region, the *producer*, on W
//    more warps of the program, concurrently with the ops after it (the
//    *consumer*: the program's own threads). The producer may use, from
//    outside its region, only the kernel's arguments and `alloc` results;
//    it may not return, write global memory or hold tiles past its copies.
//    At most one per kernel, in the kernel body.
//  * A *channel* of `slots = N` links them: slot s of every buffer the
//    producer copies into goes through rounds 0, 1, 2, ...; round r of slot s
//    carries iteration j = r * N + s of the pipelined loops.
//  * Producer: `stage_acquire(s)` blocks until the consumer released the
//    slot's previous round (round 0: at once); the async copies it then
//    issues into slot s belong to that round; `stage_commit(s)` closes it.
//  * Consumer: `stage_wait(s)` blocks until the slot's next round is
//    committed and its copies complete, and makes their data visible to
//    every consumer thread (no barrier needed); `stage_release(s [, c])`
//    ends the round (where c holds, if given): the producer may then
//    refill the slot, so no read of it (nor an async dot reading it that
//    is not yet retired by a dot_wait) may follow.
//  * The verifier proves the protocol of both loops statically
//    (ir/lib/StageProtocol.cpp): each side's rounds in order, slots of the
//    form (i + c) mod N, reads of a slot only between its wait and release,
//    copies only between acquire and commit, and no deadlock.
//
// Scans. `scan(x) {axis}` has x's type; its region ^(a, b) (two scalars of
// x's dtype) yields combine(a, b). Element i along the axis of the result
// is x_0 . x_1 . ... . x_i ("." = combine), the other dims independent. The
// combine must be associative: the backend may evaluate it as a tree, in
// any association, any number of times (float results may differ from a
// sequential loop by reassociation rounding only); operand order is kept
// (the combine need not commute). The region holds only elementwise ops and
// constants on scalars; it may read scalars defined outside it. Not defined
// on i1 tiles.
//
// Block-scaled dots. `dot_scaled(a, a_scale, b, b_scale, acc [, ts])
// {a_format, b_format}` (formats: ScaledFormats.def; docs/dot_scaled.md):
// a holds u8 codes [M, K] (fp4 formats: [M, K/2], element 2j in the low
// nibble of byte j), b the same K-major [N, K]; a_scale [M, K/bs] and
// b_scale [N, K/bs] hold one scale code per block of bs elements along K
// (u8; nvfp4's f8e4m3 scales may also be an f8e4m3 tile, and their sign
// bit is ignored: NVFP4's scales are unsigned, UE4M3); acc and the result
// are f32 [M, N]; ts, an f32 scalar, only with an nvfp4 operand.
// out[m, n] = acc[m, n] + ts * sum_k a[m, k] sa[m, k/bs] b[n, k] sb[n, k/bs]
// (ts = 1 when absent), summed in f32 in an unspecified order. Lowered natively, it becomes the block-scaled
// `dot(a, b, acc, a_scale, b_scale) {a_elem, b_elem}`: u8 a [M, K], b [K, N] a byte an element (ScaledDot.h; `packed`
// fp4 x fp4: a [M, K/2], b [K/2, N]), e8m0 (u8) scales [M, K/32], [N, K/32], or with `scale_elem = "ue4m3"`
// NVFP4's UE4M3 codes (u8, the sign bit ignored) of blocks of 16, [M, K/16], [N, K/16]; elsewhere, the exact
// decomposition.
//
// Reductions. `reduce(x) {kind, axis}` removes `axis` (a rank-1 tile gives
// a scalar): sum, max and min combine the elements (max / min as the
// elementwise ops: NaN if any element is NaN); argmax and argmin give the
// i32 position along the axis of the first maximum / minimum, comparing as
// max / min do except that -0 and +0 are equal, with NaN above every number
// for argmax and below every number for argmin (so the first NaN, if any, is
// the result of both: its index is where max / min find their NaN). Ties go
// to the lowest index.
//
// Data movement.
//  * `gather(src, index) {axis}`: src is a tile of rank r, index a tile of
//    integers (not i1) of rank r whose shape equals src's in every dim but
//    `axis`. The result has index's shape and src's dtype:
//    out[i0, .., ik, ..] = src[i0, .., index[i0, .., ik, ..], ..] (k = axis).
//    An index outside [0, src.shape[axis]) gives an unspecified value of
//    src's dtype; it never faults or touches memory outside the tile.
//  * `join(a, b)`: a and b of one tile type; the result has a trailing dim
//    of 2: out[..., 0] = a, out[..., 1] = b. Rank-4 operands are rejected
//    (tiles are rank 1..4).
//  * `split(x)`: x a tile of rank 2 to 4 whose last dim is 2; two results
//    of x's type without that dim: x[..., 0] and x[..., 1]. split(join(a,
//    b)) is (a, b).
//
// Profiling. `probe() {name, end}` marks the begin (end = 0) or the end
// (end = 1) of a scope named `name`; scopes nest within their block. A
// profiled compile (CompileOptions::profile) records, per warp, the time at
// each probe (tessera/support/Profile.h); any other compile removes them
// first (the `strip-probes` pass), so they change nothing else. Probes
// order nothing: code without memory effects may move across them.
//
// Assertions. `assert(cond) {message}` states that every element of cond
// (an i1 scalar or tile) is true. A checked compile (CompileOptions::
// checkBounds) tests it as it tests accesses: the first program to find a
// false element records the assert in the launch's record (BoundsCheck.h,
// arg kAssert), the CPU's program stops there, a GPU's threads run on, and
// the launch raises a LaunchError naming the message and the line. Any
// other compile removes them first (the `strip-asserts` pass).
//
// Control flow. `for` runs its body for iv = lo, lo+step, ... while iv < hi
// (step > 0; a non-positive step runs zero iterations), threading
// loop-carried values through `yield`. `if` selects one region; both regions
// yield values of the op's result types. `while` is a do-while: its region
// ^(carried...) runs, then yields (cond, next...); while the i1 scalar cond
// holds it runs again on next, else the op's results are next. Its carried
// values are scalars (a loop whose trip count is found as it runs: a tile
// queue, a convergence test). All three are uniform across a program.
//
// Cancelling programs. `cancel_program()` takes a program of the launch
// that has not started and ensures it never will, returning its axis-0 id
// so that the caller does its work (a persistent loop that keeps the
// hardware's scheduling: NVIDIA's cluster launch control); -1 when no
// program is left to cancel, or always where the grid has more than one
// axis or the target cannot cancel (the caller then does its own work
// only). Once it returned -1 to a program, the program must not call it
// again (the hardware leaves a further request undefined).
// ===========================================================================
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tessera/ir/Type.h"

namespace tessera::ir {

/// The deepest software pipeline a loop may have (`stages` / `pipelined`).
/// Real schedules use 2-8; deeper ones cannot fit any GPU's shared memory
/// with useful tiles and cost compile time (a prologue copy per stage, and a
/// schedule proof that grows with the stages) for nothing.
inline constexpr int64_t kMaxPipelineStages = 32;
/// The warps a warp-specialised pipeline's producer runs on where the
/// `warp-specialize` pass is not told (the pass by name): a whole
/// warpgroup, which setmaxnreg needs. Compiles ask the target
/// (codegen::gpuProducerWarps: one warp unless registers are traded).
constexpr int64_t kProducerWarps = 4;
/// The deepest nesting of regions (for / if bodies) a kernel may have. Every
/// layer (DSL trace, parser, verifier, passes, lowerings) recurses over
/// regions; the limit keeps that recursion, and compile time, bounded.
inline constexpr int kMaxRegionDepth = 200;

/// Where an op came from in the user's program.
struct Location {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
  bool known() const { return !file.empty(); }
  std::string str() const;  // "file:line:col" or "<unknown>"
};

// The closed set of operations, from Ops.def (their operands, results and
// attributes are listed there).
enum class OpCode : uint16_t {
#define TS_OP(Enum, name, traits) Enum,
#include "tessera/ir/Ops.def"
};

/// Op traits (Ops.def).
enum OpTrait : unsigned {
  kElementwise = 1,
  kEffects = 2,
  kTerminator = 4,
  kWrites = 8,
  kBinary = 16,
  kUnary = 32,
  kFloatOnly = 64,
  kTranscendental = 128,
  kRegions = 256,
  kFree = 512,
  kCheap = 1024,
};

const char* opName(OpCode op);
std::optional<OpCode> parseOpName(const std::string& s);
bool isElementwise(OpCode op);  // binary, unary, fma, cmp, select, cast, ptr_add
bool isTerminator(OpCode op);
bool hasSideEffects(OpCode op);  // store, atomics, copy, local_store, barrier, async, control flow
bool writesMemory(OpCode op);    // store, atomics, copy, local_store, barrier
bool isBinary(OpCode op);        // add .. mulhi, pow: (a, b) -> one value of their type
bool isUnary(OpCode op);         // neg .. expm1: (a) -> one value of its type
bool needsFloat(OpCode op);      // pow, exp .. expm1, fma: float operands only
/// pow, exp, exp2, log, log2, tanh, erf, sin, cos, sigmoid, log1p, expm1:
/// polynomial expansions or device-library calls (docs/math.md).
bool isTranscendental(OpCode op);
/// `cmp {pred = p}` on two integer constants of dtype d (unsigned dtypes
/// compare their bits unsigned); nullopt for an unknown predicate.
std::optional<bool> foldIntCmp(const std::string& p, int64_t a, int64_t b, DType d);
bool hasRegions(OpCode op);  // for, if, while, scan, warp_specialize
/// The cost of recomputing an op's value where it is used (Ops.def): free
/// (constant, splat, arange, broadcast, expand_dims: no arithmetic, so
/// re-emitted in any layout), cheap (about one instruction per element:
/// the free ops, reshape, and the elementwise ops but div, rem, sqrt,
/// rsqrt and the transcendentals).
bool isFreeToRecompute(OpCode op);
bool isCheapToRecompute(OpCode op);
/// The kinds of `reduce`: sum, max, min, argmax, argmin (the verifier rejects others,
/// so the backends can rely on it).
bool isReduceKind(const std::string& kind);

/// An attribute value: integer, float, string/identifier or integer list.
using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>>;
std::string attrStr(const Attr& a);

class Op;
class Block;
class Region;
class Function;

/// An SSA value: the result of an op, or an argument of a block.
class Value {
 public:
  Value(Type t, Op* def, Block* owner, unsigned index) : type_(std::move(t)), def_(def), owner_(owner), index_(index) {}
  const Type& type() const { return type_; }
  void setType(Type t) { type_ = std::move(t); }
  /// The defining op, or nullptr for block arguments.
  Op* definingOp() const { return def_; }
  /// For a block argument, its block; for a result, the block of its op.
  Block* ownerBlock() const;
  unsigned index() const { return index_; }
  bool isBlockArg() const { return def_ == nullptr; }
  /// An optional name hint (kernel argument names); the printer may use it.
  std::string nameHint;

 private:
  Type type_;
  Op* def_;
  Block* owner_;
  unsigned index_;
};

class Block {
 public:
  explicit Block(Region* parent = nullptr) : parent_(parent) {}
  /// Destroys nested regions with a worklist rather than recursion: IR built
  /// by hand may nest deeper than the stack allows (the verifier rejects it,
  /// but it must still be destroyable).
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  Value* addArgument(Type t);
  const std::vector<std::unique_ptr<Value>>& args() const { return args_; }
  Value* arg(unsigned i) const { return args_.at(i).get(); }
  unsigned numArgs() const { return static_cast<unsigned>(args_.size()); }

  std::vector<std::unique_ptr<Op>>& ops() { return ops_; }
  const std::vector<std::unique_ptr<Op>>& ops() const { return ops_; }
  Op* terminator() const { return ops_.empty() ? nullptr : ops_.back().get(); }
  /// Appends an op, taking ownership; sets its parent.
  Op* push(std::unique_ptr<Op> op);
  /// Inserts before position `pos` (an index into ops()).
  Op* insert(size_t pos, std::unique_ptr<Op> op);
  Region* parent() const { return parent_; }
  /// The op owning the region this block is in (nullptr for a kernel body).
  Op* parentOp() const;

 private:
  Region* parent_;
  std::vector<std::unique_ptr<Value>> args_;
  std::vector<std::unique_ptr<Op>> ops_;
};

class Region {
 public:
  explicit Region(Op* parent) : parent_(parent), block_(this) {}
  Block& block() { return block_; }
  const Block& block() const { return block_; }
  Op* parentOp() const { return parent_; }

 private:
  Op* parent_;
  Block block_;
};

class Op {
 public:
  Op(OpCode code, std::vector<Value*> operands, const std::vector<Type>& resultTypes, std::map<std::string, Attr> attrs,
     Location loc);
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  OpCode code() const { return code_; }
  const char* name() const { return opName(code_); }
  const Location& loc() const { return loc_; }

  const std::vector<Value*>& operands() const { return operands_; }
  Value* operand(unsigned i) const { return operands_.at(i); }
  unsigned numOperands() const { return static_cast<unsigned>(operands_.size()); }
  void setOperand(unsigned i, Value* v) { operands_.at(i) = v; }
  /// Adds a trailing optional operand (a mask); the verifier checks arity.
  void appendOperand(Value* v) { operands_.push_back(v); }

  const std::vector<std::unique_ptr<Value>>& results() const { return results_; }
  Value* result(unsigned i = 0) const { return results_.at(i).get(); }
  unsigned numResults() const { return static_cast<unsigned>(results_.size()); }

  std::map<std::string, Attr>& attrs() { return attrs_; }
  const std::map<std::string, Attr>& attrs() const { return attrs_; }
  bool hasAttr(const std::string& k) const { return attrs_.count(k) != 0; }
  /// Typed attribute access; an absent or mistyped attribute is an internal
  /// error (the verifier checks user-facing cases first).
  int64_t intAttr(const std::string& k) const;
  double floatAttr(const std::string& k) const;
  const std::string& strAttr(const std::string& k) const;
  const std::vector<int64_t>& intsAttr(const std::string& k) const;

  Region* addRegion();
  const std::vector<std::unique_ptr<Region>>& regions() const { return regions_; }
  Region& region(unsigned i) const { return *regions_.at(i); }
  unsigned numRegions() const { return static_cast<unsigned>(regions_.size()); }

  Block* parent() const { return parent_; }
  void setParent(Block* b) { parent_ = b; }

 private:
  OpCode code_;
  std::vector<Value*> operands_;
  std::vector<std::unique_ptr<Value>> results_;
  std::map<std::string, Attr> attrs_;
  std::vector<std::unique_ptr<Region>> regions_;
  Location loc_;
  Block* parent_ = nullptr;
};

/// A kernel: a name, typed arguments (block arguments of the body) with
/// optional per-argument attributes (e.g. {divisibility = 16}), and a body
/// ending in `return`.
class Function {
 public:
  Function(std::string name, Location loc) : name_(std::move(name)), loc_(std::move(loc)), body_(nullptr) {}
  const std::string& name() const { return name_; }
  const Location& loc() const { return loc_; }
  Block& body() { return body_.block(); }
  const Block& body() const { return body_.block(); }
  Value* addArgument(Type t, std::string name = {});
  unsigned numArgs() const { return body().numArgs(); }
  Value* arg(unsigned i) const { return body().arg(i); }
  std::vector<std::map<std::string, Attr>>& argAttrs() { return argAttrs_; }
  const std::vector<std::map<std::string, Attr>>& argAttrs() const { return argAttrs_; }

 private:
  std::string name_;
  Location loc_;
  Region body_;
  std::vector<std::map<std::string, Attr>> argAttrs_;
};

/// A parsed or traced translation unit: one or more kernels.
struct Module {
  std::vector<std::unique_ptr<Function>> functions;
  Function* lookup(const std::string& name) const;
};

/// Visits every op in `b` and nested regions, pre-order.
template <typename F>
void walk(Block& b, F&& f) {
  for (auto& op : b.ops()) {
    f(*op);
    for (auto& r : op->regions()) walk(r->block(), f);
  }
}

/// Deep copy of a function (for passes that must not touch the original).
std::unique_ptr<Function> clone(const Function& f);

/// The local_load whose shared slot operand `i` (0: A, 1: B) of `dot` may
/// be read from in place (see "Asynchronous dots"): the operand itself, or
/// for B its 2-D transpose (perm [1, 0]) in the dot's block: B given N x K,
/// as nn.Linear's weights and dot_scaled's B are stored, whose slot the
/// matrix instruction reads K-major. Null for any other operand;
/// `throughTranspose` (when given) says which.
const Op* dotOperandLoad(const Op& dot, unsigned i, bool* throughTranspose = nullptr);

}  // namespace tessera::ir
