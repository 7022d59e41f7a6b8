// Helpers for the CPU backend tests: build kernels with ir::Builder, compile
// them, and run them directly through Artifact::cpuEntry.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tessera/codegen/Compiler.h"
#include "tessera/ir/Builder.h"
#include "tessera/support/Error.h"
#include "tessera/support/Sanitizers.h"
#include "../../cpu_paths.h"
#include <algorithm>
#include <cmath>

namespace cputest {

using namespace tessera;
using namespace tessera::ir;

inline Type i32() { return Type::scalar(DType::I32); }
inline Type f32() { return Type::scalar(DType::F32); }
inline Type ptr(DType d) { return Type::ptr(d); }

/// A kernel under construction: the function and a builder at its body.
struct K {
  std::unique_ptr<Function> f;
  Builder b;
  explicit K(const std::string& name) : f(std::make_unique<Function>(name, Location{"test.cpp", 1, 1})), b(&f->body()) {
    b.setLoc(Location{"test.cpp", 1, 1});
  }
  Value* arg(Type t, const std::string& n) { return f->addArgument(std::move(t), n); }
  Value* ci(int64_t v) { return b.constant(i32(), v); }
  Value* cf(double v) { return b.constant(f32(), v); }
  /// Pointer tile `p + offs` for a scalar pointer and an offsets tile.
  Value* at(Value* p, Value* offs) { return b.ptrAdd(b.splat(p, offs->type().shape()), offs); }
};

using testpaths::cpuTarget;
using testpaths::kAmxCpu;
using testpaths::kAvx2Cpu;
using testpaths::kAvx512Cpu;
using testpaths::runnableTileCpus;

/// Compiles for the LLVM cpu `cpu` ("" = the host, else e.g. "x86-64-v3").
inline std::shared_ptr<codegen::Artifact> build(K& k, const std::string& cpu = "", bool dumpAsm = false) {
  k.b.ret();
  codegen::CompileOptions o;
  o.dumpAssembly = dumpAsm;
  return codegen::compile(*k.f, cpuTarget(cpu), o);
}

/// Runs every program of `grid` on the calling thread. `args` holds the
/// address of each argument value.
TESSERA_CALLS_JIT_CODE inline void run(const codegen::Artifact& a, std::vector<void*> args,
                                       std::array<int32_t, 3> grid = {1, 1, 1}) {
  int64_t n = int64_t{grid[0]} * grid[1] * grid[2];
  a.binary.hostEntry(args.data(), 0, n, grid.data());
}

/// The vector paths this host can run (see tests/cpu_paths.h).
inline std::vector<std::string> runnableIsas() { return testpaths::runnableCpus(); }

// Round-to-nearest-even conversions, independent of the compiler's.
inline uint16_t f32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  uint32_t lsb = (u >> 16) & 1;
  u += 0x7fff + lsb;
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16ToF32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float f16ToF32(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}
/// Double -> f16 with a single round-to-nearest-even.
inline uint16_t f64ToF16(double d) {
  uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  double a = std::fabs(d);
  if (std::isnan(d)) return 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;  // rounds to infinity
  int e;
  std::frexp(a, &e);         // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;           // a in [2^exp, 2^(exp+1))
  if (exp < -14) exp = -14;  // subnormal range: fixed quantum 2^-24
  double q = std::ldexp(1.0, exp - 10);
  double n = std::nearbyint(a / q);  // current rounding mode: to nearest even
  double r = n * q;
  if (r == 0) return sign;
  int re;
  std::frexp(r, &re);
  int rexp = re - 1;
  if (rexp < -14) return sign | static_cast<uint16_t>(r / std::ldexp(1.0, -24));
  uint16_t man = static_cast<uint16_t>(r / std::ldexp(1.0, rexp - 10)) & 0x3ff;
  return sign | static_cast<uint16_t>((rexp + 15) << 10) | man;
}
/// Double -> bf16 with a single round-to-nearest-even.
inline uint16_t f64ToBf16(double d) {
  if (std::isnan(d)) return 0x7fc0;
  uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  double a = std::fabs(d);
  int e;
  std::frexp(a, &e);
  int exp = std::max(e - 1, -126);
  double q = std::ldexp(1.0, exp - 7);
  double r = std::nearbyint(a / q) * q;
  float rf = static_cast<float>(r);  // exact: r has <= 8 significant bits
  uint16_t bits = f32ToBf16(rf);
  return static_cast<uint16_t>(bits | sign);
}

}  // namespace cputest
