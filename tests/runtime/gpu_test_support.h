// What the GPU driver tests share: the ABI comparison of our declarations
// with a vendor header's, an environment override for a scope,
// the message of a DeviceError, functions the fake driver exports, and a
// hand-written PTX vector add with its signature and binary.
#pragma once

#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "tessera/runtime/Runtime.h"

#include "../env_guard.h"
#include "error_of.h"

namespace tessera::rt::testing {

// Two function types agree on the ABI when they have the same arity and each
// parameter (and the result) has the same size and class: pointer, integer
// or enum, floating point. Types cannot be compared directly: the headers'
// opaque handles and enums are distinct types from our void* and int.
template <class T>
constexpr int abiClass() {
  if constexpr (std::is_pointer_v<T>)
    return 1;
  else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>)
    return 2;
  else if constexpr (std::is_floating_point_v<T>)
    return 3;
  else
    return 4;
}
template <class A, class B>
constexpr bool sameSlot() {
  return sizeof(A) == sizeof(B) && abiClass<A>() == abiClass<B>();
}
template <class F, class G>
struct SameAbi : std::false_type {};
template <class R1, class... A1, class R2, class... A2>
struct SameAbi<R1 (*)(A1...), R2 (*)(A2...)> {
  static constexpr bool check() {
    if constexpr (sizeof...(A1) != sizeof...(A2))
      return false;
    else
      return sameSlot<R1, R2>() && (sameSlot<A1, A2>() && ...);
  }
  static constexpr bool value = check();
};

using tessera::testing::EnvGuard;

/// The message of the DeviceError `f` throws (error_of.h).
template <class F>
std::string deviceError(F&& f) {
  return errorOf<DeviceError>(std::forward<F>(f));
}

/// A function the fake driver exports for inspection. The runtime opened the
/// same path, so this is the same instance of the library.
template <class Fn>
Fn fakeFn(const char* lib, const char* name) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h != nullptr);
  void* s = dlsym(h, name);
  REQUIRE(s != nullptr);
  return reinterpret_cast<Fn>(s);
}

// out[i] = a[i] + b[i] for i < n; one thread per element. Written by hand
// (checked with ptxas) so the test needs no compiler; .target sm_52 lets
// the driver JIT it for any GPU it supports.
inline constexpr const char* kVaddPtx = R"(.version 6.4
.target sm_52
.address_size 64

.visible .entry vadd(
	.param .u64 vadd_a,
	.param .u64 vadd_b,
	.param .u64 vadd_out,
	.param .u32 vadd_n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [vadd_a];
	ld.param.u64 %rd2, [vadd_b];
	ld.param.u64 %rd3, [vadd_out];
	ld.param.u32 %r2, [vadd_n];
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mad.lo.s32 %r1, %r3, %r4, %r5;
	setp.ge.u32 %p1, %r1, %r2;
	@%p1 bra DONE;
	mul.wide.u32 %rd4, %r1, 4;
	add.s64 %rd5, %rd1, %rd4;
	add.s64 %rd6, %rd2, %rd4;
	add.s64 %rd7, %rd3, %rd4;
	ld.global.f32 %f1, [%rd5];
	ld.global.f32 %f2, [%rd6];
	add.rn.f32 %f3, %f1, %f2;
	st.global.f32 [%rd7], %f3;
DONE:
	ret;
}
)";

/// A bounds-checked kernel's parameters (tessera/support/BoundsCheck.h):
/// checked_oob(ptr a, ptr out, i32 n), the extents of a and out, the
/// record. The fake driver writes a violation into the record.
inline constexpr const char* kCheckedPtx = R"(.version 6.4
.target sm_52
.address_size 64

.visible .entry checked_oob(
	.param .u64 checked_oob_a,
	.param .u64 checked_oob_out,
	.param .u32 checked_oob_n,
	.param .u64 checked_oob_extent_a,
	.param .u64 checked_oob_extent_out,
	.param .u64 checked_oob_record
)
{
	ret;
}
)";

/// A profiled kernel's parameters (tessera/support/Profile.h):
/// profiled(ptr out), the profile buffer. The fake driver writes a scope
/// per warp into the buffer.
inline constexpr const char* kProfiledPtx = R"(.version 6.4
.target sm_52
.address_size 64

.visible .entry profiled(
	.param .u64 profiled_out,
	.param .u64 profiled_buffer
)
{
	ret;
}
)";

inline KernelSignature vaddSignature() {
  KernelSignature s;
  s.kernelName = "vadd";
  s.args = {{ArgSpec::Kind::Pointer, DType::F32, "a"},
            {ArgSpec::Kind::Pointer, DType::F32, "b"},
            {ArgSpec::Kind::Pointer, DType::F32, "out"},
            {ArgSpec::Kind::Scalar, DType::I32, "n"}};
  return s;
}

/// A PTX binary of kernel `symbol` (its signature left to the caller).
inline Binary ptxBinary(const char* symbol, const char* ptx, unsigned threadsPerBlock, unsigned sharedBytes = 0) {
  Binary b;
  b.format = Binary::Format::PTX;
  b.ptx = ptx;
  b.symbol = symbol;
  b.threadsPerBlock = threadsPerBlock;
  b.sharedBytes = sharedBytes;
  return b;
}

inline Binary vaddBinary(unsigned threadsPerBlock = 128, unsigned sharedBytes = 0) {
  Binary b = ptxBinary("vadd", kVaddPtx, threadsPerBlock, sharedBytes);
  b.signature = vaddSignature();
  return b;
}

/// A rank-2 tensor map over pointer argument `source`: `cols` elements a
/// row (scalar argument `colsArg`), `rows` rows (`rowsArg`), rows
/// `colsArg` elements apart, a box of box0 x box1 swizzled by `swizzle`.
inline TensorMapSpec rowMajorTensorMap(int source, DType dt, int colsArg, int rowsArg, uint32_t box0, uint32_t box1,
                                       uint32_t swizzle) {
  TensorMapSpec m;
  m.source = source;
  m.dtype = dt;
  m.rank = 2;
  m.dims[0] = {colsArg, 1, 0};
  m.dims[1] = {rowsArg, 1, 0};
  m.strides[0] = {-1, 1, 1};
  m.strides[1] = {colsArg, 1, 0};
  m.box[0] = box0, m.box[1] = box1;
  m.swizzleBytes = swizzle;
  return m;
}

}  // namespace tessera::rt::testing
