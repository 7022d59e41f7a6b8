// `bitcast` on every backend (the pinned CPU and both emulated GPU vendors):
// each element's bits come out unchanged as the other dtype of the same
// width — NaN payloads, signed zeros, infinities and denormals included —
// in both directions for f32/i32, f64/i64, f16/i16 and bf16/i16; and a
// float's encoding can be computed on (|x| by masking the sign bit).
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr int kBlock = 128;
const char* const kBackends[] = {"cpu:x86-64-v3", "emu:nvptx:sm_80", "emu:amdgpu:gfx942"};

ts::Device deviceFor(const std::string& backend) {
  if (backend.rfind("cpu:", 0) == 0) return ts::Device::cpu(backend.substr(4));
  return ts::Device::emulator(backend.substr(4));
}

template <typename From, typename To>
ts::Kernel bitcastKernel(ts::DType to) {
  return ts::kernel("bitcast", [to](ts::Ptr<To> out, ts::Ptr<const From> in, ts::Int n) {
    auto i = ts::program_id(0) * kBlock + ts::arange(kBlock);
    auto m = i < n;
    ts::store(out + i, ts::load(in + i, m).bitcast(to), m);
  });
}

/// Bit patterns of `Bits` width: random ones and the special encodings of
/// the float type of that width.
template <typename Bits>
std::vector<Bits> patterns(int n) {
  std::mt19937_64 rng(5);
  std::vector<Bits> v;
  const int w = sizeof(Bits) * 8;
  const Bits sign = Bits(1) << (w - 1);
  // 0, -0, 1 (a denormal), all ones (a NaN), the largest positive pattern.
  for (Bits b : {Bits(0), sign, Bits(1), static_cast<Bits>(~Bits(0)), static_cast<Bits>(sign - 1)}) v.push_back(b);
  while (static_cast<int>(v.size()) < n) v.push_back(static_cast<Bits>(rng()));
  return v;
}

template <typename From, typename To, typename Bits>
void roundTrip(ts::DType from, ts::DType to) {
  const int n = 3 * kBlock + 7;
  std::vector<Bits> in = patterns<Bits>(n);
  for (const char* backend : kBackends) {
    INFO(backend << ": " << ts::name(from) << " -> " << ts::name(to));
    ts::Device dev = deviceFor(backend);
    ts::CompiledKernel k = ts::compile(bitcastKernel<From, To>(to), dev);
    ts::Buffer bin = dev.upload(from, in), bout = dev.alloc(to, in.size());
    k.launch(ts::Dim3((n + kBlock - 1) / kBlock), bout, bin, int32_t(n));
    std::vector<Bits> out = bout.read<Bits>();
    size_t bad = 0;
    for (int i = 0; i < n; ++i) bad += out[static_cast<size_t>(i)] != in[static_cast<size_t>(i)];
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("bitcast keeps every bit on every backend", "[codegen][bitcast][emu]") {
  roundTrip<float, int32_t, uint32_t>(ts::DType::F32, ts::DType::I32);
  roundTrip<int32_t, float, uint32_t>(ts::DType::I32, ts::DType::F32);
  roundTrip<double, int64_t, uint64_t>(ts::DType::F64, ts::DType::I64);
  roundTrip<int64_t, double, uint64_t>(ts::DType::I64, ts::DType::F64);
  roundTrip<ts::half, int16_t, uint16_t>(ts::DType::F16, ts::DType::I16);
  roundTrip<int16_t, ts::half, uint16_t>(ts::DType::I16, ts::DType::F16);
  roundTrip<ts::bfloat16, int16_t, uint16_t>(ts::DType::BF16, ts::DType::I16);
  roundTrip<int16_t, ts::bfloat16, uint16_t>(ts::DType::I16, ts::DType::BF16);
}

TEST_CASE("bitcast lets a kernel compute on a float's encoding", "[codegen][bitcast][emu]") {
  // |x| as x's bits with the sign bit cleared, and the exponent field.
  auto k =
      ts::kernel("encoding", [](ts::Ptr<float> absOut, ts::Ptr<int32_t> expOut, ts::Ptr<const float> in, ts::Int n) {
        auto i = ts::program_id(0) * kBlock + ts::arange(kBlock);
        auto m = i < n;
        auto bits = ts::load(in + i, m).bitcast(ts::i32);
        ts::store(absOut + i, (bits & 0x7fffffff).bitcast(ts::f32), m);
        ts::store(expOut + i, (bits >> 23) & 0xff, m);
      });
  const int n = 2 * kBlock + 3;
  std::vector<float> x(n);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-1e6f, 1e6f);
  for (float& v : x) v = d(rng);
  x[0] = -0.0f;
  x[1] = -std::numeric_limits<float>::infinity();
  x[2] = -std::numeric_limits<float>::denorm_min();
  for (const char* backend : kBackends) {
    INFO(backend);
    ts::Device dev = deviceFor(backend);
    ts::CompiledKernel ck = ts::compile(k, dev);
    ts::Buffer a = dev.alloc(ts::DType::F32, n), e = dev.alloc(ts::DType::I32, n);
    ck.launch(ts::Dim3((n + kBlock - 1) / kBlock), a, e, dev.upload(ts::DType::F32, x), int32_t(n));
    std::vector<float> av = a.read<float>();
    std::vector<int32_t> ev = e.read<int32_t>();
    for (int i = 0; i < n; ++i) {
      INFO("x = " << x[i]);
      CHECK(std::bit_cast<uint32_t>(av[i]) == (std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu));
      CHECK(ev[i] == static_cast<int32_t>((std::bit_cast<uint32_t>(x[i]) >> 23) & 0xff));
    }
  }
}
