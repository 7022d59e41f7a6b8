// Counter-based random numbers: ts::randint, randint4x, rand, randn. Each is
// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11; the Random123 library's philox4x32_10) built at trace time from
// plain IR ops, with Triton's conventions for the key, the counter and the
// conversions to floats (docs/dsl.md, "Random numbers"), so that a kernel
// ported from Triton draws the same stream. Only integer ops (mul, mulhi,
// xor, add, casts) make the bits: every backend gives the same ones.
#include "DslImpl.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>

namespace tessera {
namespace dsl {
namespace {

using ir::OpCode;

// Philox-4x32's round multipliers and Weyl key increments (Random123).
constexpr uint32_t kRoundA = 0xD2511F53u;  // multiplies counter word 0
constexpr uint32_t kRoundB = 0xCD9E8D57u;  // multiplies counter word 2
constexpr uint32_t kKeyA = 0x9E3779B9u;    // golden ratio
constexpr uint32_t kKeyB = 0xBB67AE85u;    // sqrt(3) - 1
constexpr int kRounds = 10;

/// The largest float s with (2^31 - 1) * s < 1 after rounding (Triton's
/// 4.6566127342e-10, exactly 0x1.fffffep-32 as an f32).
constexpr double kUniformScale = 0x1.fffffep-32;

/// Builds the generator's ops at the user's call, checking its operands.
class Philox {
 public:
  Philox(const char* what, const Operand& seed, const Tensor& offsets, const SrcLoc& loc)
      : s_(at(loc)), b_(*s_.builder), loc_(loc), what_(what) {
    key(seed);
    counter(offsets);
  }

  /// The four output words of Philox-4x32-10 for every counter (u32 tiles).
  std::array<ir::Value*, 4> run() {
    ir::Value* A = u32(kRoundA, shape_);
    ir::Value* B = u32(kRoundB, shape_);
    std::array<ir::Value*, 4> c = c_;
    for (int r = 0; r < kRounds; ++r) {
      // Round key r is (k0 + r * kKeyA, k1 + r * kKeyB) modulo 2^32.
      ir::Value* k0 = b_.splat(b_.binary(OpCode::Add, k0_, u32(uint32_t(r) * kKeyA, {})), shape_);
      ir::Value* k1 = b_.splat(b_.binary(OpCode::Add, k1_, u32(uint32_t(r) * kKeyB, {})), shape_);
      ir::Value* hiB = b_.binary(OpCode::MulHi, B, c[2]);
      ir::Value* loB = b_.binary(OpCode::Mul, B, c[2]);
      ir::Value* hiA = b_.binary(OpCode::MulHi, A, c[0]);
      ir::Value* loA = b_.binary(OpCode::Mul, A, c[0]);
      c = {b_.binary(OpCode::Xor, b_.binary(OpCode::Xor, hiB, c[1]), k0), loB,
           b_.binary(OpCode::Xor, b_.binary(OpCode::Xor, hiA, c[3]), k1), loA};
    }
    return c;
  }

  /// A u32 tile of random bits -> f32 in [0, 1): the bits as an i32 x,
  /// ~x where x < 0 (so 0 .. 2^31 - 1), converted to f32 and scaled.
  ir::Value* uniform(ir::Value* bits) {
    ir::Type i32 = ir::Type::scalar(DType::I32).withShape(shape_);
    ir::Value* x = b_.bitcast(bits, DType::I32);
    // x ^ (x >> 31) (arithmetic) is ~x for negative x and x otherwise.
    x = b_.binary(OpCode::Xor, x, b_.binary(OpCode::Shr, x, b_.constant(i32, int64_t{31})));
    return b_.binary(OpCode::Mul, b_.cast(x, DType::F32), f32(kUniformScale));
  }

  /// An f32 tile of `shape_` with every element `v` (v exact in f32).
  ir::Value* f32(double v) { return b_.constant(ir::Type::scalar(DType::F32).withShape(shape_), v); }
  ir::Builder& builder() { return b_; }

 private:
  ir::Value* u32(uint32_t v, const ir::Shape& shape) {
    return b_.constant(ir::Type::scalar(DType::U32).withShape(shape), static_cast<int64_t>(v));
  }

  // The key: the seed as a u64 (widened by its signedness), low word k0,
  // high word k1.
  void key(const Operand& seed) {
    const std::string expect =
        "an integer scalar (a kernel argument such as ts::Long or ts::UInt, or an integer literal)";
    switch (seed.kind()) {
      case Operand::Kind::Int: {
        const auto bits = static_cast<uint64_t>(seed.intValue());
        k0_ = u32(static_cast<uint32_t>(bits), {});
        k1_ = u32(static_cast<uint32_t>(bits >> 32), {});
        return;
      }
      case Operand::Kind::Handle: break;
      default: fail(loc_, fmt::format("{}: the seed must be {}, got {}", what_, expect, seed.str()));
    }
    ir::Value* v = use(seed.tensor(), loc_, "seed");
    const ir::Type& t = v->type();
    if (!t.isScalar() || !t.isIntLike() || t.dtype() == DType::I1)
      fail(loc_, fmt::format("{}: the seed must be {}, got {}", what_, expect, typeStr(t)));
    ir::Value* w = castTo(s_, v, DType::U64);
    k0_ = b_.cast(w, DType::U32);
    k1_ = b_.cast(b_.binary(OpCode::Shr, w, b_.constant(ir::Type::scalar(DType::U64), int64_t{32})), DType::U32);
  }

  // The counter (offset low word, offset high word, 0, 0): offsets up to
  // 32 bits are converted to u32 (narrower signed ones sign-extended), the
  // high word of 64-bit offsets is the second word.
  void counter(const Tensor& offsets) {
    ir::Value* v = use(offsets, loc_, "offsets");
    const ir::Type& t = v->type();
    if (!t.isTile() || !t.isIntLike() || t.dtype() == DType::I1)
      fail(loc_, fmt::format("{}: the offsets must be a tile of integers (e.g. i32 or i64, one counter per element), "
                             "got {}",
                             what_, typeStr(t)));
    shape_ = t.shape();
    ir::Value* zero = u32(0, shape_);
    c_[0] = castTo(s_, v, DType::U32);
    c_[1] =
        bitWidth(t.dtype()) > 32 ? b_.cast(b_.binary(OpCode::Shr, v, b_.constant(t, int64_t{32})), DType::U32) : zero;
    c_[2] = zero;
    c_[3] = zero;
  }

  TraceState& s_;
  ir::Builder& b_;
  SrcLoc loc_;
  const char* what_;
  ir::Shape shape_;
  ir::Value* k0_ = nullptr;
  ir::Value* k1_ = nullptr;
  std::array<ir::Value*, 4> c_{};
};

}  // namespace
}  // namespace dsl

Tensor randint(const Operand& seed, const Tensor& offsets, SrcLoc loc) {
  dsl::Philox p("randint", seed, offsets, loc);
  return dsl::wrap(p.run()[0]);
}

std::array<Tensor, 4> randint4x(const Operand& seed, const Tensor& offsets, SrcLoc loc) {
  dsl::Philox p("randint4x", seed, offsets, loc);
  auto c = p.run();
  return {dsl::wrap(c[0]), dsl::wrap(c[1]), dsl::wrap(c[2]), dsl::wrap(c[3])};
}

Tensor rand(const Operand& seed, const Tensor& offsets, SrcLoc loc) {
  dsl::Philox p("rand", seed, offsets, loc);
  return dsl::wrap(p.uniform(p.run()[0]));
}

Tensor randn(const Operand& seed, const Tensor& offsets, SrcLoc loc) {
  // Box-Muller on the first two words: sqrt(-2 ln u1) cos(2 pi u2), u1
  // kept >= 1e-7 so the logarithm stays finite. The constants are Triton's,
  // rounded to f32.
  dsl::Philox p("randn", seed, offsets, loc);
  auto c = p.run();
  ir::Builder& b = p.builder();
  ir::Value* u1 = b.binary(ir::OpCode::Max, p.uniform(c[0]), p.f32(static_cast<double>(1.0e-7f)));
  ir::Value* u2 = p.uniform(c[1]);
  ir::Value* th = b.binary(ir::OpCode::Mul, p.f32(static_cast<double>(6.283185307179586f)), u2);
  ir::Value* r = b.unary(ir::OpCode::Sqrt, b.binary(ir::OpCode::Mul, p.f32(-2.0), b.unary(ir::OpCode::Log, u1)));
  return dsl::wrap(b.binary(ir::OpCode::Mul, r, b.unary(ir::OpCode::Cos, th)));
}

}  // namespace tessera
