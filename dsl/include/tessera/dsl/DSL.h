// The Tessera kernel DSL: a C++ callable traced into tile IR.
//
//   namespace ts = tessera;
//   ts::Kernel softmax(int BLOCK) {   // BLOCK: a meta-parameter fixed at trace time
//     return ts::kernel("softmax", {"out", "in", "cols"},
//         [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int cols) {
//       auto row = ts::program_id(0);
//       auto c = ts::arange(BLOCK);
//       auto mask = c < cols;
//       auto x = ts::load(in + row * cols + c, mask, -ts::inf);
//       auto e = ts::exp(x - ts::max(x, 0));
//       ts::store(out + row * cols + c, e / ts::sum(e, 0), mask);
//     });
//   }
//
// ts::kernel() calls the callable once, with handles standing for the kernel
// arguments; every DSL call appends ops to the kernel being traced (held in a
// thread-local tracing context) and returns a handle (ts::Tensor) to the
// result. Plain C++ control flow runs at trace time (it unrolls / specialises);
// ts::for_range and ts::if_else emit IR control flow.
//
// Every op records the caller's file:line:column: functions take a defaulted
// std::source_location, operators take ts::Operand whose converting
// constructors do (a constructor's default argument is evaluated where the
// conversion happens, i.e. in the user's expression).
//
// ============================ TYPE RULES ===================================
//  * Handles of one dtype combine freely. Two integer handles of different
//    widths promote to the wider (sign-extending); two float handles promote
//    to the wider (f16 with bf16 gives f32). i1 combines only with i1.
//  * Integer handles never mix silently with float handles: that is a
//    DslError naming both types and suggesting an explicit `.to(ts::f32)`.
//  * A C++ integer literal takes the other operand's type (an integer
//    literal next to a float handle becomes that float type); it must fit
//    that type (0 or 1 for i1). A C++ floating literal takes the other
//    operand's float type; next to an integer handle it is a DslError.
//  * Broadcasting is numpy's: a scalar next to a tile is splat; a tile of
//    lower rank gains leading size-1 dims; size-1 dims stretch. Shapes that
//    cannot broadcast are a DslError naming both shapes.
//  * Pointers: ptr + int (handle or literal, scalar or tile) offsets by
//    elements (ptr_add, broadcasting both sides); ptr - int negates the
//    offset. No other arithmetic applies to pointers.
//  * Comparisons give i1; `!x` on an integer means x == 0; `~` is bitwise.
//  * / and % on integers truncate toward zero (IR.h).
// ===========================================================================
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/Kernel.h"
#include "tessera/ir/Atomics.h"
#include "tessera/ir/IR.h"
#include "tessera/support/DType.h"
#include "tessera/support/Error.h"
#include "tessera/support/Fp8.h"
#include "tessera/support/MxFormats.h"

namespace tessera {

using SrcLoc = std::source_location;

// ---- dtypes and constants -------------------------------------------------
inline constexpr DType i1 = DType::I1;
inline constexpr DType i8 = DType::I8;
inline constexpr DType i16 = DType::I16;
inline constexpr DType i32 = DType::I32;
inline constexpr DType i64 = DType::I64;
inline constexpr DType u8 = DType::U8;
inline constexpr DType u16 = DType::U16;
inline constexpr DType u32 = DType::U32;
inline constexpr DType u64 = DType::U64;
inline constexpr DType f16 = DType::F16;
inline constexpr DType bf16 = DType::BF16;
inline constexpr DType f32 = DType::F32;
inline constexpr DType f64 = DType::F64;
/// 8-bit storage floats (DTypes.def, docs/dtypes.md): loaded, stored, moved,
/// converted with .to() and used as dot operands; arithmetic needs .to()
/// first. Host code reads and writes them with fp8Encode / fp8Decode.
inline constexpr DType f8e4m3 = DType::F8E4M3;
inline constexpr DType f8e5m2 = DType::F8E5M2;
inline constexpr DType f8e4m3fnuz = DType::F8E4M3FNUZ;
inline constexpr DType f8e5m2fnuz = DType::F8E5M2FNUZ;
/// The OCP MX codes (MxFormats.h): host formats that name what a u8 tile
/// of codes holds (ts::mx_decode), never a kernel value's dtype.
inline constexpr DType f4e2m1 = DType::F4E2M1;
inline constexpr DType f6e2m3 = DType::F6E2M3;
inline constexpr DType f6e3m2 = DType::F6E3M2;
inline constexpr DType e8m0 = DType::E8M0;

/// Float literals usable anywhere a literal is, e.g. load(p, mask, -ts::inf).
inline constexpr double inf = std::numeric_limits<double>::infinity();
inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();

/// Storage types naming 16-bit floats in kernel signatures (Ptr<ts::half>).
struct half {
  uint16_t bits;
};
struct bfloat16 {
  uint16_t bits;
};
/// Storage types naming the 8-bit floats (Ptr<ts::float8_e4m3>); `bits` is
/// the code (fp8Encode(ts::f8e4m3, x) makes one).
struct float8_e4m3 {
  uint8_t bits;
};
struct float8_e5m2 {
  uint8_t bits;
};
struct float8_e4m3fnuz {
  uint8_t bits;
};
struct float8_e5m2fnuz {
  uint8_t bits;
};

namespace dsl {
template <class T>
struct DTypeOf;
/// The dtype of each C++ type a kernel's pointers and scalars may use; any
/// other type has no DTypeOf and does not compile.
template <DType D>
struct DTypeIs {
  static constexpr DType value = D;
};
// clang-format off
template <> struct DTypeOf<int8_t> : DTypeIs<DType::I8> {};
template <> struct DTypeOf<int16_t> : DTypeIs<DType::I16> {};
template <> struct DTypeOf<int32_t> : DTypeIs<DType::I32> {};
template <> struct DTypeOf<int64_t> : DTypeIs<DType::I64> {};
template <> struct DTypeOf<uint8_t> : DTypeIs<DType::U8> {};
template <> struct DTypeOf<uint16_t> : DTypeIs<DType::U16> {};
template <> struct DTypeOf<uint32_t> : DTypeIs<DType::U32> {};
template <> struct DTypeOf<uint64_t> : DTypeIs<DType::U64> {};
template <> struct DTypeOf<half> : DTypeIs<DType::F16> {};
template <> struct DTypeOf<bfloat16> : DTypeIs<DType::BF16> {};
template <> struct DTypeOf<float8_e4m3> : DTypeIs<DType::F8E4M3> {};
template <> struct DTypeOf<float8_e5m2> : DTypeIs<DType::F8E5M2> {};
template <> struct DTypeOf<float8_e4m3fnuz> : DTypeIs<DType::F8E4M3FNUZ> {};
template <> struct DTypeOf<float8_e5m2fnuz> : DTypeIs<DType::F8E5M2FNUZ> {};
template <> struct DTypeOf<float> : DTypeIs<DType::F32> {};
template <> struct DTypeOf<double> : DTypeIs<DType::F64> {};
// clang-format on

/// Throws DslError("file:line: error: what").
[[noreturn]] void fail(const SrcLoc& loc, const std::string& what);
}  // namespace dsl

// ---- handles ---------------------------------------------------------------

/// A traced value: a scalar, a pointer, a tile or a buffer. Cheap to copy; only
/// meaningful inside the ts::kernel() trace that produced it.
class Tensor {
 public:
  Tensor() = default;
  bool valid() const { return v_ != nullptr; }
  ir::Value* raw() const { return v_; }
  const ir::Type& type() const;
  DType dtype() const { return type().dtype(); }
  const ir::Shape& shape() const { return type().shape(); }
  int rank() const { return type().rank(); }
  bool isTile() const { return type().isTile(); }
  bool isScalar() const { return type().isScalar(); }
  bool isPointerLike() const { return type().isPointerLike(); }
  /// Derived from a Ptr<const T> argument: loads are fine, stores are not.
  bool readonly() const { return readonly_; }

  /// Cast to another dtype (no-op if equal). Float->int saturates (IR.h).
  Tensor to(DType d, SrcLoc loc = SrcLoc::current()) const;
  /// The same bits as another dtype of the same width (f32 <-> i32, f16 <->
  /// i16, ...): no conversion.
  Tensor bitcast(DType d, SrcLoc loc = SrcLoc::current()) const;
  /// Transpose of a 2-D tile.
  Tensor T(SrcLoc loc = SrcLoc::current()) const;

  /// Internal: wraps an IR value of trace `trace`.
  Tensor(ir::Value* v, uint64_t trace, bool readonly) : v_(v), trace_(trace), readonly_(readonly) {}
  uint64_t traceId() const { return trace_; }

 protected:
  ir::Value* v_ = nullptr;
  uint64_t trace_ = 0;
  bool readonly_ = false;
};

namespace dsl {
void checkScalar(const Tensor& t, DType d, const SrcLoc& loc);
void checkPointer(const Tensor& t, DType d, const SrcLoc& loc);
}  // namespace dsl

/// A scalar handle of one dtype (kernel scalar arguments, program ids, loop
/// induction variables). Converts from Tensor, checking the type.
template <DType D>
class Scalar : public Tensor {
 public:
  static constexpr DType kDType = D;
  Scalar() = default;
  Scalar(const Tensor& t, SrcLoc loc = SrcLoc::current()) : Tensor(t) {  // NOLINT: implicit by design
    dsl::checkScalar(t, D, loc);
  }
};
using Int = Scalar<DType::I32>;
using Long = Scalar<DType::I64>;
using UInt = Scalar<DType::U32>;
using ULong = Scalar<DType::U64>;
using Float = Scalar<DType::F32>;
using Double = Scalar<DType::F64>;

/// A global-memory pointer kernel argument: Ptr<float>, Ptr<const float>, ...
/// Pointer arithmetic on it yields Tensors that remember the constness.
// (The parameter is not called T: Tensor::T() would hide it.)
template <class E>
class Ptr : public Tensor {
 public:
  using Elem = std::remove_const_t<E>;
  static constexpr bool kConst = std::is_const_v<E>;
  static constexpr DType kDType = dsl::DTypeOf<Elem>::value;
  Ptr() = default;
  explicit Ptr(const Tensor& t, SrcLoc loc = SrcLoc::current()) : Tensor(t) {
    dsl::checkPointer(t, kDType, loc);
    readonly_ = readonly_ || kConst;
  }
};

/// An operand of an operator or of an elementwise function: a handle or a
/// C++ literal, plus the source location of the expression it appears in.
class Operand {
 public:
  enum class Kind : uint8_t { None, Handle, Int, Float };
  Operand() = default;
  Operand(const Tensor& t, SrcLoc loc = SrcLoc::current())  // NOLINT
      : kind_(Kind::Handle), t_(t), loc_(loc) {}
  template <std::integral I>
  Operand(I v, SrcLoc loc = SrcLoc::current())  // NOLINT
      : kind_(Kind::Int), i_(static_cast<int64_t>(v)), unsigned_(std::is_unsigned_v<I>), loc_(loc) {}
  template <std::floating_point F>
  Operand(F v, SrcLoc loc = SrcLoc::current())  // NOLINT
      : kind_(Kind::Float), f_(static_cast<double>(v)), loc_(loc) {}

  Kind kind() const { return kind_; }
  bool none() const { return kind_ == Kind::None; }
  bool isHandle() const { return kind_ == Kind::Handle; }
  bool isLiteral() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  const Tensor& tensor() const { return t_; }
  int64_t intValue() const { return i_; }
  /// An integer literal of unsigned C++ type (0xcd9e8d57u, uint64_t{...}):
  /// intValue() holds its bits, so above INT64_MAX it reads negative.
  bool unsignedLiteral() const { return unsigned_; }
  double floatValue() const { return f_; }
  const SrcLoc& loc() const { return loc_; }
  std::string str() const;  // "tile<16xf32>", "integer literal 3", ...

 private:
  Kind kind_ = Kind::None;
  Tensor t_;
  int64_t i_ = 0;
  bool unsigned_ = false;
  double f_ = 0;
  SrcLoc loc_;
};

// ---- operators -------------------------------------------------------------
Tensor operator+(const Operand& a, const Operand& b);
Tensor operator-(const Operand& a, const Operand& b);
Tensor operator*(const Operand& a, const Operand& b);
Tensor operator/(const Operand& a, const Operand& b);
Tensor operator%(const Operand& a, const Operand& b);
Tensor operator&(const Operand& a, const Operand& b);
Tensor operator|(const Operand& a, const Operand& b);
Tensor operator^(const Operand& a, const Operand& b);
Tensor operator<<(const Operand& a, const Operand& b);
Tensor operator>>(const Operand& a, const Operand& b);
Tensor operator<(const Operand& a, const Operand& b);
Tensor operator<=(const Operand& a, const Operand& b);
Tensor operator>(const Operand& a, const Operand& b);
Tensor operator>=(const Operand& a, const Operand& b);
Tensor operator==(const Operand& a, const Operand& b);
Tensor operator!=(const Operand& a, const Operand& b);
Tensor operator-(const Operand& a);
Tensor operator~(const Operand& a);
Tensor operator!(const Operand& a);
Tensor& operator+=(Tensor& a, const Operand& b);
Tensor& operator-=(Tensor& a, const Operand& b);
Tensor& operator*=(Tensor& a, const Operand& b);
Tensor& operator/=(Tensor& a, const Operand& b);

// ---- grid and tile construction ---------------------------------------------
/// This program's index along grid axis 0..2 (i32).
Tensor program_id(int axis, SrcLoc loc = SrcLoc::current());
Tensor num_programs(int axis, SrcLoc loc = SrcLoc::current());
/// Thread-block clusters (docs/dsl.md, "Clusters"): a kernel compiled with
/// CompileOptions::cluster runs its programs in clusters of that many,
/// launched together; each program reaches the shared buffers of the others
/// (TileBuffer::remote) and they meet at ts::cluster_barrier(). Without a
/// cluster (every target, CompileOptions::cluster {1, 1, 1}) each program
/// is a cluster of one: rank 0 of size 1. i32 scalars.
Tensor cluster_rank(SrcLoc loc = SrcLoc::current());
Tensor cluster_size(SrcLoc loc = SrcLoc::current());
/// A program of the launch that has not started, cancelled so that it
/// never will: its program_id(0), whose work the caller takes on (an i32
/// scalar); -1 when none is left to cancel. Where the target cannot cancel
/// programs (every target but NVIDIA sm_100a, sm_103a and sm_120a, whose
/// cluster launch control does it; a grid of more than one axis; a
/// cluster of more than one program) it is always -1, and each program
/// does its own work. Once it returned -1, do not call it again (the
/// hardware leaves that undefined). ts::Tiles::dynamic() is the schedule
/// built on it; docs/dsl.md, "Cancelling programs".
Tensor cancel_program(SrcLoc loc = SrcLoc::current());
/// tile<n x i32> holding 0..n-1 / start..end-1.
Tensor arange(int64_t n, SrcLoc loc = SrcLoc::current());
Tensor arange(int64_t start, int64_t end, SrcLoc loc = SrcLoc::current());
/// A tile (or scalar, for an empty shape) with every element equal.
Tensor zeros(const ir::Shape& shape, DType dtype, SrcLoc loc = SrcLoc::current());
Tensor full(const ir::Shape& shape, double value, DType dtype, SrcLoc loc = SrcLoc::current());
Tensor splat(const Tensor& x, const ir::Shape& shape, SrcLoc loc = SrcLoc::current());
Tensor broadcast_to(const Tensor& x, const ir::Shape& shape, SrcLoc loc = SrcLoc::current());
Tensor expand_dims(const Tensor& x, int axis, SrcLoc loc = SrcLoc::current());
Tensor reshape(const Tensor& x, const ir::Shape& shape, SrcLoc loc = SrcLoc::current());
Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm, SrcLoc loc = SrcLoc::current());
/// out[.., i, ..] = x[.., index[.., i, ..], ..] along `axis` (negative: from
/// the end): `index` is a tile of integers of x's rank whose shape equals
/// x's in every other dim; the result has index's shape and x's dtype. An
/// index outside [0, x.shape[axis]) gives an unspecified value (never a
/// fault). E.g. gather([10, 20, 30], [2, 0, 2, 1], 0) = [30, 10, 30, 20].
Tensor gather(const Tensor& x, const Tensor& index, int axis, SrcLoc loc = SrcLoc::current());
/// A tile with a new trailing dim of 2: out[..., 0] = a, out[..., 1] = b
/// (a and b of one tile type, rank 1 or 2).
Tensor join(const Tensor& a, const Tensor& b, SrcLoc loc = SrcLoc::current());
/// The inverse of join: (x[..., 0], x[..., 1]) of a tile of rank 2 to 4
/// whose last dim is 2. `auto [lo, hi] = ts::split(x);`
std::pair<Tensor, Tensor> split(const Tensor& x, SrcLoc loc = SrcLoc::current());

// ---- elementwise -------------------------------------------------------------
/// cond ? a : b elementwise; cond is i1; a, b promote and broadcast as above.
Tensor where(const Tensor& cond, const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
// Float math (integer operands are a DslError: convert with .to(ts::f32)).
Tensor exp(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor exp2(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor log(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor log2(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor sqrt(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor rsqrt(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor tanh(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor erf(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor floor(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor ceil(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor trunc(const Tensor& x, SrcLoc loc = SrcLoc::current());
/// To the nearest integer, ties to even (round(2.5) = 2, round(-0.5) = -0).
Tensor round(const Tensor& x, SrcLoc loc = SrcLoc::current());
/// C's name for the same rounding (the default IEEE mode, ties to even):
/// the `round` op.
Tensor rint(const Tensor& x, SrcLoc loc = SrcLoc::current());
/// sin and cos reduce arguments of any magnitude exactly.
Tensor sin(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor cos(const Tensor& x, SrcLoc loc = SrcLoc::current());
/// 1 / (1 + e^-x).
Tensor sigmoid(const Tensor& x, SrcLoc loc = SrcLoc::current());
/// ln(1 + x) and e^x - 1, accurate near 0.
Tensor log1p(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor expm1(const Tensor& x, SrcLoc loc = SrcLoc::current());
/// |x| for floats and integers.
Tensor abs(const Tensor& x, SrcLoc loc = SrcLoc::current());
Tensor minimum(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
Tensor maximum(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
/// a*b+c with a single rounding (floats).
Tensor fma(const Operand& a, const Operand& b, const Operand& c, SrcLoc loc = SrcLoc::current());
/// C's pow (floats): a negative base needs an integer exponent (NaN otherwise).
Tensor pow(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
/// The high half of the exact double-width product of two integers (the
/// `mulhi` op; `*` gives the low half): signed for i8..i64, unsigned for
/// u8..u64. mulhi(u32 0xffffffff, 2u) = 1, mulhi(i32 -1, 2) = -1.
Tensor mulhi(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
/// The high half of the product of the operands' bits read as unsigned,
/// whatever their signedness, in the operands' dtype (CUDA's __umulhi,
/// Triton's umulhi): umulhi(i32 -1, 2) = 1.
Tensor umulhi(const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());

// ---- random numbers ------------------------------------------------------------
// Counter-based: Philox-4x32-10 keyed by `seed` (a scalar: an integer kernel
// argument or literal, widened to 64 bits by its signedness; key = its low
// and high 32-bit words) on the counter (offset, 0, 0, 0) per element of
// `offsets` (an integer tile; 64-bit offsets put their high word second).
// The same seed and offset give the same numbers on every backend and in
// every kernel, as Triton's tl.randint / tl.rand / tl.randn do
// (docs/dsl.md, "Random numbers", gives the definitions).
/// The first word of Philox-4x32-10: a u32 tile of offsets' shape.
Tensor randint(const Operand& seed, const Tensor& offsets, SrcLoc loc = SrcLoc::current());
/// All four words (u32 tiles); randint is the first.
std::array<Tensor, 4> randint4x(const Operand& seed, const Tensor& offsets, SrcLoc loc = SrcLoc::current());
/// f32 uniform in [0, 1) from randint's word x (as i32: x < 0 ? ~x : x,
/// times 0x1.fffffep-32).
Tensor rand(const Operand& seed, const Tensor& offsets, SrcLoc loc = SrcLoc::current());
/// f32 standard normal by Box-Muller on the first two words u1, u2 (as
/// rand): sqrt(-2 ln max(u1, 1e-7)) * cos(2 pi u2).
Tensor randn(const Operand& seed, const Tensor& offsets, SrcLoc loc = SrcLoc::current());

// ---- memory --------------------------------------------------------------------
/// Reads through a pointer or tile of pointers. Lanes whose mask is false do
/// not touch memory and yield `other` (default 0). The mask is i1 and must
/// broadcast to the pointer's shape; `other` needs a mask.
Tensor load(const Tensor& ptr, const Operand& mask = {}, const Operand& other = {}, SrcLoc loc = SrcLoc::current());
/// Writes `value` (dtype equal to the pointee's; broadcast to the pointer's
/// shape) where `mask` is true.
void store(const Tensor& ptr, const Operand& value, const Operand& mask = {}, SrcLoc loc = SrcLoc::current());
/// Storing through a Ptr<const T> argument does not compile.
template <class T>
void store(const Ptr<const T>&, const Operand&, const Operand& = {}, SrcLoc = SrcLoc::current()) {
  static_assert(sizeof(T) == 0, "ts::store through a Ptr<const T>: the kernel parameter is read-only");
}
/// Atomics (IR.h, "Atomics"): each masked-on element of a global pointer
/// tile is one atomic read-modify-write; all return the old values (0 where
/// masked off). `order` says how the atomic orders the program's other
/// accesses, `scope` which programs that is guaranteed to:
///   ts::MemOrder::Relaxed (default) | Acquire | Release | AcqRel
///   ts::MemScope::Program | Device (default) | System
/// add, min, max and xchg take integers and floats; and, or, xor integers.
using ir::MemOrder;
using ir::MemScope;
#define TS_ATOMIC_FN(fn)                                                                                           \
  Tensor fn(const Tensor& ptr, const Operand& value, const Operand& mask = {}, MemOrder order = MemOrder::Relaxed, \
            MemScope scope = MemScope::Device, SrcLoc loc = SrcLoc::current());
TS_ATOMIC_FN(atomic_add)
TS_ATOMIC_FN(atomic_min)
TS_ATOMIC_FN(atomic_max)
TS_ATOMIC_FN(atomic_and)
TS_ATOMIC_FN(atomic_or)
TS_ATOMIC_FN(atomic_xor)
TS_ATOMIC_FN(atomic_xchg)
#undef TS_ATOMIC_FN
/// Compare-and-swap: stores `value` where the old value equals `cmp` (floats:
/// equal bits), returns the old values.
Tensor atomic_cas(const Tensor& ptr, const Operand& cmp, const Operand& value, const Operand& mask = {},
                  MemOrder order = MemOrder::AcqRel, MemScope scope = MemScope::Device, SrcLoc loc = SrcLoc::current());
/// Orders the program's memory accesses before it against those after it
/// (`order`: Acquire, Release or AcqRel), for the programs of `scope`.
void fence(MemOrder order = MemOrder::AcqRel, MemScope scope = MemScope::Device, SrcLoc loc = SrcLoc::current());

/// A tile held in shared (per program) or local (private) memory.
class TileBuffer : public Tensor {
 public:
  TileBuffer() = default;
  explicit TileBuffer(const Tensor& t) : Tensor(t) {}
  Tensor load(SrcLoc loc = SrcLoc::current()) const;
  void store(const Operand& tile, SrcLoc loc = SrcLoc::current()) const;
  /// This shared buffer as the program of cluster rank `rank` holds it
  /// (distributed shared memory): load and store reach that program's
  /// memory. What another program wrote is visible after a
  /// ts::cluster_barrier() that both passed, and a program's buffer must
  /// not be reached after it returns: meet at a cluster barrier before.
  TileBuffer remote(const Operand& rank, SrcLoc loc = SrcLoc::current()) const;
};
TileBuffer alloc_shared(DType dtype, const ir::Shape& shape, SrcLoc loc = SrcLoc::current());
TileBuffer alloc_local(DType dtype, const ir::Shape& shape, SrcLoc loc = SrcLoc::current());
/// Copies global memory at `ptrs` (a tile of the buffer's shape) into `dst`.
void copy(const TileBuffer& dst, const Tensor& ptrs, const Operand& mask = {}, SrcLoc loc = SrcLoc::current());
/// Orders shared-memory effects among the threads of a program.
void barrier(SrcLoc loc = SrcLoc::current());
/// Every thread of every program of the cluster arrives before any goes on:
/// orders their shared-memory effects, the remote ones included
/// (TileBuffer::remote). A ts::barrier() for a cluster of one.
void cluster_barrier(SrcLoc loc = SrcLoc::current());
/// States that every element of `cond` (an i1 scalar or tile, such as a
/// comparison) is true. A checked launch (LaunchOptions::checkBounds,
/// TESSERA_CHECK_BOUNDS=1, `tessera run --check-bounds`) tests it and raises
/// a LaunchError naming `message` and this line where an element is false;
/// any other compile removes it, with what only it used.
void device_assert(const Tensor& cond, const std::string& message, SrcLoc loc = SrcLoc::current());

namespace dsl {
void probe(const std::string& name, bool end, SrcLoc loc);
}  // namespace dsl

/// A profiling scope (docs/profiling.md): body() runs between the scope's
/// begin and end, which a profiled launch records for every warp with the
/// time (LaunchOptions::profile, TESSERA_PROFILE, `tessera run --trace`).
/// Any other compile removes them before its first pass, so the code is as
/// without them. The trace names the scope `name @ file:line`.
///
///   ts::profile_scope("softmax", [&] { ... });
template <class F>
void profile_scope(const std::string& name, F&& body, SrcLoc loc = SrcLoc::current()) {
  dsl::probe(name, false, loc);
  body();
  dsl::probe(name, true, loc);
}

/// The slot of a staged buffer that this iteration of a ts::for_pipelined
/// loop reads: stage_copy returns it; .load() gives the tile copied in.
class StagedTile : public Tensor {
 public:
  StagedTile() = default;
  explicit StagedTile(const Tensor& t) : Tensor(t) {}
  Tensor load(SrcLoc loc = SrcLoc::current()) const;
};
/// Inside a ts::for_pipelined body: copies global memory at `ptrs` (a tile
/// of pointers broadcastable to the buffer's shape; lanes where `mask` is
/// false are not read and give 0) into this iteration's slot of `buf`, and
/// returns that slot. `buf` comes from ts::alloc_shared(dtype, tile shape)
/// before the loop; stage_copy makes it multi-buffered (stages x tile
/// shape). The pointers and mask may depend only on the loop index and on
/// values defined before the loop: with S stages they are evaluated S-1
/// iterations ahead. A staged buffer is accessed only through stage_copy.
StagedTile stage_copy(const TileBuffer& buf, const Tensor& ptrs, const Operand& mask = {},
                      SrcLoc loc = SrcLoc::current());

// ---- reductions and contractions -------------------------------------------
// `axis` may be negative (python-style). Rank-1 tiles reduce to scalars.
Tensor sum(const Tensor& x, int axis, SrcLoc loc = SrcLoc::current());
Tensor max(const Tensor& x, int axis, SrcLoc loc = SrcLoc::current());
Tensor min(const Tensor& x, int axis, SrcLoc loc = SrcLoc::current());
/// Index (i32) of the first maximum along `axis` (NaN counts as above every
/// number, as max returns it).
Tensor argmax(const Tensor& x, int axis, SrcLoc loc = SrcLoc::current());
/// Index (i32) of the first minimum along `axis` (NaN counts as below every
/// number, as min returns it).
Tensor argmin(const Tensor& x, int axis, SrcLoc loc = SrcLoc::current());
/// a (MxK) @ b (KxN) + acc (MxN). a and b share a dtype; acc is f32/f64 for
/// float inputs, i32/i64 for integer inputs; without acc it is zeros of f32
/// (float inputs) or i32.
Tensor dot(const Tensor& a, const Tensor& b, const Tensor& acc = {}, SrcLoc loc = SrcLoc::current());

/// The block-scaled formats of ts::dot_scaled (docs/dot_scaled.md): the
/// element codes, the block size along K and the scale's format.
///   mxfp8_e4m3, mxfp8_e5m2  OCP MX: fp8 codes, one a byte; blocks of 32, e8m0 scales
///   mxfp6_e2m3, mxfp6_e3m2  OCP MX: fp6 codes, one a byte (low 6 bits); blocks of 32, e8m0 scales
///   mxfp4                   OCP MX: f4e2m1 codes, two a byte along K (low nibble first); blocks of 32, e8m0 scales
///   nvfp4                   f4e2m1 codes as mxfp4; blocks of 16, f8e4m3 scales, and a per-tensor f32 scale
enum class ScaledFormat : uint8_t { mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, nvfp4 };
/// "mxfp4", "nvfp4", ... as the enumerators are spelled.
const char* name(ScaledFormat f);
/// The elements one scale covers: 32 (MX) or 16 (nvfp4).
int scaleBlock(ScaledFormat f);

/// a (M x K) @ b (K x N) + acc over block-scaled operands, each element
/// times its block's scale, accumulated in f32:
///   out[m, n] = acc[m, n] + tensor_scale * sum_k a[m, k] sa[m, k / bs] b[k, n] sb[n, k / bs]
/// a: u8 tile [M, K] of codes ([M, K/2] for mxfp4 and nvfp4, two codes a
/// byte); a_scale: u8 tile [M, K / block] of scale codes (e8m0, or f8e4m3
/// for nvfp4). b is given K-major, as the block-scaled matrix instructions
/// and nn.Linear weights hold it: u8 [N, K] ([N, K/2] packed), b_scale u8
/// [N, K / block]. The formats are independent (mxfp8 x nvfp4 is legal);
/// K must be a multiple of both block sizes (pad K with zero codes: masked
/// loads give 0, which is +0 in every format). acc: f32 [M, N] (zeros when
/// absent). tensor_scale: an f32 scalar (NVFP4's per-tensor scales,
/// multiplied) scaling the product before acc is added; only where a format
/// is nvfp4. No target has a block-scaled matrix instruction yet: the dot
/// runs decomposed (decoded exactly, scaled into bf16, a bf16 dot) and the
/// compile's warnings say so (CompileOptions::nativeScaledDotsOnly makes
/// that an error).
Tensor dot_scaled(const Tensor& a, const Tensor& a_scale, ScaledFormat a_fmt, const Tensor& b, const Tensor& b_scale,
                  ScaledFormat b_fmt, const Tensor& acc = {}, const Operand& tensor_scale = {},
                  SrcLoc loc = SrcLoc::current());
/// The f32 values of a tile of MX codes `x` (u8): f4e2m1, f6e2m3, f6e3m2
/// codes in the low bits, e8m0 scale codes (NaN for 0xFF) (MxFormats.h),
/// or OCP fp8 codes (f8e4m3, f8e5m2: MXFP8's elements, Fp8.h). Exact, with
/// bit operations: a dequantisation's first step.
Tensor mx_decode(const Tensor& x, DType format, SrcLoc loc = SrcLoc::current());
/// Two f4e2m1 codes a byte: u8 [..., 2n] of codes (low 4 bits) -> u8
/// [..., n], element 2j in the low nibble of byte j. An odd last extent is
/// a DslError.
Tensor pack_fp4(const Tensor& codes, SrcLoc loc = SrcLoc::current());
/// The inverse of pack_fp4: u8 [..., n] -> u8 [..., 2n] of codes.
Tensor unpack_fp4(const Tensor& packed, SrcLoc loc = SrcLoc::current());

// ---- scans -------------------------------------------------------------------
// Inclusive prefix scans along `axis` (negative: from the end): element i of
// the result combines elements 0..i of `x` along the axis. The combination
// may be reassociated (computed as a tree), so float results may differ from
// a sequential loop by rounding only. Not defined on i1 tiles.
/// Running sum: cumsum([1, 2, 3]) = [1, 3, 6].
Tensor cumsum(const Tensor& x, int axis, SrcLoc loc = SrcLoc::current());
/// Running product: cumprod([1, 2, 3]) = [1, 2, 6].
Tensor cumprod(const Tensor& x, int axis, SrcLoc loc = SrcLoc::current());
namespace dsl {
using CombineFn = std::function<Tensor(const Tensor& a, const Tensor& b)>;
Tensor scanImpl(const Tensor& x, int axis, const CombineFn& combine, const SrcLoc& loc);
}  // namespace dsl
/// A scan with your own associative `combine(a, b)`, traced once on scalars
/// of x's dtype (`a` is the running value, `b` the next element): it may use
/// elementwise math, constants and scalar kernel arguments, and returns a
/// scalar of x's dtype. E.g. a running maximum:
///   ts::associative_scan(x, 0, [](ts::Tensor a, ts::Tensor b) { return ts::maximum(a, b); })
template <class F>
Tensor associative_scan(const Tensor& x, int axis, F&& combine, SrcLoc loc = SrcLoc::current()) {
  return dsl::scanImpl(x, axis, [&](const Tensor& a, const Tensor& b) { return Tensor(combine(a, b)); }, loc);
}

// ---- control flow ------------------------------------------------------------
/// The schedule of a ts::for_pipelined loop: its stage count (an integer
/// converts, so `3` means 3 stages) and options.
///
/// warpSpecialized(): on targets with tensor copies (nvptx:sm_90a) more
/// warps, the producer, issue the staged copies (TMA) and the kernel's
/// warps only compute, the two handing slots over through barriers
/// (docs/pipelining.md, "Warp specialisation"). It applies where every staged
/// copy is a TMA box and the loop is in the kernel's body; elsewhere
/// (other targets, other copies) the loop keeps the usual schedule and the
/// compile says why in its warnings.
struct Pipeline {
  Pipeline(int64_t stages) : stages(stages) {}  // NOLINT: `3` is 3 stages
  Pipeline& warpSpecialized(bool on = true) {
    warpSpecialize = on;
    return *this;
  }
  int64_t stages;
  bool warpSpecialize = false;
};

namespace dsl {
using BodyFn = std::function<std::vector<Tensor>(const Tensor& iv, const std::vector<Tensor>& carried)>;
std::vector<Tensor> forImpl(const Operand& lo, const Operand& hi, const Operand& step, const std::vector<Tensor>& inits,
                            const BodyFn& body, const SrcLoc& loc);
std::vector<Tensor> forPipelinedImpl(const Operand& lo, const Operand& hi, const Operand& step, const Pipeline& stages,
                                     const std::vector<Tensor>& inits, const BodyFn& body, const SrcLoc& loc);
using WhileBodyFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& carried)>;
std::vector<Tensor> whileImpl(const std::vector<Tensor>& inits, const WhileBodyFn& body, const SrcLoc& loc);
std::vector<Tensor> ifImpl(const Tensor& cond, const std::function<std::vector<Tensor>()>& thenBody,
                           const std::function<std::vector<Tensor>()>& elseBody, const SrcLoc& loc);

template <class T>
struct IsTuple : std::false_type {};
template <class... T>
struct IsTuple<std::tuple<T...>> : std::true_type {};

/// Turns a body's return value (nothing, a handle, a tuple or a vector of
/// handles) into the list of values it yields.
template <class R>
std::vector<Tensor> toList(R&& r) {
  using D = std::remove_cvref_t<R>;
  if constexpr (std::is_base_of_v<Tensor, D>) {
    return {Tensor(r)};
  } else if constexpr (IsTuple<D>::value) {
    return std::apply([](auto&&... v) { return std::vector<Tensor>{Tensor(v)...}; }, std::forward<R>(r));
  } else {
    static_assert(std::is_same_v<D, std::vector<Tensor>>,
                  "a for_range / if_else body must return nothing, a ts::Tensor, a std::tuple of "
                  "handles or a std::vector<ts::Tensor>");
    return r;
  }
}

template <class F, class... A>
std::vector<Tensor> callToList(F& f, A&&... a) {
  using R = std::invoke_result_t<F&, A...>;
  if constexpr (std::is_void_v<R>) {
    f(std::forward<A>(a)...);
    return {};
  } else {
    return toList(f(std::forward<A>(a)...));
  }
}

template <size_t N, size_t... I>
auto listToTuple(const std::vector<Tensor>& v, std::index_sequence<I...>) {
  return std::make_tuple(((void)I, v[I])...);
}
}  // namespace dsl

/// for iv in [lo, hi) step `step` with no carried values: body(ts::Int iv).
template <class F>
void for_range(const Operand& lo, const Operand& hi, const Operand& step, F&& body, SrcLoc loc = SrcLoc::current()) {
  dsl::forImpl(
      lo, hi, step, {},
      [&](const Tensor& iv, const std::vector<Tensor>&) {
        dsl::callToList(body, iv);
        return std::vector<Tensor>{};
      },
      loc);
}

/// Loop with carried values given as a tuple: body(iv, carried...) returns
/// the new values (a tuple, or one handle when one value is carried). Returns
/// the final values as a tuple of Tensors (use structured bindings).
template <class... Ts, class F>
auto for_range(const Operand& lo, const Operand& hi, const Operand& step, const std::tuple<Ts...>& inits, F&& body,
               SrcLoc loc = SrcLoc::current()) {
  std::vector<Tensor> init = std::apply([](const auto&... v) { return std::vector<Tensor>{Tensor(v)...}; }, inits);
  auto out = dsl::forImpl(
      lo, hi, step, init,
      [&](const Tensor& iv, const std::vector<Tensor>& c) {
        return [&]<size_t... I>(std::index_sequence<I...>) {
          return dsl::callToList(body, iv, c[I]...);
        }(std::index_sequence_for<Ts...>{});
      },
      loc);
  return dsl::listToTuple<sizeof...(Ts)>(out, std::index_sequence_for<Ts...>{});
}

/// Loop with one carried value: body(iv, carried) returns its new value.
template <class F>
Tensor for_range(const Operand& lo, const Operand& hi, const Operand& step, const Tensor& init, F&& body,
                 SrcLoc loc = SrcLoc::current()) {
  auto out = dsl::forImpl(
      lo, hi, step, {init},
      [&](const Tensor& iv, const std::vector<Tensor>& c) { return dsl::callToList(body, iv, c[0]); }, loc);
  return out.at(0);
}

/// Loop with carried values as a vector: body(iv, std::vector<Tensor>) returns
/// a std::vector<Tensor> of the same types.
template <class F>
std::vector<Tensor> for_range(const Operand& lo, const Operand& hi, const Operand& step,
                              const std::vector<Tensor>& inits, F&& body, SrcLoc loc = SrcLoc::current()) {
  return dsl::forImpl(
      lo, hi, step, inits, [&](const Tensor& iv, const std::vector<Tensor>& c) { return dsl::callToList(body, iv, c); },
      loc);
}

/// A loop whose trip count is found as it runs (a do-while): body(carried...)
/// runs, then returns the condition (an i1 scalar) followed by the next
/// carried values, as a tuple; while the condition holds the body runs
/// again on them. Carried values are scalars (carry tiles in for_range).
/// Returns the last carried values as a tuple:
///
///   auto [t] = ts::do_while(std::tuple{ts::program_id(0)}, [&](ts::Int t) {
///     ...                                   // the work of tile t
///     auto next = ts::cancel_program();
///     return std::tuple{next >= 0, next};
///   });
template <class... Ts, class F>
auto do_while(const std::tuple<Ts...>& inits, F&& body, SrcLoc loc = SrcLoc::current()) {
  std::vector<Tensor> init = std::apply([](const auto&... v) { return std::vector<Tensor>{Tensor(v)...}; }, inits);
  auto out = dsl::whileImpl(
      init,
      [&](const std::vector<Tensor>& c) {
        return [&]<size_t... I>(std::index_sequence<I...>) {
          return dsl::toList(body(c[I]...));
        }(std::index_sequence_for<Ts...>{});
      },
      loc);
  return dsl::listToTuple<sizeof...(Ts)>(out, std::index_sequence_for<Ts...>{});
}

/// The same with the carried values as a vector: body(std::vector<Tensor>)
/// returns a std::vector<Tensor> of the condition and the next values.
template <class F>
std::vector<Tensor> do_while(const std::vector<Tensor>& inits, F&& body, SrcLoc loc = SrcLoc::current()) {
  return dsl::whileImpl(inits, [&](const std::vector<Tensor>& c) { return dsl::toList(body(c)); }, loc);
}

/// A software-pipelined loop: for iv in [lo, hi) step `step`, written as the
/// one-stage program (ts::stage_copy the tiles of iteration iv, .load() them,
/// compute), with `stages` (>= 1) iterations' copies kept in flight:
///
///   auto sa = ts::alloc_shared(ts::f16, {BM, BK});
///   auto sb = ts::alloc_shared(ts::f16, {BK, BN});
///   auto acc = ts::for_pipelined(0, K, BK, /*stages=*/3, ts::zeros({BM, BN}, ts::f32),
///       [&](ts::Int k, ts::Tensor acc) {
///         auto a = ts::stage_copy(sa, pa + k, ma);
///         auto b = ts::stage_copy(sb, pb + k * ldb, mb);
///         return ts::dot(a.load(), b.load(), acc);
///       });
///
/// `stages` may be a ts::Pipeline: `ts::Pipeline(3).warpSpecialized()`.
/// Traces to `for {stages = S}`; the `pipeline` pass turns it into the
/// explicit schedule (docs/pipelining.md). It may be nested in for_range and
/// if_else (not in another for_pipelined); the staged buffers are allocated
/// before it, outside it. Carried values work as in for_range.
template <class F>
void for_pipelined(const Operand& lo, const Operand& hi, const Operand& step, const Pipeline& stages, F&& body,
                   SrcLoc loc = SrcLoc::current()) {
  dsl::forPipelinedImpl(
      lo, hi, step, stages, {},
      [&](const Tensor& iv, const std::vector<Tensor>&) {
        dsl::callToList(body, iv);
        return std::vector<Tensor>{};
      },
      loc);
}

template <class... Ts, class F>
auto for_pipelined(const Operand& lo, const Operand& hi, const Operand& step, const Pipeline& stages,
                   const std::tuple<Ts...>& inits, F&& body, SrcLoc loc = SrcLoc::current()) {
  std::vector<Tensor> init = std::apply([](const auto&... v) { return std::vector<Tensor>{Tensor(v)...}; }, inits);
  auto out = dsl::forPipelinedImpl(
      lo, hi, step, stages, init,
      [&](const Tensor& iv, const std::vector<Tensor>& c) {
        return [&]<size_t... I>(std::index_sequence<I...>) {
          return dsl::callToList(body, iv, c[I]...);
        }(std::index_sequence_for<Ts...>{});
      },
      loc);
  return dsl::listToTuple<sizeof...(Ts)>(out, std::index_sequence_for<Ts...>{});
}

template <class F>
Tensor for_pipelined(const Operand& lo, const Operand& hi, const Operand& step, const Pipeline& stages,
                     const Tensor& init, F&& body, SrcLoc loc = SrcLoc::current()) {
  auto out = dsl::forPipelinedImpl(
      lo, hi, step, stages, {init},
      [&](const Tensor& iv, const std::vector<Tensor>& c) { return dsl::callToList(body, iv, c[0]); }, loc);
  return out.at(0);
}

template <class F>
std::vector<Tensor> for_pipelined(const Operand& lo, const Operand& hi, const Operand& step, const Pipeline& stages,
                                  const std::vector<Tensor>& inits, F&& body, SrcLoc loc = SrcLoc::current()) {
  return dsl::forPipelinedImpl(
      lo, hi, step, stages, inits,
      [&](const Tensor& iv, const std::vector<Tensor>& c) { return dsl::callToList(body, iv, c); }, loc);
}

/// if (cond) then() else else_(); cond is a scalar i1. Both branches return
/// values of matching types (nothing, one handle, a tuple or a vector); the
/// result has the same form (a tuple of Tensors for tuples).
template <class Then, class Else>
auto if_else(const Tensor& cond, Then&& then, Else&& else_, SrcLoc loc = SrcLoc::current()) {
  auto out = dsl::ifImpl(cond, [&] { return dsl::callToList(then); }, [&] { return dsl::callToList(else_); }, loc);
  using R = std::remove_cvref_t<std::invoke_result_t<Then&>>;
  if constexpr (std::is_void_v<R>) {
    return;
  } else if constexpr (std::is_base_of_v<Tensor, R>) {
    return out.at(0);
  } else if constexpr (dsl::IsTuple<R>::value) {
    return dsl::listToTuple<std::tuple_size_v<R>>(out, std::make_index_sequence<std::tuple_size_v<R>>{});
  } else {
    return out;
  }
}

/// if (cond) then(); the branch yields nothing.
template <class Then>
void if_else(const Tensor& cond, Then&& then, SrcLoc loc = SrcLoc::current()) {
  dsl::ifImpl(cond, [&] { return dsl::callToList(then); }, {}, loc);
}

// ---- kernels -------------------------------------------------------------------
namespace dsl {
template <class T>
struct ArgTraits {
  static constexpr bool ok = false;
};
template <class T>
struct ArgTraits<Ptr<T>> {
  static constexpr bool ok = true;
  static ir::Type type() { return ir::Type::ptr(Ptr<T>::kDType, ir::MemSpace::Global); }
  static constexpr bool readonly = Ptr<T>::kConst;
};
template <DType D>
struct ArgTraits<Scalar<D>> {
  static constexpr bool ok = true;
  static ir::Type type() { return ir::Type::scalar(D); }
  static constexpr bool readonly = false;
};

template <class T>
struct Signature;
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) const> {
  using Args = std::tuple<A...>;
  using Ret = R;
};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...)> {
  using Args = std::tuple<A...>;
  using Ret = R;
};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) const noexcept> {
  using Args = std::tuple<A...>;
  using Ret = R;
};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) noexcept> {
  using Args = std::tuple<A...>;
  using Ret = R;
};
template <class R, class... A>
struct Signature<R (*)(A...)> {
  using Args = std::tuple<A...>;
  using Ret = R;
};

template <class F, class = void>
struct CallableSig : Signature<std::decay_t<F>> {};
template <class F>
struct CallableSig<F, std::void_t<decltype(&std::remove_cvref_t<F>::operator())>>
    : Signature<decltype(&std::remove_cvref_t<F>::operator())> {};

/// One kernel trace in progress: the function being built and the handles'
/// context. RAII: the destructor ends the trace (also when tracing throws).
class Trace {
 public:
  Trace(const std::string& name, std::vector<std::string> argNames, size_t numArgs, const SrcLoc& loc);
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;
  Tensor addArg(const ir::Type& t, bool readonly);
  /// Appends `return`, verifies and hands the function over.
  Kernel finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};
}  // namespace dsl

/// Traces `f` into a kernel named `name`. `argNames` (optional) names the
/// parameters in the IR and in the runtime signature; default arg0, arg1, ...
template <class F>
Kernel kernel(const std::string& name, const std::vector<std::string>& argNames, F&& f,
              SrcLoc loc = SrcLoc::current()) {
  using Sig = dsl::CallableSig<F>;
  using Args = typename Sig::Args;
  static_assert(std::is_void_v<typename Sig::Ret>, "a kernel body returns nothing (results go through ts::store)");
  return [&]<size_t... I>(std::index_sequence<I...>) {
    static_assert((dsl::ArgTraits<std::remove_cvref_t<std::tuple_element_t<I, Args>>>::ok && ...),
                  "kernel parameters must be ts::Ptr<T>, ts::Ptr<const T>, ts::Int, ts::Long, "
                  "ts::Float or ts::Double");
    dsl::Trace trace(name, argNames, sizeof...(I), loc);
    // Arguments are created in order (a braced list evaluates left to right).
    std::tuple<std::remove_cvref_t<std::tuple_element_t<I, Args>>...> args{
        std::remove_cvref_t<std::tuple_element_t<I, Args>>(
            trace.addArg(dsl::ArgTraits<std::remove_cvref_t<std::tuple_element_t<I, Args>>>::type(),
                         dsl::ArgTraits<std::remove_cvref_t<std::tuple_element_t<I, Args>>>::readonly))...};
    f(std::get<I>(args)...);
    return trace.finish();
  }(std::make_index_sequence<std::tuple_size_v<Args>>{});
}

template <class F>
Kernel kernel(const std::string& name, F&& f, SrcLoc loc = SrcLoc::current()) {
  return kernel(name, std::vector<std::string>{}, std::forward<F>(f), loc);
}

}  // namespace tessera
